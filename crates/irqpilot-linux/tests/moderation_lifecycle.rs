//! The global moderator's life on `LinuxPlatform` over a fixture tree, against the emulated
//! ethtool driver (`moderation::fake`), as the daemon runs it:
//!
//! * at low load, with `/proc/stat` moving as a real one does (one `USER_HZ` tick per 10 ms
//!   period, every other one hardirq: a period reads 0% or 100%), no period changes anything;
//! * an mlx5-like queue (RX 3 us / 32, TX 16 us / 32, adaptive RX and TX on) is taken to its
//!   lowest-latency setting once, then held back under overload (RX and TX delays, frames,
//!   adaptive off), let go when the load leaves, and `revert` restores all six fields.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use irqpilot_core::moderation::global::{GlobalModerationConfig, GlobalModerator};
use irqpilot_core::{Action, Controller, CpuId, IrqNum, Platform, RowLabel};
use irqpilot_linux::format::interrupts::{parse_interrupts, render_interrupts};
use irqpilot_linux::format::stat::{parse_stat, render_stat};
use irqpilot_linux::journal::{DEFAULT_JOURNAL, Journal, JournaledPlatform, revert};
use irqpilot_linux::moderation::ModerationIo;
use irqpilot_linux::moderation::ethtool::EthtoolCoalesce;
use irqpilot_linux::moderation::fake::{FakeEthtool, FakeNic, FakeNvme};
use irqpilot_linux::{LinuxPlatform, Root};

#[test]
fn tick_quantized_stat_at_low_load_changes_nothing() {
    let (_guard, root) = common::fixture_copy("firecracker-2cpu");
    // virtio_net's own setting: an interrupt per packet, no delay.
    let eth = FakeEthtool::new([(
        "eth0".to_string(),
        FakeNic {
            coalesce: true,
            device: EthtoolCoalesce {
                rx_max_coalesced_frames: 1,
                tx_max_coalesced_frames: 1,
                ..Default::default()
            },
            ..Default::default()
        },
    )]);
    let io = ModerationIo {
        ethtool: Some(Box::new(eth.clone())),
        nvme: Box::new(FakeNvme::default()),
    };
    let mut p = LinuxPlatform::with_root(&root).with_moderation_io(io);
    let irqs_path = root.join("proc/interrupts");
    let stat_path = root.join("proc/stat");
    let mut irqs = parse_interrupts(&std::fs::read_to_string(&irqs_path).unwrap()).unwrap();
    let mut stat = parse_stat(&std::fs::read_to_string(&stat_path).unwrap()).unwrap();
    let row = irqs
        .rows()
        .iter()
        .position(|r| r.label == RowLabel::Irq(IrqNum(38)))
        .unwrap();

    let mut moderator = GlobalModerator::new(GlobalModerationConfig::default());
    let mut controller = Controller::new(&mut p).unwrap();
    let mut changes = Vec::new();
    for period in 0..40u64 {
        // eth0's queue takes 2,000 interrupts/s on CPU 1; CPU 1 spends one tick per period, in
        // hardirq every other period (what a 5% hardirq share looks like through 10 ms ticks).
        irqs.counts_mut(row).unwrap()[1] += 20;
        std::fs::write(&irqs_path, render_interrupts(&irqs)).unwrap();
        let (_, t) = stat
            .per_cpu
            .iter_mut()
            .find(|(c, _)| *c == CpuId(1))
            .unwrap();
        if period % 2 == 1 {
            t.irq = Some(t.irq.unwrap() + 1);
        } else {
            t.idle += 1;
        }
        std::fs::write(&stat_path, render_stat(&stat)).unwrap();
        p.sleep(10_000_000);
        let step = controller.step(&mut p, &mut [&mut moderator]).unwrap();
        for (_, plan) in &step.plans {
            changes.extend(plan.actions.iter().map(Action::describe));
        }
    }
    assert!(changes.is_empty(), "{changes:#?}");
    assert!(
        !eth.log().iter().any(|l| l.contains("SCOALESCE")),
        "{:?}",
        eth.log()
    );
}

