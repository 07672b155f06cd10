//! What one sample of the generated 256-CPU server costs.
//!
//! `cargo bench -p irqpilot-linux --bench snapshot -- --warm-up-time 1 --measurement-time 3`
//!
//! The tree is written once by `tree::write_tree` (to `/dev/shm` when it exists: the ~20,000
//! files take a second there and tens of seconds on a slow virtual disk) and then read through
//! `LinuxPlatform::snapshot_into` exactly as `watch` does:
//!
//! * `snapshot/full`: `proc/interrupts` (2.4 MB: 819 rows x 256 CPUs) + `proc/stat` +
//!   `proc/softirqs`, read and parsed into a reused snapshot (target: <= 5 ms);
//! * `snapshot/interrupts_only`: the same on a root holding only `proc/interrupts`;
//! * `rates/update`: `Rates::update` between two snapshots whose counts differ in every row.
//!
//! Each is measured twice: in wall time (`snapshot/...`, `rates/...`) and in this thread's CPU
//! time (`cpu/snapshot/...`, `cpu/rates/...`), which a busy shared machine disturbs less.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "support/cpu_time.rs"]
mod cpu_time;

use criterion::measurement::Measurement;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use irqpilot_core::{MonoNs, Platform, Rates, Snapshot};
use irqpilot_linux::LinuxPlatform;
use irqpilot_linux::generate::large_server;
use irqpilot_linux::tree::write_tree;
use std::hint::black_box;

fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("irqpilot-bench-")
        .tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap()
}

fn snapshot<M: Measurement + 'static>(c: &mut Criterion<M>, prefix: &str) {
    let (machine, snap) = large_server(1);
    let dir = scratch();
    write_tree(dir.path(), &machine, &snap).unwrap();
    let bytes = std::fs::metadata(dir.path().join("proc/interrupts"))
        .unwrap()
        .len()
        + std::fs::metadata(dir.path().join("proc/stat"))
            .unwrap()
            .len()
        + std::fs::metadata(dir.path().join("proc/softirqs"))
            .unwrap()
            .len();

    let mut g = c.benchmark_group(format!("{prefix}snapshot/256cpu-generated"));
    g.throughput(Throughput::Bytes(bytes));
    let mut p = LinuxPlatform::with_root(dir.path());
    let mut s = Snapshot::default();
    p.snapshot_into(&mut s).unwrap();
    assert!(s.stat.is_some() && s.softirqs.is_some());
    g.bench_function("full", |b| {
        b.iter(|| p.snapshot_into(black_box(&mut s)).unwrap())
    });

    let only = scratch();
    std::fs::create_dir_all(only.path().join("proc")).unwrap();
    std::fs::copy(
        dir.path().join("proc/interrupts"),
        only.path().join("proc/interrupts"),
    )
    .unwrap();
    let mut p = LinuxPlatform::with_root(only.path());
    let mut s = Snapshot::default();
    g.bench_function("interrupts_only", |b| {
        b.iter(|| p.snapshot_into(black_box(&mut s)).unwrap())
    });
    g.finish();

    // Rates between two snapshots one second apart, every row and stat line having moved.
    let a = snap.clone();
    let mut b2 = snap;
    b2.taken_at = MonoNs(a.taken_at.0 + 1_000_000_000);
    for i in 0..b2.interrupts.rows().len() {
        if let Some(c) = b2.interrupts.counts_mut(i) {
            let n = c.len();
            c[i % n] += 1000 + i as u64;
        }
    }
    let mut r = Rates::between(&a, &b2).unwrap();
    c.bench_function(&format!("{prefix}rates/256cpu-generated/update"), |b| {
        b.iter(|| r.update(black_box(&a), black_box(&b2)).unwrap())
    });
}

fn wall(c: &mut Criterion) {
    snapshot(c, "");
}

fn cpu(c: &mut Criterion<cpu_time::CpuTime>) {
    snapshot(c, "cpu/");
}

criterion_group!(benches, wall);
criterion_group! {
    name = cpu_benches;
    config = Criterion::default().with_measurement(cpu_time::CpuTime);
    targets = cpu
}
criterion_main!(benches, cpu_benches);
