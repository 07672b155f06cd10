//! Tests of the search against its own objective (needs the private model), and of the
//! stateful policy.

use super::model::{BuildInput, Model};
use super::*;
use crate::ids::MonoNs;
use crate::irq::Irq;
use crate::machine::Machine;
use crate::plan::Outcome;
use crate::rates::{CpuRate, Rates, RowRate, RowStatus};
use crate::snapshot::RowLabel;
use crate::topology::Topology;
use proptest::prelude::*;

/// Per-CPU rates with no interrupts yet.
fn idle_cpus(cpus: &[CpuId]) -> Vec<CpuRate> {
    cpus.iter()
        .map(|&cpu| CpuRate {
            cpu,
            irq_per_sec: 0.0,
            arch_per_sec: 0.0,
            hardirq_pct: None,
            softirq_pct: None,
        })
        .collect()
}

/// Hardirq time at 10 us per interrupt, no softirq time.
fn account_10us(per_cpu: &mut [CpuRate]) {
    for c in per_cpu {
        c.hardirq_pct = Some(c.irq_per_sec * 1e-5 * 100.0);
        c.softirq_pct = Some(0.0);
    }
}

/// A machine with `n` IRQs at random CPUs (single-CPU masks) and random rates, time-accounted
/// at 10 us per interrupt.
fn random_machine(packages: u32, cores: u32, threads: u32, n: u32, seed: u64) -> (Machine, Rates) {
    let topo = Topology::synthetic(1, packages, cores, threads);
    let cpus: Vec<CpuId> = topo.online.iter().collect();
    let mut x = seed | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut m = Machine {
        topology: topo,
        ..Machine::default()
    };
    let mut per_cpu = idle_cpus(&cpus);
    let mut rows = Vec::new();
    for k in 0..n {
        let j = (next() % cpus.len() as u64) as usize;
        let mut irq = Irq::new(IrqNum(100 + k));
        irq.requested = Some(CpuSet::single(cpus[j]));
        irq.effective = Some(CpuSet::single(cpus[j]));
        m.irqs.insert(irq.irq, irq);
        let r = (next() % 40_000) as f64;
        let mut v = vec![0.0; cpus.len()];
        v[j] = r;
        per_cpu[j].irq_per_sec += r;
        rows.push(RowRate {
            label: RowLabel::Irq(IrqNum(100 + k)),
            per_cpu_per_sec: v,
            total_per_sec: r,
            status: RowStatus::Continuing,
            wraps: 0,
        });
    }
    account_10us(&mut per_cpu);
    let rates = Rates {
        cpus,
        per_cpu,
        rows,
        ..Rates::default()
    };
    (m, rates)
}

fn model_after(m: &Machine, r: &Rates, cfg: &PlacementConfig) -> Model {
    let d = decide(cfg, &Learned::default(), &input(m, Some(r)));
    let mut after = m.clone();
    for a in &d.plan.actions {
        if let Action::SetAffinity { irq, cpus } = a {
            let i = after.irqs.get_mut(irq).unwrap();
            i.requested = Some(cpus.clone());
            i.effective = Some(cpus.clone());
        }
    }
    build(&after, r, cfg)
}

fn build(m: &Machine, r: &Rates, cfg: &PlacementConfig) -> Model {
    let allowed = constraints::common_allowed(m, cfg);
    let rules = constraints::irq_rules(m, cfg, &allowed, &BTreeMap::new(), &mut Vec::new());
    Model::build(
        m,
        Some(r),
        &BuildInput {
            cfg,
            allowed: &allowed,
            rules: &rules,
            full_cpus: &BTreeSet::new(),
            refused_cpus: &BTreeMap::new(),
        },
    )
}

