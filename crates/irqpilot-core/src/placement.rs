//! The placement policy: where each IRQ is delivered.
//!
//! [`decide`] is the pure core: machine + rates + configuration + what the kernel refused
//! before ([`Learned`]) in, a [`Decision`] (with its [`Plan`]) out. [`PlacementPolicy`] wraps
//! it as a [`Policy`] for [`crate::Controller`]: it learns from apply reports, reports each
//! fact once, and adapts its period. The algorithm and its math are in `docs/placement.md`.
//!
//! In short: loads come from the CPUs' interrupt time shared by rate ([`load`]); IRQs the
//! rules forbid where they are (isolated, banned or offline CPUs, pins) move first; then heavy
//! IRQs move while a move lowers a quadratic objective over CPU, core, cache, package and
//! per-device-per-core loads, with a NUMA penalty, by at least the tolerance (module `spread`);
//! never onto a CPU without a free vector ([`capacity`]); never a managed or banned IRQ. Masks
//! are single CPUs: x86 delivers to one CPU anyway (balancing.md 5.7).

mod balance;
pub mod capacity;
pub mod config;
pub mod constraints;
pub mod decision;
pub mod interval;
pub mod load;
mod model;
mod spread;

#[cfg(test)]
mod tests;

pub use capacity::vectors_per_cpu;
pub use config::{Application, Pin, PlacementConfig, PlacementConfigError};
pub use constraints::{Hold, check_glob, glob_match};
pub use decision::{CpuLoad, Decision, HeavyIrq, Held, Move, MoveReason, irq_list};
pub use interval::AdaptiveInterval;
pub use load::LoadBasis;

use crate::cpuset::CpuSet;
use crate::ids::{CpuId, IrqNum};
use crate::plan::{Action, ApplyError, ApplyReport, Plan};
use crate::policy::{Policy, PolicyInput};
use balance::Why;
use model::{BuildInput, Model};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// What the kernel refused before: never retried (balancing.md 8.1-8.2).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Learned {
    /// IRQs whose affinity writes fail permanently (EIO/EPERM managed, EACCES on a read-only
    /// file, EOPNOTSUPP, a mask the kernel silently did not take), with why.
    pub refused: BTreeMap<IrqNum, String>,
    /// CPUs that answered ENOSPC: no more IRQs go there until IRQs come or go.
    pub full_cpus: BTreeSet<CpuId>,
    /// CPUs the kernel refused for one IRQ (EINVAL).
    pub refused_cpus: BTreeMap<IrqNum, CpuSet>,
    /// A fingerprint of the IRQ numbers seen last, to notice IRQs coming and going.
    fingerprint: (usize, u64),
}

impl Learned {
    /// Takes the lessons of one apply report.
    pub fn observe(&mut self, report: &ApplyReport) {
        for o in &report.outcomes {
            let (Action::SetAffinity { irq, cpus }, Err(e)) = (&o.action, &o.result) else {
                continue;
            };
            let why = match e {
                ApplyError::Vanished => continue,
                ApplyError::NoVectorSpace => {
                    self.full_cpus.extend(cpus.iter());
                    continue;
                }
                ApplyError::Invalid => {
                    self.refused_cpus
                        .entry(*irq)
                        .or_default()
                        .extend(cpus.iter());
                    continue;
                }
                ApplyError::Managed => "kernel-managed affinity (EIO/EPERM)".to_string(),
                ApplyError::PermissionDenied => "permission denied (EACCES)".to_string(),
                ApplyError::Unsupported => "not supported (EOPNOTSUPP)".to_string(),
                ApplyError::NotTaken { readback } => format!("the kernel kept {readback}"),
                ApplyError::LeftAlone { reason } => reason.clone(),
                ApplyError::Other { message } => message.clone(),
            };
            self.refused.insert(*irq, why);
        }
    }

    /// Forgets what no longer applies: IRQs that are gone (their number may be reused), and
    /// full CPUs once IRQs came or went (vectors were freed or taken).
    fn prune(&mut self, machine: &crate::Machine) {
        self.refused.retain(|n, _| machine.irqs.contains_key(n));
        self.refused_cpus
            .retain(|n, _| machine.irqs.contains_key(n));
        let fp = machine.irqs.keys().fold((0usize, 0u64), |(n, h), k| {
            (n + 1, h.rotate_left(5) ^ u64::from(k.0))
        });
        if fp != self.fingerprint {
            self.full_cpus.clear();
            self.fingerprint = fp;
        }
    }
}

