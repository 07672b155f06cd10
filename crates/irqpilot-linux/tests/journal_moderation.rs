//! Moderation changes go through the apply journal like affinity does: recorded before the
//! write where the old value can be read beforehand (the GSIM files), from the outcome where it
//! cannot (an emulated NIC and NVMe controller, which only the platform reaches); the first
//! value wins across applies; `revert` puts every knob back and archives the journal.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use irqpilot_core::{Action, CoalesceParams, IrqNum, Plan, Platform};
use irqpilot_linux::journal::{DEFAULT_JOURNAL, Journal, JournaledPlatform, Knob, revert};
use irqpilot_linux::moderation::ModerationIo;
use irqpilot_linux::moderation::ethtool::EthtoolCoalesce;
use irqpilot_linux::moderation::fake::{FakeController, FakeEthtool, FakeNic, FakeNvme};
use irqpilot_linux::{LinuxPlatform, Root};
use std::path::Path;

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn read(root: &Path, rel: &str) -> String {
    std::fs::read_to_string(root.join(rel)).unwrap()
}

#[test]
fn moderation_is_journaled_and_reverted() {
    let (_guard, root) = common::fixture_copy("firecracker-2cpu");
    for (name, v) in [
        ("delay_us", "0"),
        ("target_intr_rate", "0"),
        ("hardirq_percent", "0"),
    ] {
        write(
            &root,
            &format!("proc/irq/soft_moderation/{name}"),
            &format!("{v}\n"),
        );
    }
    write(&root, "proc/irq/38/soft_moderation", "off\n");
    let nic = EthtoolCoalesce {
        rx_coalesce_usecs: 8,
        rx_max_coalesced_frames: 32,
        ..Default::default()
    };
    let eth = FakeEthtool::new([(
        "eth0".to_string(),
        FakeNic {
            coalesce: true,
            device: nic,
            ..Default::default()
        },
    )]);
    let nvme = FakeNvme::new([("nvme0".to_string(), FakeController::default())]);
    let io = ModerationIo {
        ethtool: Some(Box::new(eth.clone())),
        nvme: Box::new(nvme.clone()),
    };
    let r = Root::new(&root);
    let journal = Journal::open(r.join(DEFAULT_JOURNAL)).unwrap();
    let mut p = JournaledPlatform::new(
        LinuxPlatform::new(r.clone()).with_moderation_io(io),
        r.clone(),
        journal,
    );
    let plan = |delay: u64, usecs: u32| Plan {
        actions: vec![
            Action::SetSoftModeration {
                param: "delay_us".into(),
                value: delay,
            },
            Action::SetIrqSoftModeration {
                irq: IrqNum(38),
                enabled: true,
            },
            Action::SetCoalesce {
                device: "eth0".into(),
                queue: Some(0),
                params: CoalesceParams {
                    rx_usecs: Some(usecs),
                    ..Default::default()
                },
            },
            Action::SetNvmeCoalescing {
                controller: "nvme0".into(),
                time_100us: 1,
                threshold: 8,
            },
        ],
        notes: vec![],
    };
    let report = p.apply(&plan(100, 50));
    assert_eq!(report.written(), 4, "{report:?}");
    assert_eq!(read(&root, "proc/irq/soft_moderation/delay_us"), "100\n");
    let j = p.journal();
    let old = |k: &Knob| {
        j.entries()
            .iter()
            .find(|e| &e.knob == k)
            .map(|e| e.old.clone())
    };
    assert_eq!(
        old(&Knob::SoftModeration {
            param: "delay_us".into()
        }),
        Some("0".into())
    );
    assert_eq!(
        old(&Knob::IrqSoftModeration { irq: IrqNum(38) }),
        Some("off".into())
    );
    assert_eq!(
        old(&Knob::Coalesce {
            device: "eth0".into(),
            queue: Some(0)
        }),
        Some(
            "rx-usecs 8 rx-frames 32 tx-usecs 0 tx-frames 0 adaptive-rx off adaptive-tx off".into()
        )
    );
    assert_eq!(
        old(&Knob::NvmeCoalescing {
            controller: "nvme0".into()
        }),
        Some("0x0000".into())
    );

    // A second change of the same knobs: the journal keeps the values from before the first.
    assert_eq!(p.apply(&plan(200, 70)).written(), 2);
    assert_eq!(p.journal().entries().len(), 4);

    let (mut inner, mut journal) = p.into_parts();
    let rep = revert(&mut inner, &mut journal).unwrap();
    assert!(!rep.partial(), "{rep:?}");
    assert_eq!(read(&root, "proc/irq/soft_moderation/delay_us"), "0\n");
    assert_eq!(read(&root, "proc/irq/38/soft_moderation"), "0\n");
    assert_eq!(eth.state().nics["eth0"].device, nic);
    assert_eq!(nvme.state().controllers["nvme0"].coalescing, 0);
    assert!(journal.is_empty());
    assert!(rep.archived.is_some());
}
