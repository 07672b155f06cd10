//! `LinuxPlatform` over fixture trees: inventory, snapshots, bad input, and applying plans to
//! temporary copies (never this machine's `/proc`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use irqpilot_core::{
    Action, ApplyError, CoalesceParams, CpuSet, IrqNum, Plan, Platform, PlatformError, QueueKind,
    Trigger,
};
use irqpilot_linux::inventory::read_machine;
use irqpilot_linux::{LinuxPlatform, Root};
use std::path::Path;

fn l(s: &str) -> CpuSet {
    CpuSet::parse_list(s).unwrap()
}

fn firecracker() -> LinuxPlatform {
    LinuxPlatform::with_root(common::fixtures().join("firecracker-2cpu"))
}

/// A root holding only `proc/interrupts` with `text`.
fn interrupts_only(text: &[u8]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("proc")).unwrap();
    std::fs::write(dir.path().join("proc/interrupts"), text).unwrap();
    dir
}

#[test]
fn machine_adds_the_interrupts_descriptors() {
    let mut p = firecracker();
    let m = p.machine().unwrap();
    let plain = read_machine(p.root()).unwrap();
    assert_eq!(m.irqs.len(), plain.irqs.len());
    assert_eq!(m.topology, plain.topology);
    // The platform adds the moderation readers' gaps: under a fixture no interface is live, so
    // eth0's coalescing is unknown rather than read from this machine's eth0.
    let added: Vec<_> = m.gaps.iter().filter(|g| !plain.gaps.contains(g)).collect();
    assert_eq!(added.len(), 1, "{added:?}");
    assert_eq!(added[0].path, "ethtool:eth0");
    assert!(plain.gaps.iter().all(|g| m.gaps.contains(g)));
    // sysfs already knew everything here; the merge changes nothing it had.
    for (n, irq) in &plain.irqs {
        assert_eq!(&m.irqs[n], irq, "IRQ {n}");
    }
}

#[test]
fn only_proc_interrupts_still_lists_every_irq() {
    let text = std::fs::read(common::fixtures().join("firecracker-2cpu/proc/interrupts")).unwrap();
    let dir = interrupts_only(&text);
    let mut p = LinuxPlatform::with_root(dir.path());
    let m = p.machine().unwrap();
    // 24-26 and 28-43: every numbered row.
    assert_eq!(m.irqs.len(), 19);
    let rx = &m.irqs[&IrqNum(38)];
    assert_eq!(rx.chip.as_deref(), Some("PCI-MSIX-0000:00:03.0"));
    assert_eq!(rx.hwirq, Some(1));
    assert_eq!(rx.trigger, Some(Trigger::Edge));
    assert_eq!(rx.handler.as_deref(), Some("edge"));
    assert_eq!(rx.actions, ["virtio2-input.0"]);
    assert_eq!(rx.queue.as_ref().map(|q| q.kind), Some(QueueKind::Rx));
    assert!(rx.is_device());
    assert_eq!(rx.requested, None, "nothing is guessed");
    assert!(m.gaps.iter().any(|g| g.path == "sys"), "{:?}", m.gaps);
    let s = p.snapshot().unwrap();
    assert_eq!(s.interrupts.rows().len(), 35);
    assert_eq!(s.stat, None);
    assert_eq!(s.softirqs, None);
}

#[test]
fn missing_proc_interrupts_names_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = LinuxPlatform::with_root(dir.path());
    for e in [p.machine().unwrap_err(), p.snapshot().unwrap_err()] {
        let msg = e.to_string();
        assert!(matches!(e, PlatformError::Io { .. }), "{e:?}");
        assert!(
            msg.contains(&format!("{}/proc/interrupts", dir.path().display())),
            "{msg}"
        );
    }
}

