//! The isolation planner: what must leave, whether vectors fit, channel cuts, the boot line.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::rates_for;
use irqpilot_core::isolation::plan::{IsolationError, Leaving, plan_isolation};
use irqpilot_core::placement::PlacementConfig;
use irqpilot_core::queue::recognise;
use irqpilot_core::{Action, CpuId, CpuSet, Irq, IrqNum, Machine, PciAddr, PciDevice, Topology};

fn l(s: &str) -> CpuSet {
    CpuSet::parse_list(s).unwrap()
}

/// Seed 004's situation: 24 CPUs, two NICs with 24 queues each, an NVMe with 24 managed
/// queues (one CPU each), everything spread over all CPUs; isolate 4-23.
fn rt_box() -> Machine {
    let topo = Topology::synthetic(1, 1, 24, 1);
    let mut m = Machine {
        topology: topo.clone(),
        default_affinity: Some(topo.online.clone()),
        ..Machine::default()
    };
    let mut n = 30u32;
    for (d, nic) in ["ens1f0", "ens1f1"].iter().enumerate() {
        let addr = PciAddr(format!("0000:3b:00.{d}"));
        let mut dev = PciDevice::new(addr.clone());
        dev.net = vec![nic.to_string()];
        dev.local_cpus = Some(topo.online.clone());
        for q in 0..24u32 {
            let mut i = Irq::new(IrqNum(n));
            n += 1;
            let name = format!("{nic}-TxRx-{q}");
            i.queue = recognise(&name);
            i.actions = vec![name];
            i.device = Some(addr.clone());
            i.requested = Some(topo.online.clone());
            i.effective = Some(CpuSet::single(CpuId(q)));
            i.managed = Some(false);
            dev.msi_irqs.push(i.irq);
            m.irqs.insert(i.irq, i);
        }
        m.devices.insert(addr, dev);
    }
    let addr = PciAddr("0000:5e:00.0".into());
    let mut dev = PciDevice::new(addr.clone());
    dev.nvme = vec!["nvme0".into()];
    for q in 0..24u32 {
        let mut i = Irq::new(IrqNum(n));
        n += 1;
        let name = format!("nvme0q{}", q + 1);
        i.queue = recognise(&name);
        i.actions = vec![name];
        i.device = Some(addr.clone());
        // Pairs of CPUs per queue: queue 2 covers 2-3 (half housekeeping), queue 5 covers 10.
        i.requested = Some(CpuSet::range(q / 2 * 2, q / 2 * 2 + 1));
        i.effective = Some(CpuSet::single(CpuId(q)));
        i.managed = Some(true);
        m.irqs.insert(i.irq, i);
    }
    m.devices.insert(addr, dev);
    m
}

