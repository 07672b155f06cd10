//! Recordings and reports at scale: an hour of the generated 256-CPU server at one sample a
//! second (the server's counters moving at the rates its counts imply, `MovingServer`) is
//! recorded, then turned into a report by the real `irqpilot report` command, then replayed.
//! Prints the file and page sizes, the CPU time per recorded sample, and the report's time.
//!
//! `cargo bench -p irqpilot --bench recording` (IRQPILOT_BENCH_SAMPLES=N for another length)
//!
//! Targets (issue 12): an hour under 50 MB; `report` on it within 5 s and a page under 5 MB.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../../irqpilot-linux/benches/support/cpu_time.rs"]
mod cpu_time;

use clap::Parser;
use criterion::measurement::Measurement;
use irqpilot::cli::Cli;
use irqpilot_core::Platform;
use irqpilot_linux::generate::MovingServer;
use irqpilot_record::{Meta, Recording, Writer};
use std::io::BufWriter;
use std::time::Instant;

/// CPU time of this process, ns (the report runs in threads of its own libraries too).
fn process_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else to parse.
    let samples: u64 = std::env::var("IRQPILOT_BENCH_SAMPLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3600);
    let dir = tempfile::Builder::new()
        .prefix("irqpilot-bench-")
        .tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    let path = dir.path().join("hour.irqrec");
    let mut server = MovingServer::new(1);
    let machine = server.machine().unwrap();
    let mut meta = Meta::new("watch", "/srv/generated", 1_000_000_000);
    meta.start_mono_ns = server.now().0;
    meta.created_unix_ns = 1_767_225_600_000_000_000;
    let f = std::fs::File::create(&path).unwrap();
    let mut w = Writer::new(BufWriter::new(f), &path, &meta, &machine).unwrap();
    let mut push_ns = 0u64;
    for k in 0..samples {
        if k > 0 {
            server.sleep(1_000_000_000);
        }
        let t0 = cpu_time::CpuTime.start();
        w.push(server.snapshot_now()).unwrap();
        push_ns += cpu_time::CpuTime.end(t0);
    }
    let stats = w.stats();
    w.finish().unwrap();
    let size = std::fs::metadata(&path).unwrap().len();
    println!(
        "recording: {samples} samples of 256 CPUs x {} rows at 1 s: {:.2} MB ({:.0} bytes/sample; {} blocks, {} key points; {:.1} MB uncompressed); {:.0} us CPU per sample to record",
        server.snapshot_now().interrupts.rows().len(),
        size as f64 / 1e6,
        size as f64 / samples as f64,
        stats.blocks,
        stats.keys,
        stats.raw_bytes as f64 / 1e6,
        push_ns as f64 / samples as f64 / 1e3
    );

    // The report, through the command itself.
    let html = dir.path().join("report.html");
    let cli = Cli::parse_from([
        "irqpilot",
        "report",
        path.to_str().unwrap(),
        "--out",
        html.to_str().unwrap(),
    ]);
    let (w0, c0) = (Instant::now(), process_cpu_ns());
    irqpilot::run(&cli).unwrap();
    let (wall, cpu) = (
        w0.elapsed().as_secs_f64(),
        (process_cpu_ns() - c0) as f64 / 1e9,
    );
    let page = std::fs::metadata(&html).unwrap().len();
    println!(
        "report: {wall:.2} s wall, {cpu:.2} s CPU; page {:.2} MB",
        page as f64 / 1e6
    );

    // Replay: every sample decoded into a snapshot.
    let rec = Recording::open(&path).unwrap();
    let mut p = rec.player().unwrap();
    let w0 = Instant::now();
    let mut n = 0u64;
    while p.next_sample().unwrap() {
        n += 1;
    }
    let t = w0.elapsed().as_secs_f64();
    println!(
        "replay: {n} samples decoded in {t:.2} s ({:.0} samples/s); seek to the middle: {:.1} ms",
        n as f64 / t,
        {
            let w0 = Instant::now();
            p.seek(rec.span_ns().unwrap().0 + samples / 2 * 1_000_000_000)
                .unwrap();
            w0.elapsed().as_secs_f64() * 1e3
        }
    );
}