/// mlx5's defaults: 3 us / 32 packets on RX (CQE mode), 16 us / 32 on TX, DIM on both.
fn mlx5_defaults() -> EthtoolCoalesce {
    EthtoolCoalesce {
        rx_coalesce_usecs: 3,
        rx_max_coalesced_frames: 32,
        tx_coalesce_usecs: 16,
        tx_max_coalesced_frames: 32,
        use_adaptive_rx_coalesce: 1,
        use_adaptive_tx_coalesce: 1,
        ..Default::default()
    }
}

#[test]
fn overload_then_idle_then_revert_restores_rx_and_tx() {
    let (_guard, root) = common::fixture_copy("firecracker-2cpu");
    let original = mlx5_defaults();
    let eth = FakeEthtool::new([(
        "eth0".to_string(),
        FakeNic {
            coalesce: true,
            device: original,
            queues: Some(vec![original]),
            ..Default::default()
        },
    )]);
    let io = ModerationIo {
        ethtool: Some(Box::new(eth.clone())),
        nvme: Box::new(FakeNvme::default()),
    };
    let r = Root::new(&root);
    let journal = Journal::open(r.join(DEFAULT_JOURNAL)).unwrap();
    let mut p = JournaledPlatform::new(
        LinuxPlatform::new(r.clone()).with_moderation_io(io),
        r.clone(),
        journal,
    );
    let irqs_path = root.join("proc/interrupts");
    let mut irqs = parse_interrupts(&std::fs::read_to_string(&irqs_path).unwrap()).unwrap();
    let row = irqs
        .rows()
        .iter()
        .position(|r| r.label == RowLabel::Irq(IrqNum(38)))
        .unwrap();
    let mut moderator = GlobalModerator::new(GlobalModerationConfig {
        knee_search: false,
        ..Default::default()
    });
    let mut controller = Controller::new(&mut p).unwrap();
    let queue = |eth: &FakeEthtool| eth.state().nics["eth0"].queues.as_ref().unwrap()[0];
    let mut step = |p: &mut JournaledPlatform<LinuxPlatform>, per_period: u64| {
        irqs.counts_mut(row).unwrap()[1] += per_period;
        std::fs::write(&irqs_path, render_interrupts(&irqs)).unwrap();
        p.sleep(10_000_000);
        controller.step(p, &mut [&mut moderator]).unwrap()
    };
    // The first period takes the queue to its lowest-latency setting.
    let first = step(&mut p, 20);
    assert_eq!(first.applied.written(), 1, "{:?}", first.applied);
    let idle = queue(&eth);
    assert_eq!(
        (
            idle.rx_coalesce_usecs,
            idle.tx_coalesce_usecs,
            idle.use_adaptive_rx_coalesce,
            idle.use_adaptive_tx_coalesce
        ),
        (0, 0, 0, 0)
    );
    // Overload (the counter moves as if 2 M/s; a platform's clock drifts, so "about"): the
    // queue is held back on both directions.
    let mut held = None;
    for _ in 0..10 {
        step(&mut p, 20_000);
        let q = queue(&eth);
        if q.rx_coalesce_usecs > 0 {
            held = Some(q);
        }
    }
    let held = held.expect("held back under overload");
    assert_eq!(held.tx_coalesce_usecs, held.rx_coalesce_usecs);
    let least = GlobalModerationConfig::default().rx_frames;
    assert!(held.rx_max_coalesced_frames >= least && held.tx_max_coalesced_frames >= least);
    // The load leaves: the delays shrink back to the idle setting.
    for _ in 0..80 {
        step(&mut p, 20);
    }
    assert_eq!(queue(&eth), idle);
    // `revert` puts back everything the moderator changed: RX and TX, frames, adaptive flags.
    let (mut inner, mut journal) = p.into_parts();
    let rep = revert(&mut inner, &mut journal).unwrap();
    assert!(!rep.partial(), "{rep:?}");
    assert_eq!(queue(&eth), original);
}
