//! `read_machine` and `capture` over the captured fixture trees and hand-built trees.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use irqpilot_core::{
    CacheKind, CpuId, CpuSet, Gap, GapReason, HousekeepingBasis, IrqNum, IsolFlag, Machine, NodeId,
    PciAddr, QueueKind, Topology, Trigger,
};
use irqpilot_linux::Root;
use irqpilot_linux::capture::capture;
use irqpilot_linux::format::{cpu, procirq, value};
use irqpilot_linux::inventory::read_machine;
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

fn l(s: &str) -> CpuSet {
    CpuSet::parse_list(s).unwrap()
}

fn addr(s: &str) -> PciAddr {
    PciAddr::parse(s).unwrap()
}

fn gap<'a>(m: &'a Machine, path: &str) -> Option<&'a Gap> {
    m.gaps.iter().find(|g| g.path == path)
}

/// A temporary root directory built file by file.
struct Tree(tempfile::TempDir);

impl Tree {
    fn new() -> Tree {
        Tree(tempfile::tempdir().unwrap())
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.0.path().join(rel)
    }

    fn file(&self, rel: &str, text: &str) -> &Tree {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
        self
    }

    fn dir(&self, rel: &str) -> &Tree {
        std::fs::create_dir_all(self.path(rel)).unwrap();
        self
    }

    fn link(&self, rel: &str, target: &str) -> &Tree {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, p).unwrap();
        self
    }

    fn root(&self) -> Root {
        Root::new(self.0.path())
    }

    fn read(&self) -> Machine {
        read_machine(&self.root()).unwrap()
    }

    /// Minimal CPU files: online, possible, and an empty isolated list.
    fn cpus(&self, online: &str, possible: &str) -> &Tree {
        self.file("sys/devices/system/cpu/online", &format!("{online}\n"))
            .file("sys/devices/system/cpu/possible", &format!("{possible}\n"))
            .file("sys/devices/system/cpu/isolated", "\n")
    }

    /// One IRQ with all its `/proc/irq/N` and `/sys/kernel/irq/N` files.
    fn irq(&self, n: u32, chip: &str, actions: &str, affinity: &str, node: &str) -> &Tree {
        let p = format!("proc/irq/{n}");
        let s = format!("sys/kernel/irq/{n}");
        self.file(&format!("{p}/smp_affinity_list"), &format!("{affinity}\n"))
            .file(
                &format!("{p}/effective_affinity_list"),
                &format!("{affinity}\n"),
            )
            .file(&format!("{p}/affinity_hint"), "00\n")
            .file(&format!("{p}/node"), &format!("{node}\n"))
            .file(&format!("{s}/chip_name"), &format!("{chip}\n"))
            .file(&format!("{s}/hwirq"), "0\n")
            .file(&format!("{s}/type"), "edge\n")
            .file(&format!("{s}/name"), "edge\n")
            .file(&format!("{s}/actions"), &format!("{actions}\n"))
    }
}

// ---------------------------------------------------------------------------------------------
// The real capture.

fn firecracker() -> Machine {
    read_machine(&Root::new(fixtures().join("firecracker-2cpu"))).unwrap()
}

#[test]
fn firecracker_topology() {
    let m = firecracker();
    let t = &m.topology;
    assert_eq!(t.online, l("0-1"));
    assert_eq!(t.possible, Some(l("0-1")));
    assert_eq!(t.nr_cpu_ids(), 2);
    assert_eq!(t.cpus.len(), 2);
    assert_eq!(t.nodes.get(&NodeId(0)), Some(&l("0-1")));
    let c1 = &t.cpus[&CpuId(1)];
    assert_eq!((c1.package, c1.core, c1.die), (Some(0), Some(1), Some(0)));
    // x86 prints cluster_id 65535 when there is no cluster; that is not a shared cluster.
    assert_eq!(c1.cluster, None);
    assert_eq!(c1.thread_siblings, Some(l("1")));
    assert_eq!(c1.package_cpus, Some(l("0-1")));
    assert_eq!(c1.node, Some(NodeId(0)));
    let levels: Vec<(u8, CacheKind)> = c1.caches.iter().map(|c| (c.level, c.kind)).collect();
    assert_eq!(
        levels,
        [
            (1, CacheKind::Data),
            (1, CacheKind::Instruction),
            (2, CacheKind::Unified),
            (3, CacheKind::Unified)
        ]
    );
    let llc = t.llc(CpuId(1)).unwrap();
    assert_eq!(llc.size_bytes, Some(32 << 20));
    assert_eq!(llc.shared_cpus, l("0-1"));
    assert_eq!(c1.caches[0].size_bytes, Some(48 << 10));
}