#[test]
fn funnel_overflows_and_channel_cuts_fix_it() {
    let m = rt_box();
    // At 12 vectors per CPU the 4 housekeeping CPUs hold 48; they already hold 16 (8 NIC
    // queues, 8 managed reservations) and 40 NIC queues must come: 56, 8 too many.
    let cfg = PlacementConfig {
        vector_capacity: 12,
        ..PlacementConfig::default()
    };
    let p = plan_isolation(&m, &l("4-23"), &cfg, None).unwrap();
    assert_eq!(p.housekeeping, l("0-3"));
    // 40 NIC queues sit on 4-23 and every NIC mask names them: all 48 must leave or narrow.
    assert_eq!(p.must_leave.len(), 48);
    assert!(!p.vectors.fits);
    assert_eq!(p.vectors.available, 48);
    assert!(p.vectors.needed > 48, "{:?}", p.vectors);
    // Never over capacity on any housekeeping CPU, whatever does not fit stays and is named.
    assert!(p.vectors.fullest.unwrap().1 <= 12);
    assert!(
        p.decision
            .plan
            .notes
            .iter()
            .any(|n| n.contains("no allowed CPU has a free vector"))
    );
    assert_eq!((p.vectors.used_now, p.vectors.needed), (16, 56));
    assert_eq!(p.decision.stuck.len(), 8);
    // Cutting the first NIC to 4 combined channels frees 20 vectors: enough, the second
    // keeps its queues.
    assert_eq!(p.channels.len(), 1);
    assert!(
        p.channels
            .iter()
            .all(|c| c.recommended == 4 && c.combined && c.queues == 24)
    );
    assert!(p.fits_after_channels);
    assert!(matches!(
        &p.plan.actions[0],
        Action::SetChannels { device, combined: Some(4), rx: None, tx: None } if device == "ens1f0"
    ));
    assert_eq!(p.default_affinity, Some(l("0-3")));
    // Queues 4-23 of ens1f0 go with the cut: listed as removed, never written, and the rest
    // is planned without them, so everything left has a place.
    let removed: Vec<&Leaving> = p.must_leave.iter().filter(|x| x.removed).collect();
    assert_eq!(removed.len(), 20);
    assert!(
        removed
            .iter()
            .all(|x| x.to.is_none() && x.name.contains("ens1f0"))
    );
    assert!(
        p.must_leave
            .iter()
            .filter(|x| !x.removed)
            .all(|x| x.to.is_some())
    );
    let after = p.after_channels.as_ref().unwrap();
    assert!(after.stuck.is_empty());
    for a in &p.plan.actions {
        if let Action::SetAffinity { irq, .. } = a {
            assert!(!removed.iter().any(|x| x.irq == *irq), "{a:?}");
        }
    }
    assert!(p.plan.notes.iter().any(|n| n.contains("20 IRQs go away")));
    // Managed queues on 4-23: those whose pair includes 0-3 are steerable by managed_irq.
    assert_eq!(p.managed.len(), 20);
    assert_eq!(p.managed.iter().filter(|x| x.steerable).count(), 0);
    assert_eq!(
        p.cmdline,
        "isolcpus=managed_irq,domain,4-23 nohz_full=4-23 rcu_nocbs=4-23 irqaffinity=0-3"
    );
}

#[test]
fn fits_with_default_capacity_and_keeps_existing_isolation() {
    let mut m = rt_box();
    m.isolation.isolated = Some(l("22-23"));
    let p = plan_isolation(&m, &l("3-21"), &PlacementConfig::default(), None).unwrap();
    assert_eq!(p.housekeeping, l("0-2"));
    assert!(p.vectors.fits && p.channels.is_empty() && p.fits_after_channels);
    for leaving in &p.must_leave {
        let to = leaving.to.as_ref().expect("placed");
        assert!(to.is_subset(&l("0-2")), "{leaving:?}");
    }
    // A managed queue covering 2-3 can be steered to 2.
    assert!(
        p.managed
            .iter()
            .any(|x| x.steerable && x.mask == Some(l("2-3")))
    );
    assert_eq!(
        p.cmdline,
        "isolcpus=managed_irq,domain,3-23 nohz_full=3-23 rcu_nocbs=3-23 irqaffinity=0-2"
    );
    // With rates, the heavy queues are balanced over the housekeeping CPUs.
    let per: Vec<(IrqNum, f64)> = m.irqs.keys().map(|&i| (i, 5_000.0)).collect();
    let r = rates_for(&m, &per, true, 10.0);
    let p = plan_isolation(&m, &l("3-21"), &PlacementConfig::default(), Some(&r)).unwrap();
    let after = &p.decision.per_cpu_load_after;
    let hk: Vec<f64> = after
        .iter()
        .filter(|c| c.cpu.0 < 3)
        .map(|c| c.load)
        .collect();
    let (lo, hi) = (
        hk.iter().cloned().fold(f64::MAX, f64::min),
        hk.iter().cloned().fold(0.0, f64::max),
    );
    assert!(hi - lo < 0.2, "{hk:?}");
}

