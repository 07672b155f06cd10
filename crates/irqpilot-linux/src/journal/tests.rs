use super::*;
use irqpilot_core::{CpuId, CpuSet, Outcome};
use std::collections::BTreeMap;

/// A kernel stand-in over a temp root: writes `smp_affinity_list` and `default_smp_affinity`
/// like the Linux platform (old value verbatim, newline-terminated text), with per-IRQ faults,
/// and checks the journal on disk already holds each old value when it writes.
struct FakeKernel {
    root: Root,
    journal: PathBuf,
    faults: BTreeMap<IrqNum, ApplyError>,
    crash: bool,
    /// Whether writes must find their knob journaled (true under `JournaledPlatform`).
    check: bool,
}

impl Platform for FakeKernel {
    fn machine(&mut self) -> Result<Machine, PlatformError> {
        Ok(Machine::default())
    }
    fn snapshot_into(&mut self, _: &mut Snapshot) -> Result<(), PlatformError> {
        Ok(())
    }
    fn apply(&mut self, plan: &Plan) -> ApplyReport {
        if self.crash {
            // Died after the journal was saved, before any write.
            return ApplyReport::default();
        }
        let on_disk = std::fs::read_to_string(&self.journal).unwrap_or_default();
        let mut out = Vec::new();
        for a in &plan.actions {
            let (rel, text) = match a {
                Action::SetAffinity { irq, cpus } => (
                    format!("proc/irq/{irq}/smp_affinity_list"),
                    procirq::render_affinity_list(cpus),
                ),
                Action::SetDefaultAffinity { cpus } => (
                    "proc/irq/default_smp_affinity".to_string(),
                    procirq::render_affinity_mask(cpus, 4),
                ),
                _ => unreachable!(),
            };
            let path = self.root.join(&rel);
            let old = std::fs::read_to_string(&path)
                .ok()
                .map(|t| t.trim_end().to_string());
            if let Action::SetAffinity { irq, .. } = a {
                if let Some(e) = self.faults.get(irq) {
                    out.push(Outcome {
                        action: a.clone(),
                        old,
                        result: Err(e.clone()),
                    });
                    continue;
                }
            }
            let Some(old) = old else {
                out.push(Outcome {
                    action: a.clone(),
                    old: None,
                    result: Err(ApplyError::Vanished),
                });
                continue;
            };
            if self.check {
                let knob = match a {
                    Action::SetAffinity { irq, .. } => format!("\"irq\": {irq}"),
                    _ => "\"kind\": \"default-affinity\"".to_string(),
                };
                assert!(
                    on_disk.contains(&knob),
                    "{rel} ({old:?}) not journaled before the write:\n{on_disk}"
                );
            }
            let changed = std::fs::read_to_string(&path).unwrap() != text;
            std::fs::write(&path, &text).unwrap();
            out.push(Outcome {
                action: a.clone(),
                old: Some(old),
                result: Ok(changed),
            });
        }
        ApplyReport { outcomes: out }
    }
    fn now(&mut self) -> MonoNs {
        MonoNs(0)
    }
    fn sleep(&mut self, _: u64) {}
}

