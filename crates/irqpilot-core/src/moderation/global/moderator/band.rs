//! Delays the fast loop's band would hold that the target does not need.
//!
//! Inside the band (from `relax_below` up to the target) the fast loop holds its delays: a
//! relax step there would put the rate back over the target and the loop would cycle across
//! it. But a transient over the target (the backlog a knee search's step leaves draining, a
//! peak) caps queues, and where the load's own rate is under the target the band then keeps
//! those delays for as long as the load sits in it, though letting them go keeps the total
//! under the target (held-out gen-47-33: 4 queues at 5-6 us for a second under a target 5%
//! over the load's own 1.39 M/s; p95 1.049x `none`).

/// What one period of the fast loop shows this rule.
pub(super) struct Period {
    pub(super) index: u64,
    /// Delays or thresholds were in force during the period counted.
    pub(super) moderating: bool,
    /// The device interrupt rate, smoothed (the fast loop's view), and as counted.
    pub(super) total: f64,
    pub(super) counted: f64,
    pub(super) target: f64,
    /// The fast loop holds the load this period (over the target).
    pub(super) over: bool,
    /// The fast loop's hysteresis (`GlobalModerationConfig::hysteresis`).
    pub(super) band: f64,
}

/// The load's own rate, and the let-go it allows.
#[derive(Debug, Clone, Default)]
pub(super) struct BandLetGo {
    /// The load's own rate: the lesser of the last two periods counted unheld in a row (not
    /// the period right after a release, where a backlog drains over it; not a single
    /// period's peak). The moderator's `natural`, any period counted unheld, is what the knee
    /// search reads; a let-go judged on it would take a drain for the load.
    own: f64,
    /// The previous period's rate, where it was counted unheld.
    last_unheld: Option<f64>,
    was_moderating: bool,
    /// The period and target of the last let-go, until it has stood two periods.
    released: Option<(u64, f64)>,
    /// A let-go went over the target within two periods (the load's own rate had grown since
    /// it was counted): none again until the load is counted unheld again.
    failed: bool,
}

impl BandLetGo {
    /// The load's own rate (0 before it has been counted unheld).
    pub(super) fn own(&self) -> f64 {
        self.own
    }

    /// Counts a period: the load's own rate where it ran unheld, and whether the last let-go
    /// went over the target (then returns the target it was let go at). Every period,
    /// whether or not a let-go may be asked.
    pub(super) fn observe(&mut self, p: &Period) -> Option<f64> {
        if !p.moderating && !self.was_moderating {
            self.own = self.last_unheld.map_or(p.total, |l| l.min(p.total));
            self.last_unheld = Some(p.total);
            self.failed = false;
        } else if p.moderating {
            self.last_unheld = None;
        }
        self.was_moderating = p.moderating;
        let (at, t) = self.released?;
        if p.over && p.index - at <= 2 {
            self.failed = true;
            self.released = None;
            return Some(t);
        }
        if p.index - at > 2 {
            self.released = None;
        }
        None
    }

    /// Whether every delay goes this period: some are held, the loop does not hold the load
    /// over the target, the rate (smoothed and counted) is within the band about the load's
    /// own rate (the delays hold back less than a band's worth, so no backlog of a load held
    /// far under its own rate; and no more than a band over it, so the load has not grown
    /// since: a burst after idle is not judged by the idle rate) and under the target, and
    /// the load's own rate is under the target. Asked after [`BandLetGo::observe`] of the
    /// same period.
    pub(super) fn let_go(&mut self, p: &Period, delayed: bool) -> bool {
        let go = delayed
            && !p.over
            && self.own > 0.0
            && self.own < p.target
            && p.total.max(p.counted) <= p.target
            && p.total.min(p.counted) >= self.own * (1.0 - p.band)
            && p.total.max(p.counted) <= self.own * (1.0 + p.band)
            && !self.failed;
        if go {
            self.released = Some((p.index, p.target));
        }
        go
    }
}
