//! The cost of one scrape of the metrics endpoint on the generated 256-CPU server (789 IRQs):
//! the three counter files read, rates, imbalance and findings recomputed (the counters move
//! and the snapshots are 15 s apart, as with a 15 s scrape interval, so every scrape pays for
//! them), and the OpenMetrics text encoded; with and without `--per-cpu-irqs`.
//!
//! `cargo bench -p irqpilot --bench scrape -- --warm-up-time 1 --measurement-time 3`
//!
//! Measured in wall time (`scrape/...`) and in this thread's CPU time (`cpu/scrape/...`). At a
//! 15 s scrape interval the exporter's share of a core is the CPU time per scrape / 15 s, plus
//! the inventory re-read once a minute (docs/metrics.md).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../../irqpilot-linux/benches/support/cpu_time.rs"]
mod cpu_time;

use criterion::measurement::Measurement;
use criterion::{Criterion, criterion_group, criterion_main};
use irqpilot::metrics::{Scraper, Shared};
use irqpilot_core::{ApplyReport, Machine, MonoNs, Plan, Platform, PlatformError, Snapshot};
use irqpilot_linux::LinuxPlatform;
use irqpilot_linux::generate::large_server;
use irqpilot_linux::tree::{write_counters, write_tree};
use std::sync::{Arc, Mutex};

/// Reads the counter files of several roots in turn (the same machine, counts growing), with
/// timestamps 15 s apart.
struct Rotating {
    roots: Vec<LinuxPlatform>,
    next: u64,
}

impl Platform for Rotating {
    fn machine(&mut self) -> Result<Machine, PlatformError> {
        self.roots[0].machine()
    }
    fn snapshot_into(&mut self, snap: &mut Snapshot) -> Result<(), PlatformError> {
        let i = (self.next % self.roots.len() as u64) as usize;
        self.next += 1;
        self.roots[i].snapshot_into(snap)?;
        snap.taken_at = MonoNs(self.next * 15_000_000_000);
        Ok(())
    }
    fn apply(&mut self, _plan: &Plan) -> ApplyReport {
        ApplyReport::default()
    }
    fn now(&mut self) -> MonoNs {
        MonoNs(self.next * 15_000_000_000)
    }
    fn sleep(&mut self, _ns: u64) {}
}

fn scrape<M: Measurement + 'static>(c: &mut Criterion<M>, prefix: &str) {
    let (machine, mut snap) = large_server(1);
    let dir = tempfile::Builder::new()
        .prefix("irqpilot-bench-")
        .tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    let full = dir.path().join("full");
    write_tree(&full, &machine, &snap).unwrap();
    let mut roots = vec![LinuxPlatform::with_root(&full)];
    for k in 1..8u64 {
        for i in 0..snap.interrupts.rows().len() {
            if let Some(counts) = snap.interrupts.counts_mut(i) {
                let n = counts.len();
                counts[i % n] += 500 * k;
            }
        }
        let root = dir.path().join(format!("counters-{k}"));
        std::fs::create_dir_all(root.join("proc")).unwrap();
        write_counters(&root, &snap).unwrap();
        roots.push(LinuxPlatform::with_root(&root));
    }
    let machine = Arc::new(roots[0].machine().unwrap());
    for per_cpu in [false, true] {
        let shared = Arc::new(Mutex::new(Shared {
            machine: Some(Arc::clone(&machine)),
            moderation_target_per_sec: 1e6,
            ..Shared::default()
        }));
        let platform = Rotating {
            roots: roots
                .iter()
                .map(|r| LinuxPlatform::new(r.root().clone()))
                .collect(),
            next: 0,
        };
        let mut s = Scraper::with_platform(Box::new(platform), shared, per_cpu, None);
        let len = s.scrape().unwrap().len();
        assert!(len > 100_000, "{len}");
        let name = if per_cpu { "per_cpu_irqs" } else { "default" };
        c.bench_function(&format!("{prefix}scrape/256cpu-generated/{name}"), |b| {
            b.iter(|| s.scrape().unwrap().len())
        });
    }
}

fn wall(c: &mut Criterion) {
    scrape(c, "");
}

fn cpu(c: &mut Criterion<cpu_time::CpuTime>) {
    scrape(c, "cpu/");
}

criterion_group!(benches, wall);
criterion_group! {
    name = cpu_benches;
    config = Criterion::default().with_measurement(cpu_time::CpuTime);
    targets = cpu
}
criterion_main!(benches, cpu_benches);