fn tree() -> (tempfile::TempDir, Root) {
    let d = tempfile::tempdir().unwrap();
    for (irq, mask) in [(30, "0-3\n"), (31, "2\n"), (32, "1,3\n")] {
        let dir = d.path().join(format!("proc/irq/{irq}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("smp_affinity_list"), mask).unwrap();
    }
    std::fs::write(d.path().join("proc/irq/default_smp_affinity"), "f\n").unwrap();
    let root = Root::new(d.path());
    (d, root)
}

fn snapshot(root: &Root) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    for rel in [
        "proc/irq/30/smp_affinity_list",
        "proc/irq/31/smp_affinity_list",
        "proc/irq/32/smp_affinity_list",
        "proc/irq/default_smp_affinity",
    ] {
        out.insert(
            rel.to_string(),
            std::fs::read(root.join(rel)).unwrap_or_default(),
        );
    }
    out
}

fn set(irq: u32, cpu: u32) -> Action {
    Action::SetAffinity {
        irq: IrqNum(irq),
        cpus: CpuSet::single(CpuId(cpu)),
    }
}

fn journaled(root: &Root, faults: BTreeMap<IrqNum, ApplyError>) -> JournaledPlatform<FakeKernel> {
    let path = root.join(DEFAULT_JOURNAL);
    let fake = FakeKernel {
        root: root.clone(),
        journal: path.clone(),
        faults,
        crash: false,
        check: true,
    };
    JournaledPlatform::new(fake, root.clone(), Journal::open(path).unwrap())
}

#[test]
fn apply_journals_first_and_revert_restores_bytes() {
    let (_d, root) = tree();
    let before = snapshot(&root);
    let mut p = journaled(&root, BTreeMap::new());
    let plan = Plan {
        actions: vec![
            set(30, 1),
            set(31, 2),
            Action::SetDefaultAffinity {
                cpus: CpuSet::range(0, 1),
            },
        ],
        notes: vec![],
    };
    let r = p.apply(&plan);
    assert_eq!(r.failures(), 0);
    assert_eq!(r.written(), 2, "IRQ 31 was already on CPU 2");
    // A second apply changes IRQ 30 again: the first old value (0-3) stays recorded.
    p.apply(&Plan {
        actions: vec![set(30, 3), set(32, 0)],
        notes: vec![],
    });
    let (mut fake, mut journal) = p.into_parts();
    fake.check = false;
    let j = Journal::open(journal.path()).unwrap();
    let olds: Vec<(&Knob, &str)> = j
        .entries()
        .iter()
        .map(|e| (&e.knob, e.old.as_str()))
        .collect();
    assert_eq!(
        olds,
        vec![
            (&Knob::Affinity { irq: IrqNum(30) }, "0-3"),
            (&Knob::Affinity { irq: IrqNum(31) }, "2"),
            (&Knob::DefaultAffinity, "f"),
            (&Knob::Affinity { irq: IrqNum(32) }, "1,3"),
        ]
    );
    assert_ne!(snapshot(&root), before);
    let rep = revert(&mut fake, &mut journal).unwrap();
    assert!(!rep.partial());
    assert_eq!(snapshot(&root), before, "byte for byte");
    let archived = rep.archived.clone().unwrap();
    assert!(archived.ends_with("journal.json.reverted"));
    assert_eq!((rep.restored(), rep.already(), rep.gone()), (3, 1, 0));
    assert!(!root.join(DEFAULT_JOURNAL).exists());
    // Nothing left: a second revert does nothing.
    let mut j = Journal::open(root.join(DEFAULT_JOURNAL)).unwrap();
    assert!(
        revert(&mut fake, &mut j)
            .unwrap()
            .applied
            .outcomes
            .is_empty()
    );
}

#[test]
fn refusals_are_reported_and_the_journal_stays_consistent() {
    let (_d, root) = tree();
    let before = snapshot(&root);
    let faults: BTreeMap<IrqNum, ApplyError> = [
        (IrqNum(31), ApplyError::NoVectorSpace),
        (IrqNum(32), ApplyError::Managed),
    ]
    .into_iter()
    .collect();
    let mut p = journaled(&root, faults);
    let r = p.apply(&Plan {
        actions: vec![set(30, 1), set(31, 0), set(32, 0), set(99, 0)],
        notes: vec![],
    });
    assert_eq!(r.failures(), 3);
    assert_eq!(r.outcomes[3].result, Err(ApplyError::Vanished));
    // Refused knobs are journaled too (their old value is still current: restoring is a
    // no-op); the vanished IRQ had nothing to read.
    assert_eq!(p.journal().entries().len(), 3);
    let (mut fake, mut journal) = p.into_parts();
    fake.check = false;
    fake.faults.clear();
    let rep = revert(&mut fake, &mut journal).unwrap();
    assert!(!rep.partial());
    assert_eq!(snapshot(&root), before);
}

#[test]
fn a_crash_after_journaling_leaves_a_revertable_state() {
    let (_d, root) = tree();
    let before = snapshot(&root);
    let mut p = journaled(&root, BTreeMap::new());
    p.inner_mut().crash = true;
    p.apply(&Plan {
        actions: vec![set(30, 1), set(32, 2)],
        notes: vec![],
    });
    assert_eq!(snapshot(&root), before);
    // A new process finds the journal and reverts: nothing to write, journal archived.
    let (mut fake, _) = p.into_parts();
    fake.crash = false;
    fake.check = false;
    let mut j = Journal::open(root.join(DEFAULT_JOURNAL)).unwrap();
    assert_eq!(j.entries().len(), 2);
    let rep = revert(&mut fake, &mut j).unwrap();
    assert_eq!(rep.applied.written(), 0);
    assert!(rep.archived.is_some());
    assert_eq!(snapshot(&root), before);
}

#[test]
fn failed_restores_are_kept_for_later() {
    let (_d, root) = tree();
    let mut p = journaled(&root, BTreeMap::new());
    p.apply(&Plan {
        actions: vec![set(30, 1), set(31, 0)],
        notes: vec![],
    });
    let (mut fake, mut journal) = p.into_parts();
    fake.check = false;
    fake.faults.insert(IrqNum(30), ApplyError::PermissionDenied);
    let rep = revert(&mut fake, &mut journal).unwrap();
    assert!(rep.partial());
    assert_eq!(rep.kept, 1);
    let j = Journal::open(root.join(DEFAULT_JOURNAL)).unwrap();
    assert_eq!(j.entries().len(), 1);
    assert_eq!(j.entries()[0].knob, Knob::Affinity { irq: IrqNum(30) });
}

#[test]
fn unsaveable_journal_means_nothing_is_written() {
    let (d, root) = tree();
    let mut p = journaled(&root, BTreeMap::new());
    // The journal's directory is a file: the journal cannot be saved.
    std::fs::create_dir_all(d.path().join("var/lib")).unwrap();
    std::fs::write(d.path().join("var/lib/irqpilot"), "not a directory").unwrap();
    let before = snapshot(&root);
    let r = p.apply(&Plan {
        actions: vec![set(30, 1)],
        notes: vec![],
    });
    assert_eq!(r.failures(), 1);
    assert!(
        matches!(&r.outcomes[0].result, Err(ApplyError::Other { message }) if message.contains("not applied"))
    );
    assert_eq!(snapshot(&root), before);
}

#[test]
fn journal_format_is_checked_and_restores_parse() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("j.json");
    std::fs::write(&path, "{\"version\": 9, \"entries\": []}").unwrap();
    assert!(matches!(
        Journal::open(&path),
        Err(JournalError::Format { .. })
    ));
    std::fs::write(&path, "garbage").unwrap();
    assert!(Journal::open(&path).is_err());
    let e = Entry {
        knob: Knob::Channels {
            device: "eth0".into(),
        },
        old: "combined=8 rx=0 tx=0 other=1".into(),
    };
    assert_eq!(
        restore_action(&e),
        Ok(Action::SetChannels {
            device: "eth0".into(),
            combined: Some(8),
            rx: Some(0),
            tx: Some(0)
        })
    );
    let other = Entry {
        knob: Knob::Other { what: "x".into() },
        old: "y".into(),
    };
    assert!(restore_action(&other).is_err());
}

