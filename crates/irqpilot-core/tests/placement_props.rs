//! Property tests of the placement policy's rules (issue 5, docs/placement.md): generated
//! topologies, layouts and rates; each property is one rule.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Scenario, Shape, apply, follow, generate, rates_for};
use irqpilot_core::placement::{
    Decision, Learned, MoveReason, PlacementConfig, decide, vectors_per_cpu,
};
use irqpilot_core::{
    Action, CpuId, CpuSet, Irq, IrqNum, Machine, MonoNs, PciAddr, PciDevice, PolicyInput, Rates,
    Topology,
};
use proptest::prelude::*;

fn run(m: &Machine, r: Option<&Rates>, cfg: &PlacementConfig) -> Decision {
    decide(
        cfg,
        &Learned::default(),
        &PolicyInput {
            machine: m,
            rates: r,
            now: MonoNs(0),
        },
    )
}

fn shapes() -> impl Strategy<Value = (Shape, u64)> {
    (
        1u32..=2,
        1u32..=3,
        1u32..=5,
        1u32..=2,
        0u32..=3,
        1u32..=10,
        0u32..=4,
        0u32..=6,
        any::<bool>(),
        any::<bool>(),
        any::<u64>(),
    )
        .prop_map(
            |(
                nodes,
                packages,
                cores,
                threads,
                devices,
                queues,
                platform,
                managed,
                isolate,
                time,
                seed,
            )| {
                (
                    Shape {
                        nodes: nodes.min(packages),
                        packages,
                        cores,
                        threads,
                        devices,
                        queues,
                        platform_irqs: platform,
                        managed_queues: managed,
                        isolate,
                        time,
                    },
                    seed,
                )
            },
        )
}

fn configs() -> impl Strategy<Value = PlacementConfig> {
    (prop_oneof![Just(200u32), 2u32..=6], any::<bool>(), 0u32..4).prop_map(|(cap, ban, pin)| {
        let mut c = PlacementConfig {
            vector_capacity: cap,
            ..PlacementConfig::default()
        };
        if ban {
            c.ban_cpus = CpuSet::single(CpuId(1));
            c.ban_irqs = vec![IrqNum(25)];
        }
        if pin > 0 {
            c.pin.push(irqpilot_core::placement::Pin {
                irq: None,
                device: Some("eth0".into()),
                name: None,
                cpus: CpuSet::range(0, pin),
            });
        }
        c
    })
}

/// The CPU where the policy's model says an IRQ is delivered (same rule as the policy).
fn delivered(i: &Irq) -> Option<CpuId> {
    let eff = i.effective.as_ref()?;
    match &i.requested {
        Some(r) if !eff.is_subset(r) && r.len() == 1 => r.first(),
        _ => eff.first(),
    }
}

fn allowed_for(m: &Machine, cfg: &PlacementConfig, irq: &Irq) -> CpuSet {
    let base = m
        .housekeeping()
        .intersection(&m.topology.online)
        .difference(&cfg.ban_cpus);
    let pinned = cfg.pin.iter().find(|p| {
        p.device.as_deref() == Some("eth0") && irq.actions.iter().any(|a| a.starts_with("eth0-"))
    });
    match pinned.map(|p| p.cpus.intersection(&base)) {
        Some(s) if !s.is_empty() => s,
        _ => base,
    }
}

