use super::*;
use crate::moderation::ethtool::EthtoolCoalesce;
use crate::moderation::fake::{FakeController, FakeEthtool, FakeNic, FakeNvme};
use crate::moderation::restore::restore_action;
use irqpilot_core::Outcome;
use std::collections::BTreeMap;
use std::path::Path;

fn coal(rx_usecs: u32, rx_frames: u32) -> EthtoolCoalesce {
    EthtoolCoalesce {
        rx_coalesce_usecs: rx_usecs,
        rx_max_coalesced_frames: rx_frames,
        tx_coalesce_usecs: 16,
        rate_sample_interval: 2,
        ..Default::default()
    }
}

fn nics(entries: Vec<(&str, FakeNic)>) -> FakeEthtool {
    FakeEthtool::new(entries.into_iter().map(|(n, c)| (n.to_string(), c)))
}

/// eth1: per-queue (4 queues); eth2: device-wide only; veth0: no coalescing at all.
fn three_nics() -> FakeEthtool {
    nics(vec![
        (
            "eth1",
            FakeNic {
                coalesce: true,
                device: coal(8, 64),
                queues: Some(vec![coal(8, 64); 4]),
                ..Default::default()
            },
        ),
        (
            "eth2",
            FakeNic {
                coalesce: true,
                device: coal(3, 0),
                ..Default::default()
            },
        ),
        ("veth0", FakeNic::default()),
    ])
}

/// An io over clones of the fakes (the caller keeps the other handles to look at them).
fn io_with(eth: &FakeEthtool, nvme: &FakeNvme) -> ModerationIo {
    ModerationIo {
        ethtool: Some(Box::new(eth.clone())),
        nvme: Box::new(nvme.clone()),
    }
}

const ZERO: &str = "rx-usecs 0 rx-frames 0 tx-usecs 0 tx-frames 0 adaptive-rx off adaptive-tx off";

fn rx(usecs: u32) -> CoalesceParams {
    CoalesceParams {
        rx_usecs: Some(usecs),
        ..Default::default()
    }
}

fn read_back(io: &mut ModerationIo, dev: &str, scope: CoalesceScope) -> EthtoolCoalesce {
    get_coalesce(io.ethtool.as_deref_mut().unwrap(), dev, scope).unwrap()
}

#[test]
fn per_queue_read_modify_write_and_verify() {
    let eth = three_nics();
    let mut io = io_with(&eth, &FakeNvme::default());
    let (old, result) = set_nic_coalesce(&mut io, "eth1", Some(2), &rx(50));
    assert_eq!(
        old.as_deref(),
        Some("rx-usecs 8 rx-frames 64 tx-usecs 16 tx-frames 0 adaptive-rx off adaptive-tx off"),
        "all six fields, whatever the action names"
    );
    assert_eq!(result, Ok(true));
    let q2 = read_back(&mut io, "eth1", CoalesceScope::Queue(2));
    assert_eq!(
        q2,
        EthtoolCoalesce {
            rx_coalesce_usecs: 50,
            ..coal(8, 64)
        },
        "others kept"
    );
    assert_eq!(
        read_back(&mut io, "eth1", CoalesceScope::Queue(1)),
        coal(8, 64)
    );
    assert_eq!(
        read_back(&mut io, "eth1", CoalesceScope::Device),
        coal(8, 64)
    );
    assert_eq!(
        eth.log()[..3],
        [
            "eth1 ETHTOOL_PERQUEUE/GCOALESCE [2]",
            "eth1 ETHTOOL_PERQUEUE/SCOALESCE [2]",
            "eth1 ETHTOOL_PERQUEUE/GCOALESCE [2]",
        ]
    );

    // Asking again writes nothing.
    let sets = |e: &FakeEthtool| e.log().iter().filter(|l| l.contains("SCOALESCE")).count();
    let before = sets(&eth);
    assert_eq!(
        set_nic_coalesce(&mut io, "eth1", Some(2), &rx(50)).1,
        Ok(false)
    );
    assert_eq!(sets(&eth), before, "no set when the value is already there");
}