/// A NIC driver that sets its queues' affinity itself when the channel count changes, as
/// virtio_net does on `ethtool -L`: IRQ 30 (queue 0) goes to CPU 0, IRQ 31 (queue 1) to CPU 1.
struct RespreadingNic {
    root: Root,
    channels: u32,
}

impl Platform for RespreadingNic {
    fn machine(&mut self) -> Result<Machine, PlatformError> {
        let addr = irqpilot_core::PciAddr("0000:00:04.0".into());
        let mut dev = irqpilot_core::PciDevice::new(addr.clone());
        dev.net = vec!["eth1".into()];
        let mut m = Machine::default();
        m.devices.insert(addr.clone(), dev);
        for n in [30, 31] {
            let mut irq = irqpilot_core::Irq::new(IrqNum(n));
            irq.device = Some(addr.clone());
            m.irqs.insert(IrqNum(n), irq);
        }
        Ok(m)
    }
    fn snapshot_into(&mut self, _: &mut Snapshot) -> Result<(), PlatformError> {
        Ok(())
    }
    fn apply(&mut self, plan: &Plan) -> ApplyReport {
        let mask = |irq: u32| self.root.join(&format!("proc/irq/{irq}/smp_affinity_list"));
        let mut out = Vec::new();
        for a in &plan.actions {
            let (old, changed) = match a {
                Action::SetChannels { combined, .. } => {
                    let old = format!("combined={} rx=0 tx=0 other=0", self.channels);
                    self.channels = combined.unwrap();
                    for (irq, cpu) in [(30, "0\n"), (31, "1\n")] {
                        std::fs::write(mask(irq), cpu).unwrap();
                    }
                    (old, true)
                }
                Action::SetAffinity { irq, cpus } => {
                    let old = std::fs::read_to_string(mask(irq.0)).unwrap();
                    let new = procirq::render_affinity_list(cpus);
                    std::fs::write(mask(irq.0), &new).unwrap();
                    (old.trim_end().to_string(), old != new)
                }
                _ => unreachable!(),
            };
            out.push(Outcome {
                action: a.clone(),
                old: Some(old),
                result: Ok(changed),
            });
        }
        ApplyReport { outcomes: out }
    }
    fn now(&mut self) -> MonoNs {
        MonoNs(0)
    }
    fn sleep(&mut self, _: u64) {}
}

