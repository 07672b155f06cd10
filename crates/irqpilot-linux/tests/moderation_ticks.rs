//! The global moderator on `LinuxPlatform` over a fixture tree whose `/proc/stat` moves as a
//! real one does at low load: one `USER_HZ` tick (10 ms) per control period, every other one
//! counted as hardirq. A single period then reads 0% or 100% hardirq; neither may lead to a
//! coalescing change (the NIC is already at its lowest-latency setting).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use irqpilot_core::moderation::global::{GlobalModerationConfig, GlobalModerator};
use irqpilot_core::{Action, Controller, CpuId, IrqNum, Platform, RowLabel};
use irqpilot_linux::LinuxPlatform;
use irqpilot_linux::format::interrupts::{parse_interrupts, render_interrupts};
use irqpilot_linux::format::stat::{parse_stat, render_stat};
use irqpilot_linux::moderation::ModerationIo;
use irqpilot_linux::moderation::ethtool::EthtoolCoalesce;
use irqpilot_linux::moderation::fake::{FakeEthtool, FakeNic, FakeNvme};

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
