//! `tree::write_tree` and the generated large server: what is written reads back as the same
//! machine and the same counters.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use irqpilot_core::{Platform, Snapshot};
use irqpilot_linux::capture::capture;
use irqpilot_linux::format::interrupts::render_interrupts;
use irqpilot_linux::generate::large_server;
use irqpilot_linux::inventory::read_machine;
use irqpilot_linux::moderation::read::is_moderation_gap;
use irqpilot_linux::tree::{write_counters, write_tree};
use irqpilot_linux::{LinuxPlatform, Root};

/// Counters read back through the platform equal the written ones (the time is the reader's).
fn assert_same_counters(read: &Snapshot, written: &Snapshot) {
    assert_eq!(read.interrupts, written.interrupts);
    assert_eq!(read.stat, written.stat);
    assert_eq!(read.softirqs, written.softirqs);
}

#[test]
fn generated_server_round_trips() {
    let (machine, snap) = large_server(42);
    let dir = common::scratch_dir();
    let report = write_tree(dir.path(), &machine, &snap).unwrap();
    assert!(report.files > 10_000, "{report:?}");
    let drivers = machine
        .devices
        .values()
        .filter(|d| d.driver.is_some())
        .count();
    assert_eq!(report.links, machine.devices.len() + drivers);
    assert_eq!((machine.devices.len(), drivers), (15, 14));

    let read = read_machine(&Root::new(dir.path())).unwrap();
    assert!(read.gaps.is_empty(), "{:?}", read.gaps);
    assert_eq!(read, machine);

    // The platform's view (inventory + /proc/interrupts descriptors) is the same machine too.
    let mut p = LinuxPlatform::with_root(dir.path());
    let mut seen = p.machine().unwrap();
    // A written tree has no live interfaces or NVMe device nodes: the moderation readers record
    // each device as a gap instead of reading this machine's devices.
    assert!(
        seen.gaps.iter().all(|g| is_moderation_gap(&g.path)),
        "{:?}",
        seen.gaps
    );
    assert!(seen.gaps.iter().any(|g| g.path == "dev/nvme0"));
    assert!(seen.moderation.knobs.is_empty());
    seen.gaps.clear();
    assert_eq!(seen, machine);
    let s = p.snapshot().unwrap();
    assert_same_counters(&s, &snap);
    let text = std::fs::read_to_string(dir.path().join("proc/interrupts")).unwrap();
    assert_eq!(text, render_interrupts(&snap.interrupts));
    // 256 columns and the label width the kernel uses for nr_irqs 2456.
    assert!(text.starts_with(&format!("{}CPU0 ", " ".repeat(12))));
    assert!(text.contains("\n NMI: "));

    let manifest: toml::Table =
        toml::from_str(&std::fs::read_to_string(dir.path().join("MANIFEST.toml")).unwrap())
            .unwrap();
    assert_eq!(manifest["online_cpus"].as_integer(), Some(256));
    assert_eq!(
        manifest["kernel_release"].as_str(),
        machine.kernel_release.as_deref()
    );
}

#[test]
fn generated_tree_is_deterministic_and_capturable() {
    let (machine, snap) = large_server(3);
    let a = common::scratch_dir();
    let b = common::scratch_dir();
    write_tree(a.path(), &machine, &snap).unwrap();
    write_tree(b.path(), &machine, &snap).unwrap();
    for rel in [
        "proc/interrupts",
        "proc/stat",
        "proc/softirqs",
        "MANIFEST.toml",
        "sys/kernel/irq/100/per_cpu_count",
    ] {
        assert_eq!(
            std::fs::read(a.path().join(rel)).unwrap(),
            std::fs::read(b.path().join(rel)).unwrap(),
            "{rel}"
        );
    }
    // Every file the reader needs is one that `capture` copies.
    let c = common::scratch_dir();
    let out = c.path().join("copy");
    let report = capture(&Root::new(a.path()), &out).unwrap();
    assert!(report.skipped.is_empty(), "{:?}", report.skipped);
    assert_eq!(read_machine(&Root::new(&out)).unwrap(), machine);
}

#[test]
fn captured_fixture_round_trips_through_write_tree() {
    let src = Root::new(common::fixtures().join("firecracker-2cpu"));
    let mut p = LinuxPlatform::new(src.clone());
    let machine = read_machine(&src).unwrap();
    let snap = p.snapshot().unwrap();
    let dir = common::scratch_dir();
    write_tree(dir.path(), &machine, &snap).unwrap();
    // Same facts and the same gaps (IRQ 27 has no /proc/irq entry, no debugfs).
    assert_eq!(read_machine(&Root::new(dir.path())).unwrap(), machine);
    let mut q = LinuxPlatform::with_root(dir.path());
    assert_same_counters(&q.snapshot().unwrap(), &snap);
    // The fixture's own /proc files are reproduced byte for byte.
    for rel in ["proc/interrupts", "proc/stat", "proc/softirqs"] {
        assert_eq!(
            std::fs::read_to_string(dir.path().join(rel)).unwrap(),
            std::fs::read_to_string(src.join(rel)).unwrap(),
            "{rel}"
        );
    }
}

#[test]
fn write_counters_moves_the_clock() {
    let (machine, mut snap) = large_server(5);
    let dir = common::scratch_dir();
    write_tree(dir.path(), &machine, &snap).unwrap();
    let mut p = LinuxPlatform::with_root(dir.path());
    let before = p.snapshot().unwrap();
    let row = snap
        .interrupts
        .rows()
        .iter()
        .position(|r| r.desc().ends_with("mlx5_comp3@pci:0000:3b:00.0"))
        .unwrap();
    snap.interrupts.counts_mut(row).unwrap()[3] += 1000;
    write_counters(dir.path(), &snap).unwrap();
    let after = p.snapshot().unwrap();
    let rates = irqpilot_core::Rates::between(&before, &after).unwrap();
    let r = &rates.rows[row];
    assert!(r.per_cpu_per_sec[3] > 0.0);
    assert_eq!(r.per_cpu_per_sec.iter().filter(|v| **v > 0.0).count(), 1);
}