#[test]
fn a_channel_cut_journals_the_masks_its_driver_rewrites() {
    // The operator's layout: queue 0 on CPU 3, queue 1 on CPU 2 (not what the driver sets).
    let (_d, root) = tree();
    std::fs::write(root.join("proc/irq/30/smp_affinity_list"), "3\n").unwrap();
    std::fs::write(root.join("proc/irq/31/smp_affinity_list"), "2\n").unwrap();
    let before = snapshot(&root);
    let nic = RespreadingNic {
        root: root.clone(),
        channels: 4,
    };
    let path = root.join(DEFAULT_JOURNAL);
    let mut p = JournaledPlatform::new(nic, root.clone(), Journal::open(&path).unwrap());
    // isolate --apply: the cut, then the placement on the machine as the cut left it.
    p.apply(&Plan {
        actions: vec![Action::SetChannels {
            device: "eth1".into(),
            combined: Some(2),
            rx: None,
            tx: None,
        }],
        notes: Vec::new(),
    });
    p.apply(&Plan {
        actions: vec![set(30, 1)],
        notes: Vec::new(),
    });
    let recorded: Vec<_> = p
        .journal()
        .entries()
        .iter()
        .map(|e| e.knob.clone())
        .collect();
    assert_eq!(
        recorded[..3],
        [
            Knob::Affinity { irq: IrqNum(30) },
            Knob::Affinity { irq: IrqNum(31) },
            Knob::Channels {
                device: "eth1".into()
            }
        ]
    );
    assert_eq!(p.journal().entries()[0].old, "3");
    // Revert: channels back (the driver re-spreads), then the operator's masks over it.
    let (mut nic, mut journal) = p.into_parts();
    let rep = revert(&mut nic, &mut journal).unwrap();
    assert!(!rep.partial());
    assert_eq!(nic.channels, 4);
    assert_eq!(snapshot(&root), before);
}

#[test]
fn a_second_writer_never_overwrites_the_first_ones_originals() {
    // The forced race of two applies: both open the journal before either has written. The
    // second re-reads the file before recording, so the values from before the first apply
    // stay; with an in-memory copy it would have saved the first apply's results as originals.
    let (_d, root) = tree();
    let before = snapshot(&root);
    let mut first = journaled(&root, BTreeMap::new());
    let mut second = journaled(&root, BTreeMap::new());
    first.apply(&Plan {
        actions: vec![set(30, 1), set(31, 0)],
        notes: vec![],
    });
    second.inner_mut().check = false;
    second.apply(&Plan {
        actions: vec![set(30, 2), set(31, 3), set(32, 0)],
        notes: vec![],
    });
    let j = Journal::open(root.join(DEFAULT_JOURNAL)).unwrap();
    let olds: Vec<&str> = j.entries().iter().map(|e| e.old.as_str()).collect();
    assert_eq!(olds, ["0-3", "2", "1,3"], "{:?}", j.entries());
    let (mut fake, mut journal) = second.into_parts();
    let rep = revert(&mut fake, &mut journal).unwrap();
    assert!(!rep.partial());
    assert_eq!(rep.restored(), 3);
    assert_eq!(snapshot(&root), before);
}

