//! `LinuxPlatform` with moderation: the inventory's knobs and a mixed plan applied to a fixture
//! copy with emulated NIC and NVMe drivers: every action gets its outcome, refusals do not stop
//! the rest, and the next inventory shows the new settings.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use irqpilot_core::moderation::knobs::Knob;
use irqpilot_core::{Action, ApplyError, CoalesceParams, CpuSet, IrqNum, Plan, Platform};
use irqpilot_linux::LinuxPlatform;
use irqpilot_linux::moderation::ModerationIo;
use irqpilot_linux::moderation::ethtool::EthtoolCoalesce;
use irqpilot_linux::moderation::fake::{FakeController, FakeEthtool, FakeNic, FakeNvme};

fn fakes() -> (FakeEthtool, FakeNvme) {
    let c = EthtoolCoalesce {
        rx_coalesce_usecs: 8,
        rx_max_coalesced_frames: 32,
        ..Default::default()
    };
    let eth = FakeEthtool::new([
        (
            "eth0".to_string(),
            FakeNic {
                coalesce: true,
                device: c,
                ..Default::default()
            },
        ),
        ("veth0".to_string(), FakeNic::default()),
    ]);
    let nvme = FakeNvme::new([("nvme0".to_string(), FakeController::default())]);
    (eth, nvme)
}

#[test]
fn knobs_and_a_mixed_plan() {
    let (_guard, root) = common::fixture_copy("firecracker-2cpu");
    let (eth, nvme) = fakes();
    let io = ModerationIo {
        ethtool: Some(Box::new(eth.clone())),
        nvme: Box::new(nvme.clone()),
    };
    let mut p = LinuxPlatform::with_root(&root).with_moderation_io(io);
    let m = p.machine().unwrap();
    // virtio2-input.0 is eth0's only rx vector; virtio_net here has no per-queue ops.
    assert_eq!(
        m.moderation.knobs[&IrqNum(38)],
        Knob::NicQueue {
            device: "eth0".into(),
            queue: 0,
            per_queue: false,
            rx_usecs: 8,
            rx_max_frames: 32,
            adaptive_rx: false,
            tx_usecs: 0,
            tx_max_frames: 0,
            adaptive_tx: false,
            min_usecs: 1,
        }
    );
    assert_eq!(m.moderation.knobs.len(), 1);
    assert!(!m.gaps.iter().any(|g| g.path.starts_with("ethtool:")));

    let rx = |usecs| CoalesceParams {
        rx_usecs: Some(usecs),
        ..Default::default()
    };
    let plan = Plan {
        actions: vec![
            Action::SetCoalesce {
                device: "veth0".into(),
                queue: Some(0),
                params: rx(50),
            },
            Action::SetCoalesce {
                device: "eth0".into(),
                queue: Some(0),
                params: rx(50),
            },
            Action::SetNvmeCoalescing {
                controller: "nvme1".into(),
                time_100us: 1,
                threshold: 8,
            },
            Action::SetNvmeCoalescing {
                controller: "nvme0".into(),
                time_100us: 1,
                threshold: 8,
            },
            Action::SetSoftModeration {
                param: "delay_us".into(),
                value: 100,
            },
            Action::SetIrqSoftModeration {
                irq: IrqNum(38),
                enabled: true,
            },
            Action::SetAffinity {
                irq: IrqNum(38),
                cpus: CpuSet::parse_list("0").unwrap(),
            },
        ],
        notes: vec![],
    };
    let report = p.apply(&plan);
    let results: Vec<_> = report
        .outcomes
        .iter()
        .map(|o| (o.old.as_deref(), o.result.clone()))
        .collect();
    assert_eq!(
        results,
        [
            (None, Err(ApplyError::Unsupported)),
            (
                Some(
                    "rx-usecs 8 rx-frames 32 tx-usecs 0 tx-frames 0 adaptive-rx off adaptive-tx off"
                ),
                Ok(true)
            ),
            (None, Err(ApplyError::Unsupported)),
            (Some("0x0000"), Ok(true)),
            (None, Err(ApplyError::Unsupported)),
            (None, Err(ApplyError::Unsupported)),
            (Some("0-1"), Ok(true)),
        ]
    );
    assert_eq!(nvme.state().controllers["nvme0"].coalescing, 0x0107);
    let m = p.machine().unwrap();
    assert!(matches!(
        m.moderation.knobs[&IrqNum(38)],
        Knob::NicQueue {
            rx_usecs: 50,
            rx_max_frames: 32,
            ..
        }
    ));
    assert!(
        eth.log().iter().all(|l| !l.starts_with("veth0 ETHTOOL_S")),
        "no set after the refused get"
    );
}
