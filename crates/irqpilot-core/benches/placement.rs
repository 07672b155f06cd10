//! `decide` on a 256-CPU machine with 4,096 IRQs (issue 5: <= 10 ms).
//!
//! The machine: 2 nodes, 2 packages x 64 cores x 2 threads, 40% of CPUs isolated, 8 NICs x 64
//! queues (most of them heavy), one NVMe with 256 kernel-managed queues (one per CPU), 3,328 light platform
//! and misc IRQs; every IRQ on a random CPU. Three cases:
//! * `first`: that random layout, which needs isolation moves and a lot of balancing;
//! * `steady`: the layout the policy left (a fixed point): the daemon's usual period;
//! * `pile-up`: every movable IRQ on CPU 0, the worst case.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/common/mod.rs"]
mod common;

use common::{Shape, apply, generate, rates_for};
use criterion::{Criterion, criterion_group, criterion_main};
use irqpilot_core::placement::{Learned, PlacementConfig, decide};
use irqpilot_core::{CpuId, CpuSet, IrqNum, MonoNs, PolicyInput};
use std::hint::black_box;

fn bench(c: &mut Criterion) {
    let shape = Shape {
        nodes: 2,
        packages: 2,
        cores: 64,
        threads: 2,
        devices: 8,
        queues: 64,
        platform_irqs: 3328,
        managed_queues: 256,
        isolate: true,
        time: true,
    };
    let s = generate(&shape, 42);
    let cfg = PlacementConfig::default();
    let learned = Learned::default();
    assert_eq!(s.machine.irqs.len(), 4096);
    assert_eq!(s.machine.topology.online.len(), 256);
    let input = |m| PolicyInput {
        machine: m,
        rates: Some(&s.rates),
        now: MonoNs(0),
    };
    let first = decide(&cfg, &learned, &input(&s.machine));
    eprintln!(
        "first: {} moves ({} migrations), {} heavy, {} rounds, imbalance {:?} -> {:?}",
        first.moves.len(),
        first.migrations(),
        first.heavy.len(),
        first.rounds,
        first.imbalance_before,
        first.imbalance_after
    );
    let steady_machine = apply(&s.machine, &first.plan, true);
    assert!(
        decide(&cfg, &learned, &input(&steady_machine))
            .plan
            .is_empty()
    );

    let mut pile = s.machine.clone();
    for i in pile.irqs.values_mut() {
        if i.managed != Some(true) {
            i.requested = Some(pile.topology.online.clone());
            i.effective = Some(CpuSet::single(CpuId(0)));
        }
    }
    let per_irq: Vec<(IrqNum, f64)> = s
        .rates
        .rows
        .iter()
        .filter_map(|r| Some((r.label.irq()?, r.total_per_sec)))
        .collect();
    let pile_rates = rates_for(&pile, &per_irq, false, 10.0);
    let pile_input = PolicyInput {
        machine: &pile,
        rates: Some(&pile_rates),
        now: MonoNs(0),
    };
    let p = decide(&cfg, &learned, &pile_input);
    eprintln!("pile-up: {} moves, {} rounds", p.moves.len(), p.rounds);

    let mut g = c.benchmark_group("decide-256cpu-4096irq");
    g.sample_size(30);
    g.bench_function("steady", |b| {
        b.iter(|| decide(&cfg, &learned, black_box(&input(&steady_machine))))
    });
    g.bench_function("first", |b| {
        b.iter(|| decide(&cfg, &learned, black_box(&input(&s.machine))))
    });
    g.bench_function("pile-up", |b| {
        b.iter(|| decide(&cfg, &learned, black_box(&pile_input)))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