#[test]
fn firecracker_devices_and_irqs() {
    let m = firecracker();
    assert_eq!(m.devices.len(), 6);
    let bridge = &m.devices[&addr("0000:00:00.0")];
    assert_eq!(bridge.class, Some(0x060000));
    assert_eq!(bridge.driver, None);
    assert!(bridge.msi_irqs.is_empty());
    assert_eq!(bridge.legacy_irq, None);
    let net = &m.devices[&addr("0000:00:03.0")];
    assert_eq!(net.class, Some(0x020000));
    assert_eq!(net.driver.as_deref(), Some("virtio-pci"));
    assert_eq!(net.net, ["eth0"]);
    assert_eq!(net.msi_irqs, [IrqNum(37), IrqNum(38), IrqNum(39)]);
    assert_eq!(net.numa_node, None);
    assert_eq!(net.local_cpus, Some(l("0-1")));
    let blk = &m.devices[&addr("0000:00:02.0")];
    assert_eq!(blk.msi_irqs, [IrqNum(35), IrqNum(36)]);

    // 24-43 from /sys/kernel/irq; 27 has no /proc/irq entry (never requested).
    assert_eq!(m.irqs.len(), 20);
    assert_eq!(m.irqs.keys().next(), Some(&IrqNum(24)));
    let rx = &m.irqs[&IrqNum(38)];
    assert_eq!(rx.actions, ["virtio2-input.0"]);
    assert_eq!(rx.chip.as_deref(), Some("PCI-MSIX-0000:00:03.0"));
    assert_eq!(rx.hwirq, Some(1));
    assert_eq!(rx.trigger, Some(Trigger::Edge));
    assert_eq!(rx.device, Some(addr("0000:00:03.0")));
    assert_eq!(rx.driver.as_deref(), Some("virtio-pci"));
    assert_eq!(rx.queue.as_ref().map(|q| q.kind), Some(QueueKind::Rx));
    assert_eq!(rx.requested, Some(l("0-1")));
    assert_eq!(rx.effective.as_ref().map(CpuSet::len), Some(1));
    // virtio-net hints its queue pair at every CPU; virtio-blk gives no hint.
    assert_eq!(rx.affinity_hint, Some(l("0-1")));
    let req = &m.irqs[&IrqNum(36)];
    assert_eq!(req.affinity_hint, None);
    assert_eq!(req.queue.as_ref().map(|q| q.kind), Some(QueueKind::Io));
    // virtio-blk's queue vectors get a node from their (spread) affinity; virtio-net's say -1.
    assert_eq!(req.node, Some(NodeId(0)));
    assert_eq!(rx.node, None);
    for n in 28..=43 {
        assert!(m.irqs[&IrqNum(n)].device.is_some(), "IRQ {n} has a device");
    }
    let serial = &m.irqs[&IrqNum(26)];
    assert_eq!(serial.chip.as_deref(), Some("IO-APIC"));
    assert_eq!(serial.actions, ["ttyS0"]);
    assert_eq!(serial.device, None);
    let unused = &m.irqs[&IrqNum(27)];
    assert!(unused.actions.is_empty());
    assert_eq!(unused.requested, None);
    assert!(m.irqs.values().all(|i| i.managed.is_none()));
}

#[test]
fn firecracker_rest_and_gaps() {
    let m = firecracker();
    assert_eq!(m.kernel_release.as_deref(), Some("6.18.44-fc-v657"));
    assert_eq!(m.default_affinity, Some(l("0-1")));
    let cmdline = m.cmdline.as_deref().unwrap();
    assert!(cmdline.contains(" -- --firecracker-init"));
    assert_eq!(m.isolation.isolated, Some(CpuSet::new()));
    // No CONFIG_NO_HZ_FULL file, and the command line asks for none: known to be none.
    assert_eq!(m.isolation.nohz_full, None);
    assert_eq!(m.isolation.isolcpus, None);
    assert_eq!(m.housekeeping(), l("0-1"));
    assert_eq!(
        m.gaps,
        [
            Gap {
                path: "proc/irq/27".into(),
                reason: GapReason::Missing
            },
            Gap {
                path: "sys/kernel/debug/irq/irqs".into(),
                reason: GapReason::Missing
            },
        ]
    );
}

