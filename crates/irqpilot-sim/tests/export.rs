//! The exported tree: a live `/proc` + `/sys` of the simulated machine that outside tools read
//! and write, and that irqpilot's own `LinuxPlatform` reads as it reads a real machine.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use irqpilot_core::{Action, ApplyError, CpuId, CpuSet, IrqNum, Plan, Platform};
use irqpilot_linux::LinuxPlatform;
use irqpilot_linux::format::interrupts::parse_interrupts;
use irqpilot_sim::export::{ExportOptions, READY_FILE, TreeExport};
use irqpilot_sim::scenarios::builtin;
use irqpilot_sim::{Scenario, Sim, SimPlatform};
use std::path::Path;

fn platform(name: &str, sets: &[(&str, &str)]) -> SimPlatform {
    let sets: Vec<(String, String)> = sets
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let sc: Scenario = builtin(name).unwrap().unwrap().with_sets(&sets).unwrap();
    SimPlatform::new(Sim::new(sc).unwrap())
}

/// One step of the exported twin: outside writes taken, 10 ms simulated, tree refreshed.
fn step(e: &mut TreeExport, p: &mut SimPlatform) {
    e.pick_up(p).unwrap();
    p.sleep(10_000_000);
    e.refresh(p).unwrap();
}

/// Per-CPU counts of `irq` in the tree's `proc/interrupts`.
fn counts(root: &Path, irq: u32) -> Vec<u64> {
    let t =
        parse_interrupts(&std::fs::read_to_string(root.join("proc/interrupts")).unwrap()).unwrap();
    let row = t.irq_row(IrqNum(irq)).unwrap();
    t.counts(row).to_vec()
}

fn read(root: &Path, rel: &str) -> String {
    std::fs::read_to_string(root.join(rel)).unwrap()
}

#[test]
fn an_affinity_written_into_the_tree_moves_the_irq() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let mut p = platform("balance-p4-4nic-netperf", &[]);
    let mut e = TreeExport::create(&mut p, root, ExportOptions::default()).unwrap();
    assert!(root.join(READY_FILE).exists());
    // Every NIC starts on CPU 0.
    assert_eq!(read(root, "proc/irq/25/effective_affinity_list"), "0\n");
    step(&mut e, &mut p);
    let before = counts(root, 25);
    assert!(before[0] > 0 && before[2] == 0, "{before:?}");
    std::fs::write(root.join("proc/irq/25/smp_affinity_list"), "2\n").unwrap();
    step(&mut e, &mut p);
    step(&mut e, &mut p);
    let after = counts(root, 25);
    assert!(after[2] > 0, "{after:?}");
    // Only CPU 2 counted IRQ 25 after the move (an interrupt in flight at the write may land
    // on CPU 0 once more).
    assert!(after[0] - before[0] <= 1, "{before:?} -> {after:?}");
    assert_eq!(read(root, "proc/irq/25/effective_affinity_list"), "2\n");
    assert_eq!(read(root, "proc/irq/25/smp_affinity"), "04\n");
    assert_eq!(e.writes.len(), 1);
    assert_eq!(e.writes[0].result, Ok(true));
    // The hex form works too, and a write that changes nothing is taken as such.
    std::fs::write(root.join("proc/irq/26/smp_affinity"), "8\n").unwrap();
    std::fs::write(root.join("proc/irq/25/smp_affinity_list"), "2\n").unwrap();
    step(&mut e, &mut p);
    assert_eq!(read(root, "proc/irq/26/effective_affinity_list"), "3\n");
    assert_eq!(read(root, "proc/irq/26/smp_affinity_list"), "3\n");
    assert_eq!(p.sim().report().migrations, 2);
}

