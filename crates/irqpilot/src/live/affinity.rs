//! [`AffinityWatch`]: notices affinity changes on a live root without re-reading the whole
//! inventory (a tenth of a second on a 256-CPU server). An IRQ whose interrupts land on a CPU
//! outside its known effective affinity has its two affinity files read again (at most once
//! per [`RECHECK_NS`] per IRQ); and every IRQ is re-read once per [`SWEEP_NS`], a few per
//! sample, because an idle IRQ can move without anything showing in the counters.

use super::sampler::Sampler;
use irqpilot_core::{CpuSet, IrqNum, Machine};
use irqpilot_linux::Root;
use irqpilot_linux::inventory::irq_affinity;
use irqpilot_record::Affinity;
use std::collections::BTreeMap;
use std::path::Path;

/// Least time between two reads of one IRQ's files prompted by its counters.
pub const RECHECK_NS: u64 = 5_000_000_000;
/// Time to re-read every IRQ once, round robin.
pub const SWEEP_NS: u64 = 60_000_000_000;
/// Most IRQs re-read because of their counters in one sample.
const MAX_READS: usize = 32;

/// An affinity change, as seen between two samples.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// Monotonic time of the sample after which it was seen, ns.
    pub at_ns: u64,
    /// The IRQ.
    pub irq: IrqNum,
    /// Before.
    pub before: Affinity,
    /// After.
    pub after: Affinity,
}

/// See the module documentation.
#[derive(Debug)]
pub struct AffinityWatch {
    root: Root,
    known: BTreeMap<IrqNum, Affinity>,
    read_at: BTreeMap<IrqNum, u64>,
    cursor: Option<IrqNum>,
    last_ns: Option<u64>,
    sweep_credit: f64,
    candidates: Vec<IrqNum>,
    changes: Vec<Change>,
}

impl AffinityWatch {
    /// Watches the IRQs of `machine` under `root`.
    pub fn new(root: &Path, machine: &Machine) -> AffinityWatch {
        let mut w = AffinityWatch {
            root: Root::new(root),
            known: BTreeMap::new(),
            read_at: BTreeMap::new(),
            cursor: None,
            last_ns: None,
            sweep_credit: 0.0,
            candidates: Vec::new(),
            changes: Vec::new(),
        };
        w.set_machine(machine);
        w
    }

    /// Starts again from a new inventory.
    pub fn set_machine(&mut self, machine: &Machine) {
        self.known = Affinity::all(machine);
        self.read_at.clear();
    }

    /// The affinity last seen for `irq`.
    pub fn known(&self, irq: IrqNum) -> Option<&Affinity> {
        self.known.get(&irq)
    }

    /// Checks after a sample taken at `now_ns`; returns the changes found.
    pub fn check(&mut self, sampler: &Sampler, now_ns: u64) -> &[Change] {
        self.changes.clear();
        self.candidates.clear();
        let rates = sampler.rates();
        for row in rates.rows.iter().filter(|r| r.total_per_sec > 0.0) {
            let Some(irq) = row.label.irq() else { continue };
            if self.candidates.len() >= MAX_READS {
                break;
            }
            let Some(eff) = self.known.get(&irq).and_then(|a| a.effective.as_ref()) else {
                continue;
            };
            let stray = row
                .per_cpu_per_sec
                .iter()
                .zip(&rates.cpus)
                .any(|(v, c)| *v > 0.0 && !eff.contains(*c));
            let recent = self
                .read_at
                .get(&irq)
                .is_some_and(|t| now_ns.saturating_sub(*t) < RECHECK_NS);
            if stray && !recent {
                self.candidates.push(irq);
            }
        }
        // The round-robin share of this interval.
        let dt = self.last_ns.map_or(0, |t| now_ns.saturating_sub(t));
        self.last_ns = Some(now_ns);
        self.sweep_credit += self.known.len() as f64 * dt as f64 / SWEEP_NS as f64;
        while self.sweep_credit >= 1.0 && !self.known.is_empty() {
            self.sweep_credit -= 1.0;
            let next = match self.cursor {
                Some(c) => self
                    .known
                    .range(IrqNum(c.0.saturating_add(1))..)
                    .next()
                    .map(|(k, _)| *k),
                None => None,
            }
            .or_else(|| self.known.keys().next().copied());
            self.cursor = next;
            if let Some(irq) = next {
                if !self.candidates.contains(&irq) {
                    self.candidates.push(irq);
                }
            }
        }
        let candidates = std::mem::take(&mut self.candidates);
        for &irq in &candidates {
            self.read_at.insert(irq, now_ns);
            let (requested, effective) = irq_affinity(&self.root, irq);
            if requested.is_none() && effective.is_none() {
                // Gone or unreadable: the inventory refresh deals with vanished IRQs.
                continue;
            }
            let after = Affinity {
                requested,
                effective,
            };
            let before = self.known.insert(irq, after.clone());
            if let Some(before) = before.filter(|b| *b != after) {
                self.changes.push(Change {
                    at_ns: now_ns,
                    irq,
                    before,
                    after,
                });
            }
        }
        self.candidates = candidates;
        &self.changes
    }
}

/// `a -> b` for a requested/effective pair, the effective CPUs when they are known.
pub fn describe(a: &Affinity) -> String {
    let set = |s: &Option<CpuSet>| s.as_ref().map_or("?".to_string(), CpuSet::to_string);
    match (&a.requested, &a.effective) {
        (Some(r), Some(e)) if r == e => r.to_string(),
        _ => format!("{} (effective {})", set(&a.requested), set(&a.effective)),
    }
}
