//! Parse and render throughput of the counter files a snapshot is made of.
//!
//! `cargo bench -p irqpilot-linux --bench parse -- --warm-up-time 1 --measurement-time 3`
//!
//! The big cases read the shared corpus in place (the 13.4 MB, 1,152-CPU `/proc/interrupts` and
//! its `/proc/softirqs`); without the corpus they are skipped with a message. A generated
//! 256-CPU, 800-IRQ file (the size of a large server) is always measured.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use irqpilot_core::{CpuId, InterruptTable, IrqNum, RowLabel};
use irqpilot_linux::format::interrupts::{
    parse_interrupts, parse_interrupts_into, render_interrupts, render_interrupts_into,
};
use irqpilot_linux::format::irq_desc::parse_descs;
use irqpilot_linux::format::softirqs::parse_softirqs;
use irqpilot_linux::format::stat::parse_stat;
use std::hint::black_box;

const CORPUS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/corpus/proc-interrupts"
);

fn corpus_file(name: &str) -> Option<String> {
    let path = format!("{CORPUS}/{name}");
    match std::fs::read_to_string(&path) {
        Ok(text) => Some(text),
        Err(e) => {
            eprintln!("SKIPPED {name}: cannot read {path}: {e}");
            None
        }
    }
}

/// 256 CPUs, 800 IRQs in the kernel's layout.
fn generated_large() -> String {
    let cpus: Vec<CpuId> = (0..256).map(CpuId).collect();
    let mut t = InterruptTable::with_kernel_header(cpus, 3);
    for irq in 0..800u32 {
        let counts: Vec<u64> = (0..256u64)
            .map(|c| (u64::from(irq) * 7919 + c * 104_729) % 5_000_000_000)
            .collect();
        let tail = format!(
            "  IR-PCI-MSIX-0000:3b:00.0 {:>3}-edge      eth0-TxRx-{irq}",
            irq % 64
        );
        t.push_kernel_row(RowLabel::Irq(IrqNum(irq)), 3, &counts, &tail);
    }
    for name in ["NMI", "LOC", "RES", "CAL", "TLB"] {
        t.push_kernel_row(
            RowLabel::Named(name.into()),
            3,
            &[12345; 256],
            "   Some interrupts",
        );
    }
    render_interrupts(&t)
}

fn interrupts_cases(c: &mut Criterion, label: &str, text: &str) {
    let mut g = c.benchmark_group(format!("interrupts/{label}"));
    g.throughput(Throughput::Bytes(text.len() as u64));
    g.bench_function("parse", |b| {
        b.iter(|| parse_interrupts(black_box(text)).unwrap())
    });
    let mut table = parse_interrupts(text).unwrap();
    g.bench_function("parse_into", |b| {
        b.iter(|| parse_interrupts_into(black_box(text), &mut table).unwrap())
    });
    let mut out = String::new();
    g.bench_function("render_into", |b| {
        b.iter(|| render_interrupts_into(black_box(&table), &mut out))
    });
    g.bench_function("parse_descs", |b| b.iter(|| parse_descs(black_box(&table))));
    g.finish();
}

fn interrupts(c: &mut Criterion) {
    if let Some(text) = corpus_file("04-pcp-x86-1152cpu.txt") {
        interrupts_cases(c, "1152cpu-corpus", &text);
    }
    interrupts_cases(c, "256cpu-800irq-generated", &generated_large());
}

fn companions(c: &mut Criterion) {
    if let Some(text) = corpus_file("04-pcp-x86-1152cpu.softirqs") {
        let mut g = c.benchmark_group("softirqs/1152cpu-corpus");
        g.throughput(Throughput::Bytes(text.len() as u64));
        g.bench_function("parse", |b| {
            b.iter(|| parse_softirqs(black_box(&text)).unwrap())
        });
        g.finish();
    }
    if let Some(text) = corpus_file("18-coreos-hyperv-vm-2cpu.stat") {
        let mut g = c.benchmark_group("stat/2cpu-corpus");
        g.throughput(Throughput::Bytes(text.len() as u64));
        g.bench_function("parse", |b| {
            b.iter(|| parse_stat(black_box(&text)).unwrap())
        });
        g.finish();
    }
}

criterion_group!(benches, interrupts, companions);
criterion_main!(benches);
