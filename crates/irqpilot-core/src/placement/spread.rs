//! The objective the policy minimises, and what a move is worth.
//!
//! With X_g the load of group g, the policy minimises
//!
//! ```text
//! Phi = sum_cpu X^2 + w_smt sum_core X^2 + w_llc sum_llc X^2 + w_pkg sum_package X^2
//!     + w_queue sum_(device,core) X^2 + 2 w_numa sum_i L_i [i off its device's local CPUs]
//! ```
//!
//! Squares reward spreading at every level at once; the weights say how much sharing a core,
//! a cache or a package costs compared with sharing a CPU. Moving IRQ i (load L) from CPU h to
//! CPU t changes Phi by exactly `-2 L (A_i - C_i(t))`, where `C_i(t)` is the *arrival cost*
//!
//! ```text
//! C_i(t) = sum_levels w_l X'_(g_l(t)) + w_numa [t remote for i]      (w_cpu = 1)
//! ```
//!
//! with X' the group loads without i, and `A_i = C_i(h)`. So the best target is the one with
//! the least arrival cost, and the move's *gain* `A_i - C_i(t)` is in CPU shares.

use super::model::{IrqSlot, Model};
use std::cmp::Ordering;

/// The least loaded allowed CPU with room, overall and per package, cache and core (load
/// counted as `cpu + w_smt core + w_llc llc + w_pkg package`). Every target of an IRQ costs at
/// least that, less the own load the IRQ takes out of the groups it shares with its current
/// CPU (its queue and NUMA terms are never negative), so an IRQ whose current cost is within
/// the tolerance of that bound cannot gain a move and needs no scan of every CPU. Not sound
/// with a negative weight (an unvalidated configuration): then nothing is pruned.
pub(crate) struct ArrivalFloor {
    sound: bool,
    global: f64,
    pkg: Vec<f64>,
    llc: Vec<f64>,
    core: Vec<f64>,
}

/// What the arrival cost of one IRQ needs, looked up once: the search asks it of every CPU.
struct Arrival<'a> {
    load: f64,
    /// The IRQ's current CPU (dense), and its core, cache and package.
    here: Option<(usize, u32, u32, u32)>,
    queue: Option<&'a [f64]>,
    local: Option<&'a crate::CpuSet>,
}

