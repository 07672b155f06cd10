//! The search: first the moves the rules require (off isolated, banned or offline CPUs, into
//! pins), then balancing moves while one brings at least the tolerance.
//!
//! Every balancing move lowers the objective Phi (module `spread`) by at least
//! `2 * heavy_min_load * tolerance`, and Phi is bounded below, so the search ends. It ends at a
//! layout where no single move of a heavy IRQ gains the tolerance: a fixed point, so deciding
//! again on the applied result (same rates) moves nothing, and undoing a move needs the loads
//! to change by about twice the tolerance.

use super::config::PlacementConfig;
use super::model::Model;

/// Why an IRQ moved (the first reason that applied).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Why {
    /// Its CPU is not a housekeeping CPU (isolated).
    Isolation,
    /// Its CPU is banned in the configuration.
    BannedCpu,
    /// A pin excludes its CPU.
    Pin,
    /// Its CPU is offline or unknown.
    Unplaced,
    /// Its mask names CPUs it may not use, but it is delivered to one it may: the mask is
    /// narrowed to that CPU (no migration).
    Narrow,
    /// A balancing move.
    Balance,
}

/// Outcome of the search beyond the new positions.
#[derive(Debug, Default)]
pub(crate) struct SearchReport {
    /// IRQs that had to move but found no allowed CPU with a free vector.
    pub stuck: Vec<usize>,
    /// Per-IRQ reason, for IRQs that moved or were narrowed.
    pub why: Vec<Option<Why>>,
    /// IRQs whose mask must be rewritten even if they end where they started.
    pub narrow: Vec<bool>,
    /// Balancing rounds run.
    pub rounds: u32,
    /// Stuck IRQs placed after balancing freed a vector.
    pub placed_late: u32,
    /// The round limit was hit before a fixed point (never seen in tests; reported if it is).
    pub round_limit_hit: bool,
}

/// Safety net far above anything the tests reach; the objective argument bounds the search.
const MAX_ROUNDS: u32 = 1000;

/// Runs the whole search on `m`.
pub(crate) fn search(m: &mut Model, cfg: &PlacementConfig, banned: &crate::CpuSet) -> SearchReport {
    let mut rep = SearchReport {
        why: vec![None; m.irqs.len()],
        narrow: vec![false; m.irqs.len()],
        ..SearchReport::default()
    };
    required_moves(m, banned, &mut rep);
    balance(m, cfg, &mut rep);
    // Balancing may free a vector where a stuck IRQ may go: try again until nothing changes,
    // so the end state is a fixed point of both steps.
    while !rep.stuck.is_empty() {
        let stuck = std::mem::take(&mut rep.stuck);
        let before = stuck.len();
        for i in stuck {
            let why = rep.why[i].take();
            match place(m, i) {
                Some(t) => {
                    m.move_irq(i, t as u32);
                    rep.why[i] = why.or(Some(Why::Unplaced));
                    rep.placed_late += 1;
                }
                None => {
                    rep.why[i] = why;
                    rep.stuck.push(i);
                }
            }
        }
        if rep.stuck.len() == before {
            break;
        }
        balance(m, cfg, &mut rep);
    }
    m.resum();
    rep
}

/// Where an IRQ that has to move goes: heavy ones by arrival cost, light ones by vectors.
fn place(m: &Model, i: usize) -> Option<usize> {
    if m.irqs[i].heavy {
        m.best_by_cost(i).map(|(t, _)| t)
    } else {
        m.best_by_vectors(i)
    }
}