#[test]
fn snapshots_read_all_three_files_and_time_advances() {
    let mut p = firecracker();
    let a = p.snapshot().unwrap();
    let b = p.snapshot().unwrap();
    assert!(b.taken_at > a.taken_at);
    assert!(a.taken_at.0 > 0);
    assert_eq!(a.interrupts.cpus.len(), 2);
    assert_eq!(a.stat.as_ref().map(|s| s.per_cpu.len()), Some(2));
    assert!(
        a.softirqs
            .as_ref()
            .is_some_and(|s| s.row("NET_RX").is_some())
    );
    assert_eq!(a.interrupts, b.interrupts);
    let before = p.now();
    p.sleep(1_000_000);
    assert!(p.now().since(before).is_some_and(|d| d >= 1_000_000));
}

fn parse_error(text: &[u8]) -> (String, usize, String) {
    let dir = interrupts_only(text);
    let mut p = LinuxPlatform::with_root(dir.path());
    match p.snapshot().unwrap_err() {
        PlatformError::Parse {
            path,
            line,
            message,
        } => {
            assert_eq!(path, dir.path().join("proc/interrupts"));
            // The inventory reports the same error.
            assert!(matches!(p.machine(), Err(PlatformError::Parse { .. })));
            (path.display().to_string(), line, message)
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn bad_input_names_file_and_line() {
    let head = "           CPU0       CPU1       \n";
    let (_, line, msg) = parse_error(format!("{head} 24:          1\n").as_bytes());
    assert_eq!(line, 2, "truncated row: {msg}");
    let (_, line, msg) =
        parse_error(format!("{head} 24:          1         x2   IO-APIC\n").as_bytes());
    assert_eq!(line, 2, "non-numeric count: {msg}");
    let (_, line, msg) =
        parse_error(format!("{head} 24:          1          2          3   x\n").as_bytes());
    assert_eq!(line, 2, "more columns than the header: {msg}");
    let (_, line, msg) = parse_error(b"");
    assert_eq!(line, 0, "empty: {msg}");
    let (_, line, msg) =
        parse_error(format!("{head} 25:          1          2   ok\n\x7fELF\x02\x01\n").as_bytes());
    assert_eq!(line, 3, "binary: {msg}");
    let (_, line, msg) = parse_error(&[b'C', b'P', b'U', b'0', b'\n', 0xff, 0xfe, b'\n']);
    assert_eq!(line, 2, "not UTF-8: {msg}");
    assert!(msg.contains("0xff"), "{msg}");
}

#[test]
fn unreadable_interrupts_is_an_io_error_and_bad_stat_a_parse_error() {
    let dir = tempfile::tempdir().unwrap();
    // A directory where the file should be: reading fails (EISDIR) even as root.
    std::fs::create_dir_all(dir.path().join("proc/interrupts")).unwrap();
    let mut p = LinuxPlatform::with_root(dir.path());
    assert!(matches!(p.snapshot(), Err(PlatformError::Io { .. })));

    let (_guard, root) = common::fixture_copy("firecracker-2cpu");
    std::fs::write(root.join("proc/stat"), "cpu  1 2 3\n").unwrap();
    let mut p = LinuxPlatform::with_root(&root);
    match p.snapshot().unwrap_err() {
        PlatformError::Parse { path, line, .. } => {
            assert_eq!(path, root.join("proc/stat"));
            assert_eq!(line, 1);
        }
        other => panic!("{other:?}"),
    }
}

fn read(root: &Path, rel: &str) -> String {
    std::fs::read_to_string(root.join(rel)).unwrap()
}

#[test]
fn apply_set_affinity_writes_only_what_differs() {
    let (_guard, root) = common::fixture_copy("firecracker-2cpu");
    let mut p = LinuxPlatform::with_root(&root);
    let set = |irq: u32, cpus: &str| Action::SetAffinity {
        irq: IrqNum(irq),
        cpus: l(cpus),
    };
    let plan = Plan {
        actions: vec![
            set(38, "0"),
            set(38, "0"),
            set(999, "1"),
            set(39, ""),
            Action::SetDefaultAffinity { cpus: l("1") },
            Action::SetCoalesce {
                device: "eth0".into(),
                queue: None,
                params: CoalesceParams::default(),
            },
        ],
        notes: vec![],
    };
    let report = p.apply(&plan);
    let o = &report.outcomes;
    assert_eq!(o.len(), 6);
    assert_eq!(o[0].result, Ok(true));
    assert_eq!(o[0].old.as_deref(), Some("0-1"));
    assert_eq!(read(&root, "proc/irq/38/smp_affinity_list"), "0\n");
    assert_eq!(o[1].result, Ok(false), "already so: nothing written");
    assert_eq!(o[1].old.as_deref(), Some("0"));
    assert_eq!(o[2].result, Err(ApplyError::Vanished));
    assert_eq!(o[2].old, None);
    assert_eq!(o[3].result, Err(ApplyError::Invalid));
    assert_eq!(read(&root, "proc/irq/39/smp_affinity_list"), "0-1\n");
    assert_eq!(o[4].result, Ok(true));
    assert_eq!(o[4].old.as_deref(), Some("3"));
    // A hex mask nr_cpu_ids (2) bits wide.
    assert_eq!(read(&root, "proc/irq/default_smp_affinity"), "2\n");
    assert_eq!(o[5].result, Err(ApplyError::Unsupported));
    assert_eq!((report.written(), report.failures()), (2, 3));

    // The inventory sees the change; the old values are enough to revert.
    let m = p.machine().unwrap();
    assert_eq!(m.irqs[&IrqNum(38)].requested, Some(l("0")));
    assert_eq!(m.default_affinity, Some(l("1")));
    let revert = Plan {
        actions: vec![
            set(38, o[0].old.as_deref().unwrap()),
            Action::SetDefaultAffinity {
                cpus: CpuSet::parse_mask(o[4].old.as_deref().unwrap()).unwrap(),
            },
        ],
        notes: vec![],
    };
    assert_eq!(p.apply(&revert).written(), 2);
    assert_eq!(read(&root, "proc/irq/38/smp_affinity_list"), "0-1\n");
    assert_eq!(read(&root, "proc/irq/default_smp_affinity"), "3\n");
}

#[test]
fn default_affinity_width_follows_possible_cpus() {
    let (_guard, root) = common::fixture_copy("firecracker-2cpu");
    std::fs::write(root.join("sys/devices/system/cpu/possible"), "0-39\n").unwrap();
    let mut p = LinuxPlatform::new(Root::new(&root));
    let r = p.apply(&Plan {
        actions: vec![Action::SetDefaultAffinity { cpus: l("32") }],
        notes: vec![],
    });
    assert_eq!(r.outcomes[0].result, Ok(true));
    assert_eq!(
        read(&root, "proc/irq/default_smp_affinity"),
        "01,00000000\n"
    );
}

#[test]
fn online_cpus_come_from_proc_interrupts_when_cpu_online_cannot_be_trusted() {
    let (_d, root) = common::fixture_copy("firecracker-2cpu");
    let online = root.join("sys/devices/system/cpu/online");
    // Online beyond possible: one of the two files is wrong; the gap says so and the online
    // CPUs are the columns of /proc/interrupts (never CPUs 2-8191 in default_smp_affinity).
    std::fs::write(&online, "0-8191\n").unwrap();
    let m = LinuxPlatform::with_root(&root).machine().unwrap();
    assert_eq!(m.topology.online, l("0-1"));
    let gap = m
        .gaps
        .iter()
        .find(|g| g.path == "sys/devices/system/cpu/online")
        .unwrap();
    assert!(format!("{:?}", gap.reason).contains("2-8191"), "{gap:?}");
    // Unreadable: the same fallback, so isolation still has its housekeeping CPUs.
    std::fs::remove_file(&online).unwrap();
    std::fs::create_dir(&online).unwrap();
    let m = LinuxPlatform::with_root(&root).machine().unwrap();
    assert_eq!(m.topology.online, l("0-1"));
    assert_eq!(m.housekeeping(), l("0-1"));
    assert!(
        m.gaps
            .iter()
            .any(|g| g.path == "sys/devices/system/cpu/online")
    );
}