impl Model {
    fn arrival(&self, i: usize) -> Arrival<'_> {
        let s = &self.irqs[i];
        Arrival {
            load: s.load,
            here: s.pos.map(|h| {
                let c = &self.cpus[h as usize];
                (h as usize, c.core, c.llc, c.pkg)
            }),
            queue: s.queue_dev.map(|d| self.queue_load[d as usize].as_slice()),
            local: s.local.map(|l| &self.locals[l as usize]),
        }
    }

    /// The arrival cost for `a` on dense CPU `t`.
    #[inline(always)]
    fn arrival_cost_of(&self, a: &Arrival<'_>, t: usize) -> f64 {
        let l = a.load;
        let c = &self.cpus[t];
        let w = &self.weights;
        // Remove the IRQ's own load from the groups it is in now.
        let (own_cpu, own_core, own_llc, own_pkg) = match a.here {
            Some((h, core, llc, pkg)) => (h == t, core == c.core, llc == c.llc, pkg == c.pkg),
            None => (false, false, false, false),
        };
        let without = |x: f64, own: bool| if own { x - l } else { x };
        let mut cost = without(self.cpu_load[t], own_cpu)
            + w.smt * without(self.core_load[c.core as usize], own_core)
            + w.llc * without(self.llc_load[c.llc as usize], own_llc)
            + w.pkg * without(self.pkg_load[c.pkg as usize], own_pkg);
        if let Some(q) = a.queue {
            cost += w.queue * without(q[c.core as usize], own_core);
        }
        if a.local.is_some_and(|set| !set.contains(c.id)) {
            cost += w.numa;
        }
        cost
    }

    /// Lower bounds on arrival costs for one state of the loads, for pruning: see
    /// [`ArrivalFloor`].
    pub fn arrival_floor(&self) -> ArrivalFloor {
        let w = &self.weights;
        let sound = w.smt >= 0.0 && w.llc >= 0.0 && w.pkg >= 0.0 && w.queue >= 0.0 && w.numa >= 0.0;
        let mut f = ArrivalFloor {
            sound,
            global: f64::INFINITY,
            pkg: vec![f64::INFINITY; self.pkg_load.len()],
            llc: vec![f64::INFINITY; self.llc_load.len()],
            core: vec![f64::INFINITY; self.core_load.len()],
        };
        for (t, c) in self.cpus.iter().enumerate() {
            if !(c.allowed && self.has_room(t)) {
                continue;
            }
            let base = self.cpu_load[t]
                + w.smt * self.core_load[c.core as usize]
                + w.llc * self.llc_load[c.llc as usize]
                + w.pkg * self.pkg_load[c.pkg as usize];
            f.global = f.global.min(base);
            let (p, l, k) = (c.pkg as usize, c.llc as usize, c.core as usize);
            f.pkg[p] = f.pkg[p].min(base);
            f.llc[l] = f.llc[l].min(base);
            f.core[k] = f.core[k].min(base);
        }
        f
    }

    /// The least arrival cost IRQ `i` could have on any CPU it may move to (`-inf` when the
    /// floor is not sound).
    pub fn arrival_lower_bound(&self, f: &ArrivalFloor, i: usize) -> f64 {
        let s = &self.irqs[i];
        let Some(h) = s.pos.filter(|_| f.sound) else {
            return f64::NEG_INFINITY;
        };
        let h = &self.cpus[h as usize];
        let (l, w) = (s.load, &self.weights);
        // A target sharing a group with the IRQ's CPU is credited the IRQ's own load there.
        f.global
            .min(f.pkg[h.pkg as usize] - l * w.pkg)
            .min(f.llc[h.llc as usize] - l * (w.pkg + w.llc))
            .min(f.core[h.core as usize] - l * (w.pkg + w.llc + w.smt))
    }

    /// Arrival cost of IRQ `i` on dense CPU `t`: the loads it would share there, without its own.
    pub fn arrival_cost(&self, i: usize, t: usize) -> f64 {
        self.arrival_cost_of(&self.arrival(i), t)
    }

    /// Gain of moving IRQ `i` from where it is to `t`, in CPU shares (`A_i - C_i(t)`).
    #[cfg(test)]
    pub fn gain(&self, i: usize, t: usize) -> Option<f64> {
        let h = self.irqs[i].pos? as usize;
        Some(self.arrival_cost(i, h) - self.arrival_cost(i, t))
    }

    /// The smallest gain a balancing move off CPU `h` must bring.
    pub fn tolerance(&self, h: usize, tol: f64, tol_rel: f64) -> f64 {
        tol.max(tol_rel * self.cpu_load[h])
    }

    /// Allowed CPUs with a free vector that IRQ `i` could move to (its own CPU excluded).
    pub fn targets<'a>(&'a self, i: usize) -> impl Iterator<Item = usize> + 'a {
        let s: &'a IrqSlot = &self.irqs[i];
        (0..self.cpus.len()).filter(move |&t| {
            Some(t as u32) != s.pos && s.may_use(&self.cpus[t]) && self.has_room(t)
        })
    }

    /// The target with the least arrival cost (ties: fewer vectors, then lower CPU number).
    pub fn best_by_cost(&self, i: usize) -> Option<(usize, f64)> {
        let mut best: Option<(usize, f64)> = None;
        let a = self.arrival(i);
        for t in self.targets(i) {
            let c = self.arrival_cost_of(&a, t);
            let better = match best {
                None => true,
                Some((b, bc)) => match c.total_cmp(&bc) {
                    Ordering::Less => true,
                    Ordering::Equal => self.vectors[t] < self.vectors[b],
                    Ordering::Greater => false,
                },
            };
            if better {
                best = Some((t, c));
            }
        }
        best
    }

    /// The target for a light IRQ that has to move: local CPUs first, then the CPU with the
    /// fewest vectors (what the kernel's matrix allocator does, balancing.md 5.6), then the
    /// least arrival cost. Light IRQs carry no load worth balancing but each holds a vector,
    /// and many of them funnelled onto one CPU is how vector exhaustion happens.
    pub fn best_by_vectors(&self, i: usize) -> Option<usize> {
        self.targets(i).min_by(|&a, &b| {
            let key = |t: usize| (self.remote(i, self.cpus[t].id), self.vectors[t]);
            key(a).cmp(&key(b)).then_with(|| {
                self.arrival_cost(i, a)
                    .total_cmp(&self.arrival_cost(i, b))
                    .then(a.cmp(&b))
            })
        })
    }

    /// Phi, computed from scratch (for tests and reports): see the module docs.
    pub fn objective(&self) -> f64 {
        let w = &self.weights;
        let sq = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>();
        let mut phi = sq(&self.cpu_load)
            + w.smt * sq(&self.core_load)
            + w.llc * sq(&self.llc_load)
            + w.pkg * sq(&self.pkg_load)
            + w.queue * self.queue_load.iter().map(|q| sq(q)).sum::<f64>();
        for (i, s) in self.irqs.iter().enumerate() {
            if s.hold.is_none() {
                if let Some(p) = s.pos {
                    if self.remote(i, self.cpus[p as usize].id) {
                        phi += 2.0 * w.numa * s.load;
                    }
                }
            }
        }
        phi
    }
}
