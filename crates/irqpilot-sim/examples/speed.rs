//! Speed and sameness of one build of the twin, for comparing two builds in one session:
//! `speed SCENARIO [key=value ...]` runs the built-in scenario once, timed, and prints its event
//! count, wall time, events per second and a digest of its JSON report (two builds that
//! simulate alike print the same digest).
//!
//! ```sh
//! cargo build --release -p irqpilot-sim --example speed
//! git archive main | tar -x -C /tmp/base && cp crates/irqpilot-sim/examples/speed.rs \
//!     /tmp/base/crates/irqpilot-sim/examples/ && (cd /tmp/base && cargo build --release \
//!     -p irqpilot-sim --example speed)
//! for i in 1 2 3 4; do /tmp/base/target/release/examples/speed nic-100g-32q; \
//!     target/release/examples/speed nic-100g-32q; done
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hash::{Hash, Hasher};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(name) = args.first() else {
        eprintln!("usage: speed SCENARIO [key=value ...]");
        std::process::exit(2);
    };
    let sets: Vec<(String, String)> = args[1..]
        .iter()
        .map(|s| {
            let (k, v) = s.split_once('=').expect("key=value");
            (k.to_string(), v.to_string())
        })
        .collect();
    let sc = irqpilot_sim::scenarios::builtin(name)
        .expect("a built-in scenario")
        .unwrap()
        .with_sets(&sets)
        .unwrap();
    let started = std::time::Instant::now();
    let mut sim = irqpilot_sim::Sim::new(sc.clone()).unwrap();
    sim.run();
    let wall = started.elapsed().as_secs_f64();
    let events = sim.events_handled();
    let report = irqpilot_sim::run_scenario(sc, |_| {}).unwrap();
    let mut h = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_string(&report).unwrap().hash(&mut h);
    println!(
        "{name} events {events} wall {wall:.3} s events/s {:.0} digest {:016x}",
        events as f64 / wall,
        h.finish()
    );
}
