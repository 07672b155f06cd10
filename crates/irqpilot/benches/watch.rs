//! The cost of one `irqpilot watch` interval on the generated 256-CPU server: snapshot
//! (`proc/interrupts` + `proc/stat` + `proc/softirqs`) + `Rates::update` + one rendered line,
//! through the command's own `Watcher`.
//!
//! `cargo bench -p irqpilot --bench watch -- --warm-up-time 1 --measurement-time 3`
//!
//! Counters must move for the rendered line to hold IRQs, so the sampler reads 16 copies of the
//! counter files in turn, each later one with more interrupts on every row (every 16th interval
//! sees counters go back: a reset, which costs the same). At 10 Hz the CPU share of one core is
//! 10 x the time per interval. Measured in wall time (`watch/...`) and in this thread's CPU time
//! (`cpu/watch/...`), which a busy shared machine disturbs less.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../../irqpilot-linux/benches/support/cpu_time.rs"]
mod cpu_time;

use criterion::measurement::Measurement;
use criterion::{Criterion, criterion_group, criterion_main};
use irqpilot::cli::Format;
use irqpilot::cmd::watch::Watcher;
use irqpilot_core::{ApplyReport, Machine, MonoNs, Plan, Platform, PlatformError, Snapshot};
use irqpilot_linux::LinuxPlatform;
use irqpilot_linux::generate::large_server;
use irqpilot_linux::tree::{write_counters, write_tree};

/// Reads the counter files of several roots in turn (all the same machine).
struct Rotating {
    roots: Vec<LinuxPlatform>,
    next: usize,
}

impl Platform for Rotating {
    fn machine(&mut self) -> Result<Machine, PlatformError> {
        self.roots[0].machine()
    }
    fn snapshot_into(&mut self, snap: &mut Snapshot) -> Result<(), PlatformError> {
        let i = self.next % self.roots.len();
        self.next += 1;
        self.roots[i].snapshot_into(snap)
    }
    fn apply(&mut self, _plan: &Plan) -> ApplyReport {
        ApplyReport::default()
    }
    fn now(&mut self) -> MonoNs {
        self.roots[0].now()
    }
    fn sleep(&mut self, ns: u64) {
        self.roots[0].sleep(ns);
    }
}

fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("irqpilot-bench-")
        .tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap()
}

fn watch<M: Measurement + 'static>(c: &mut Criterion<M>, prefix: &str) {
    let (machine, mut snap) = large_server(1);
    let dir = scratch();
    let full = dir.path().join("full");
    write_tree(&full, &machine, &snap).unwrap();
    let mut roots = vec![LinuxPlatform::with_root(&full)];
    for k in 1..16u64 {
        for i in 0..snap.interrupts.rows().len() {
            if let Some(counts) = snap.interrupts.counts_mut(i) {
                let n = counts.len();
                // The busiest CPU of the row, and a second one, take more interrupts.
                counts[i % n] += 500 * k;
                counts[(i * 7 + 3) % n] += 50 * k;
            }
        }
        let root = dir.path().join(format!("counters-{k}"));
        std::fs::create_dir_all(root.join("proc")).unwrap();
        write_counters(&root, &snap).unwrap();
        roots.push(LinuxPlatform::with_root(&root));
    }
    let machine = roots[0].machine().unwrap();
    let mut p = Rotating { roots, next: 0 };
    for (name, format) in [("json", Format::Json), ("table", Format::Table)] {
        let mut w = Watcher::new(&machine, format, 10);
        w.sample(&mut p).unwrap();
        let len = w.sample(&mut p).unwrap().len();
        assert!(len > 1000, "{len}");
        c.bench_function(
            &format!("{prefix}watch/256cpu-generated/sample_{name}"),
            |b| b.iter(|| w.sample(&mut p).unwrap().len()),
        );
    }
    // `watch --record`: the same sample, then written to a recording (compressed, to a sink
    // so the disk is not measured). The ratio to sample_json is the recording's overhead.
    let mut w = Watcher::new(&machine, Format::Json, 10);
    let meta = irqpilot_record::Meta::new("bench", "/", 100_000_000);
    let mut rec = irqpilot_record::Writer::new(std::io::sink(), "sink", &meta, &machine).unwrap();
    w.sample(&mut p).unwrap();
    rec.push(w.sampler().snapshot()).unwrap();
    c.bench_function(
        &format!("{prefix}watch/256cpu-generated/sample_json_recorded"),
        |b| {
            b.iter(|| {
                let n = w.sample(&mut p).unwrap().len();
                rec.push(w.sampler().snapshot()).unwrap();
                n
            })
        },
    );
}

fn wall(c: &mut Criterion) {
    watch(c, "");
}

fn cpu(c: &mut Criterion<cpu_time::CpuTime>) {
    watch(c, "cpu/");
}

criterion_group!(benches, wall);
criterion_group! {
    name = cpu_benches;
    config = Criterion::default().with_measurement(cpu_time::CpuTime);
    targets = cpu
}
criterion_main!(benches, cpu_benches);
