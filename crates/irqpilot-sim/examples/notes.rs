// scratch: print the moderator's notes over a run (not committed)
use irqpilot_sim::scenarios::builtin;
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let name = &args[1];
    let sc = if let Some(rest) = name.strip_prefix("gen-") { let (s, i) = rest.split_once('-').unwrap(); let g = irqpilot_sim::heldout::machine(s.parse().unwrap(), i.parse().unwrap()).unwrap(); eprintln!("{}", g.toml); g.scenario } else { match builtin(name) { Some(s) => s.unwrap(), None => irqpilot_sim::Scenario::from_toml(&std::fs::read_to_string(name).unwrap(), name).unwrap() } };
    let sets: Vec<(String,String)> = args[2..].iter().map(|s| { let (k,v)=s.split_once('=').unwrap(); (k.to_string(), v.to_string())}).collect();
    let sc = sc.with_sets(&sets).unwrap();
    let r = irqpilot_sim::run_scenario_observed(sc, |_| {}, |step| {
        for (_, p) in &step.plans { for n in &p.notes { if !n.starts_with("device interrupts") { println!("{:.0} {}", step.at.0 as f64/1e6, n); } } }
    }).unwrap();
    println!("int/s {:.0} gbps {:?} iops {:?} lat {:?}", r.interrupts_per_sec, r.throughput_gbps, r.iops, r.latency_us.map(|l| (l.p50,l.p95,l.p99)));
    let step: usize = std::env::var("STEP").ok().and_then(|s| s.parse().ok()).unwrap_or(5); for p in r.series.iter().step_by(step) { print!("{:.0}:{:.2}/{:.1} ", p.t_ms, p.interrupts_per_sec/1e6, p.throughput_gbps.max(p.iops/1e6)); }
    println!();
}
