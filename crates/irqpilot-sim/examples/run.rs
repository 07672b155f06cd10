//! Runs a scenario file and prints the JSON report (development helper; the CLI is `irqpilot sim`).
#![allow(clippy::unwrap_used, clippy::expect_used)]
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let text = std::fs::read_to_string(&args[1]).unwrap();
    let mut sc = irqpilot_sim::Scenario::from_toml(&text, &args[1]).unwrap();
    let sets: Vec<(String, String)> = args[2..]
        .iter()
        .map(|s| {
            let (k, v) = s.split_once('=').unwrap();
            (k.to_string(), v.to_string())
        })
        .collect();
    sc = sc.with_sets(&sets).unwrap();
    let t = std::time::Instant::now();
    let mut r = irqpilot_sim::run_scenario(sc, |_| {}).unwrap();
    let wall = t.elapsed();
    if std::env::var("SERIES").is_err() {
        r.series.clear();
    }
    r.per_cpu.truncate(4);
    // r.per_source.truncate(4);
    println!("{}", serde_json::to_string_pretty(&r).unwrap());
    eprintln!(
        "wall {:?}, events {} ({:.1} M/s)",
        wall,
        r.sim.events,
        r.sim.events as f64 / wall.as_secs_f64() / 1e6
    );
}