/// Moves every movable IRQ that is where the rules say it may not be.
fn required_moves(m: &mut Model, banned: &crate::CpuSet, rep: &mut SearchReport) {
    let mut must: Vec<(usize, Why)> = Vec::new();
    for (i, s) in m.irqs.iter().enumerate() {
        if s.hold.is_some() {
            continue;
        }
        let why = match s.pos {
            None => Some(Why::Unplaced),
            Some(p) => {
                let c = &m.cpus[p as usize];
                if !s.may_use(c) {
                    Some(if banned.contains(c.id) {
                        Why::BannedCpu
                    } else if !c.allowed {
                        Why::Isolation
                    } else {
                        Why::Pin
                    })
                } else {
                    None
                }
            }
        };
        match why {
            Some(w) => must.push((i, w)),
            None => {
                // Delivered to a good CPU, but the mask also names CPUs it may not use: the
                // kernel could move it there at any time (a hotplug, a vector reshuffle).
                let bad_mask = !s.mask_ok;
                if bad_mask {
                    rep.why[i] = Some(Why::Narrow);
                    rep.narrow[i] = true;
                }
            }
        }
    }
    // Heavy first, heaviest first (longest-processing-time order), then light by IRQ number.
    must.sort_by(|a, b| {
        let (sa, sb) = (&m.irqs[a.0], &m.irqs[b.0]);
        sb.heavy
            .cmp(&sa.heavy)
            .then(sb.load.total_cmp(&sa.load))
            .then(a.0.cmp(&b.0))
    });
    for (i, why) in must {
        rep.why[i] = Some(why);
        match place(m, i) {
            Some(t) => m.move_irq(i, t as u32),
            None => rep.stuck.push(i),
        }
    }
}

/// Balancing rounds: collect every heavy IRQ's best move worth the tolerance, apply them in
/// order of objective decrease (re-checking each against the loads as they now are), repeat
/// until a round moves nothing.
fn balance(m: &mut Model, cfg: &PlacementConfig, rep: &mut SearchReport) {
    let heavy: Vec<usize> = (0..m.irqs.len())
        .filter(|&i| {
            let s = &m.irqs[i];
            s.heavy && s.pos.is_some_and(|p| s.may_use(&m.cpus[p as usize]))
        })
        .collect();
    if heavy.is_empty() {
        return;
    }
    let worth = |m: &Model, i: usize| -> Option<(usize, f64)> {
        let h = m.irqs[i].pos? as usize;
        let (t, cost) = m.best_by_cost(i)?;
        let gain = m.arrival_cost(i, h) - cost;
        (gain >= m.tolerance(h, cfg.tolerance, cfg.tolerance_relative)).then_some((t, gain))
    };
    loop {
        if rep.rounds >= MAX_ROUNDS {
            rep.round_limit_hit = true;
            return;
        }
        rep.rounds += 1;
        m.resum();
        let mut cands: Vec<(f64, usize)> = {
            // Most IRQs cannot gain the tolerance anywhere: a bound on their best target's
            // cost says so without scanning every CPU (steady periods, late rounds). The
            // margin keeps float rounding from ever pruning a move the full scan would make.
            let floor = m.arrival_floor();
            let may_gain = |i: usize| {
                let Some(h) = m.irqs[i].pos.map(|h| h as usize) else {
                    return true;
                };
                let here = m.arrival_cost(i, h);
                let bound = here - m.arrival_lower_bound(&floor, i);
                bound + 1e-9 * (1.0 + here.abs())
                    >= m.tolerance(h, cfg.tolerance, cfg.tolerance_relative)
            };
            heavy
                .iter()
                .filter(|&&i| may_gain(i))
                .filter_map(|&i| worth(m, i).map(|(_, g)| (g * m.irqs[i].load, i)))
                .collect()
        };
        if cands.is_empty() {
            return;
        }
        // Steepest first: the largest objective decrease (2 L gain).
        cands.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut moved = 0;
        for (_, i) in cands {
            if let Some((t, _)) = worth(m, i) {
                m.move_irq(i, t as u32);
                rep.why[i] = Some(match rep.why[i] {
                    None | Some(Why::Narrow) => Why::Balance,
                    Some(w) => w,
                });
                moved += 1;
            }
        }
        if moved == 0 {
            return;
        }
    }
}