fn input<'a>(m: &'a Machine, r: Option<&'a Rates>) -> PolicyInput<'a> {
    PolicyInput {
        machine: m,
        rates: r,
        now: MonoNs(0),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 150, ..ProptestConfig::default() })]

    /// The incremental gain is the objective's exact change: moving L with gain g lowers Phi
    /// by 2 L g, computed from scratch.
    #[test]
    fn gain_matches_objective(p in 1u32..=3, c in 1u32..=4, t in 1u32..=2, n in 1u32..=30, seed in any::<u64>(), pick in any::<u64>()) {
        let (m, r) = random_machine(p, c, t, n, seed);
        let cfg = PlacementConfig::default();
        let mut model = build(&m, &r, &cfg);
        let i = (pick % model.irqs.len() as u64) as usize;
        let targets: Vec<usize> = model.targets(i).collect();
        prop_assume!(!targets.is_empty());
        let to = targets[(pick >> 32) as usize % targets.len()];
        let g = model.gain(i, to).unwrap();
        let l = model.irqs[i].load;
        let before = model.objective();
        model.move_irq(i, to as u32);
        model.resum();
        let after = model.objective();
        prop_assert!(((before - after) - 2.0 * l * g).abs() <= 1e-9 * before.max(1.0),
            "phi {before} -> {after}, 2Lg = {}", 2.0 * l * g);
    }

    /// The pruning bound is a bound: no IRQ costs less on any target than the floor says.
    #[test]
    fn arrival_floor_bounds_every_target(p in 1u32..=3, c in 1u32..=4, t in 1u32..=2, n in 1u32..=40, seed in any::<u64>()) {
        let (m, r) = random_machine(p, c, t, n, seed);
        let model = build(&m, &r, &PlacementConfig::default());
        let floor = model.arrival_floor();
        for i in 0..model.irqs.len() {
            let lb = model.arrival_lower_bound(&floor, i);
            for to in model.targets(i) {
                let cost = model.arrival_cost(i, to);
                prop_assert!(lb <= cost + 1e-12, "irq {i} -> {to}: bound {lb} > cost {cost}");
            }
        }
    }

    /// The result is a local optimum: no single move of a heavy IRQ to any allowed CPU with a
    /// free vector gains the tolerance (checked exhaustively, not with the search's own loop).
    #[test]
    fn result_is_a_local_optimum(p in 1u32..=3, c in 1u32..=4, t in 1u32..=2, n in 1u32..=40, seed in any::<u64>()) {
        let (m, r) = random_machine(p, c, t, n, seed);
        let cfg = PlacementConfig::default();
        let model = model_after(&m, &r, &cfg);
        for i in 0..model.irqs.len() {
            if !model.irqs[i].heavy {
                continue;
            }
            let h = model.irqs[i].pos.unwrap() as usize;
            let tol = model.tolerance(h, cfg.tolerance, cfg.tolerance_relative);
            for to in model.targets(i) {
                let g = model.gain(i, to).unwrap();
                prop_assert!(g < tol, "irq {} {} -> {}: gain {g} >= {tol}", model.irqs[i].irq, h, to);
            }
        }
    }
}

#[test]
fn kamble_four_heavy_nics_on_four_ht_packages() {
    // balancing.md 3.1 / seed 002: a 4-way HT P4 Xeon (4 packages x 1 core x 2 threads) with
    // four heavy NIC IRQs. Random rotation spreads them over 4 CPUs 3/16 of the time; the
    // policy puts one on each package every time, whatever the start.
    for start in 0..8u32 {
        let topo = Topology::synthetic(1, 4, 1, 2);
        let mut m = Machine {
            topology: topo.clone(),
            ..Machine::default()
        };
        let mut rows = Vec::new();
        let mut per_cpu: Vec<CpuRate> = topo
            .online
            .iter()
            .map(|cpu| CpuRate {
                cpu,
                irq_per_sec: 0.0,
                arch_per_sec: 0.0,
                hardirq_pct: None,
                softirq_pct: None,
            })
            .collect();
        for k in 0..4u32 {
            let mut i = Irq::new(IrqNum(20 + k));
            i.requested = Some(topo.online.clone());
            i.effective = Some(CpuSet::single(CpuId((start + k) % 2)));
            m.irqs.insert(i.irq, i);
            let mut v = vec![0.0; 8];
            v[((start + k) % 2) as usize] = 30_000.0;
            per_cpu[((start + k) % 2) as usize].irq_per_sec += 30_000.0;
            rows.push(RowRate {
                label: RowLabel::Irq(IrqNum(20 + k)),
                per_cpu_per_sec: v,
                total_per_sec: 30_000.0,
                status: RowStatus::Continuing,
                wraps: 0,
            });
        }
        let r = Rates {
            cpus: topo.online.iter().collect(),
            per_cpu,
            rows,
            ..Rates::default()
        };
        let d = decide(
            &PlacementConfig::default(),
            &Learned::default(),
            &input(&m, Some(&r)),
        );
        let mut pkgs: Vec<u32> = d
            .heavy
            .iter()
            .map(|h| topo.package_key(h.cpu.unwrap()))
            .collect();
        pkgs.sort_unstable();
        assert_eq!(pkgs, vec![0, 1, 2, 3], "start {start}: {:?}", d.heavy);
    }
}

