//! Simulator speed on `nic-100g-32q` (today's moderation, the collapse case: ~4 M interrupts/s,
//! the most events per simulated second of the built-ins) and with GSIM.
//!
//! `cargo bench -p irqpilot-sim --bench sim -- --warm-up-time 1 --measurement-time 5`
//! Throughput is reported in simulated events; divide by the time to get events/s. One
//! iteration simulates 100 ms.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use irqpilot_sim::scenarios::builtin;
use irqpilot_sim::{Scenario, Sim};

fn scenario(sets: &[(&str, &str)]) -> Scenario {
    let sets: Vec<(String, String)> = sets
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    builtin("nic-100g-32q")
        .unwrap()
        .unwrap()
        .with_sets(&sets)
        .unwrap()
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("nic-100g-32q-100ms");
    g.sample_size(10);
    for (name, sets) in [
        (
            "static-limited",
            vec![("duration_ms", "100"), ("warmup_ms", "0")],
        ),
        (
            "gsim",
            vec![
                ("duration_ms", "100"),
                ("warmup_ms", "0"),
                ("moderation", "gsim"),
            ],
        ),
    ] {
        // Events per iteration, counted once (the simulation is deterministic).
        let mut probe = Sim::new(scenario(&sets)).unwrap();
        probe.run();
        g.throughput(Throughput::Elements(probe.events_handled()));
        g.bench_function(name, |b| {
            b.iter(|| {
                let mut sim = Sim::new(scenario(&sets)).unwrap();
                sim.run();
                sim.events_handled()
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
