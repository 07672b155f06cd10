use super::*;
use crate::moderation::ethtool::EthtoolCoalesce;
use crate::moderation::fake::{FakeController, FakeEthtool, FakeNic, FakeNvme};
use irqpilot_core::{PciAddr, PciDevice, queue};
use std::path::Path;

fn irq(machine: &mut Machine, n: u32, name: &str, dev: Option<&str>) {
    let mut i = Irq::new(IrqNum(n));
    i.actions = vec![name.to_string()];
    i.queue = queue::recognise(name);
    i.trigger = Some(Trigger::Edge);
    i.device = dev.and_then(PciAddr::parse);
    machine.irqs.insert(i.irq, i);
}

/// eth1 (per-queue, 2 queues), eth2 (device-wide only), veth-like eth3 (no coalescing), a
/// virtio NIC whose vectors name `virtio2`, NVMe nvme0 (admin + 2 I/O queues) and nvme1
/// (absent: no device node), a virtio-blk queue and a timer.
fn machine() -> Machine {
    let mut m = Machine::default();
    let addr = PciAddr::parse("0000:00:03.0").unwrap();
    let mut virtio = PciDevice::new(addr.clone());
    virtio.net = vec!["ens3".into()];
    m.devices.insert(addr, virtio);
    irq(&mut m, 30, "eth1-TxRx-0", None);
    irq(&mut m, 31, "eth1-TxRx-1", None);
    irq(&mut m, 32, "eth1-tx-2", None);
    irq(&mut m, 33, "eth2-rx-0", None);
    irq(&mut m, 34, "eth2-rx-1", None);
    irq(&mut m, 35, "eth3-TxRx-0", None);
    irq(&mut m, 38, "virtio2-input.0", Some("0000:00:03.0"));
    irq(&mut m, 39, "virtio2-output.0", Some("0000:00:03.0"));
    irq(&mut m, 40, "nvme0q0", None);
    irq(&mut m, 41, "nvme0q1", None);
    irq(&mut m, 42, "nvme0q2", None);
    irq(&mut m, 43, "nvme1q1", None);
    irq(&mut m, 44, "virtio1-req.0", None);
    irq(&mut m, 0, "timer", None);
    m
}

fn coal(usecs: u32) -> EthtoolCoalesce {
    EthtoolCoalesce {
        rx_coalesce_usecs: usecs,
        rx_max_coalesced_frames: 32,
        use_adaptive_rx_coalesce: 1,
        tx_coalesce_usecs: 16,
        tx_max_coalesced_frames: 64,
        use_adaptive_tx_coalesce: 1,
        ..Default::default()
    }
}

fn fakes() -> (FakeEthtool, FakeNvme) {
    let nic = |coalesce, device, queues| FakeNic {
        coalesce,
        device,
        queues,
        ..Default::default()
    };
    let eth = FakeEthtool::new([
        (
            "eth1".to_string(),
            nic(true, coal(1), Some(vec![coal(10), coal(11)])),
        ),
        ("eth2".to_string(), nic(true, coal(20), None)),
        ("eth3".to_string(), nic(false, coal(0), None)),
        ("ens3".to_string(), nic(true, coal(0), None)),
    ]);
    let nvme = FakeNvme::new([(
        "nvme0".to_string(),
        FakeController {
            coalescing: 0x0a03,
            ..Default::default()
        },
    )]);
    (eth, nvme)
}

fn nic(device: &str, queue: u32, per_queue: bool, rx_usecs: u32) -> Knob {
    Knob::NicQueue {
        device: device.into(),
        queue,
        per_queue,
        rx_usecs,
        rx_max_frames: 32,
        adaptive_rx: true,
        // The TX side is read too: the global moderator restores it.
        tx_usecs: 16,
        tx_max_frames: 64,
        adaptive_tx: true,
        min_usecs: 1,
    }
}