#[test]
fn policy_learns_refusals_and_reports_facts_once() {
    let (mut m, r) = random_machine(1, 2, 1, 3, 7);
    // Everything on CPU 0, CPU 1 free: the policy wants to move something.
    for i in m.irqs.values_mut() {
        i.requested = Some(CpuSet::single(CpuId(0)));
        i.effective = Some(CpuSet::single(CpuId(0)));
    }
    let mut managed = Irq::new(IrqNum(500));
    managed.managed = Some(true);
    managed.requested = Some(CpuSet::range(0, 1));
    m.irqs.insert(managed.irq, managed);
    let rates = {
        let mut r = r;
        for row in &mut r.rows {
            let total = row.total_per_sec.max(20_000.0);
            row.per_cpu_per_sec = vec![total, 0.0];
            row.total_per_sec = total;
        }
        r.per_cpu[0].irq_per_sec = r.rows.iter().map(|x| x.total_per_sec).sum();
        r.per_cpu[1].irq_per_sec = 0.0;
        r.per_cpu[0].hardirq_pct = Some(r.per_cpu[0].irq_per_sec * 1e-3);
        r
    };
    let mut p = PlacementPolicy::new(PlacementConfig::default()).unwrap();
    let plan = Policy::decide(&mut p, &input(&m, Some(&rates)));
    assert!(!plan.actions.is_empty());
    assert_eq!(
        plan.notes
            .iter()
            .filter(|n| n.contains("kernel-managed"))
            .count(),
        1
    );
    assert_eq!(p.next_interval_ns(), Some(1_000_000_000));
    // The kernel refuses every write as managed (a read-only file on a newer kernel): each
    // IRQ is tried once, never again, and the refusal is one new fact.
    let mut tried: BTreeSet<IrqNum> = BTreeSet::new();
    let mut plan = plan;
    let mut refusal_notes = 0;
    for _ in 0..10 {
        for a in &plan.actions {
            if let Action::SetAffinity { irq, .. } = a {
                assert!(tried.insert(*irq), "IRQ {irq} retried");
            }
        }
        let report = ApplyReport {
            outcomes: plan
                .actions
                .iter()
                .map(|a| Outcome {
                    action: a.clone(),
                    old: Some("0".into()),
                    result: Err(ApplyError::Managed),
                })
                .collect(),
        };
        p.observe(&report);
        plan = Policy::decide(&mut p, &input(&m, Some(&rates)));
        refusal_notes += plan
            .notes
            .iter()
            .filter(|n| n.contains("refused by the kernel"))
            .count();
        assert!(
            !plan
                .notes
                .iter()
                .any(|n| n.contains("kernel-managed affinity, left"))
        );
        if plan.actions.is_empty() {
            break;
        }
    }
    assert!(plan.actions.is_empty());
    assert!(refusal_notes >= 1);
    let plan3 = Policy::decide(&mut p, &input(&m, Some(&rates)));
    assert!(plan3.notes.is_empty(), "{:?}", plan3.notes);
    // Steady: the period grows.
    assert!(p.next_interval_ns().unwrap() > 1_000_000_000);
}