#[test]
fn no_per_queue_falls_back_to_device_wide() {
    let eth = three_nics();
    let mut io = io_with(&eth, &FakeNvme::default());
    let (old, result) = set_nic_coalesce(&mut io, "eth2", Some(1), &rx(25));
    assert_eq!(
        (old.as_deref(), result),
        (
            Some("rx-usecs 3 rx-frames 0 tx-usecs 16 tx-frames 0 adaptive-rx off adaptive-tx off"),
            Ok(true)
        )
    );
    assert_eq!(
        eth.log(),
        [
            "eth2 ETHTOOL_PERQUEUE/GCOALESCE [1]",
            "eth2 ETHTOOL_GCOALESCE",
            "eth2 ETHTOOL_SCOALESCE",
            "eth2 ETHTOOL_GCOALESCE",
        ]
    );
    assert_eq!(eth.state().nics["eth2"].device.rx_coalesce_usecs, 25);
    assert_eq!(
        eth.state().nics["eth2"].device.tx_coalesce_usecs,
        16,
        "kept"
    );
}

/// The moderator's action (delay plus frame counts, TX alike) on a driver that supports only
/// `rx-usecs`, as e1000 (found in the VM check: the kernel answered EOPNOTSUPP to the whole set).
#[test]
fn fields_the_driver_lacks_are_dropped_not_the_delay() {
    let e1000 = FakeNic {
        coalesce: true,
        device: EthtoolCoalesce {
            rx_coalesce_usecs: 3,
            ..Default::default()
        },
        supported: Some(1),
        ..Default::default()
    };
    let eth = nics(vec![("eth0", e1000)]);
    let mut io = io_with(&eth, &FakeNvme::default());
    let moderator = CoalesceParams {
        rx_usecs: Some(200),
        rx_max_frames: Some(64),
        tx_usecs: Some(200),
        tx_max_frames: Some(64),
        use_adaptive_rx: Some(false),
        use_adaptive_tx: Some(false),
    };
    let (old, result) = set_nic_coalesce(&mut io, "eth0", Some(0), &moderator);
    assert_eq!(
        old.as_deref(),
        Some("rx-usecs 3 rx-frames 0 tx-usecs 0 tx-frames 0 adaptive-rx off adaptive-tx off")
    );
    assert_eq!(result, Ok(true));
    assert_eq!(
        eth.state().nics["eth0"].device,
        EthtoolCoalesce {
            rx_coalesce_usecs: 200,
            ..Default::default()
        }
    );
    assert_eq!(
        eth.log(),
        [
            "eth0 ETHTOOL_PERQUEUE/GCOALESCE [0]",
            "eth0 ETHTOOL_GCOALESCE",
            "eth0 ETHTOOL_SCOALESCE",
            "eth0 ETHTOOL_SCOALESCE",
            "eth0 ETHTOOL_SCOALESCE",
            "eth0 ETHTOOL_GCOALESCE",
        ],
        "all six, without frame counts, without tx-usecs"
    );
    // Revert writes the old value back; its zeros never trip the check.
    let action = Action::SetCoalesce {
        device: "eth0".into(),
        queue: Some(0),
        params: moderator.clone(),
    };
    let Ok(Some(Action::SetCoalesce { params, .. })) =
        crate::moderation::restore::restore_for(&action, old.as_deref().unwrap())
    else {
        panic!("no restore action");
    };
    assert_eq!(
        set_nic_coalesce(&mut io, "eth0", Some(0), &params).1,
        Ok(true)
    );
    assert_eq!(eth.state().nics["eth0"].device.rx_coalesce_usecs, 3);

    // Without even rx-usecs the refusal stands.
    let mut none = FakeNic {
        coalesce: true,
        supported: Some(0),
        ..Default::default()
    };
    none.device.rx_coalesce_usecs = 0;
    let eth = nics(vec![("eth9", none)]);
    let mut io = io_with(&eth, &FakeNvme::default());
    assert_eq!(
        set_nic_coalesce(&mut io, "eth9", None, &moderator).1,
        Err(ApplyError::Unsupported)
    );
}