fn untouchable(cfg: &PlacementConfig, irq: &Irq) -> bool {
    irq.managed == Some(true) || cfg.ban_irqs.contains(&irq.irq)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Every planned mask is one online, housekeeping, unbanned CPU inside the IRQ's pin, and
    /// never for a managed or banned IRQ.
    #[test]
    fn masks_are_single_allowed_cpus((shape, seed) in shapes(), cfg in configs()) {
        let Scenario { machine: m, rates } = generate(&shape, seed);
        let d = run(&m, Some(&rates), &cfg);
        for a in &d.plan.actions {
            match a {
                Action::SetAffinity { irq, cpus } => {
                    let i = &m.irqs[irq];
                    prop_assert!(!untouchable(&cfg, i), "touched held IRQ {irq}");
                    prop_assert_eq!(cpus.len(), 1);
                    let allowed = allowed_for(&m, &cfg, i);
                    prop_assert!(cpus.is_subset(&allowed), "irq {} -> {} not in {}", irq, cpus, allowed);
                }
                Action::SetDefaultAffinity { cpus } => {
                    prop_assert!(!cpus.is_empty());
                    prop_assert!(cpus.is_subset(&m.housekeeping()));
                }
                other => prop_assert!(false, "unexpected action {other:?}"),
            }
        }
        let mut irqs: Vec<IrqNum> = d.moves.iter().map(|mv| mv.irq).collect();
        irqs.dedup();
        prop_assert_eq!(irqs.len(), d.moves.len(), "one write per IRQ");
    }

    /// After applying, no movable IRQ is delivered to, or may be moved by the kernel to, a CPU
    /// it may not use: device IRQs leave isolated CPUs (unless no vector is free anywhere, which
    /// the decision reports as stuck).
    #[test]
    fn isolated_cpus_are_left_clean((shape, seed) in shapes(), cfg in configs()) {
        let Scenario { machine: m, rates } = generate(&shape, seed);
        let d = run(&m, Some(&rates), &cfg);
        if d.allowed.is_empty() {
            // Isolation and bans left nothing: nothing may be placed, and the plan says so.
            prop_assert!(d.plan.actions.is_empty());
            prop_assert!(d.plan.notes.iter().any(|n| n.contains("no online housekeeping CPU")));
            return Ok(());
        }
        let after = apply(&m, &d.plan, true);
        for i in after.irqs.values() {
            if untouchable(&cfg, i) || d.stuck.contains(&i.irq) {
                continue;
            }
            let allowed = allowed_for(&m, &cfg, i);
            prop_assert!(i.requested.as_ref().is_some_and(|r| r.is_subset(&allowed)),
                "irq {} mask {:?} outside {}", i.irq, i.requested, allowed);
            prop_assert!(delivered(i).is_some_and(|c| allowed.contains(c)));
        }
        if !d.stuck.is_empty() {
            prop_assert!(d.plan.notes.iter().any(|n| n.contains("no allowed CPU has a free vector")));
        }
    }

    /// Sticky: deciding again on the machine after applying its own plan (same rates) is a
    /// no-op, whether the kernel moved the IRQs at once or (a fixture) never did.
    #[test]
    fn deciding_again_is_a_no_op((shape, seed) in shapes(), cfg in configs(), kernel in any::<bool>()) {
        let Scenario { machine: m, rates } = generate(&shape, seed);
        let d = run(&m, Some(&rates), &cfg);
        let after = apply(&m, &d.plan, kernel);
        let again = run(&after, Some(&rates), &cfg);
        prop_assert!(again.plan.actions.is_empty(), "second plan {:?}", again.moves);
        // Also when the next period measures the IRQs where they now are (counts basis: the
        // per-IRQ loads are the same numbers).
        if !shape.time {
            let r2 = follow(&after, &rates, false, 10.0);
            let again = run(&after, Some(&r2), &cfg);
            prop_assert!(again.plan.actions.is_empty(), "with re-measured rates {:?}", again.moves);
        }
    }

    /// Never more vectors on a CPU than its capacity (a CPU already over it takes nothing).
    #[test]
    fn vector_capacity_is_respected((shape, seed) in shapes(), cfg in configs()) {
        let Scenario { machine: m, rates } = generate(&shape, seed);
        let before = vectors_per_cpu(&m);
        let d = run(&m, Some(&rates), &cfg);
        let after = vectors_per_cpu(&apply(&m, &d.plan, true));
        for (cpu, v) in &after {
            prop_assert!(*v <= before[cpu].max(cfg.vector_capacity),
                "cpu {cpu}: {} -> {v} vectors, capacity {}", before[cpu], cfg.vector_capacity);
            let gained = d.moves.iter().any(|mv| mv.to.contains(*cpu) && mv.from != mv.to);
            if gained {
                prop_assert!(*v <= cfg.vector_capacity);
            }
        }
    }

    /// Deterministic, and managed IRQs are one fact, never an action.
    #[test]
    fn deterministic_and_managed_reported_once((shape, seed) in shapes(), cfg in configs()) {
        let Scenario { machine: m, rates } = generate(&shape, seed);
        let a = run(&m, Some(&rates), &cfg);
        let b = run(&m, Some(&rates), &cfg);
        prop_assert_eq!(&a, &b);
        let managed = m.irqs.values().filter(|i| i.managed == Some(true)).count();
        let notes = a.plan.notes.iter().filter(|n| n.contains("kernel-managed")).count();
        prop_assert_eq!(notes, usize::from(managed > 0));
    }

    /// Light IRQs are never moved for balance, only to satisfy the rules.
    #[test]
    fn light_irqs_only_move_when_required((shape, seed) in shapes(), cfg in configs()) {
        let Scenario { machine: m, rates } = generate(&shape, seed);
        let d = run(&m, Some(&rates), &cfg);
        for mv in &d.moves {
            if mv.load < cfg.heavy_min_load {
                prop_assert_ne!(mv.reason, MoveReason::Balance, "light irq {} balanced", mv.irq);
            }
        }
        // Without rates there is no load: nothing moves for balance at all.
        let d = run(&m, None, &cfg);
        prop_assert!(d.moves.iter().all(|mv| mv.reason != MoveReason::Balance));
    }

    /// Heavy sources spread over packages first, then cores, then SMT siblings: k equal heavy
    /// IRQs piled on one CPU end on min(k, packages) packages, min(k, cores) cores and
    /// min(k, cpus) CPUs, on a machine whose packages are alike.
    #[test]
    fn spread_packages_then_cores_then_threads(
        packages in 1u32..=4, cores in 1u32..=4, threads in 1u32..=2, k in 1u32..=20,
        start in any::<u64>(),
    ) {
        let topo = Topology::synthetic(1, packages, cores, threads);
        let cpus: Vec<CpuId> = topo.online.iter().collect();
        let first = cpus[(start % cpus.len() as u64) as usize];
        let mut m = Machine { topology: topo.clone(), ..Machine::default() };
        let mut rate = Vec::new();
        for n in 0..k {
            let mut i = Irq::new(IrqNum(100 + n));
            i.actions = vec![format!("src{n}")];
            i.requested = Some(topo.online.clone());
            i.effective = Some(CpuSet::single(first));
            m.irqs.insert(i.irq, i);
            rate.push((IrqNum(100 + n), 20_000.0));
        }
        // 20k/s at 10 us each: 0.2 CPU per IRQ.
        let rates = rates_for(&m, &rate, true, 10.0);
        let cfg = PlacementConfig::default();
        let d = run(&m, Some(&rates), &cfg);
        let after = apply(&m, &d.plan, true);
        let at: Vec<CpuId> = after.irqs.values().filter_map(|i| i.effective.as_ref()?.first()).collect();
        let distinct = |key: &dyn Fn(CpuId) -> u32| {
            let mut v: Vec<u32> = at.iter().map(|&c| key(c)).collect();
            v.sort_unstable();
            v.dedup();
            v.len() as u32
        };
        prop_assert_eq!(distinct(&|c| topo.package_key(c)), k.min(packages));
        prop_assert_eq!(distinct(&|c| topo.core_key(c).0), k.min(packages * cores));
        prop_assert_eq!(distinct(&|c| c.0), k.min(packages * cores * threads));
        // And evenly: no package holds more than its share rounded up.
        for p in 0..packages {
            let n = at.iter().filter(|&&c| topo.package_key(c) == p).count() as u32;
            prop_assert!(n <= k.div_ceil(packages), "package {p} holds {n} of {k}");
        }
    }

    /// A device's queues go to its NUMA-local CPUs, one per core, while those have room.
    #[test]
    fn device_queues_local_one_per_core(cores in 2u32..=6, threads in 1u32..=2, q in 1u32..=6, remote_start in any::<bool>()) {
        let topo = Topology::synthetic(2, 2, cores, threads);
        let node1 = topo.nodes[&irqpilot_core::NodeId(1)].clone();
        let node0 = topo.nodes[&irqpilot_core::NodeId(0)].clone();
        let q = q.min(cores);
        let mut m = Machine { topology: topo.clone(), ..Machine::default() };
        let addr = PciAddr("0000:86:00.0".into());
        let mut dev = PciDevice::new(addr.clone());
        dev.local_cpus = Some(node1.clone());
        dev.numa_node = Some(irqpilot_core::NodeId(1));
        dev.net = vec!["eth7".into()];
        m.devices.insert(addr.clone(), dev);
        let start = if remote_start { node0.first() } else { node1.first() };
        let mut rate = Vec::new();
        for n in 0..q {
            let mut i = Irq::new(IrqNum(200 + n));
            let name = format!("eth7-TxRx-{n}");
            i.queue = irqpilot_core::queue::recognise(&name);
            i.actions = vec![name];
            i.device = Some(addr.clone());
            i.requested = Some(topo.online.clone());
            i.effective = start.map(CpuSet::single);
            m.irqs.insert(i.irq, i);
            rate.push((IrqNum(200 + n), 10_000.0));
        }
        let rates = rates_for(&m, &rate, true, 10.0);
        let d = run(&m, Some(&rates), &PlacementConfig::default());
        let after = apply(&m, &d.plan, true);
        let mut cores_used = Vec::new();
        for i in after.irqs.values() {
            let c = delivered(i).unwrap();
            prop_assert!(node1.contains(c), "irq {} on remote cpu {c}", i.irq);
            cores_used.push(topo.core_key(c));
        }
        cores_used.sort();
        cores_used.dedup();
        prop_assert_eq!(cores_used.len() as u32, q);
    }

    /// No move while balanced within the tolerance: one heavy IRQ per CPU with loads a little
    /// apart stays where it is, and repeated periods never rotate anything.
    #[test]
    fn balanced_layout_stays(packages in 1u32..=2, cores in 1u32..=4, threads in 1u32..=2, seed in any::<u64>()) {
        let topo = Topology::synthetic(1, packages, cores, threads);
        let mut rng = common::Rng(seed);
        let mut m = Machine { topology: topo.clone(), ..Machine::default() };
        let mut rate = Vec::new();
        for (n, c) in topo.online.iter().enumerate() {
            let mut i = Irq::new(IrqNum(300 + n as u32));
            i.actions = vec![format!("q{n}")];
            i.requested = Some(CpuSet::single(c));
            i.effective = Some(CpuSet::single(c));
            m.irqs.insert(i.irq, i);
            // 0.3 CPU each, +-0.2% noise.
            rate.push((IrqNum(300 + n as u32), 30_000.0 * (1.0 + (rng.unit() - 0.5) * 0.004)));
        }
        let rates = rates_for(&m, &rate, true, 10.0);
        let cfg = PlacementConfig::default();
        let mut cur = m;
        for _ in 0..3 {
            let d = run(&cur, Some(&rates), &cfg);
            prop_assert!(d.plan.actions.is_empty(), "moved {:?}", d.moves);
            cur = apply(&cur, &d.plan, true);
        }
    }
}

