//! Steady-state sampling allocates nothing: `LinuxPlatform::snapshot_into` into a reused
//! snapshot, after it has seen the files once, on the captured fixture and on the generated
//! 256-CPU server. (A separate test binary: it installs a counting global allocator.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use irqpilot_core::{Platform, Rates, Snapshot};
use irqpilot_linux::LinuxPlatform;
use irqpilot_linux::generate::large_server;
use irqpilot_linux::tree::{write_counters, write_tree};

#[path = "common/counting.rs"]
mod counting;

#[global_allocator]
static GLOBAL: counting::Counting = counting::Counting;

/// Samples `p` `n` times after four warm-up samples; returns allocations per phase.
fn steady_state(p: &mut LinuxPlatform, n: usize) -> (u64, u64) {
    let mut prev = Snapshot::default();
    let mut cur = Snapshot::default();
    let mut rates = Rates::default();
    // Each snapshot is filled twice: the second fill sets up the table's spare rows.
    let (warm, _) = counting::allocations(|| {
        for _ in 0..2 {
            p.snapshot_into(&mut prev).unwrap();
            p.snapshot_into(&mut cur).unwrap();
            rates.update(&prev, &cur).unwrap();
        }
    });
    let (steady, _) = counting::allocations(|| {
        for _ in 0..n {
            std::mem::swap(&mut prev, &mut cur);
            p.snapshot_into(&mut cur).unwrap();
            rates.update(&prev, &cur).unwrap();
        }
    });
    assert!(cur.stat.is_some() && cur.softirqs.is_some());
    (warm, steady)
}

#[test]
fn captured_fixture_samples_without_allocating() {
    let mut p = LinuxPlatform::with_root(common::fixtures().join("firecracker-2cpu"));
    let (warm, steady) = steady_state(&mut p, 200);
    assert!(warm > 0, "the first reads allocate the buffers");
    assert_eq!(steady, 0);
}

#[test]
fn generated_server_samples_without_allocating_while_counts_move() {
    let (machine, mut snap) = large_server(11);
    let dir = common::scratch_dir();
    write_tree(dir.path(), &machine, &snap).unwrap();
    let mut p = LinuxPlatform::with_root(dir.path());
    let (_, steady) = steady_state(&mut p, 20);
    assert_eq!(steady, 0);

    // Counters that move (rows keep their width) still cost nothing to read.
    let mut prev = p.snapshot().unwrap();
    let mut cur = p.snapshot().unwrap();
    p.snapshot_into(&mut prev).unwrap();
    p.snapshot_into(&mut cur).unwrap();
    let mut rates = Rates::between(&prev, &cur).unwrap();
    for round in 1..=5u64 {
        for i in 0..snap.interrupts.rows().len() {
            if let Some(c) = snap.interrupts.counts_mut(i) {
                c.iter_mut().for_each(|v| *v += round);
            }
        }
        write_counters(dir.path(), &snap).unwrap();
        std::mem::swap(&mut prev, &mut cur);
        let (n, _) = counting::allocations(|| {
            p.snapshot_into(&mut cur).unwrap();
            rates.update(&prev, &cur).unwrap();
        });
        assert_eq!(n, 0, "round {round}");
        assert!(rates.total_irq_per_sec() > 0.0);
    }
}