#[test]
fn live_knobs_from_ethtool_and_nvme() {
    let d = tempfile::tempdir().unwrap();
    let (eth, nvme) = fakes();
    let mut io = ModerationIo {
        ethtool: Some(Box::new(eth.clone())),
        nvme: Box::new(nvme.clone()),
    };
    let (inv, gaps) = read_moderation(&Root::new(d.path()), &machine(), &mut io);
    let k = |n: u32| inv.knobs.get(&IrqNum(n)).cloned();
    assert_eq!(k(30), Some(nic("eth1", 0, true, 10)));
    assert_eq!(k(31), Some(nic("eth1", 1, true, 11)));
    assert_eq!(k(32), None, "tx-only vector");
    assert_eq!(k(33), Some(nic("eth2", 0, false, 20)));
    assert_eq!(k(34), Some(nic("eth2", 1, false, 20)));
    assert_eq!(k(35), None, "no coalescing: no knob");
    assert_eq!(k(38), Some(nic("ens3", 0, false, 0)), "virtio2 is ens3");
    assert_eq!(k(40), None, "admin queue");
    let nv = |vector| Knob::NvmeController {
        controller: "nvme0".into(),
        vector,
        time_100us: 10,
        threshold: 4,
    };
    assert_eq!(k(41), Some(nv(1)));
    assert_eq!(k(42), Some(nv(2)));
    assert_eq!(k(43), None);
    assert_eq!(k(44), None);
    assert_eq!(inv.soft, None);
    assert_eq!(
        gaps,
        vec![Gap {
            path: "dev/nvme1".into(),
            reason: GapReason::Missing
        }],
        "eth3's EOPNOTSUPP is no gap"
    );
    // eth2 has no per-queue ops: asked once per-queue, then the device-wide answer is reused.
    let log = eth.log();
    let eth2: Vec<_> = log.iter().filter(|l| l.starts_with("eth2")).collect();
    assert_eq!(
        eth2,
        [
            "eth2 ETHTOOL_PERQUEUE/GCOALESCE [0]",
            "eth2 ETHTOOL_GCOALESCE"
        ]
    );
    assert!(
        log.iter().all(|l| !l.contains("SCOALESCE")),
        "reading never sets"
    );
    assert_eq!(
        nvme.log(),
        ["nvme0 get 08h cdw11=0x0"],
        "one read per controller"
    );
}

#[test]
fn fixture_roots_record_gaps_not_guesses() {
    let d = tempfile::tempdir().unwrap();
    let root = Root::new(d.path());
    let mut io = ModerationIo::for_root(&root);
    let (inv, gaps) = read_moderation(&root, &machine(), &mut io);
    assert!(inv.knobs.is_empty(), "{:?}", inv.knobs);
    let paths: Vec<&str> = gaps.iter().map(|g| g.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "ethtool:ens3",
            "ethtool:eth1",
            "ethtool:eth2",
            "ethtool:eth3",
            "dev/nvme0",
            "dev/nvme1"
        ]
    );
    assert!(gaps.iter().all(|g| g.reason == GapReason::Missing));
}

fn write(dir: &Path, rel: &str, text: &str) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

#[test]
fn soft_moderation_wins_where_the_kernel_has_it() {
    let d = tempfile::tempdir().unwrap();
    crate::moderation::soft::tests::v4_tree(d.path());
    write(d.path(), "proc/irq/30/soft_moderation", "on\n");
    write(d.path(), "proc/irq/41/soft_moderation", "off\n");
    write(d.path(), "proc/irq/0/soft_moderation", "off\n");
    write(d.path(), "proc/irq/44/soft_moderation", "sometimes\n");
    let mut m = machine();
    if let Some(t) = m.irqs.get_mut(&IrqNum(0)) {
        t.trigger = Some(Trigger::Level);
    }
    let (eth, nvme) = fakes();
    let mut io = ModerationIo {
        ethtool: Some(Box::new(eth)),
        nvme: Box::new(nvme),
    };
    let mut m2 = m.clone();
    fill_moderation(&Root::new(d.path()), &mut m2, &mut io);
    let inv = &m2.moderation;
    assert_eq!(inv.knobs[&IrqNum(30)], Knob::Soft { enabled: true });
    assert_eq!(inv.knobs[&IrqNum(41)], Knob::Soft { enabled: false });
    assert_eq!(
        inv.knobs[&IrqNum(31)],
        nic("eth1", 1, true, 11),
        "no soft file: device knob"
    );
    assert!(
        !inv.knobs.contains_key(&IrqNum(0)),
        "level-triggered: GSIM refuses it"
    );
    let soft = inv.soft.as_ref().unwrap();
    assert_eq!(soft.params["delay_us"], 100);
    let bad = m2
        .gaps
        .iter()
        .find(|g| g.path == "proc/irq/*/soft_moderation")
        .unwrap();
    assert!(
        matches!(&bad.reason, GapReason::Unparsable(msg) if msg.starts_with("proc/irq/44/soft_moderation:1:")),
        "{bad:?}"
    );
}