#[test]
fn writes_the_kernel_would_refuse_are_logged_and_undone() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let mut p = platform("isolation-rt-24cpu", &[]);
    let mut e = TreeExport::create(&mut p, root, ExportOptions::default()).unwrap();
    // CPUs 0-3 hold one queue each and room for 5: four more fit on CPU 0, then ENOSPC.
    for irq in 28..33 {
        std::fs::write(
            root.join(format!("proc/irq/{irq}/smp_affinity_list")),
            "0\n",
        )
        .unwrap();
    }
    // No online CPU in the mask (EINVAL), garbage (EINVAL after a grace step), the default.
    std::fs::write(root.join("proc/irq/33/smp_affinity_list"), "30\n").unwrap();
    std::fs::write(root.join("proc/irq/34/smp_affinity"), "zz\n").unwrap();
    std::fs::write(root.join("proc/irq/default_smp_affinity"), "3\n").unwrap();
    step(&mut e, &mut p);
    step(&mut e, &mut p);
    let results: Vec<(String, Result<bool, ApplyError>)> = e
        .writes
        .iter()
        .map(|w| (w.file.clone(), w.result.clone()))
        .collect();
    let of = |f: &str| {
        results
            .iter()
            .find(|(file, _)| file == f)
            .map(|(_, r)| r.clone())
            .unwrap()
    };
    for irq in 28..32 {
        assert_eq!(of(&format!("proc/irq/{irq}/smp_affinity_list")), Ok(true));
    }
    assert_eq!(
        of("proc/irq/32/smp_affinity_list"),
        Err(ApplyError::NoVectorSpace)
    );
    assert_eq!(
        of("proc/irq/33/smp_affinity_list"),
        Err(ApplyError::Invalid)
    );
    assert_eq!(of("proc/irq/34/smp_affinity"), Err(ApplyError::Invalid));
    assert_eq!(of("proc/irq/default_smp_affinity"), Ok(true));
    // Refused writes leave the kernel's view: the old mask, the old effective CPU.
    assert_eq!(read(root, "proc/irq/32/smp_affinity_list"), "0-23\n");
    assert_eq!(read(root, "proc/irq/32/effective_affinity_list"), "8\n");
    assert_eq!(read(root, "proc/irq/33/smp_affinity_list"), "0-23\n");
    assert_eq!(read(root, "proc/irq/34/smp_affinity"), "ffffff\n");
    assert_eq!(read(root, "proc/irq/default_smp_affinity"), "000003\n");
    assert_eq!(read(root, "proc/irq/31/effective_affinity_list"), "0\n");
}

#[test]
fn the_tree_has_what_irqbalance_reads() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let mut p = platform("balance-p4-4nic-netperf", &[]);
    TreeExport::create(&mut p, root, ExportOptions::default()).unwrap();
    let cpu4 = "sys/devices/system/cpu/cpu4";
    // Package 0 is CPUs 0 and 4 (two threads of one core).
    assert_eq!(
        read(root, &format!("{cpu4}/topology/core_siblings")),
        "11\n"
    );
    assert_eq!(
        read(root, &format!("{cpu4}/topology/physical_package_id")),
        "0\n"
    );
    assert_eq!(
        read(root, &format!("{cpu4}/cache/index2/shared_cpu_map")),
        "11\n"
    );
    assert!(root.join(format!("{cpu4}/node0")).is_dir());
    assert_eq!(read(root, "sys/devices/system/node/node0/cpumap"), "ff\n");
    assert_eq!(read(root, "sys/devices/system/cpu/online"), "0-7\n");
    let dev = "sys/bus/pci/devices/0000:19:00.0";
    assert_eq!(read(root, &format!("{dev}/class")), "0x020000\n");
    assert_eq!(read(root, &format!("{dev}/vendor")), "0x8086\n");
    assert_eq!(read(root, &format!("{dev}/subsystem_device")), "0xa01f\n");
    assert_eq!(read(root, &format!("{dev}/numa_node")), "0\n");
    assert!(root.join(format!("{dev}/msi_irqs/25")).exists());
    assert!(read(root, "proc/stat").contains("\nintr "));
    // The isolated machine says which CPUs are isolated, as irqbalance expects.
    let dir2 = tempfile::tempdir().unwrap();
    let mut p2 = platform("isolation-rt-24cpu", &[]);
    TreeExport::create(&mut p2, dir2.path(), ExportOptions::default()).unwrap();
    assert_eq!(
        read(dir2.path(), "sys/devices/system/cpu/isolated"),
        "4-23\n"
    );
    assert_eq!(
        read(dir2.path(), "sys/devices/system/cpu/nohz_full"),
        "4-23\n"
    );
}