#[test]
fn an_unknown_default_affinity_is_left_alone_and_said() {
    let mut m = rt_box();
    let p = plan_isolation(&m, &l("4-23"), &PlacementConfig::default(), None).unwrap();
    assert_eq!(p.default_affinity, Some(l("0-3")));
    assert!(
        !p.plan
            .notes
            .iter()
            .any(|n| n.contains("default_smp_affinity"))
    );
    m.default_affinity = None;
    let p = plan_isolation(&m, &l("4-23"), &PlacementConfig::default(), None).unwrap();
    assert_eq!(p.default_affinity, None);
    assert!(
        !p.plan
            .actions
            .iter()
            .any(|a| matches!(a, Action::SetDefaultAffinity { .. }))
    );
    assert!(
        p.plan.notes.iter().any(|n| n.contains(
            "default_smp_affinity could not be read as a CPU mask: left alone; IRQs requested later may land on 4-23 (set it to 0-3 by hand)"
        )),
        "{:?}",
        p.plan.notes
    );
}

#[test]
fn refuses_impossible_requests() {
    let m = rt_box();
    assert!(matches!(
        plan_isolation(&m, &l("100-200"), &PlacementConfig::default(), None),
        Err(IsolationError::NothingToIsolate(_))
    ));
    assert!(matches!(
        plan_isolation(&m, &l("0-23"), &PlacementConfig::default(), None),
        Err(IsolationError::NoHousekeeping(_))
    ));
}

mod props {
    use super::common::{Shape, generate};
    use irqpilot_core::CpuSet;
    use irqpilot_core::isolation::plan::plan_isolation;
    use irqpilot_core::placement::{PlacementConfig, vectors_per_cpu};
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 150, ..ProptestConfig::default() })]

        /// Whatever leaves goes to a housekeeping CPU with room or is reported stuck; no
        /// housekeeping CPU ends over capacity; channel cuts appear only when it does not fit.
        #[test]
        fn isolation_plans_are_sound(
            cores in 2u32..=6, threads in 1u32..=2, devices in 0u32..=3, queues in 1u32..=12,
            cap in 2u32..=30, first in 0u32..4, seed in any::<u64>(),
        ) {
            let shape = Shape {
                nodes: 1, packages: 1, cores, threads, devices, queues,
                platform_irqs: 3, managed_queues: 2, isolate: false, time: true,
            };
            let s = generate(&shape, seed);
            let n = s.machine.topology.online.len() as u32;
            let cpus = CpuSet::range(first.min(n - 1).max(1), n - 1);
            let cfg = PlacementConfig { vector_capacity: cap, ..PlacementConfig::default() };
            let p = plan_isolation(&s.machine, &cpus, &cfg, Some(&s.rates)).unwrap();
            prop_assert!(!p.housekeeping.intersects(&cpus));
            let placing = p.after_channels.as_ref().unwrap_or(&p.decision);
            for l in &p.must_leave {
                match &l.to {
                    Some(to) => prop_assert!(to.is_subset(&p.housekeeping) && !l.removed),
                    None => prop_assert!(l.removed || placing.stuck.contains(&l.irq)),
                }
            }
            // No write names an IRQ a channel cut removes.
            for a in &p.plan.actions {
                if let irqpilot_core::Action::SetAffinity { irq, .. } = a {
                    prop_assert!(!p.must_leave.iter().any(|l| l.removed && l.irq == *irq));
                }
            }
            prop_assert_eq!(p.vectors.fits, p.decision.stuck.is_empty());
            // Cuts only when it does not fit; with nothing to cut it still does not fit.
            prop_assert!(p.channels.is_empty() || !p.vectors.fits);
            if !p.vectors.fits && p.channels.is_empty() {
                prop_assert!(!p.fits_after_channels);
            }
            let after = super::common::apply(&s.machine, &p.decision.plan, true);
            let before = vectors_per_cpu(&s.machine);
            for (cpu, v) in vectors_per_cpu(&after) {
                if p.housekeeping.contains(cpu) {
                    prop_assert!(v <= before[&cpu].max(cap));
                }
            }
            let want = format!("irqaffinity={}", p.housekeeping);
            prop_assert!(p.cmdline.contains(&want), "{}", p.cmdline);
        }
    }
}