/// The objective decreases and deciding on a pile-up spreads it, at 256 CPUs too.
#[test]
fn big_machine_pile_up_spreads_and_settles() {
    let topo = Topology::synthetic(2, 2, 64, 2);
    let mut m = Machine {
        topology: topo.clone(),
        ..Machine::default()
    };
    let mut rate = Vec::new();
    for n in 0..512u32 {
        let mut i = Irq::new(IrqNum(1000 + n));
        i.actions = vec![format!("x{n}")];
        i.requested = Some(topo.online.clone());
        i.effective = Some(CpuSet::single(CpuId(0)));
        m.irqs.insert(i.irq, i);
        rate.push((IrqNum(1000 + n), 1_000.0 + f64::from(n % 17) * 500.0));
    }
    let rates = rates_for(&m, &rate, false, 10.0);
    let cfg = PlacementConfig {
        interrupt_cost_us: 10.0,
        ..PlacementConfig::default()
    };
    let d = run(&m, Some(&rates), &cfg);
    assert!(d.objective_after < d.objective_before / 10.0);
    assert!(d.imbalance_after.unwrap() < 1.5, "{:?}", d.imbalance_after);
    let after = apply(&m, &d.plan, true);
    assert!(run(&after, Some(&rates), &cfg).plan.actions.is_empty());
}