#[test]
fn linux_platform_reads_and_drives_the_twin_like_a_machine() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let mut p = platform("numa-remote-2node", &[]);
    let mut e = TreeExport::create(&mut p, root, ExportOptions::default()).unwrap();
    step(&mut e, &mut p);
    let mut linux = LinuxPlatform::with_root(root);
    let seen = linux.machine().unwrap();
    let truth = p.sim().machine();
    assert_eq!(seen.topology.online, truth.topology.online);
    assert_eq!(seen.topology.nodes, truth.topology.nodes);
    assert_eq!(
        seen.irqs.keys().collect::<Vec<_>>(),
        truth.irqs.keys().collect::<Vec<_>>()
    );
    for (n, irq) in &truth.irqs {
        let s = &seen.irqs[n];
        assert_eq!(s.effective, irq.effective, "irq {n}");
        assert_eq!(s.requested, irq.requested, "irq {n}");
        assert_eq!(s.node, irq.node, "irq {n}");
        assert_eq!(s.actions, irq.actions, "irq {n}");
        assert_eq!(s.device, irq.device, "irq {n}");
    }
    let dev = &seen.devices[truth.devices.keys().next().unwrap()];
    assert_eq!(dev.local_cpus.as_ref().unwrap().to_list_string(), "4-7");
    // Snapshots parse and advance.
    let s1 = linux.snapshot().unwrap();
    step(&mut e, &mut p);
    let s2 = linux.snapshot().unwrap();
    let row = |s: &irqpilot_core::Snapshot| {
        s.interrupts
            .total(s.interrupts.irq_row(IrqNum(24)).unwrap())
    };
    assert!(row(&s2) > row(&s1));
    // A plan applied through LinuxPlatform lands in the twin at its next step.
    let report = linux.apply(&Plan {
        actions: vec![Action::SetAffinity {
            irq: IrqNum(24),
            cpus: CpuSet::single(CpuId(5)),
        }],
        notes: vec![],
    });
    assert_eq!(report.failures(), 0, "{report:?}");
    step(&mut e, &mut p);
    let m = p.sim().machine();
    assert_eq!(
        m.irqs[&IrqNum(24)].effective,
        Some(CpuSet::single(CpuId(5)))
    );
    let again = linux.machine().unwrap();
    assert_eq!(
        again.irqs[&IrqNum(24)].effective,
        Some(CpuSet::single(CpuId(5)))
    );
}

#[test]
fn an_exported_run_reports_outside_writes_and_is_deterministic_without_them() {
    let run = |dir: &Path| {
        let sc = builtin("balance-p4-4nic-netperf")
            .unwrap()
            .unwrap()
            .with_sets(&[("duration_ms".into(), "700".into())])
            .unwrap();
        irqpilot_sim::run_scenario_exported(sc, dir, ExportOptions::default(), |_| {}).unwrap()
    };
    let (a, wa) = run(tempfile::tempdir().unwrap().path());
    let (b, _) = run(tempfile::tempdir().unwrap().path());
    assert!(wa.is_empty());
    assert_eq!(
        serde_json::to_string(&a).unwrap(),
        serde_json::to_string(&b).unwrap()
    );
    // Exporting does not change the simulation.
    let sc = builtin("balance-p4-4nic-netperf")
        .unwrap()
        .unwrap()
        .with_sets(&[("duration_ms".into(), "700".into())])
        .unwrap();
    let plain = irqpilot_sim::run_scenario(sc, |_| {}).unwrap();
    assert_eq!(a.transactions_per_sec, plain.transactions_per_sec);
    assert_eq!(a.per_cpu, plain.per_cpu);
}