#[test]
fn refusals_are_reported_per_device() {
    let eth = three_nics();
    eth.state().nics.insert(
        "eth9".into(),
        FakeNic {
            coalesce: true,
            fail_sets: Some(libc::EPERM),
            ..Default::default()
        },
    );
    eth.state().nics.insert(
        "eth8".into(),
        FakeNic {
            coalesce: true,
            rx_usecs_step: Some(4),
            ..Default::default()
        },
    );
    let mut io = io_with(&eth, &FakeNvme::default());
    let p = rx(50);
    assert_eq!(
        set_nic_coalesce(&mut io, "veth0", None, &p),
        (None, Err(ApplyError::Unsupported))
    );
    assert_eq!(
        set_nic_coalesce(&mut io, "gone0", Some(0), &p),
        (None, Err(ApplyError::Vanished))
    );
    assert_eq!(
        set_nic_coalesce(&mut io, "eth9", None, &p),
        (Some(ZERO.into()), Err(ApplyError::PermissionDenied))
    );
    assert_eq!(
        set_nic_coalesce(&mut io, "eth8", None, &p),
        (
            Some(ZERO.into()),
            Err(ApplyError::NotTaken {
                readback: "rx-usecs 48".into()
            })
        )
    );
    assert_eq!(
        set_nic_coalesce(&mut io, "eth1", Some(4), &p),
        (None, Err(ApplyError::Invalid)),
        "queue beyond the device's queues"
    );
    assert_eq!(
        set_nic_coalesce(&mut io, "eth1", Some(4096), &p),
        (None, Err(ApplyError::Invalid))
    );
    assert_eq!(
        set_nic_coalesce(&mut io, "a/b", None, &p),
        (None, Err(ApplyError::Invalid))
    );
    // And after all that, a good device still takes its change.
    assert_eq!(set_nic_coalesce(&mut io, "eth1", Some(0), &p).1, Ok(true));
    let mut none = ModerationIo {
        ethtool: None,
        nvme: Box::new(FakeNvme::default()),
    };
    assert_eq!(
        set_nic_coalesce(&mut none, "eth1", None, &p),
        (None, Err(ApplyError::Unsupported))
    );
}

fn nvme0() -> FakeNvme {
    FakeNvme::new([(
        "nvme0".to_string(),
        FakeController {
            coalescing: 0,
            vectors: BTreeMap::from([(1, false), (2, false)]),
            ..Default::default()
        },
    )])
}

#[test]
fn nvme_features_are_set_and_verified() {
    let nvme = nvme0();
    let mut io = io_with(&FakeEthtool::default(), &nvme);
    let want = IrqCoalescing {
        time_100us: 10,
        threshold: 4,
    };
    assert_eq!(
        set_nvme_coalescing(&mut io, "nvme0", want),
        (Some("0x0000".into()), Ok(true))
    );
    assert_eq!(get_irq_coalescing(io.nvme.as_mut(), "nvme0").unwrap(), want);
    assert_eq!(
        nvme.log(),
        [
            "nvme0 get 08h cdw11=0x0",
            "nvme0 set 08h cdw11=0xa03",
            "nvme0 get 08h cdw11=0x0",
            "nvme0 get 08h cdw11=0x0",
        ]
    );
    assert_eq!(
        set_nvme_coalescing(&mut io, "nvme0", want),
        (Some("0x0a03".into()), Ok(false))
    );
    let off = IrqVectorConfig {
        vector: 2,
        coalescing_disabled: true,
    };
    assert_eq!(
        set_nvme_vector(&mut io, "nvme0", off),
        (Some("0x0002".into()), Ok(true))
    );
    assert_eq!(
        get_vector_config(io.nvme.as_mut(), "nvme0", 2).unwrap(),
        off
    );
    assert!(
        !get_vector_config(io.nvme.as_mut(), "nvme0", 1)
            .unwrap()
            .coalescing_disabled
    );
}