/// Every fixture tree reads without an unparsable file and agrees with its MANIFEST.
#[test]
fn every_fixture_matches_its_manifest() {
    let mut seen = 0;
    for entry in std::fs::read_dir(fixtures()).unwrap() {
        let dir = entry.unwrap().path();
        let Ok(manifest) = std::fs::read_to_string(dir.join("MANIFEST.toml")) else {
            continue;
        };
        let manifest: toml::Table = toml::from_str(&manifest).unwrap();
        let m = read_machine(&Root::new(&dir)).unwrap();
        let name = dir.display();
        if let Some(k) = manifest.get("kernel_release").and_then(|v| v.as_str()) {
            assert_eq!(m.kernel_release.as_deref(), Some(k), "{name}");
        }
        if let Some(n) = manifest.get("online_cpus").and_then(|v| v.as_integer()) {
            assert_eq!(m.topology.online.len() as i64, n, "{name}");
        }
        let bad: Vec<_> = m
            .gaps
            .iter()
            .filter(|g| matches!(g.reason, GapReason::Unparsable(_)))
            .collect();
        assert!(bad.is_empty(), "{name}: {bad:?}");
        assert!(!m.irqs.is_empty(), "{name}");
        seen += 1;
    }
    assert!(seen >= 1);
}

#[test]
fn capture_of_a_capture_reads_the_same() {
    let src = Root::new(fixtures().join("firecracker-2cpu"));
    let out = tempfile::tempdir().unwrap();
    let dst = out.path().join("copy");
    let report = capture(&src, &dst).unwrap();
    assert!(report.skipped.is_empty(), "{:?}", report.skipped);
    assert_eq!(report.online_cpus, Some(2));
    assert_eq!(report.links, 11, "6 device links and 5 driver links");
    let copied = read_machine(&Root::new(&dst)).unwrap();
    assert_eq!(copied, read_machine(&src).unwrap());
    let link = std::fs::read_link(dst.join("sys/bus/pci/devices/0000:00:03.0")).unwrap();
    assert!(link.is_relative());
    let manifest: toml::Table =
        toml::from_str(&std::fs::read_to_string(dst.join("MANIFEST.toml")).unwrap()).unwrap();
    assert_eq!(manifest["kernel_release"].as_str(), Some("6.18.44-fc-v657"));
    assert!(matches!(
        capture(&src, &dst),
        Err(irqpilot_linux::capture::CaptureError::NotEmpty(_))
    ));
}

#[test]
fn capture_never_leaves_the_tree() {
    let t = Tree::new();
    t.file("proc/interrupts", "           CPU0\n")
        .file("sys/bus/pci/devices/0000:00:01.0/class", "0x020000\n")
        .link(
            "sys/bus/pci/devices/0000:00:01.0/driver",
            "../../../../../../../../etc",
        )
        .link("sys/bus/pci/devices/0000:00:02.0", "/etc");
    let out = tempfile::tempdir().unwrap();
    let report = capture(&t.root(), &out.path().join("c")).unwrap();
    let skipped: Vec<&str> = report.skipped.iter().map(|s| s.path.as_str()).collect();
    assert!(
        skipped.contains(&"sys/bus/pci/devices/0000:00:01.0/driver"),
        "{skipped:?}"
    );
    assert!(
        skipped
            .iter()
            .any(|p| p.starts_with("sys/bus/pci/devices/0000:00:02.0")),
        "{skipped:?}"
    );
    assert!(
        !out.path()
            .join("c/sys/bus/pci/devices/0000:00:01.0/driver")
            .exists()
    );
    let manifest = std::fs::read_to_string(out.path().join("c/MANIFEST.toml")).unwrap();
    assert!(manifest.contains("leaves the tree"), "{manifest}");
}

// ---------------------------------------------------------------------------------------------
// Hand-built trees.

#[test]
fn isolation_from_cmdline_and_sysfs() {
    let t = Tree::new();
    t.cpus("0-7", "0-7")
        .file("sys/devices/system/cpu/isolated", "2-7\n")
        .file("sys/devices/system/cpu/nohz_full", "2-7\n")
        .file(
            "proc/cmdline",
            "BOOT_IMAGE=/vmlinuz isolcpus=managed_irq,domain,2-7 nohz_full=2-7 irqaffinity=0-1\n",
        );
    let m = t.read();
    let iso = &m.isolation;
    assert_eq!(iso.isolated, Some(l("2-7")));
    assert_eq!(iso.nohz_full, Some(l("2-7")));
    assert_eq!(iso.irqaffinity, Some(l("0-1")));
    let ic = iso.isolcpus.as_ref().unwrap();
    assert_eq!(ic.cpus, l("2-7"));
    assert!(ic.flags.contains(&IsolFlag::ManagedIrq) && ic.flags.contains(&IsolFlag::Domain));
    let hk = iso.housekeeping(&m.topology.online);
    assert_eq!(hk.cpus, l("0-1"));
    assert_eq!(hk.basis, HousekeepingBasis::Derived);
    assert!(gap(&m, "proc/cmdline").is_none());
}