fn reason(w: Why) -> MoveReason {
    match w {
        Why::Isolation => MoveReason::Isolation,
        Why::BannedCpu => MoveReason::BannedCpu,
        Why::Pin => MoveReason::Pin,
        Why::Unplaced => MoveReason::Unplaced,
        Why::Narrow => MoveReason::Narrow,
        Why::Balance => MoveReason::Balance,
    }
}

fn cpu_loads(m: &Model) -> Vec<CpuLoad> {
    m.per_cpu_load()
        .into_iter()
        .zip(&m.vectors)
        .zip(&m.cpus)
        .map(|(((cpu, load), &vectors), c)| CpuLoad {
            cpu,
            load,
            vectors,
            allowed: c.allowed,
        })
        .collect()
}

fn imbalance(loads: &[CpuLoad]) -> Option<f64> {
    let v: Vec<f64> = loads.iter().filter(|c| c.allowed).map(|c| c.load).collect();
    crate::rates::imbalance(&v)
}

/// Decides where IRQs go: the pure core of the placement policy (no state, no I/O).
pub fn decide(cfg: &PlacementConfig, learned: &Learned, input: &PolicyInput<'_>) -> Decision {
    let machine = input.machine;
    let mut notes = Vec::new();
    let allowed = constraints::common_allowed(machine, cfg);
    let rules = constraints::irq_rules(machine, cfg, &allowed, &learned.refused, &mut notes);
    let mut m = Model::build(
        machine,
        input.rates,
        &BuildInput {
            cfg,
            allowed: &allowed,
            rules: &rules,
            full_cpus: &learned.full_cpus,
            refused_cpus: &learned.refused_cpus,
        },
    );
    let before = cpu_loads(&m);
    let objective_before = m.objective();
    let rep = if allowed.is_empty() {
        notes.push("no online housekeeping CPU is left after bans: nothing is placed".into());
        balance::SearchReport::default()
    } else {
        balance::search(&mut m, cfg, &cfg.ban_cpus)
    };
    let after = cpu_loads(&m);

    let mut plan = Plan::default();
    let mut moves = Vec::new();
    for (i, s) in m.irqs.iter().enumerate() {
        let mut why = rep.why.get(i).copied().flatten();
        let Some(p) = s.pos else { continue };
        let moved = s.pos != s.home;
        let narrow = rep.narrow.get(i).copied().unwrap_or(false);
        if !moved {
            if !narrow {
                continue;
            }
            // Balanced away and back: what is left is the narrowing.
            why = Some(Why::Narrow);
        }
        let to = CpuSet::single(m.cpus[p as usize].id);
        let mask_before = machine.irqs.get(&s.irq).and_then(|i| i.requested.clone());
        if !moved && mask_before.as_ref() == Some(&to) {
            continue;
        }
        plan.actions.push(Action::SetAffinity {
            irq: s.irq,
            cpus: to.clone(),
        });
        moves.push(Move {
            irq: s.irq,
            from: s
                .home
                .map(|h| CpuSet::single(m.cpus[h as usize].id))
                .unwrap_or_default(),
            to,
            mask_before,
            load: s.load,
            reason: why.map_or(MoveReason::Balance, reason),
        });
    }
    if cfg.manage_default_affinity && !allowed.is_empty() {
        let forbidden = machine.topology.online.difference(&allowed);
        if let Some(d) = &machine.default_affinity {
            if d.intersects(&forbidden) {
                plan.actions.push(Action::SetDefaultAffinity {
                    cpus: allowed.clone(),
                });
            }
        }
    }

    let mut held: Vec<Held> = m
        .irqs
        .iter()
        .filter_map(|s| s.hold.clone().map(|hold| Held { irq: s.irq, hold }))
        .collect();
    held.sort_by(|a, b| a.hold.cmp(&b.hold).then(a.irq.cmp(&b.irq)));
    facts(&held, &mut notes);
    let stuck: Vec<IrqNum> = rep.stuck.iter().map(|&i| m.irqs[i].irq).collect();
    if !stuck.is_empty() {
        notes.push(format!(
            "IRQ {} must leave CPUs they may not use, but no allowed CPU has a free vector \
             (capacity {} per CPU): left in place; fewer queues or more housekeeping CPUs needed",
            irq_list(&stuck),
            cfg.vector_capacity
        ));
    }
    if rep.round_limit_hit {
        notes.push("balancing stopped at its round limit before settling".into());
    }
    if input.rates.is_none() {
        notes.push("no rates yet: only isolation, bans and pins are applied this period".into());
    } else if m.basis == LoadBasis::Counts || m.basis == LoadBasis::Mixed {
        notes.push(format!(
            "load basis {}: some CPUs report no interrupt time, their interrupts are costed at \
             {} us each",
            m.basis, cfg.interrupt_cost_us
        ));
    }
    plan.notes = notes;

    let mut heavy: Vec<HeavyIrq> = m
        .irqs
        .iter()
        .filter(|s| s.heavy)
        .map(|s| HeavyIrq {
            irq: s.irq,
            load: s.load,
            cpu: s.pos.map(|p| m.cpus[p as usize].id),
        })
        .collect();
    heavy.sort_by(|a, b| b.load.total_cmp(&a.load).then(a.irq.cmp(&b.irq)));
    Decision {
        plan,
        moves,
        imbalance_before: imbalance(&before),
        imbalance_after: imbalance(&after),
        per_cpu_load_before: before,
        per_cpu_load_after: after,
        objective_before,
        objective_after: m.objective(),
        basis: input.rates.map(|_| m.basis),
        allowed,
        heavy,
        held,
        stuck,
        rounds: rep.rounds,
        loads: m
            .irqs
            .iter()
            .filter(|s| s.load > 0.0)
            .map(|s| (s.irq, s.load))
            .collect(),
    }
}