#[test]
fn irqpilot_daemon_loop_through_linux_platform_places_the_exported_twin() {
    // The daemon's loop (Controller + placement policy over LinuxPlatform, real time) against
    // the twin exported at wall-clock pace: what `irqpilot daemon --root DIR` does.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let go = root.join("go");
    let sc = builtin("balance-p4-4nic-netperf")
        .unwrap()
        .unwrap()
        .with_sets(&[
            ("duration_ms".into(), "1500".into()),
            ("warmup_ms".into(), "1000".into()),
        ])
        .unwrap();
    let cfg = sc.placement.irqpilot.clone();
    let opts = ExportOptions {
        scale: Some(1.0),
        hold_until: Some(go.clone()),
        ..ExportOptions::default()
    };
    let twin_root = root.clone();
    let twin = std::thread::spawn(move || {
        irqpilot_sim::run_scenario_exported(sc, &twin_root, opts, |_| {}).unwrap()
    });
    let ready = root.join(READY_FILE);
    let t0 = std::time::Instant::now();
    while !ready.exists() {
        assert!(t0.elapsed().as_secs() < 30, "the twin never became ready");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let mut linux = LinuxPlatform::with_root(&root);
    let mut policy = irqpilot_core::PlacementPolicy::new(cfg).unwrap();
    let mut controller = irqpilot_core::Controller::new(&mut linux).unwrap();
    std::fs::write(&go, "").unwrap();
    let mut refused = 0;
    while !twin.is_finished() {
        let wait = irqpilot_core::Policy::next_interval_ns(&policy).unwrap_or(200_000_000);
        linux.sleep(wait.min(200_000_000));
        if twin.is_finished() {
            break;
        }
        let step = controller.step(&mut linux, &mut [&mut policy]).unwrap();
        refused += step.applied.failures();
    }
    let (report, writes) = twin.join().unwrap();
    assert_eq!(refused, 0);
    assert!(
        !writes.is_empty() && writes.iter().all(|w| w.result.is_ok()),
        "{writes:?}"
    );
    // One NIC per package, placed before the measured half second and left alone.
    let mut packages: Vec<u32> = report.per_source.iter().map(|s| s.cpu % 4).collect();
    packages.sort();
    assert_eq!(packages, vec![0, 1, 2, 3]);
    assert_eq!(report.migrations, 0);
    assert!(report.transactions_per_sec.unwrap() > 50_000.0);
}

/// A peer's write is a truncate and then a write: a step that falls in between must take
/// neither the empty file nor refuse it, nor write over the file the peer is writing. The write
/// that lands is taken at a later step.
#[test]
fn a_write_in_progress_is_waited_for_not_refused() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let mut p = platform("balance-p4-4nic-netperf", &[]);
    let mut e = TreeExport::create(&mut p, root, ExportOptions::default()).unwrap();
    let list = root.join("proc/irq/25/smp_affinity_list");
    // The peer has truncated the file (fopen "w") and not written yet; the twin steps twice.
    let mut peer = std::fs::File::create(&list).unwrap();
    step(&mut e, &mut p);
    assert_eq!(read(root, "proc/irq/25/smp_affinity_list"), "");
    assert!(e.writes.is_empty(), "{:?}", e.writes);
    // Its write lands: taken at the next step.
    use std::io::Write;
    peer.write_all(b"2\n").unwrap();
    drop(peer);
    step(&mut e, &mut p);
    assert_eq!(e.writes.len(), 1, "{:?}", e.writes);
    assert_eq!(e.writes[0].result, Ok(true));
    step(&mut e, &mut p);
    assert_eq!(read(root, "proc/irq/25/effective_affinity_list"), "2\n");
    // A truncate never followed by a write is no write at all: after a whole step the old
    // text is back and nothing is logged.
    let before = e.writes.len();
    std::fs::File::create(root.join("proc/irq/26/smp_affinity_list")).unwrap();
    step(&mut e, &mut p);
    step(&mut e, &mut p);
    step(&mut e, &mut p);
    assert_eq!(read(root, "proc/irq/26/smp_affinity_list"), "0-7\n");
    assert_eq!(e.writes.len(), before, "{:?}", e.writes);
}

