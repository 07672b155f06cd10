//! `irqpilot moderate` on fixtures: the command line, the JSON contract, GSIM configured through
//! procfs files of a fixture copy (applied, journaled, sticky, reverted), and the global
//! moderator acting on an emulated NIC through `LinuxPlatform` while the fixture's counters move.
//! Nothing here touches this machine's devices or `/proc`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{copy_tree, firecracker, irqpilot, ok};
use irqpilot::cmd::moderate::{ModerateReport, decide};
use irqpilot_core::moderation::global::{GlobalModerationConfig, GlobalModerator};
use irqpilot_core::moderation::kernel_soft::KernelSoftModeration;
use irqpilot_core::{
    Action, ApplyReport, Machine, MonoNs, Plan, Platform, PlatformError, Snapshot,
};
use irqpilot_linux::LinuxPlatform;
use irqpilot_linux::format::interrupts::{parse_interrupts, render_interrupts};
use irqpilot_linux::journal::{DEFAULT_JOURNAL, Journal, Knob};
use irqpilot_linux::moderation::ModerationIo;
use irqpilot_linux::moderation::ethtool::EthtoolCoalesce;
use irqpilot_linux::moderation::fake::{FakeEthtool, FakeNic, FakeNvme};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn copy_of_firecracker() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("fc");
    copy_tree(&firecracker(), &root);
    (dir, root)
}