/// One note per kind of held IRQ.
fn facts(held: &[Held], notes: &mut Vec<String>) {
    let mut by: BTreeMap<String, Vec<IrqNum>> = BTreeMap::new();
    for h in held {
        let what = match &h.hold {
            Hold::Managed => "kernel-managed affinity, left to the kernel (only \
                              isolcpus=managed_irq at boot steers them)"
                .to_string(),
            Hold::Banned => "banned in the configuration".to_string(),
            Hold::NoAffinityFile => "no readable smp_affinity_list".to_string(),
            Hold::Refused(why) => format!("refused by the kernel earlier: {why}"),
        };
        by.entry(what).or_default().push(h.irq);
    }
    for (what, irqs) in by {
        notes.push(format!("IRQ {}: {what}", irq_list(&irqs)));
    }
}

/// The placement policy as a [`Policy`]: [`decide`] plus what it learns between periods.
#[derive(Debug, Clone)]
pub struct PlacementPolicy {
    cfg: PlacementConfig,
    learned: Learned,
    interval: AdaptiveInterval,
    reported: BTreeSet<String>,
    last: Option<Decision>,
}

impl PlacementPolicy {
    /// A policy with `cfg` (validated).
    pub fn new(cfg: PlacementConfig) -> Result<PlacementPolicy, PlacementConfigError> {
        cfg.validate()?;
        Ok(PlacementPolicy {
            cfg,
            learned: Learned::default(),
            interval: AdaptiveInterval::default(),
            reported: BTreeSet::new(),
            last: None,
        })
    }

    /// The configuration in force.
    pub fn config(&self) -> &PlacementConfig {
        &self.cfg
    }

    /// Replaces the configuration (SIGHUP), keeping what was learned from the kernel.
    pub fn set_config(&mut self, cfg: PlacementConfig) -> Result<(), PlacementConfigError> {
        cfg.validate()?;
        self.cfg = cfg;
        // New bans or pins deserve to be reported and acted on at once.
        self.reported.clear();
        self.interval = AdaptiveInterval::default();
        Ok(())
    }

    /// What the kernel refused so far.
    pub fn learned(&self) -> &Learned {
        &self.learned
    }

    /// The last decision, in full (notes not yet filtered).
    pub fn last_decision(&self) -> Option<&Decision> {
        self.last.as_ref()
    }

    /// Decides, updating the period and the learned state; returns the full decision.
    pub fn decide_full(&mut self, input: &PolicyInput<'_>) -> Decision {
        self.learned.prune(input.machine);
        let d = decide(&self.cfg, &self.learned, input);
        let acted = !d.plan.is_empty();
        self.interval
            .update(&self.cfg, input.rates.is_some(), acted, d.loads.clone());
        self.last = Some(d.clone());
        d
    }
}

impl Policy for PlacementPolicy {
    fn name(&self) -> &'static str {
        "placement"
    }

    fn decide(&mut self, input: &PolicyInput<'_>) -> Plan {
        let mut plan = self.decide_full(input).plan;
        // Facts are reported once, not every period (irqbalance's log floods, balancing.md 2).
        plan.notes.retain(|n| self.reported.insert(n.clone()));
        plan
    }

    fn observe(&mut self, report: &ApplyReport) {
        self.learned.observe(report);
    }

    fn next_interval_ns(&self) -> Option<u64> {
        Some(
            self.interval
                .current_ms(&self.cfg)
                .saturating_mul(1_000_000),
        )
    }
}