#[test]
fn unrestorable_originals_are_left_alone_and_reported() {
    let (d, root) = tree();
    // What no kernel prints, but a damaged tree may hold: letters, nothing, CPUs beyond any
    // machine. Once overwritten, none of them could be put back.
    for (irq, text) in [(30, "abc\n"), (31, "\n"), (32, "0-4294967295\n")] {
        std::fs::write(
            d.path().join(format!("proc/irq/{irq}/smp_affinity_list")),
            text,
        )
        .unwrap();
    }
    let before = snapshot(&root);
    let mut p = journaled(&root, BTreeMap::new());
    p.inner_mut().check = false;
    let r = p.apply(&Plan {
        actions: vec![
            set(30, 1),
            set(31, 1),
            set(32, 1),
            Action::SetDefaultAffinity {
                cpus: CpuSet::range(0, 1),
            },
        ],
        notes: vec![],
    });
    assert_eq!(r.outcomes.len(), 4, "one outcome per action, in order");
    for (k, irq) in [30, 31, 32].into_iter().enumerate() {
        let o = &r.outcomes[k];
        assert_eq!(o.action, set(irq, 1));
        match &o.result {
            Err(ApplyError::LeftAlone { reason }) => assert!(
                reason.starts_with(&format!("IRQ {irq} affinity could not be restored")),
                "{reason}"
            ),
            other => panic!("IRQ {irq}: {other:?}"),
        }
    }
    assert_eq!(r.outcomes[3].result, Ok(true));
    // Only the default affinity was journaled and written.
    assert_eq!(p.journal().entries().len(), 1);
    let (mut fake, mut journal) = p.into_parts();
    let rep = revert(&mut fake, &mut journal).unwrap();
    assert!(!rep.partial());
    assert_eq!(snapshot(&root), before, "byte for byte");
}

#[test]
fn archives_are_never_overwritten_and_can_be_restored_again() {
    let (_d, root) = tree();
    let before = snapshot(&root);
    let path = root.join(DEFAULT_JOURNAL);
    for round in 0..3 {
        let mut p = journaled(&root, BTreeMap::new());
        p.apply(&Plan {
            actions: vec![set(30, round), set(31, 3)],
            notes: vec![],
        });
        let (mut fake, mut journal) = p.into_parts();
        fake.check = false;
        let rep = revert(&mut fake, &mut journal).unwrap();
        assert_eq!(
            rep.archived.as_deref(),
            archives(&path).last().map(|p| p.as_path())
        );
    }
    let all = archives(&path);
    assert_eq!(all.len(), 3);
    assert!(all[0].ends_with("journal.json.reverted"));
    assert!(all[2].ends_with("journal.json.reverted.2"));
    assert_eq!(snapshot(&root), before);
    // Something else moves the IRQs after the revert: the archive says what differs, and puts
    // it back (the archive itself stays).
    std::fs::write(root.join("proc/irq/30/smp_affinity_list"), "3\n").unwrap();
    let newest = Journal::open(&all[2]).unwrap();
    let differ = differing(&root, newest.entries());
    assert_eq!(differ.len(), 1);
    assert_eq!(differ[0].knob, Knob::Affinity { irq: IrqNum(30) });
    let mut fake = journaled(&root, BTreeMap::new()).into_parts().0;
    fake.check = false;
    let rep = restore_archived(&mut fake, &all[2]).unwrap();
    assert_eq!((rep.restored(), rep.already(), rep.kept), (1, 1, 0));
    assert_eq!(snapshot(&root), before);
    assert!(all[2].exists());
}

#[test]
fn knobs_read_as_words() {
    assert_eq!(
        Knob::Affinity { irq: IrqNum(814) }.to_string(),
        "IRQ 814 affinity"
    );
    assert_eq!(
        Knob::Coalesce {
            device: "eth0".into(),
            queue: Some(3)
        }
        .to_string(),
        "eth0 queue 3 coalescing"
    );
    assert_eq!(Knob::DefaultAffinity.to_string(), "default affinity");
}