fn s(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

#[test]
fn needs_exactly_one_mode() {
    let root = s(&firecracker());
    for args in [
        vec!["--root", &root, "moderate"],
        vec!["--root", &root, "moderate", "--plan", "--apply"],
    ] {
        let out = irqpilot(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--plan") || err.contains("--apply"), "{err}");
    }
}

#[test]
fn plan_on_the_fixture() {
    let root = s(&firecracker());
    let text = ok(&["--root", &root, "moderate", "--plan", "--sample", "20ms"]);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with(&format!("moderation of {root} over 0.0")),
        "{text}"
    );
    assert!(
        lines[0].contains("device interrupts 0/s (target 1.00M/s)"),
        "{text}"
    );
    assert_eq!(lines[1], "kernel soft moderation: not in this kernel");
    assert!(lines.contains(&"plan: nothing to change"), "{text}");
    assert!(
        lines.contains(
            &"  ethtool:eth0: missing (no live interface under this root: its coalescing is unknown)"
        ),
        "{text}"
    );
}

#[test]
fn json_is_a_stable_object() {
    let root = s(&firecracker());
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("irqpilot.toml");
    std::fs::write(
        &cfg,
        "[moderation]\ntarget_intr_rate = 500000\ndelay_us = 50\n",
    )
    .unwrap();
    let text = ok(&[
        "--root",
        &root,
        "--config",
        &s(&cfg),
        "--format",
        "json",
        "moderate",
        "--plan",
        "--sample",
        "0",
    ]);
    let keys = [
        "root",
        "mode",
        "interval_s",
        "targets",
        "load",
        "kernel_soft_moderation",
        "sources",
        "actions",
        "notes",
        "outcomes",
        "gaps",
    ];
    let pos: Vec<usize> = keys
        .iter()
        .map(|k| text.find(&format!("\"{k}\":")).unwrap())
        .collect();
    assert!(pos.windows(2).all(|w| w[0] < w[1]), "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v.as_object().unwrap().len(), keys.len());
    assert_eq!(v["mode"], "plan");
    assert_eq!(v["interval_s"], Value::Null);
    assert_eq!(v["targets"]["target_intr_rate"], 500000.0);
    assert_eq!(v["targets"]["delay_us"], 50);
    assert_eq!(v["outcomes"], Value::Null);
    assert_eq!(v["gaps"][0]["path"], "ethtool:eth0");

    std::fs::write(&cfg, "[moderation]\ntarget_rate = 1\n").unwrap();
    let out = irqpilot(&["--root", &root, "--config", &s(&cfg), "moderate", "--plan"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("target_rate"));
}

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn read(root: &Path, rel: &str) -> String {
    std::fs::read_to_string(root.join(rel)).unwrap()
}

/// The fixture as a GSIM v4 kernel: parameters off, GSIM offered on the virtio queues and on an
/// ACPI interrupt (not a device IRQ: left alone).
fn gsim_fixture() -> (tempfile::TempDir, PathBuf) {
    let (dir, root) = copy_of_firecracker();
    for (name, v) in [
        ("delay_us", "0"),
        ("target_intr_rate", "0"),
        ("hardirq_percent", "0"),
        ("update_ms", "5"),
        ("scale_cpus", "150"),
    ] {
        write(
            &root,
            &format!("proc/irq/soft_moderation/{name}"),
            &format!("{v}\n"),
        );
    }
    write(&root, "proc/irq/soft_moderation/stats", "");
    for irq in [24, 36, 38, 39] {
        write(&root, &format!("proc/irq/{irq}/soft_moderation"), "off\n");
    }
    (dir, root)
}

#[test]
fn gsim_is_configured_journaled_sticky_and_reverted() {
    let (_dir, root) = gsim_fixture();
    let r = s(&root);
    let text = ok(&[
        "--root", &r, "--format", "json", "moderate", "--apply", "--sample", "0",
    ]);
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["mode"], "apply");
    assert_eq!(v["kernel_soft_moderation"]["form"], "directory");
    let outcomes = v["outcomes"].as_array().unwrap();
    let summaries: Vec<&str> = outcomes
        .iter()
        .map(|o| o["summary"].as_str().unwrap())
        .collect();
    assert_eq!(
        summaries,
        [
            "kernel soft moderation target_intr_rate = 1000000",
            "kernel soft moderation hardirq_percent = 70",
            "kernel soft moderation delay_us = 250",
            "irq 36: kernel soft moderation on",
            "irq 38: kernel soft moderation on",
            "irq 39: kernel soft moderation on",
        ]
    );
    assert!(outcomes.iter().all(|o| o["result"] == "written"), "{text}");
    assert_eq!(outcomes[2]["old"], "0");
    assert_eq!(outcomes[4]["old"], "off");
    assert_eq!(read(&root, "proc/irq/soft_moderation/delay_us"), "250\n");
    assert_eq!(read(&root, "proc/irq/38/soft_moderation"), "1\n");
    assert_eq!(
        read(&root, "proc/irq/24/soft_moderation"),
        "off\n",
        "not a device IRQ"
    );
    // The actions name the IRQs they act on: a global parameter acts on every GSIM IRQ.
    assert_eq!(v["actions"][0]["irqs"], serde_json::json!([24, 36, 38, 39]));

    // Sticky: the next run finds everything in place.
    let again = ok(&["--root", &r, "moderate", "--plan", "--sample", "0"]);
    assert!(again.contains("plan: nothing to change"), "{again}");
    assert!(again.contains("kernel soft moderation on"), "{again}");

    // Journaled (before writing) inside the root; `irqpilot revert` restores every file.
    let journal = Journal::open(root.join(DEFAULT_JOURNAL)).unwrap();
    assert_eq!(journal.entries().len(), 6);
    let delay = Knob::SoftModeration {
        param: "delay_us".into(),
    };
    let entry = journal.entries().iter().find(|e| e.knob == delay).unwrap();
    assert_eq!(entry.old, "0");
    let out = ok(&["--root", &r, "--format", "json", "revert"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["written"], 6, "{out}");
    assert_eq!(read(&root, "proc/irq/soft_moderation/delay_us"), "0\n");
    assert_eq!(
        read(&root, "proc/irq/soft_moderation/target_intr_rate"),
        "0\n"
    );
    assert_eq!(read(&root, "proc/irq/38/soft_moderation"), "0\n");
    assert!(
        !root.join(DEFAULT_JOURNAL).exists(),
        "archived after a full revert"
    );
}

/// `LinuxPlatform` whose fixture counters advance while it sleeps: IRQ 38 (eth0's rx queue,
/// delivered to CPU 1) at `rate` interrupts/s.
struct Ticking {
    inner: LinuxPlatform,
    root: PathBuf,
    rate: f64,
    now_ns: u64,
}

impl Platform for Ticking {
    fn machine(&mut self) -> Result<Machine, PlatformError> {
        self.inner.machine()
    }
    fn snapshot_into(&mut self, snap: &mut Snapshot) -> Result<(), PlatformError> {
        self.inner.snapshot_into(snap)?;
        snap.taken_at = MonoNs(self.now_ns);
        Ok(())
    }
    fn apply(&mut self, plan: &Plan) -> ApplyReport {
        self.inner.apply(plan)
    }
    fn now(&mut self) -> MonoNs {
        MonoNs(self.now_ns)
    }
    fn sleep(&mut self, ns: u64) {
        self.now_ns += ns;
        let path = self.root.join("proc/interrupts");
        let table = parse_interrupts(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let mut next = irqpilot_core::InterruptTable::default();
        next.header.clone_from(&table.header);
        next.cpus.clone_from(&table.cpus);
        next.final_newline = table.final_newline;
        for row in table.rows() {
            let mut counts = table.counts(row).to_vec();
            if row.label.irq().map(|n| n.0) == Some(38) {
                counts[1] += (self.rate * ns as f64 / 1e9) as u64;
            }
            next.push_row(
                row.label.clone(),
                &row.lead,
                row.first_width,
                &counts,
                &row.tail,
            );
        }
        std::fs::write(&path, render_interrupts(&next)).unwrap();
    }
}

#[test]
fn global_moderator_acts_on_an_emulated_nic() {
    let (_dir, root) = copy_of_firecracker();
    let idle = EthtoolCoalesce {
        rx_max_coalesced_frames: 1,
        tx_max_coalesced_frames: 1,
        ..Default::default()
    };
    let eth = FakeEthtool::new([(
        "eth0".to_string(),
        FakeNic {
            coalesce: true,
            device: idle,
            queues: Some(vec![idle]),
            ..Default::default()
        },
    )]);
    let io = ModerationIo {
        ethtool: Some(Box::new(eth.clone())),
        nvme: Box::new(FakeNvme::default()),
    };
    let mut p = Ticking {
        inner: LinuxPlatform::with_root(&root).with_moderation_io(io),
        root: root.clone(),
        rate: 2_000_000.0,
        now_ns: 1_000_000_000,
    };
    // An excluded interface is measured but never touched, however hot.
    let excluded = GlobalModerationConfig {
        exclude: vec!["eth*".into()],
        ..Default::default()
    };
    let mut global = GlobalModerator::new(excluded.clone());
    let d = decide(&mut p, &mut [&mut global], 100_000_000).unwrap();
    assert!(d.merged().actions.is_empty(), "{:?}", d.merged());

    let cfg = GlobalModerationConfig::default();
    let mut global = GlobalModerator::new(cfg.clone());
    let mut kernel = KernelSoftModeration::new(cfg.clone());
    let d = decide(&mut p, &mut [&mut global, &mut kernel], 100_000_000).unwrap();

    let report = ModerateReport::build(&s(&root), &cfg, &d, None);
    assert_eq!(report.sources.len(), 1);
    assert_eq!(
        report.sources[0].summary,
        "eth0 queue 0: rx-usecs 0 rx-frames 1 tx-usecs 0 tx-frames 1 adaptive-rx off adaptive-tx off"
    );
    assert_eq!(report.actions.len(), 1, "{:?}", report.actions);
    let a = &report.actions[0];
    assert_eq!(a.policy, "global-moderation");
    assert_eq!(a.irqs, [38]);
    let measured = a.rate_per_sec.unwrap();
    assert!((measured - 2e6).abs() < 1e4, "{measured}");
    let Action::SetCoalesce {
        device,
        queue,
        params,
    } = &a.action
    else {
        panic!("{:?}", a.action);
    };
    assert_eq!((device.as_str(), *queue), ("eth0", Some(0)));
    let usecs = params.rx_usecs.unwrap();
    assert!((1..=cfg.delay_us).contains(&usecs), "{usecs}");
    assert!(
        report.notes[0].contains("above target"),
        "{:?}",
        report.notes
    );
    assert!(
        report
            .render()
            .contains("global-moderation  eth0 queue 0: rx-usecs")
    );

    // Apply through the platform: the emulated NIC's queue 0 takes it, device-wide untouched.
    let applied = p.apply(&d.merged());
    assert_eq!(applied.written(), 1, "{applied:?}");
    let old = applied.outcomes[0].old.clone().unwrap();
    assert!(
        old.starts_with("rx-usecs 0 rx-frames 1 tx-usecs 0 tx-frames 1"),
        "{old}"
    );
    {
        let st = eth.state();
        let nic = &st.nics["eth0"];
        assert_eq!(nic.queues.as_ref().unwrap()[0].rx_coalesce_usecs, usecs);
        assert_eq!(nic.device, idle);
    }
    let m = p.machine().unwrap();
    // No packet counts in this tree: the delay gets the least frame count.
    let frames = cfg.rx_frames;
    assert_eq!(
        report_knob(&m),
        format!(
            "eth0 queue 0: rx-usecs {usecs} rx-frames {frames} tx-usecs {usecs} tx-frames {frames} adaptive-rx off adaptive-tx off"
        )
    );
}

fn report_knob(m: &Machine) -> String {
    irqpilot::cmd::moderate::knob_summary(m.moderation.knobs.values().next().unwrap())
}

/// `--plan` on this machine: reads (ethtool gets on live interfaces need no privilege and change
/// nothing), decides, writes nothing.
#[test]
fn plan_on_this_machine_writes_nothing() {
    let text = ok(&[
        "--format", "json", "moderate", "--plan", "--sample", "100ms",
    ]);
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["root"], "/");
    assert_eq!(v["mode"], "plan");
    assert_eq!(v["outcomes"], Value::Null);
    assert!(v["interval_s"].as_f64().unwrap() >= 0.1);
    assert!(v["load"]["device_irq_per_sec"].as_f64().unwrap() >= 0.0);
    for s in v["sources"].as_array().unwrap() {
        assert!(s["summary"].as_str().is_some_and(|t| !t.is_empty()), "{s}");
    }
}

/// The daemon runs the moderators next to placement: on a GSIM kernel its first period
/// configures GSIM, journaled like placement's changes; `revert` undoes both.
#[test]
fn daemon_runs_moderation_next_to_placement() {
    let (_dir, root) = gsim_fixture();
    let r = s(&root);
    let text = ok(&[
        "--root", &r, "--format", "json", "daemon", "--once", "--force",
    ]);
    let line: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert!(line["written"].as_u64().unwrap() >= 6, "{text}");
    assert_eq!(read(&root, "proc/irq/soft_moderation/delay_us"), "250\n");
    assert_eq!(read(&root, "proc/irq/39/soft_moderation"), "1\n");
    let journal = Journal::open(root.join(DEFAULT_JOURNAL)).unwrap();
    assert!(
        journal
            .entries()
            .iter()
            .any(|e| e.knob == Knob::IrqSoftModeration { irq: 39.into() }),
        "{:?}",
        journal.entries()
    );
    ok(&["--root", &r, "revert"]);
    assert_eq!(read(&root, "proc/irq/soft_moderation/delay_us"), "0\n");
    assert_eq!(read(&root, "proc/irq/39/soft_moderation"), "0\n");
}

/// eth0 as an e1000 behind the emulated ethtool: device-wide coalescing, `rx-usecs` its only
/// field (`supported_coalesce_params` = usecs), 3 (dynamic conservative mode) to begin with;
/// its IRQ fires `rate` times a second.
fn e1000_like(root: &Path, rate: f64) -> (FakeEthtool, Ticking) {
    let e1000 = EthtoolCoalesce {
        rx_coalesce_usecs: 3,
        ..Default::default()
    };
    let eth = FakeEthtool::new([(
        "eth0".to_string(),
        FakeNic {
            coalesce: true,
            device: e1000,
            queues: None,
            supported: Some(1),
            ..Default::default()
        },
    )]);
    let io = ModerationIo {
        ethtool: Some(Box::new(eth.clone())),
        nvme: Box::new(FakeNvme::default()),
    };
    let p = Ticking {
        inner: LinuxPlatform::with_root(root).with_moderation_io(io),
        root: root.to_path_buf(),
        rate,
        now_ns: 1_000_000_000,
    };
    (eth, p)
}

/// A driver without frame counts (e1000: `rx-usecs` only) reads `rx-frames 0` after every set.
/// The moderator must not take that as a difference and send the same delay again each period
/// (a refused set, the retries and a rewrite every 10 ms).
#[test]
fn a_driver_without_frame_counts_is_not_rewritten_every_period() {
    let (_dir, root) = copy_of_firecracker();
    let (eth, mut p) = e1000_like(&root, 2_000_000.0);
    let mut global = GlobalModerator::new(GlobalModerationConfig::default());
    let (mut sets, mut repeats) = (0, 0);
    for _ in 0..30 {
        let d = decide(&mut p, &mut [&mut global], 10_000_000).unwrap();
        let plan = d.merged();
        let current = eth.state().nics["eth0"].device.rx_coalesce_usecs;
        for a in &plan.actions {
            if let Action::SetCoalesce { params, .. } = a {
                sets += 1;
                if params.rx_usecs == Some(current) {
                    repeats += 1;
                }
            }
        }
        let applied = p.apply(&plan);
        assert_eq!(applied.failures(), 0, "{applied:?}");
    }
    // The delay climbs to its ceiling under a rate the NIC cannot lower (one busy queue against
    // a 1 M/s target needs at most ~1 us), then holds.
    let st = eth.state();
    let usecs = st.nics["eth0"].device.rx_coalesce_usecs;
    assert!((1..=3).contains(&usecs), "{usecs}");
    assert!((1..=5).contains(&sets), "{sets} sets");
    assert_eq!(
        repeats, 0,
        "{sets} sets, {repeats} of them the value already there"
    );
}

/// Intel's ITR drivers (e1000, e1000e, igb, igc) read `rx-usecs` 1-4 as mode numbers and
/// refuse 2 and 5-9: a small delay asked of them is programmed as their least real time, 10 us.
#[test]
fn small_delays_on_an_itr_driver_are_its_least_real_time() {
    let (_dir, root) = copy_of_firecracker();
    let link = root.join("sys/bus/pci/devices/0000:00:03.0/driver");
    std::fs::remove_file(&link).unwrap();
    std::os::unix::fs::symlink("../../../bus/pci/drivers/e1000", &link).unwrap();
    // Just above the target: the moderator wants a delay of a few microseconds.
    let (eth, mut p) = e1000_like(&root, 1_050_000.0);
    let m = p.machine().unwrap();
    assert_eq!(
        report_knob(&m),
        "eth0 device-wide: rx-usecs 3 rx-frames 0 tx-usecs 0 tx-frames 0 adaptive-rx off adaptive-tx off (least rx-usecs 10)"
    );
    let cfg = GlobalModerationConfig::default();
    let mut global = GlobalModerator::new(cfg.clone());
    let d = decide(&mut p, &mut [&mut global], 100_000_000).unwrap();
    let report = ModerateReport::build(&s(&root), &cfg, &d, None);
    assert_eq!(report.actions.len(), 1, "{:?}", report.actions);
    let Action::SetCoalesce { params, .. } = &report.actions[0].action else {
        panic!("{:?}", report.actions[0].action);
    };
    assert_eq!(params.rx_usecs, Some(10), "{params:?}");
    let applied = p.apply(&d.merged());
    assert_eq!(applied.failures(), 0, "{applied:?}");
    assert_eq!(eth.state().nics["eth0"].device.rx_coalesce_usecs, 10);
}
