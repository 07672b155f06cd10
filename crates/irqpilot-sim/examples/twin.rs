//! Runs a scenario and prints its JSON report; with `--export-root DIR` the machine is exported
//! as a live tree while it runs (development helper until `irqpilot sim` has `--export-root`;
//! `scripts/vs-irqbalance.sh` uses it).
//!
//! `twin SCENARIO [--export-root DIR] [--scale S] [--step-ms N] [--hold-until FILE] [key=value ...]`: SCENARIO is a
//! built-in name or a TOML file. Outside writes to the tree are listed on stderr.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use irqpilot_sim::export::ExportOptions;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let name = &args[0];
    let mut sc = match irqpilot_sim::scenarios::builtin(name) {
        Some(s) => s.unwrap(),
        None => {
            let text = std::fs::read_to_string(name).unwrap();
            irqpilot_sim::Scenario::from_toml(&text, name).unwrap()
        }
    };
    let mut opts = ExportOptions::default();
    let mut root = None;
    let mut sets = Vec::new();
    let mut rest = args[1..].iter();
    while let Some(a) = rest.next() {
        match a.as_str() {
            "--export-root" => root = Some(std::path::PathBuf::from(rest.next().unwrap())),
            "--scale" => opts.scale = Some(rest.next().unwrap().parse().unwrap()),
            "--hold-until" => opts.hold_until = Some(rest.next().unwrap().into()),
            "--step-ms" => opts.step_ns = rest.next().unwrap().parse::<u64>().unwrap() * 1_000_000,
            kv => {
                let (k, v) = kv.split_once('=').unwrap();
                sets.push((k.to_string(), v.to_string()));
            }
        }
    }
    sc = sc.with_sets(&sets).unwrap();
    let mut report = match root {
        Some(root) => {
            let (report, writes) =
                irqpilot_sim::run_scenario_exported(sc, &root, opts, |_| {}).unwrap();
            for w in &writes {
                eprintln!(
                    "outside write at {:.3} ms: {} = {:?}: {:?}",
                    w.at_ns as f64 / 1e6,
                    w.file,
                    w.text,
                    w.result
                );
            }
            report
        }
        None => irqpilot_sim::run_scenario(sc, |_| {}).unwrap(),
    };
    report.series.clear();
    println!("{}", serde_json::to_string_pretty(&report).unwrap());
}