#[test]
fn enospc_marks_a_cpu_full_until_irqs_change() {
    let mut l = Learned::default();
    l.observe(&ApplyReport {
        outcomes: vec![Outcome {
            action: Action::SetAffinity {
                irq: IrqNum(40),
                cpus: CpuSet::single(CpuId(3)),
            },
            old: None,
            result: Err(ApplyError::NoVectorSpace),
        }],
    });
    assert!(l.full_cpus.contains(&CpuId(3)));
    let mut m = Machine::default();
    m.irqs.insert(IrqNum(40), Irq::new(IrqNum(40)));
    l.prune(&m);
    assert!(
        l.full_cpus.is_empty(),
        "first prune records the fingerprint and clears"
    );
    l.full_cpus.insert(CpuId(3));
    l.prune(&m);
    assert!(l.full_cpus.contains(&CpuId(3)), "same IRQs: still full");
    m.irqs.insert(IrqNum(41), Irq::new(IrqNum(41)));
    l.prune(&m);
    assert!(l.full_cpus.is_empty(), "an IRQ came: vectors changed");
}

/// A machine whose IRQ 41 is registered (on an isolated CPU) after the first period.
struct Growing {
    now: u64,
    machine: Machine,
    late: Irq,
    writes: Vec<(IrqNum, CpuSet)>,
}

impl crate::platform::Platform for Growing {
    fn machine(&mut self) -> Result<Machine, crate::platform::PlatformError> {
        Ok(self.machine.clone())
    }
    fn snapshot_into(
        &mut self,
        s: &mut crate::snapshot::Snapshot,
    ) -> Result<(), crate::platform::PlatformError> {
        use crate::snapshot::InterruptTable;
        let cpus: Vec<CpuId> = self.machine.topology.online.iter().collect();
        let mut t = InterruptTable::with_kernel_header(cpus.clone(), 3);
        for irq in self.machine.irqs.values() {
            let counts: Vec<u64> = cpus.iter().map(|_| self.now / 1_000_000).collect();
            t.push_kernel_row(RowLabel::Irq(irq.irq), 3, &counts, " x");
        }
        s.interrupts = t;
        s.taken_at = MonoNs(self.now);
        Ok(())
    }
    fn apply(&mut self, plan: &Plan) -> ApplyReport {
        let mut outcomes = Vec::new();
        for a in &plan.actions {
            if let Action::SetAffinity { irq, cpus } = a {
                self.writes.push((*irq, cpus.clone()));
                if let Some(i) = self.machine.irqs.get_mut(irq) {
                    i.requested = Some(cpus.clone());
                    i.effective = Some(cpus.clone());
                }
            }
            outcomes.push(Outcome {
                action: a.clone(),
                old: None,
                result: Ok(true),
            });
        }
        ApplyReport { outcomes }
    }
    fn now(&mut self) -> MonoNs {
        MonoNs(self.now)
    }
    fn sleep(&mut self, ns: u64) {
        self.now += ns;
        if self.now >= 2_500_000_000 && !self.machine.irqs.contains_key(&self.late.irq) {
            self.machine.irqs.insert(self.late.irq, self.late.clone());
        }
    }
}

#[test]
fn new_irqs_are_placed_the_period_they_appear() {
    let topo = Topology::synthetic(1, 1, 4, 1);
    let mut m = Machine {
        topology: topo.clone(),
        ..Machine::default()
    };
    m.isolation.isolated = Some(CpuSet::range(2, 3));
    let mut first = Irq::new(IrqNum(40));
    first.requested = Some(CpuSet::single(CpuId(0)));
    first.effective = Some(CpuSet::single(CpuId(0)));
    m.irqs.insert(first.irq, first);
    let mut late = Irq::new(IrqNum(41));
    late.requested = Some(CpuSet::range(0, 3));
    late.effective = Some(CpuSet::single(CpuId(3)));
    let mut p = Growing {
        now: 0,
        machine: m,
        late,
        writes: Vec::new(),
    };
    let mut pol = PlacementPolicy::new(PlacementConfig::default()).unwrap();
    let reports =
        crate::control::run_adaptive(&mut p, &mut [&mut pol], 1_000_000_000, 6_000_000_000)
            .unwrap();
    // The IRQ appeared at 2.5 s; the first period after that moved it off CPU 3.
    let at = reports
        .iter()
        .position(|r| r.applied.written() > 0)
        .expect("placed");
    assert!(reports[at].refreshed_inventory);
    assert!(reports[at].at.0 >= 2_500_000_000);
    assert!(
        at == 0 || reports[at - 1].at.0 < 2_500_000_000,
        "not the first period after"
    );
    assert_eq!(p.writes.len(), 1);
    assert_eq!(p.writes[0].0, IrqNum(41));
    assert!(p.writes[0].1.is_subset(&CpuSet::range(0, 1)));
}