/// Empty and degenerate inputs do not panic.
#[test]
fn degenerate_inputs() {
    let cfg = PlacementConfig::default();
    let empty = Machine::default();
    let d = run(&empty, None, &cfg);
    assert!(d.plan.actions.is_empty());
    let d = run(&empty, Some(&Rates::default()), &cfg);
    assert!(d.plan.actions.is_empty());
    // Rates naming CPUs and IRQs the inventory does not know, NaN and infinite rates.
    let mut m = Machine {
        topology: Topology::synthetic(1, 1, 2, 1),
        ..Machine::default()
    };
    let mut i = Irq::new(IrqNum(30));
    i.requested = Some(CpuSet::range(0, 1));
    m.irqs.insert(i.irq, i);
    let mut r = rates_for(&m, &[(IrqNum(30), 5.0), (IrqNum(99), 7.0)], true, 10.0);
    r.cpus.push(CpuId(4000));
    r.per_cpu.push(irqpilot_core::CpuRate {
        cpu: CpuId(4000),
        irq_per_sec: f64::INFINITY,
        arch_per_sec: 0.0,
        hardirq_pct: Some(f64::NAN),
        softirq_pct: None,
    });
    for row in &mut r.rows {
        row.per_cpu_per_sec.push(f64::NAN);
    }
    let d = run(&m, Some(&r), &cfg);
    assert!(d.per_cpu_load_after.iter().all(|c| c.load.is_finite()));
    // Everything isolated: housekeeping falls back to all online CPUs, never an empty mask.
    m.isolation.isolated = Some(CpuSet::range(0, 1));
    let d = run(&m, Some(&r), &cfg);
    for a in &d.plan.actions {
        if let Action::SetAffinity { cpus, .. } = a {
            assert!(!cpus.is_empty());
        }
    }
}