/// A write that lands after the twin's pick-up and before its refresh is taken at the next
/// step, never undone by the refresh: not when the refresh rewrites that IRQ's files because
/// an earlier write was just taken (to the same file, or to the IRQ's other affinity file, as
/// `revert` restoring both does), nor at the step after a taken write (a leftover flag once
/// rewrote the files there, and `revert` right after `isolate` lost its first writes).
#[test]
fn a_write_between_pick_up_and_refresh_is_kept_and_taken() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let mut p = platform("balance-p4-4nic-netperf", &[]);
    let mut e = TreeExport::create(&mut p, root, ExportOptions::default()).unwrap();
    // A writer that replaces the file whole (irqpilot off procfs) and one that writes in place.
    let replace = |rel: &str, text: &str| {
        let tmp = root.join(format!("{rel}.peer"));
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, root.join(rel)).unwrap();
    };
    let in_place = |rel: &str, text: &str| std::fs::write(root.join(rel), text).unwrap();
    // IRQ 25: "2" taken at this pick-up, "3" lands before the refresh.
    // IRQ 26: its mask taken (CPU 2), then its list written (CPU 1) before the refresh.
    in_place("proc/irq/25/smp_affinity_list", "2\n");
    replace("proc/irq/26/smp_affinity", "4\n");
    e.pick_up(&mut p).unwrap();
    p.sleep(10_000_000);
    replace("proc/irq/25/smp_affinity_list", "3\n");
    in_place("proc/irq/26/smp_affinity_list", "1\n");
    e.refresh(&p).unwrap();
    assert_eq!(read(root, "proc/irq/25/smp_affinity_list"), "3\n");
    assert_eq!(read(root, "proc/irq/26/smp_affinity_list"), "1\n");
    step(&mut e, &mut p);
    step(&mut e, &mut p);
    assert_eq!(read(root, "proc/irq/25/effective_affinity_list"), "3\n");
    assert_eq!(read(root, "proc/irq/25/smp_affinity"), "08\n");
    assert_eq!(read(root, "proc/irq/26/effective_affinity_list"), "1\n");
    assert_eq!(read(root, "proc/irq/26/smp_affinity"), "02\n");
    // The step after a taken write: a write landing between its pick-up and its refresh.
    in_place("proc/irq/27/smp_affinity_list", "2\n");
    step(&mut e, &mut p);
    e.pick_up(&mut p).unwrap();
    p.sleep(10_000_000);
    replace("proc/irq/27/smp_affinity_list", "3\n");
    e.refresh(&p).unwrap();
    assert_eq!(read(root, "proc/irq/27/smp_affinity_list"), "3\n");
    step(&mut e, &mut p);
    assert_eq!(read(root, "proc/irq/27/effective_affinity_list"), "3\n");
    // The same for the default affinity.
    in_place("proc/irq/default_smp_affinity", "3\n");
    step(&mut e, &mut p);
    e.pick_up(&mut p).unwrap();
    replace("proc/irq/default_smp_affinity", "c\n");
    e.refresh(&p).unwrap();
    assert_eq!(read(root, "proc/irq/default_smp_affinity"), "c\n");
    step(&mut e, &mut p);
    assert_eq!(read(root, "proc/irq/default_smp_affinity"), "0c\n");
    // Every write was taken, none refused; no temporary file is left behind.
    let files: Vec<&str> = e.writes.iter().map(|w| w.file.as_str()).collect();
    assert_eq!(e.writes.len(), 8, "{files:?}");
    assert!(
        e.writes.iter().all(|w| w.result == Ok(true)),
        "{:?}",
        e.writes
    );
    for irq in 25..28 {
        for f in std::fs::read_dir(root.join(format!("proc/irq/{irq}"))).unwrap() {
            let name = f.unwrap().file_name().into_string().unwrap();
            assert!(!name.starts_with('.'), "{irq}/{name}");
        }
    }
}