#[test]
fn nvme_refusals() {
    let fake = nvme0();
    fake.state().controllers.insert(
        "nvme1".into(),
        FakeController {
            set_status: Some(0x010e),
            ..Default::default()
        },
    );
    fake.state().controllers.insert(
        "nvme2".into(),
        FakeController {
            errno: Some(libc::EACCES),
            ..Default::default()
        },
    );
    let mut io = io_with(&FakeEthtool::default(), &fake);
    let want = IrqCoalescing {
        time_100us: 1,
        threshold: 8,
    };
    assert_eq!(
        set_nvme_coalescing(&mut io, "nvme1", want),
        (Some("0x0000".into()), Err(ApplyError::Unsupported))
    );
    assert_eq!(
        set_nvme_coalescing(&mut io, "nvme2", want),
        (None, Err(ApplyError::PermissionDenied))
    );
    assert_eq!(
        set_nvme_coalescing(&mut io, "nvme7", want),
        (None, Err(ApplyError::Unsupported)),
        "no device node"
    );
    assert_eq!(
        set_nvme_coalescing(&mut io, "sda", want).1,
        Err(ApplyError::Invalid)
    );
    let zero = IrqCoalescing {
        time_100us: 1,
        threshold: 0,
    };
    assert_eq!(
        set_nvme_coalescing(&mut io, "nvme0", zero).1,
        Err(ApplyError::Invalid)
    );
    let v9 = IrqVectorConfig {
        vector: 9,
        coalescing_disabled: true,
    };
    assert_eq!(
        set_nvme_vector(&mut io, "nvme0", v9),
        (None, Err(ApplyError::Unsupported)),
        "Invalid Field on Get Features 09h: no such vector"
    );
}

#[test]
fn nvme_under_a_fixture_root_is_unsupported_per_controller() {
    let d = tempfile::tempdir().unwrap();
    let root = Root::new(d.path());
    let mut io = ModerationIo::for_root(&root);
    let a = Action::SetNvmeCoalescing {
        controller: "nvme0".into(),
        time_100us: 1,
        threshold: 4,
    };
    assert_eq!(
        apply_moderation(&root, &mut io, &a),
        Some((None, Err(ApplyError::Unsupported)))
    );
}

fn write(dir: &Path, rel: &str, text: &str) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn read(dir: &Path, rel: &str) -> String {
    std::fs::read_to_string(dir.join(rel)).unwrap()
}

#[test]
fn soft_parameters_directory_form() {
    let d = tempfile::tempdir().unwrap();
    crate::moderation::soft::tests::v4_tree(d.path());
    let root = Root::new(d.path());
    assert_eq!(
        set_soft_param(&root, "delay_us", 50),
        (Some("100".into()), Ok(true))
    );
    assert_eq!(read(d.path(), "proc/irq/soft_moderation/delay_us"), "50\n");
    assert_eq!(
        set_soft_param(&root, "delay_us", 50),
        (Some("50".into()), Ok(false))
    );
    assert_eq!(
        set_soft_param(&root, "delay_us", 501),
        (None, Err(ApplyError::Invalid))
    );
    assert_eq!(
        set_soft_param(&root, "update_ms", 0).1,
        Err(ApplyError::Invalid)
    );
    assert_eq!(
        read(d.path(), "proc/irq/soft_moderation/update_ms"),
        "5\n",
        "untouched"
    );
    assert_eq!(
        set_soft_param(&root, "stats", 1).1,
        Err(ApplyError::Invalid)
    );
    assert_eq!(
        set_soft_param(&root, "timer_rounds", 1).1,
        Err(ApplyError::Unsupported)
    );
}

#[test]
fn soft_parameters_single_file_form() {
    let d = tempfile::tempdir().unwrap();
    write(
        d.path(),
        "proc/irq/soft_moderation",
        crate::moderation::soft::tests::V3_READOUT,
    );
    let root = Root::new(d.path());
    // The file is not the kernel: a write replaces it, so the request's exact text is visible.
    assert_eq!(
        set_soft_param(&root, "hardirq_percent", 50),
        (Some("70".into()), Ok(true))
    );
    assert_eq!(
        read(d.path(), "proc/irq/soft_moderation"),
        "hardirq_percent=50\n"
    );

    // v1/v2 spelling of the rate.
    write(
        d.path(),
        "proc/irq/soft_moderation",
        "delay_us 0\ntarget_irq_rate 0\n",
    );
    assert_eq!(
        set_soft_param(&root, "target_intr_rate", 900_000),
        (Some("0".into()), Ok(true))
    );
    assert_eq!(
        read(d.path(), "proc/irq/soft_moderation"),
        "target_irq_rate=900000\n"
    );

    let none = tempfile::tempdir().unwrap();
    assert_eq!(
        set_soft_param(&Root::new(none.path()), "delay_us", 10),
        (None, Err(ApplyError::Unsupported))
    );
}