/// Two queues of `eth0` (NUMA node 1) under load, on node 1. Alone they stay near the device;
/// with the consuming application on node 0 they move next to it (its last-level cache), and
/// an application entry for another device changes nothing.
#[test]
fn queues_follow_their_application_across_nodes() {
    use crate::queue::{NamingScheme, Queue, QueueKind};
    let topo = Topology::synthetic(2, 2, 4, 1);
    let mut m = Machine {
        topology: topo.clone(),
        ..Machine::default()
    };
    let cpus: Vec<CpuId> = topo.online.iter().collect();
    let mut per_cpu = idle_cpus(&cpus);
    let mut rows = Vec::new();
    for k in 0..2u32 {
        let at = CpuId(4 + k);
        let mut i = Irq::new(IrqNum(40 + k));
        i.node = Some(crate::ids::NodeId(1));
        i.queue = Some(Queue {
            kind: QueueKind::TxRx,
            index: Some(k),
            owner: "eth0".into(),
            scheme: NamingScheme::I40e,
        });
        i.requested = Some(CpuSet::single(at));
        i.effective = Some(CpuSet::single(at));
        m.irqs.insert(i.irq, i);
        let mut v = vec![0.0; cpus.len()];
        v[at.0 as usize] = 20_000.0;
        per_cpu[at.0 as usize].irq_per_sec += 20_000.0;
        rows.push(RowRate {
            label: RowLabel::Irq(IrqNum(40 + k)),
            per_cpu_per_sec: v,
            total_per_sec: 20_000.0,
            status: RowStatus::Continuing,
            wraps: 0,
        });
    }
    account_10us(&mut per_cpu);
    let r = Rates {
        cpus: cpus.clone(),
        per_cpu,
        rows,
        ..Rates::default()
    };
    let placed = |cfg: &PlacementConfig| -> Vec<CpuId> {
        let d = decide(cfg, &Learned::default(), &input(&m, Some(&r)));
        d.heavy.iter().map(|h| h.cpu.unwrap()).collect()
    };
    let node_of = |cfg: &PlacementConfig| -> Vec<u32> {
        placed(cfg).iter().map(|c| topo.package_key(*c)).collect()
    };
    assert_eq!(node_of(&PlacementConfig::default()), vec![1, 1]);
    let app = |device: &str, cpus: &str| PlacementConfig {
        applications: vec![Application {
            device: device.into(),
            cpus: CpuSet::parse_list(cpus).unwrap(),
            process: None,
        }],
        ..PlacementConfig::default()
    };
    // Next to the application (CPUs 2-3 share its cache), not on it.
    let mut near = placed(&app("eth0", "0-1"));
    near.sort_unstable();
    assert_eq!(near, vec![CpuId(2), CpuId(3)]);
    assert_eq!(node_of(&app("eth1", "0-1")), vec![1, 1]);
    // An application on every CPU of its cache: the IRQs stay near the device.
    assert_eq!(node_of(&app("eth0", "0-3")), vec![1, 1]);
    let bad = PlacementConfig {
        applications: vec![Application {
            device: "eth0".into(),
            cpus: CpuSet::new(),
            process: None,
        }],
        ..PlacementConfig::default()
    };
    assert!(
        bad.validate()
            .unwrap_err()
            .to_string()
            .contains("applications[0]")
    );
}