/// Readers see a file's old text or its new text, never an empty or partial one: the twin's
/// refreshes and irqpilot's own writes (`LinuxPlatform` on the exported tree) both replace
/// files whole, as a kernel write is atomic for readers.
#[test]
fn readers_never_see_an_empty_file_while_the_twin_and_irqpilot_write() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let mut p = platform("balance-p4-4nic-netperf", &[]);
    let mut e = TreeExport::create(&mut p, &root, ExportOptions::default()).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let files = [
        "proc/interrupts",
        "proc/stat",
        "proc/softirqs",
        "proc/irq/25/smp_affinity_list",
        "proc/irq/25/smp_affinity",
        "proc/irq/25/effective_affinity_list",
        "proc/irq/default_smp_affinity",
    ];
    let reader = {
        let (root, stop) = (root.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut reads = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for f in files {
                    let t = std::fs::read_to_string(root.join(f)).unwrap();
                    assert!(t.ends_with('\n') && t.len() > 1, "{f} read as {t:?}");
                    reads += 1;
                }
            }
            reads
        })
    };
    // The twin steps in its own thread while irqpilot writes through LinuxPlatform, which
    // waits for the twin to take each write and reads it back.
    let twin = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                step(&mut e, &mut p);
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            e.writes
        })
    };
    let mut linux = LinuxPlatform::with_root(&root);
    for i in 0..8u32 {
        let report = linux.apply(&Plan {
            actions: vec![Action::SetAffinity {
                irq: IrqNum(25),
                cpus: CpuSet::single(CpuId(i % 4)),
            }],
            notes: vec![],
        });
        assert_eq!(report.failures(), 0, "{report:?}");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(reader.join().unwrap() > 0);
    let writes = twin.join().unwrap();
    assert!(writes.iter().all(|w| w.result.is_ok()), "{writes:?}");
}

#[test]
fn application_threads_are_exported_pinned_or_allowed_their_whole_set() {
    let cpus_allowed = |root: &Path, tid: u32| {
        read(root, &format!("proc/4000/task/{tid}/status"))
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:\t").map(str::to_string))
    };
    // Pinned: a thread per CPU of app_cpus (0-1), each on its own.
    let dir = tempfile::tempdir().unwrap();
    let mut p = platform("app-pinned-2node", &[]);
    let _e = TreeExport::create(&mut p, dir.path(), ExportOptions::default()).unwrap();
    assert_eq!(read(dir.path(), "proc/4000/comm"), "rpc-0\n");
    assert_eq!(cpus_allowed(dir.path(), 4001).as_deref(), Some("1"));
    assert!(!dir.path().join("proc/4000/task/4002").exists());
    // Scheduled: a thread per client connection (32), each allowed all of 0-1.
    let dir = tempfile::tempdir().unwrap();
    let mut p = platform(
        "app-pinned-2node",
        &[("workload.0.app_schedule", "scheduled")],
    );
    let _e = TreeExport::create(&mut p, dir.path(), ExportOptions::default()).unwrap();
    assert_eq!(cpus_allowed(dir.path(), 4000).as_deref(), Some("0-1"));
    assert_eq!(cpus_allowed(dir.path(), 4031).as_deref(), Some("0-1"));
    assert!(!dir.path().join("proc/4000/task/4032").exists());
}