#[test]
fn nohz_full_from_cmdline_with_last_cpu() {
    let t = Tree::new();
    t.cpus("0-7", "0-7").file(
        "proc/cmdline",
        "quiet isolcpus=nohz,4-N nohz_full=4-N irqaffinity=0-3 -- nohz_full=1\n",
    );
    let m = t.read();
    // No sysfs nohz_full file (no CONFIG_NO_HZ_FULL there): the command line's value is used.
    assert_eq!(m.isolation.nohz_full, Some(l("4-7")));
    assert!(gap(&m, "sys/devices/system/cpu/nohz_full").is_none());
    let ic = m.isolation.isolcpus.as_ref().unwrap();
    assert_eq!(ic.cpus, l("4-7"));
    assert_eq!(ic.flags, [IsolFlag::Nohz].into_iter().collect());
    assert_eq!(m.housekeeping(), l("0-3"));
}

#[test]
fn last_cpu_without_possible_is_an_unparsable_cmdline_gap() {
    let t = Tree::new();
    t.file("sys/devices/system/cpu/online", "0-3\n")
        .file("proc/cmdline", "isolcpus=2-N irqaffinity=0-1\n");
    let m = t.read();
    assert_eq!(m.isolation.isolcpus, None);
    assert_eq!(
        m.isolation.irqaffinity,
        Some(l("0-1")),
        "the other parameters still count"
    );
    let g = gap(&m, "proc/cmdline").unwrap();
    match &g.reason {
        GapReason::Unparsable(msg) => {
            assert!(msg.starts_with("proc/cmdline:1: isolcpus=2-N"), "{msg}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        gap(&m, "sys/devices/system/cpu/possible").map(|g| &g.reason),
        Some(&GapReason::Missing)
    );
}

#[test]
fn missing_sources_are_grouped() {
    let t = Tree::new();
    t.cpus("0-1", "0-1")
        .file("proc/cmdline", "quiet\n")
        .file("proc/irq/default_smp_affinity", "3\n");
    for n in [24, 25, 26] {
        // Old kernel: no effective_affinity files anywhere, no /sys/kernel/irq.
        t.file(&format!("proc/irq/{n}/smp_affinity_list"), "0-1\n")
            .file(&format!("proc/irq/{n}/affinity_hint"), "0\n")
            .file(&format!("proc/irq/{n}/node"), "-1\n");
    }
    t.file("proc/irq/24/effective_affinity", "1\n");
    let m = t.read();
    assert_eq!(m.irqs.len(), 3);
    assert_eq!(m.irqs[&IrqNum(24)].effective, Some(l("0")), "mask fallback");
    assert_eq!(m.irqs[&IrqNum(25)].effective, None);
    let paths: Vec<&str> = m.gaps.iter().map(|g| g.path.as_str()).collect();
    assert!(
        paths.contains(&"proc/irq/{25-26}/effective_affinity_list"),
        "{paths:?}"
    );
    assert!(paths.contains(&"sys/kernel/irq"), "{paths:?}");
    assert!(
        !paths.iter().any(|p| p.starts_with("sys/kernel/irq/")),
        "{paths:?}"
    );
    assert!(paths.contains(&"sys/devices/system/node"), "{paths:?}");
    // Every CPU dir is missing: the two online CPUs give one grouped gap per directory.
    assert!(!paths.iter().any(|p| p.contains("cpu0")), "{paths:?}");

    // Now no IRQ has any effective file: one gap with `*`.
    std::fs::remove_file(t.path("proc/irq/24/effective_affinity")).unwrap();
    let m = t.read();
    assert!(
        gap(&m, "proc/irq/*/effective_affinity_list").is_some(),
        "{:?}",
        m.gaps
    );
}

#[test]
fn offline_cpus_lose_topology_without_a_gap() {
    let t = Tree::new();
    t.cpus("0-2", "0-3");
    for c in 0..2 {
        let base = format!("sys/devices/system/cpu/cpu{c}");
        t.file(&format!("{base}/topology/physical_package_id"), "-1\n")
            .file(&format!("{base}/topology/core_id"), &format!("{c}\n"))
            .file(
                &format!("{base}/topology/thread_siblings_list"),
                &format!("{c}\n"),
            )
            .file(&format!("{base}/topology/core_siblings_list"), "0-3\n")
            .dir(&format!("{base}/cache"));
    }
    t.dir("sys/devices/system/cpu/cpu2")
        .dir("sys/devices/system/cpu/cpu3");
    let m = t.read();
    assert_eq!(m.topology.cpus.len(), 4);
    let c0 = &m.topology.cpus[&CpuId(0)];
    assert_eq!(c0.package, None, "-1 is no package");
    assert_eq!(c0.core, Some(0));
    assert_eq!(c0.thread_siblings, Some(l("0")), "old name as fallback");
    assert_eq!(c0.package_cpus, Some(l("0-3")), "old name as fallback");
    let paths: Vec<&str> = m.gaps.iter().map(|g| g.path.as_str()).collect();
    assert!(
        paths.contains(&"sys/devices/system/cpu/cpu2/topology"),
        "{paths:?}"
    );
    assert!(
        paths.contains(&"sys/devices/system/cpu/cpu2/cache"),
        "{paths:?}"
    );
    assert!(
        !paths.iter().any(|p| p.contains("cpu3")),
        "cpu3 is offline: {paths:?}"
    );
    // Old kernel: no die/cluster files on the CPUs that have topology.
    assert!(
        paths.contains(&"sys/devices/system/cpu/cpu*/topology/die_id"),
        "{paths:?}"
    );
    assert!(
        !paths.iter().any(|p| p.ends_with("core_cpus_list")),
        "fallback found: {paths:?}"
    );
}

#[test]
fn only_proc_interrupts() {
    let t = Tree::new();
    t.file(
        "proc/interrupts",
        "           CPU0       CPU1       \n 24:          1          0  IO-APIC   5-edge      ACPI:Ged\n",
    );
    let m = t.read();
    assert!(m.topology.cpus.is_empty());
    assert!(m.topology.online.is_empty());
    assert!(m.irqs.is_empty() && m.devices.is_empty());
    assert_eq!(m.kernel_release, None);
    let paths: Vec<(&str, &GapReason)> = m
        .gaps
        .iter()
        .map(|g| (g.path.as_str(), &g.reason))
        .collect();
    assert_eq!(
        paths,
        [
            ("proc/cmdline", &GapReason::Missing),
            ("proc/irq", &GapReason::Missing),
            ("proc/sys/kernel/osrelease", &GapReason::Missing),
            ("sys", &GapReason::Missing),
        ]
    );
}

#[test]
fn malformed_files_become_unparsable_gaps() {
    let t = Tree::new();
    t.cpus("0-1", "0-1")
        .file("proc/cmdline", "quiet\n")
        .irq(24, "IO-APIC", "ttyS0", "0-1", "-1")
        .irq(25, "IO-APIC", "i8042", "0-1", "-1")
        .file("proc/irq/24/smp_affinity_list", "zz\n")
        .file("proc/irq/24/smp_affinity", "2\n")
        .file("sys/kernel/irq/25/type", "rising\n")
        .file("sys/devices/system/cpu/isolated", "0\n1\n")
        .file("proc/irq/default_smp_affinity", "xyz\n");
    let m = t.read();
    let msg = |path: &str| match &gap(&m, path)
        .unwrap_or_else(|| panic!("no gap {path}: {:?}", m.gaps))
        .reason
    {
        GapReason::Unparsable(s) => s.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        msg("proc/irq/24/smp_affinity_list"),
        "proc/irq/24/smp_affinity_list:1: bad cpulist token \"zz\""
    );
    assert!(
        msg("sys/kernel/irq/25/type")
            .starts_with("sys/kernel/irq/25/type:1: unknown trigger type \"rising\"")
    );
    assert!(
        msg("sys/devices/system/cpu/isolated").starts_with("sys/devices/system/cpu/isolated:2:")
    );
    assert!(msg("proc/irq/default_smp_affinity").contains(":1:"));
    // The rest still loads: the mask stands in for the bad list, IRQ 25 keeps its other facts.
    assert_eq!(m.irqs[&IrqNum(24)].requested, Some(l("1")));
    assert_eq!(m.irqs[&IrqNum(25)].trigger, None);
    assert_eq!(m.irqs[&IrqNum(25)].actions, ["i8042"]);
    assert_eq!(m.isolation.isolated, None);
    assert_eq!(m.topology.online, l("0-1"));
}

#[test]
fn unreadable_files_are_permission_gaps() {
    use std::os::unix::fs::PermissionsExt;
    let t = Tree::new();
    t.cpus("0-1", "0-1")
        .file("proc/cmdline", "quiet\n")
        .irq(30, "PCI-MSIX-0000:00:01.0", "eth0-TxRx-0", "0", "0")
        .file("proc/irq/30/smp_affinity", "1\n")
        .file("sys/bus/pci/devices/0000:00:01.0/class", "0x020000\n");
    let locked = t.path("proc/irq/30/smp_affinity_list");
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
    let locked_dir = t.path("sys/bus/pci/devices");
    std::fs::set_permissions(&locked_dir, std::fs::Permissions::from_mode(0o000)).unwrap();
    let can_still_read = std::fs::read(&locked).is_ok();
    let m = t.read();
    std::fs::set_permissions(&locked_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    if can_still_read {
        eprintln!(
            "skipping permission assertions: running as root, chmod 000 does not block reads"
        );
        assert_eq!(m.irqs[&IrqNum(30)].requested, Some(l("0")));
        return;
    }
    assert_eq!(
        gap(&m, "proc/irq/30/smp_affinity_list").map(|g| &g.reason),
        Some(&GapReason::PermissionDenied)
    );
    assert_eq!(m.irqs[&IrqNum(30)].requested, Some(l("0")), "mask fallback");
    assert_eq!(
        gap(&m, "sys/bus/pci/devices").map(|g| &g.reason),
        Some(&GapReason::PermissionDenied)
    );
    assert!(m.devices.is_empty());
}

#[test]
fn numa_nodes_and_pci_devices() {
    let t = Tree::new();
    let nic = "sys/devices/pci0000:80/0000:81:00.0";
    let nvme = "sys/devices/pci0000:00/0000:01:00.0";
    let usb = "sys/devices/pci0000:00/0000:00:14.0";
    t.cpus("0-7", "0-7")
        .file("proc/cmdline", "quiet\n")
        .file("sys/devices/system/node/node0/cpulist", "0-3\n")
        .file("sys/devices/system/node/node1/cpulist", "4-7\n")
        .link(
            "sys/bus/pci/devices/0000:81:00.0",
            "../../../devices/pci0000:80/0000:81:00.0",
        )
        .link(
            "sys/bus/pci/devices/0000:01:00.0",
            "../../../devices/pci0000:00/0000:01:00.0",
        )
        .link(
            "sys/bus/pci/devices/0000:00:14.0",
            "../../../devices/pci0000:00/0000:00:14.0",
        )
        .file(&format!("{nic}/class"), "0x020000\n")
        .file(&format!("{nic}/numa_node"), "1\n")
        .file(&format!("{nic}/local_cpulist"), "4-7\n")
        .file(&format!("{nic}/irq"), "11\n")
        .file(&format!("{nic}/msi_irqs/40"), "msix\n")
        .file(&format!("{nic}/msi_irqs/41"), "msix\n")
        .dir(&format!("{nic}/net/enp129s0f0np0"))
        .link(
            &format!("{nic}/driver"),
            "../../../bus/pci/drivers/mlx5_core",
        )
        .dir("sys/bus/pci/drivers/mlx5_core")
        .file(&format!("{nvme}/class"), "0x010802\n")
        .file(&format!("{nvme}/numa_node"), "0\n")
        .file(&format!("{nvme}/local_cpus"), "0f\n")
        .file(&format!("{nvme}/irq"), "0\n")
        .file(&format!("{nvme}/msi_irqs/50"), "msix\n")
        .file(&format!("{nvme}/msi_irqs/51"), "msix\n")
        .dir(&format!("{nvme}/nvme/nvme0"))
        .link(&format!("{nvme}/driver"), "../../../bus/pci/drivers/nvme")
        .file(&format!("{usb}/class"), "0x0c0330\n")
        .file(&format!("{usb}/numa_node"), "-1\n")
        .file(&format!("{usb}/local_cpulist"), "0-7\n")
        .file(&format!("{usb}/irq"), "16\n")
        .irq(
            40,
            "IR-PCI-MSIX-0000:81:00.0",
            "mlx5_comp0@pci:0000:81:00.0",
            "4",
            "-1",
        )
        .irq(
            41,
            "IR-PCI-MSIX-0000:81:00.0",
            "mlx5_comp1@pci:0000:81:00.0",
            "5",
            "0",
        )
        .irq(50, "IR-PCI-MSIX-0000:01:00.0", "nvme0q0", "0-7", "0")
        .irq(51, "IR-PCI-MSIX-0000:01:00.0", "nvme0q1", "0-3", "0")
        .irq(16, "IO-APIC", "xhci_hcd", "0-7", "-1")
        .irq(11, "IO-APIC", "", "0-7", "-1")
        // An MSI IRQ no msi_irqs entry claims: its chip name still names the device.
        .irq(60, "PCI-MSIX-0000:01:00.0", "nvme0q2", "4-7", "1");
    let m = t.read();
    assert_eq!(m.topology.nodes.len(), 2);
    assert_eq!(m.topology.node_of(CpuId(5)), Some(NodeId(1)));
    let dev = &m.devices[&addr("0000:81:00.0")];
    assert_eq!(dev.numa_node, Some(NodeId(1)));
    assert_eq!(dev.local_cpus, Some(l("4-7")));
    assert_eq!(dev.driver.as_deref(), Some("mlx5_core"));
    assert_eq!(dev.net, ["enp129s0f0np0"]);
    assert_eq!(dev.legacy_irq, Some(IrqNum(11)));
    assert_eq!(
        m.devices[&addr("0000:01:00.0")].local_cpus,
        Some(l("0-3")),
        "mask fallback"
    );
    assert_eq!(m.devices[&addr("0000:01:00.0")].nvme, ["nvme0"]);
    assert_eq!(m.devices[&addr("0000:00:14.0")].numa_node, None);

    let comp0 = &m.irqs[&IrqNum(40)];
    assert_eq!(comp0.device, Some(addr("0000:81:00.0")));
    assert_eq!(
        comp0.node,
        Some(NodeId(1)),
        "-1 falls back to the device's node"
    );
    assert_eq!(
        m.irqs[&IrqNum(41)].node,
        Some(NodeId(0)),
        "the IRQ's own node wins"
    );
    assert_eq!(comp0.queue.as_ref().map(|q| q.kind), Some(QueueKind::TxRx));
    assert_eq!(
        m.irqs[&IrqNum(50)].queue.as_ref().map(|q| q.kind),
        Some(QueueKind::Admin)
    );
    assert_eq!(m.irqs[&IrqNum(51)].driver.as_deref(), Some("nvme"));
    // With MSI-X on, `irq` names an INTx line the driver does not use.
    assert_eq!(m.irqs[&IrqNum(11)].device, None);
    assert_eq!(
        m.irqs[&IrqNum(16)].device,
        Some(addr("0000:00:14.0")),
        "legacy line"
    );
    assert_eq!(m.irqs[&IrqNum(16)].driver, None);
    assert_eq!(
        m.irqs[&IrqNum(60)].device,
        Some(addr("0000:01:00.0")),
        "chip name"
    );
    assert!(
        m.gaps
            .iter()
            .all(|g| !matches!(g.reason, GapReason::Unparsable(_))),
        "{:?}",
        m.gaps
    );
}

/// Writes the topology files of `topo` with the crate's renderers.
fn write_topology(t: &Tree, topo: &Topology) {
    let base = "sys/devices/system/cpu";
    t.file(
        &format!("{base}/online"),
        &value::render_cpulist(&topo.online),
    );
    if let Some(p) = &topo.possible {
        t.file(&format!("{base}/possible"), &value::render_cpulist(p));
    }
    for (c, ct) in &topo.cpus {
        let d = format!("{base}/cpu{}/topology", c.0);
        t.file(
            &format!("{d}/physical_package_id"),
            &cpu::render_topology_id(ct.package),
        )
        .file(&format!("{d}/die_id"), &cpu::render_topology_id(ct.die))
        .file(
            &format!("{d}/cluster_id"),
            &cpu::render_topology_id(ct.cluster),
        )
        .file(&format!("{d}/core_id"), &cpu::render_topology_id(ct.core));
        for (name, set) in [
            ("core_cpus_list", &ct.thread_siblings),
            ("cluster_cpus_list", &ct.cluster_cpus),
            ("die_cpus_list", &ct.die_cpus),
            ("package_cpus_list", &ct.package_cpus),
        ] {
            t.file(
                &format!("{d}/{name}"),
                &value::render_cpulist(set.as_ref().unwrap()),
            );
        }
        for (k, cache) in ct.caches.iter().enumerate() {
            let d = format!("{base}/cpu{}/cache/index{k}", c.0);
            t.file(&format!("{d}/level"), &cpu::render_cache_level(cache.level))
                .file(&format!("{d}/type"), &cpu::render_cache_type(cache.kind))
                .file(
                    &format!("{d}/size"),
                    &cpu::render_cache_size(cache.size_bytes.unwrap()),
                )
                .file(
                    &format!("{d}/shared_cpu_list"),
                    &value::render_cpulist(&cache.shared_cpus),
                )
                .file(&format!("{d}/id"), &cpu::render_cache_id(cache.id.unwrap()));
        }
    }
    for (n, set) in &topo.nodes {
        t.file(
            &format!("sys/devices/system/node/node{}/cpulist", n.0),
            &value::render_cpulist(set),
        );
    }
}

#[test]
fn two_package_smt_topology_round_trips() {
    // 2 nodes, 2 packages, 4 cores each, 2 threads: CPUs 0-7 first threads, 8-15 siblings.
    let topo = Topology::synthetic(2, 2, 4, 2);
    let t = Tree::new();
    write_topology(&t, &topo);
    t.file("sys/devices/system/cpu/isolated", "\n")
        .file("proc/cmdline", "quiet\n");
    let m = t.read();
    assert_eq!(m.topology, topo);
    assert_eq!(m.topology.smt_siblings(CpuId(1)), l("1,9"));
    assert_eq!(m.topology.package_cpus(CpuId(12)), l("4-7,12-15"));
    assert_eq!(m.topology.llc(CpuId(3)).map(|c| c.level), Some(3));
    let kinds: Vec<CacheKind> = m.topology.cpus[&CpuId(0)]
        .caches
        .iter()
        .map(|c| c.kind)
        .collect();
    assert_eq!(
        kinds,
        [
            CacheKind::Data,
            CacheKind::Instruction,
            CacheKind::Unified,
            CacheKind::Unified
        ]
    );
    let paths: Vec<&str> = m.gaps.iter().map(|g| g.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "proc/irq",
            "proc/sys/kernel/osrelease",
            "sys/bus/pci/devices",
            "sys/kernel/irq"
        ]
    );
}

#[test]
fn irq_only_in_sysfs_and_mask_files() {
    let t = Tree::new();
    t.cpus("0-39", "0-39")
        .file("proc/cmdline", "quiet\n")
        .file("sys/kernel/irq/27/chip_name", "IO-APIC\n")
        .file("sys/kernel/irq/27/hwirq", "1\n")
        .file("sys/kernel/irq/27/type", "level\n")
        .file("sys/kernel/irq/27/name", "")
        .file("sys/kernel/irq/27/actions", "")
        .irq(28, "IO-APIC", "acpi", "0-39", "-1")
        .file(
            "proc/irq/28/affinity_hint",
            &procirq::render_affinity_hint(Some(&l("1,33")), 40),
        );
    let m = t.read();
    let i27 = &m.irqs[&IrqNum(27)];
    assert_eq!(i27.trigger, Some(Trigger::Level));
    assert_eq!(i27.handler, None, "empty name file: no flow handler name");
    assert!(i27.actions.is_empty());
    assert_eq!(
        gap(&m, "proc/irq/27").map(|g| &g.reason),
        Some(&GapReason::Missing)
    );
    assert_eq!(m.irqs[&IrqNum(28)].affinity_hint, Some(l("1,33")));
}

#[test]
fn managed_state_from_debugfs() {
    let debug = |dstate: &str, names: &[&str]| {
        let mut s = format!(
            "handler:  handle_edge_irq\ndevice:   0000:00:02.0\nstatus:   0x00000000\n\
             istate:   0x00000000\nddepth:   0\nwdepth:   0\ndstate:   {dstate}\n"
        );
        for n in names {
            s.push_str(&format!("            {n}\n"));
        }
        s.push_str("node:     0\naffinity: 0-1\neffectiv: 1\n");
        s
    };
    let t = Tree::new();
    t.cpus("0-1", "0-1")
        .file("proc/cmdline", "quiet\n")
        .irq(35, "PCI-MSIX-0000:00:02.0", "virtio1-config", "0-1", "-1")
        .irq(36, "PCI-MSIX-0000:00:02.0", "virtio1-req.0", "0-1", "0")
        .irq(37, "PCI-MSIX-0000:00:03.0", "virtio2-input.0", "0-1", "-1")
        .file(
            "sys/kernel/debug/irq/irqs/35",
            &debug("0x00401200", &["IRQD_ACTIVATED", "IRQD_IRQ_STARTED"]),
        )
        .file(
            "sys/kernel/debug/irq/irqs/36",
            &debug(
                "0x31600200",
                &[
                    "IRQD_ACTIVATED",
                    "IRQD_AFFINITY_MANAGED",
                    "IRQD_MANAGED_SHUTDOWN",
                ],
            ),
        )
        .file(
            "sys/kernel/debug/irq/irqs/37",
            "handler:  handle_edge_irq\n",
        );
    let m = t.read();
    assert_eq!(m.irqs[&IrqNum(35)].managed, Some(false));
    assert_eq!(m.irqs[&IrqNum(36)].managed, Some(true));
    assert_eq!(m.irqs[&IrqNum(37)].managed, None);
    match &gap(&m, "sys/kernel/debug/irq/irqs/37").unwrap().reason {
        GapReason::Unparsable(msg) => assert!(msg.contains("dstate"), "{msg}"),
        other => panic!("{other:?}"),
    }
}