#[test]
fn soft_moderation_per_irq() {
    let d = tempfile::tempdir().unwrap();
    crate::moderation::soft::tests::v4_tree(d.path());
    write(d.path(), "proc/irq/45/soft_moderation", "off\n");
    std::fs::create_dir_all(d.path().join("proc/irq/46")).unwrap();
    let root = Root::new(d.path());
    assert_eq!(
        set_irq_soft(&root, IrqNum(45), true),
        (Some("off".into()), Ok(true))
    );
    assert_eq!(read(d.path(), "proc/irq/45/soft_moderation"), "1\n");
    assert_eq!(
        set_irq_soft(&root, IrqNum(45), true),
        (Some("1".into()), Ok(false))
    );
    assert_eq!(
        set_irq_soft(&root, IrqNum(46), true),
        (None, Err(ApplyError::Unsupported))
    );
    assert_eq!(
        set_irq_soft(&root, IrqNum(47), true),
        (None, Err(ApplyError::Vanished))
    );
    write(d.path(), "proc/irq/48/soft_moderation", "perhaps\n");
    assert!(matches!(
        set_irq_soft(&root, IrqNum(48), true),
        (Some(_), Err(ApplyError::Other { .. }))
    ));
}

/// Apply a plan's worth of actions, then the restoring actions newest first: every knob is back.
#[test]
fn restore_puts_every_knob_back() {
    let d = tempfile::tempdir().unwrap();
    crate::moderation::soft::tests::v4_tree(d.path());
    write(d.path(), "proc/irq/45/soft_moderation", "off\n");
    let root = Root::new(d.path());
    let mut io = io_with(&three_nics(), &nvme0());
    let actions = vec![
        Action::SetCoalesce {
            device: "eth1".into(),
            queue: Some(3),
            params: CoalesceParams {
                rx_usecs: Some(40),
                rx_max_frames: Some(16),
                use_adaptive_rx: Some(true),
                ..Default::default()
            },
        },
        Action::SetCoalesce {
            device: "eth2".into(),
            queue: None,
            params: rx(30),
        },
        Action::SetNvmeCoalescing {
            controller: "nvme0".into(),
            time_100us: 2,
            threshold: 8,
        },
        Action::SetNvmeVectorCoalescing {
            controller: "nvme0".into(),
            vector: 1,
            disable: true,
        },
        Action::SetSoftModeration {
            param: "target_intr_rate".into(),
            value: 800_000,
        },
        Action::SetIrqSoftModeration {
            irq: IrqNum(45),
            enabled: true,
        },
        Action::SetAffinity {
            irq: IrqNum(45),
            cpus: irqpilot_core::CpuSet::default(),
        },
    ];
    let mut outcomes = Vec::new();
    for a in &actions {
        // What a journal records before writing is what the outcome reports afterwards.
        let before = read_current(&root, &mut io, a);
        let Some((old, result)) = apply_moderation(&root, &mut io, a) else {
            assert_eq!(before, None, "not a moderation action: {a:?}");
            continue;
        };
        assert_eq!(before, old, "{a:?}");
        assert_eq!(result, Ok(true), "{a:?}");
        outcomes.push(Outcome {
            action: a.clone(),
            old,
            result,
        });
    }
    assert_eq!(outcomes.len(), 6, "the affinity action is not moderation's");
    for o in outcomes.iter().rev() {
        let undo = restore_action(o).unwrap().unwrap();
        assert_eq!(
            apply_moderation(&root, &mut io, &undo).unwrap().1,
            Ok(true),
            "{undo:?}"
        );
    }
    assert_eq!(
        read_back(&mut io, "eth1", CoalesceScope::Queue(3)),
        coal(8, 64)
    );
    assert_eq!(
        read_back(&mut io, "eth2", CoalesceScope::Device),
        coal(3, 0)
    );
    assert_eq!(
        get_irq_coalescing(io.nvme.as_mut(), "nvme0")
            .unwrap()
            .cdw11(),
        Some(0)
    );
    assert!(
        !get_vector_config(io.nvme.as_mut(), "nvme0", 1)
            .unwrap()
            .coalescing_disabled
    );
    assert_eq!(
        read(d.path(), "proc/irq/soft_moderation/target_intr_rate"),
        "1000000\n"
    );
    assert_eq!(read(d.path(), "proc/irq/45/soft_moderation"), "0\n");
}
