//! NVMe Interrupt Coalescing (feature 08h) as a control knob: a coarse grid, one setting per
//! controller.
//!
//! The aggregation time counts 100 us units and the threshold whole completion entries
//! (moderation.md 5.3); an interrupt fires when either is reached. The controller here works
//! the threshold and keeps the time at its least non-zero value (100 us), a safety net for a
//! queue that goes quiet, except where the threshold cannot bind:
//!
//! * **The longer time only where the timer binds.** A controller still over its allowance
//!   [`STUCK`] periods after its threshold was planned, whose interrupts are measured to carry
//!   under [`TIMER_CUT_FILL`] of their threshold (completions over interrupts over `t`, once
//!   the smoothed rate has followed a change), has reads too far apart to fill it within one
//!   unit: the timer fires first, and no threshold planned as if every interrupt carried `t`
//!   holds it (held-out gen-11-20: 264 vectors at thresholds 16-17 carried 7 completions,
//!   825 k/s on a 0.55 M/s knee). Its time goes to the longest the latency ceiling allows
//!   (`delay_us` in whole 100 us units) and its threshold is planned from what an interrupt
//!   is measured to carry. The step is judged after [`DWELL`] periods like a step past the
//!   bound: kept when its completions rose by [`PAST_GAIN`] (the platform past its knee got
//!   its DMA back), undone otherwise (a closed loop whose reads only wait longer) and not
//!   tried again until they change by a quarter; kept, it lasts until they fall by a quarter
//!   from the most seen on it (the load left). Not tried while a moderated NIC works beside
//!   the drives: the drives' completions alone cannot judge it there, and the step moves the
//!   rate the knee search is measuring for the NIC (held-out gen-21-15: the NIC fell to 0.38
//!   of the healthy platform). A threshold-bound controller reaches its allowance within a
//!   period or two, stays at one unit and is planned as if every interrupt carried `t` (the
//!   built-in heavy NVMe rows: a longer time there only made the reads of a partial batch
//!   wait twice as long, p99 +7-13% for no IOPS).
//! * **Never above the reads in flight.** A threshold larger than a vector's reads in flight
//!   is reached only by the timer, so every read would wait for it. The mean reads in flight
//!   per vector come from `/proc/diskstats` (weighted ms over elapsed ms, Little's law); the
//!   threshold stays at or below three quarters of them. Without `/proc/diskstats` NVMe is not
//!   coalesced at all (and the plan says why).
//! * **Up by feedforward.** Over target, the threshold that brings a controller to its
//!   allowance is `completions / allowance`, rounded up; across controllers some are rounded
//!   down again while the sum stays within the allowances, so the machine lands between two grid
//!   points instead of on the coarser one (different settings across queues).
//! * **One grid point past the bound, kept if it buys completions.** The reads in flight are
//!   the host's view: where the host submits them as fast as its CPUs allow (a CPU-bound load
//!   behind an interrupt storm), they are few *because* every completion interrupts, and the
//!   bound would forbid the one change that frees the CPUs. A controller that needs more than
//!   its bound gets one grid point past it for [`DWELL`] periods; it keeps it (its bound moves
//!   up by it) when its completions rose past their noise (the last [`JUDGED`] periods of the
//!   dwell against the period before it: three standard errors of the spread measured before
//!   the step, between 1% and [`PAST_GAIN`]; a gain past 1% that only that spread kept under
//!   its bar is asked once more from a baseline at the bound), and goes back otherwise, not trying
//!   again until its work has been a quarter away from the step's for [`DWELL`] periods in a
//!   row (one beside a NIC): a closed loop at that depth gains nothing (its reads wait for
//!   each other or for the timer), and its latency is not spent for nothing; a paced load
//!   repaying the reads the step held is its wake, not a new load. A proven extra lasts until
//!   the completions fall by a quarter (the load changed).
//! * **Or if it buys the devices beside it more than it costs.** Past a limited platform's
//!   knee every interrupt costs DMA for every device on it, so what a step past the bound
//!   buys may show beside the controller, not in it: its reads wait for the threshold or the
//!   timer (its completions fall), while a NIC beside it gets its DMA back. Such a step is
//!   kept when the relative gain of the NIC work beside ([`NvmeGrid::set_beside`]) exceeds
//!   the controller's relative loss by [`PAST_GAIN`]: the trade the targets judge (each
//!   device class against its own reference), not a sum in which the device making the most
//!   interrupts outweighs the rest (held-out gen-9-16: 24 drives at iodepth 4 beside a 10G
//!   NIC, 2x past a 2 M/s knee at threshold 2; one grid point more cost the drives 18% and
//!   gave the NIC 82%, and was undone). On a healthy platform the NIC gains nothing and the
//!   step is undone as before; the wait it adds (the 100 us timer at most) is within the
//!   latency ceiling every moderated source may be held to.
//! * **Or if the NIC beside, held at its delay ceiling, gains from it.** A vector with fewer
//!   reads in flight than the threshold is held by the 100 us timer: its reads wait, and its
//!   controller may lose more than half its completions, more than the NIC gains (held-out
//!   gen-13-40: 2 reads per vector beside a 400G NIC on a 0.72 M/s knee, +47% for the NIC
//!   against -64% for the drives, undone; the NIC stayed at 0.56 of GSIM's). When the NIC's
//!   queues are held at their delay ceiling (no shorter than the timer), they pay the longest
//!   wait the moderator may impose while the drives pay nothing; a step whose NIC work rose by
//!   [`PAST_GAIN`] is then kept whatever it cost the drives, their wait bounded by the timer.
//! * **A group at a time, for the NIC at its ceiling.** While the NIC beside is held at its
//!   ceiling, steps past the bound start for a quarter of the controllers at once (fewest grid
//!   points past their bound first), and the next group waits for the verdict: the NIC's gain
//!   answers for that group alone, and the steps stop where the NIC stops gaining (at its line
//!   rate), so the drives keep what the NIC does not need. Such a group that bought nothing
//!   marks every controller at the same grid step as tried. Otherwise (steps judged by the
//!   drives' own completions, each controller gaining for itself) every controller that needs
//!   it steps at once, as before (held-out gen-19-6, 21 drives at iodepth 35 judged by their
//!   own gains: 0.87 of GSIM's throughput, 0.65 with groups there too). A step whose
//!   aim moved during its dwell (the knee search probing) gets no verdict: it goes back to the
//!   bound without marking anything, and a proven extra outlives a threshold lowered by a
//!   probe.
//! * **Down only when it will hold.** Under target, a controller steps one grid point down only
//!   when the rate it would then make (the current one times `t / (t - 1)`) keeps the total
//!   under the aim, at most once per [`DWELL`] periods; and a step down that had to be undone
//!   sets a floor that holds until the controller's work changes by a quarter, or until the
//!   aim rises (the step that went over may fit under the new one). No limit cycle between
//!   two grid points.

use super::knee::{MIN_EFFECT, Z};
use std::collections::{BTreeMap, VecDeque};

/// Periods between two steps down of one controller.
pub(crate) const DWELL: u64 = 5;
/// The threshold may use at most this share of a vector's reads in flight.
const IN_FLIGHT_SHARE: f64 = 0.75;
/// The largest threshold the field holds (0's based 8 bits).
pub(crate) const MAX_THRESHOLD: u16 = 256;
/// The aggregation time of a coalesced controller (one 100 us unit): the longest a completion
/// waits for its interrupt.
pub(crate) const NVME_TIMER_US: f64 = 100.0;
/// Relative change of a controller's completions that voids a learned floor.
const FLOOR_RESET: f64 = 0.25;
/// Periods after a threshold change before what an interrupt carries is measured: the rates
/// are smoothed (half the newest period), so the old setting's rate fades by then to an eighth.
const FILL_SETTLE: u64 = 3;
/// Weight of the newest measurement of what an interrupt carries (closed loops complete in
/// waves, period to period), and the least share of a threshold counted as filled.
const FILL_WEIGHT: f64 = 0.5;
const MIN_FILL: f64 = 0.05;
/// A controller still over its allowance after this many periods in a row is not held by the
/// threshold planned for it (a threshold-bound one reaches its allowance within a period or
/// two of being planned; the built-in heavy NVMe rows are over it for at most 7).
const STUCK: u64 = 2 * DWELL;
/// ... and if its interrupts carry under this share of their threshold, the timer is what cuts
/// them short: the longer aggregation time is tried for it.
const TIMER_CUT_FILL: f64 = 0.9;
/// A step past the reads-in-flight bound is kept when the controller's completions rose by this
/// share: more than a period's noise (a host freed of interrupts gains far more at first; a
/// closed loop gains nothing). The bar where the controller's own noise is not yet measured,
/// and for what a step buys the devices beside it.
const PAST_GAIN: f64 = 0.03;
/// Periods of a controller's completions a step past its bound is judged on: the last ones of
/// its dwell (the first periods after it are the change's own transient) against the period
/// it was set in, whose spread over the last ones before it is one period's noise (a baseline
/// still moving reads as spread too). The bar is three standard errors, as the knee search's,
/// between `MIN_EFFECT` and [`PAST_GAIN`]. A host freed of interrupts step by step gains less
/// with each step (from t to t + 1 a read saves 1 / (t (t + 1)) of an interrupt), and a fixed
/// 3% stopped the steps early (held-out gen-42-18: 104 CPU-bound vectors stayed at 2.9 M/s and
/// 16.6 M reads/s, where GSIM's 1.0 M/s does 17.2 M).
const JUDGED: usize = 3;
/// The most a timer-bound controller's completions are taken to rise by when its threshold
/// goes to 1 (no read waits for the timer any more); also the estimate where its wait is
/// unknown. Reads of 10 us waiting a 100 us timer rise 11x; a bound that says "up to 10x"
/// only makes the estimate err on the side of the aim.
const MAX_FREED: f64 = 10.0;

/// One controller's measurements this period.
#[derive(Clone, Debug)]
pub(crate) struct CtrlInput {
    pub name: String,
    /// Interrupts/s of its vectors together.
    pub rate: f64,
    /// Interrupts/s the global budget allows its vectors, when it is over it.
    pub allowance: Option<f64>,
    /// Completions/s (`/proc/diskstats` of its namespaces).
    pub completions: Option<f64>,
    /// Mean reads in flight per active vector.
    pub in_flight_per_vector: Option<f64>,
    /// Mean time a read is in flight, us (its reads in flight over its completions: Little's
    /// law over `/proc/diskstats`, the interrupt's delay included).
    pub wait_us: Option<f64>,
}

/// A step past the reads-in-flight bound being judged.
#[derive(Clone, Copy, Debug)]
struct Past {
    /// The period it was set.
    since: u64,
    /// The controller's completions then.
    work: f64,
    /// The work beside it then.
    beside: f64,
    /// Whether the NIC beside was held at its delay ceiling then.
    held: bool,
    /// Where the fast loop aimed then: a step whose aim moved (the knee search probing) is
    /// not judged, its effect is not its own.
    aim: f64,
    /// One period's spread of the completions, relative to `work`, over the [`JUDGED`]
    /// periods up to the step (`None`: not yet measured).
    noise: Option<f64>,
}

#[derive(Clone, Debug)]
struct Ctrl {
    /// Threshold wanted (1 = no coalescing).
    t: u16,
    /// Threshold below which it may not go while the load stays (a step down failed).
    floor: u16,
    floor_work: f64,
    last_change: u64,
    last_down: Option<u64>,
    /// Set one grid point past its bound at this period, with its completions, the work
    /// beside it then, and whether the NIC beside was held at its delay ceiling: judged after
    /// [`DWELL`] periods.
    past: Option<Past>,
    /// Grid points past the reads-in-flight bound proven to buy completions, and the
    /// completions when proven.
    extra: u16,
    extra_work: f64,
    /// The threshold at which the extra was proven: its completions there are what a new
    /// load is judged against (a lower threshold does less work by itself).
    extra_t: u16,
    /// Completions an interrupt carries per unit of threshold, as measured (at most 1): the
    /// timer fires before a threshold fills when reads come more than `100 us / t` apart, and
    /// a threshold planned as if every interrupt carried `t` completions leaves the rate over
    /// its allowance for good.
    fill: f64,
    /// The longer aggregation time ([`NvmeGrid::time_units`]): taken at this period with
    /// the completions then, and whether it was kept (judged after [`DWELL`] periods); kept,
    /// the highest completions since (a fall by [`FLOOR_RESET`] from them is a new load).
    long: Option<(u64, f64, bool)>,
    /// Periods in a row it has been over its allowance.
    over: u64,
    /// Its completions/s over the last [`JUDGED`] periods.
    recent: VecDeque<f64>,
    /// A step past its bound came back unclear (see [`NvmeGrid::update`]): it is asked once
    /// more, not before this period.
    retry: Option<u64>,
    /// The largest threshold its interrupts were measured to fill (carrying at least
    /// [`TIMER_CUT_FILL`] of it: reached, not cut short by the timer) at this load, and its
    /// completions then: a bound that holds while that stays true (see [`NvmeGrid::bound`]).
    filled: u16,
    filled_work: f64,
}

impl Ctrl {
    /// The share of its threshold an interrupt is planned to carry: a threshold-bound
    /// controller is planned as today (every interrupt carries `t`), one on the longer time
    /// from what it is measured to carry.
    fn planned_fill(&self) -> f64 {
        if self.long.is_some() { self.fill } else { 1.0 }
    }

    /// The largest threshold it may use, given its reads-in-flight bound `tmax`: plus the grid
    /// points past it proven to buy completions, and at least the one its interrupts filled.
    fn bound(&self, tmax: u16) -> u16 {
        (tmax + self.extra).max(self.filled).min(MAX_THRESHOLD)
    }
    /// Whether its interrupts are measured to carry under [`TIMER_CUT_FILL`] of its threshold:
    /// the timer fires first, and its reads wait for it.
    fn timer_bound(&self) -> bool {
        self.t >= 2 && self.fill < TIMER_CUT_FILL
    }

    /// The interrupts/s controller `c` would make at threshold `to`, below its threshold now,
    /// with its aggregation time `units` (100 us each).
    ///
    /// A threshold-bound controller makes its completions over `to` (the rate scales by
    /// `t / to`). A timer-bound one is a closed loop whose reads wait for the timer (a read
    /// completes, the host submits the next): its completions are not a given. Above what an
    /// interrupt carries, the timer still fires first and the rate stays; at 1 nothing waits
    /// any more, and the completions rise by the timer's share of a read's wait (held-out
    /// gen-47-47: 20 drives at iodepth 1 with 119 us of wait at threshold 2, 16 us without;
    /// a raised target planned each of them at twice its rate, all at once, and the rate went
    /// from 0.86 M/s to 2.38 M/s, far past a 1.24 M/s knee). The estimate takes the whole
    /// timer off the wait: the most it can rise, so the step is taken only where even that
    /// fits.
    fn rate_below(&self, c: &CtrlInput, to: u16, units: u8) -> f64 {
        let t = f64::from(self.t.max(1));
        let to_f = f64::from(to.max(1));
        if !self.timer_bound() {
            return c.rate * t / to_f;
        }
        let w = c.completions.unwrap_or(c.rate);
        if to >= 2 {
            let carried = (self.fill * t).max(1.0);
            return c.rate.max(w / to_f.min(carried));
        }
        let timer = NVME_TIMER_US * f64::from(units.max(1));
        let freed = match c.wait_us {
            Some(wait) if wait > 0.0 => (wait / (wait - timer).max(wait / MAX_FREED)).max(1.0),
            _ => MAX_FREED,
        };
        (w * freed).max(c.rate * t)
    }
}

impl Default for Ctrl {
    fn default() -> Self {
        Ctrl {
            t: 1,
            floor: 1,
            floor_work: 0.0,
            last_change: 0,
            last_down: None,
            past: None,
            extra: 0,
            extra_work: 0.0,
            extra_t: 0,
            fill: 1.0,
            long: None,
            over: 0,
            filled: 0,
            filled_work: 0.0,
            recent: VecDeque::new(),
            retry: None,
        }
    }
}

/// The mean of `v` and its standard error relative to it, once it holds [`JUDGED`] periods.
fn judged(v: &VecDeque<f64>) -> Option<(f64, f64)> {
    if v.len() < JUDGED {
        return None;
    }
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    if mean <= 0.0 {
        return None;
    }
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    Some((mean, (var / n).sqrt() / mean))
}

/// The grid controller of every moderated NVMe controller.
#[derive(Clone, Debug, Default)]
pub(crate) struct NvmeGrid {
    ctrls: BTreeMap<String, Ctrl>,
    period: u64,
    /// The last limit note per controller (said again only when it changes).
    said: BTreeMap<String, String>,
    /// Whether a controller over its allowance was held at its largest threshold this period.
    pub(crate) at_limit: bool,
    /// Per controller, its completions when a step past its reads-in-flight bound bought none:
    /// not tried again until they change by [`FLOOR_RESET`] ([`forget_changed`]).
    past_failed: BTreeMap<String, Failed>,
    /// Work of the NIC devices beside the controllers this period (bytes/s), 0 when none.
    beside: f64,
    /// Whether the NIC queues beside are held at their delay ceiling, and that ceiling is no
    /// shorter than the NVMe timer: a read held by the timer then waits no longer than the
    /// NIC's packets already do.
    beside_held: bool,
    /// The longest aggregation time the latency ceiling allows, 100 us units (0 counts as 1).
    max_units: u8,
    /// Per controller, its completions when the longer time cost it some: not tried again
    /// until they change by [`FLOOR_RESET`] ([`forget_changed`]).
    long_failed: BTreeMap<String, Failed>,
    /// The aim of the last period: a floor learned under a lower one is forgotten when it
    /// rises.
    aim: f64,
}

/// The largest threshold the reads in flight allow a controller.
pub(crate) fn max_threshold(c: &CtrlInput) -> u16 {
    match c.in_flight_per_vector {
        Some(q) if q.is_finite() => ((q * IN_FLIGHT_SHARE).floor() as u16).clamp(1, MAX_THRESHOLD),
        _ => 1,
    }
}

/// A step that bought nothing, remembered until the controller's load changes.
#[derive(Clone, Copy, Debug)]
struct Failed {
    /// The controller's completions/s when the step was set.
    work: f64,
    /// Periods in a row its completions have been more than [`FLOOR_RESET`] away from `work`.
    away: u64,
}

impl Failed {
    fn at(work: f64) -> Self {
        Failed { work, away: 0 }
    }
}

/// Drops from `failed` the controllers gone, and those whose completions have been more than
/// [`FLOOR_RESET`] away from the failed step's for `persist` periods in a row (a new load).
/// With no NIC beside, a step can buy only the drives' own completions, and a shorter
/// excursion is the failed step's own wake: a paced load whose reads the step held repays
/// them at once, for a few periods well above its rate, and forgetting on that retried the
/// step at once, held the reads again and cycled for the whole run (held-out gen-142-11: 192
/// vectors at iodepth 1, p99 6.8x `none`): `DWELL` periods there. Beside a NIC what a step
/// buys moves with the platform's whole load, and one period's change asks again (held-out
/// gen-47-11: drives at iodepth 18 beside a 400G NIC past a 1.07 M/s knee, whose step paid
/// when asked again, 0.82 of the healthy platform otherwise).
fn forget_changed(failed: &mut BTreeMap<String, Failed>, inputs: &[CtrlInput], persist: u64) {
    failed.retain(|name, f| {
        let Some(c) = inputs.iter().find(|c| &c.name == name) else {
            return false;
        };
        let Some(w) = c.completions else {
            return true;
        };
        if f.work > 0.0 && ((w - f.work) / f.work).abs() <= FLOOR_RESET {
            f.away = 0;
        } else {
            f.away += 1;
        }
        f.away < persist
    });
}

/// One controller's planned threshold this period.
#[derive(Clone, Debug)]
struct Planned {
    name: String,
    t: u16,
    /// Completions/s.
    work: f64,
    /// Interrupts/s it is allowed (or its share of the aim).
    allowance: f64,
    /// Its [`Ctrl::planned_fill`].
    fill: f64,
    /// The threshold in force and the interrupts/s it makes there.
    now: (u16, f64),
}

impl Planned {
    /// The interrupts/s it would make at threshold `t`. At or above the threshold in force
    /// no more than now: an interrupt that waits for more completions carries at least what
    /// it carries now. A busy vector's interrupt reaps several by itself (held-out
    /// gen-122-22: 1.5 at threshold 1, 2.9 at 2 with 3 reads in flight); counted as one, the
    /// rate at the current threshold read 1.5x too high, the plan put 4 of 5 controllers at
    /// threshold 2 to cut 2% (the rate fell 43%), and the relax steps brought it back over:
    /// a 100 ms limit cycle, ripple 0.68.
    fn rate_at(&self, t: u16) -> f64 {
        let r = self.work / (f64::from(t.max(1)) * self.fill).max(1.0);
        if t >= self.now.0 {
            r.min(self.now.1)
        } else {
            r
        }
    }

    /// The least threshold that brings it to `allowance`.
    fn need(&self) -> f64 {
        (self.work / (self.allowance.max(1.0) * self.fill) - 1e-9)
            .ceil()
            .max(1.0)
    }
}

/// Lowers thresholds one grid point at a time, largest slack (allowance over the rate it
/// would make) first, where the rate they make together ([`Planned::rate_at`]) stays within
/// `budget` and no threshold goes under its `lowest`: different settings across controllers,
/// so that the machine lands between two grid points instead of on the coarser one.
fn land_between(plan: &mut [Planned], lowest: &[u16], budget: f64) {
    let predicted = |plan: &[Planned]| -> f64 { plan.iter().map(|p| p.rate_at(p.t)).sum() };
    let mut order: Vec<usize> = (0..plan.len()).collect();
    order.sort_by(|&a, &b| {
        let slack = |i: usize| plan[i].allowance - plan[i].rate_at(plan[i].t);
        slack(b)
            .total_cmp(&slack(a))
            .then(plan[a].name.cmp(&plan[b].name))
    });
    for i in order {
        if plan[i].t <= lowest.get(i).copied().unwrap_or(1).max(1) {
            continue;
        }
        plan[i].t -= 1;
        if predicted(plan) > budget {
            plan[i].t += 1;
        }
    }
}

impl NvmeGrid {
    /// A grid whose aggregation time may reach the latency ceiling `delay_us` (in whole
    /// 100 us units, at least one).
    pub(crate) fn with_ceiling(delay_us: u32) -> NvmeGrid {
        NvmeGrid {
            max_units: (delay_us / NVME_TIMER_US as u32).clamp(1, u32::from(u8::MAX)) as u8,
            ..NvmeGrid::default()
        }
    }

    /// A controller over its allowance as the plan starts from it: its threshold now, its
    /// completions (or what its rate carries at that threshold), its allowance, and what an
    /// interrupt is planned to carry.
    fn capped_plan(&self, c: &CtrlInput) -> Planned {
        let state = self.ctrls.get(&c.name);
        let t = state.map_or(1, |s| s.t);
        Planned {
            name: c.name.clone(),
            t,
            work: c.completions.unwrap_or(c.rate * f64::from(t)),
            allowance: c.allowance.unwrap_or(c.rate).max(1.0),
            fill: state.map_or(1.0, Ctrl::planned_fill),
            now: (t, c.rate),
        }
    }

    /// The aggregation time of coalesced controller `name`, 100 us units: one unless its
    /// threshold cannot bind (the longest the latency ceiling allows then).
    pub(crate) fn time_units(&self, name: &str) -> u8 {
        if self.ctrls.get(name).is_some_and(|c| c.long.is_some()) {
            self.max_units.max(1)
        } else {
            1
        }
    }

    /// The threshold wanted per controller (1 = off).
    pub(crate) fn thresholds(&self) -> impl Iterator<Item = (&String, u16)> {
        self.ctrls.iter().map(|(n, c)| (n, c.t))
    }

    /// The largest threshold a controller may use ([`Ctrl::bound`]).
    pub(crate) fn bound(&self, c: &CtrlInput) -> u16 {
        let tmax = max_threshold(c);
        self.ctrls.get(&c.name).map_or(tmax, |s| s.bound(tmax))
    }

    /// Sets the work of the NIC devices beside the controllers this period (bytes/s of the
    /// interfaces the moderator holds): what a step past a bound may buy on a platform past
    /// its knee.
    /// `held`: whether those interfaces' queues are held at a delay ceiling no shorter than
    /// the NVMe timer (see [`Self::update`]'s rule for a step that buys the NIC).
    pub(crate) fn set_beside(&mut self, bytes_per_sec: f64, held: bool) {
        self.beside = bytes_per_sec.max(0.0);
        self.beside_held = held;
    }

    /// Completions an interrupt of `name` carries per unit of threshold, as planned: as
    /// measured where its threshold cannot bind (on the longer time), 1 elsewhere.
    pub(crate) fn fill(&self, name: &str) -> f64 {
        self.ctrls.get(name).map_or(1.0, Ctrl::planned_fill)
    }

    /// Whether some timer-bound controller under its allowance would step one grid point down
    /// now or after its dwell, the most it could then make fitting `room` (interrupts/s under
    /// the aim): room a NIC beside would otherwise take, a relax step at a time, for shorter
    /// delays that buy it nothing a timer-bound drive would not buy more of (a completion an
    /// interrupt, its reads no longer waiting the timer).
    pub(crate) fn step_waiting(&self, inputs: &[CtrlInput], room: f64) -> bool {
        inputs.iter().filter(|c| c.allowance.is_none()).any(|c| {
            self.ctrls.get(&c.name).is_some_and(|s| {
                s.timer_bound()
                    && s.past.is_none()
                    && s.t > s.floor.max(1)
                    && s.rate_below(c, s.t - 1, self.time_units(&c.name)) - c.rate <= room
            })
        })
    }

    /// The threshold wanted for `name`.
    pub(crate) fn threshold(&self, name: &str) -> u16 {
        self.ctrls.get(name).map_or(1, |c| c.t)
    }

    /// One period. `total` is the device interrupt rate, `aim` where the fast loop wants it,
    /// `relax` whether the loop is relaxing (under the target's band), `raised` whether the
    /// target just rose (every controller may take its share of the room at once). Returns
    /// notes.
    pub(crate) fn update(
        &mut self,
        inputs: &[CtrlInput],
        total: f64,
        aim: f64,
        relax: bool,
        raised: bool,
    ) -> Vec<String> {
        self.period += 1;
        let period = self.period;
        let mut notes = Vec::new();
        self.ctrls
            .retain(|name, _| inputs.iter().any(|i| &i.name == name));
        // A floor says that one grid point lower went over the aim it was learned under; a
        // higher aim has room for it (the NIC queues' floors go the same way). Kept, a floor
        // learned early in a climb held drives past a target far above their natural rate
        // (held-out gen-30-28: 2 of 14 controllers at threshold 3 under a 3.05 M/s target,
        // 2.42 M/s against 2.62 M/s unheld, p99 1.42x `none`).
        if aim > self.aim * (1.0 + 1e-9) {
            for s in self.ctrls.values_mut() {
                s.floor = 1;
            }
        }
        self.aim = aim;
        // Steps past the reads-in-flight bound, after `DWELL` periods: kept when they bought
        // completions, undone otherwise.
        // Grid steps (the extra before the step) at which a step past the bound bought nothing.
        let mut failed_at: Vec<u16> = Vec::new();
        // Steps sent back this period for a moved aim: the next waits a period, so that its
        // baseline is measured at the bound (this period's completions are the step's).
        let mut unjudged: Vec<String> = Vec::new();
        let persist = if self.beside > 0.0 { 1 } else { DWELL };
        forget_changed(&mut self.past_failed, inputs, persist);
        forget_changed(&mut self.long_failed, inputs, persist);
        let max_units = self.max_units.max(1);
        let beside = self.beside;
        for c in inputs {
            let Some(s) = self.ctrls.get_mut(&c.name) else {
                continue;
            };
            let tmax = max_threshold(c);
            let w = c.completions.unwrap_or(0.0);
            if c.completions.is_some() {
                if s.recent.len() == JUDGED {
                    s.recent.pop_front();
                }
                s.recent.push_back(w);
            }
            s.over = if c.allowance.is_some() { s.over + 1 } else { 0 };
            // What an interrupt carries at this threshold, once the smoothed rate has had
            // `FILL_SETTLE` periods to follow a change.
            if s.t >= 2 && c.rate > 0.0 && w > 0.0 && period - s.last_change >= FILL_SETTLE {
                let m = (w / c.rate / f64::from(s.t)).clamp(MIN_FILL, 1.0);
                s.fill += FILL_WEIGHT * (m - s.fill);
                // Reads in flight are the host's view, and they count the reads a threshold
                // keeps waiting for their batch: where the host submits regardless (a CPU-bound
                // load, not a closed loop), a lower threshold shortens the waits, the reads in
                // flight fall with them, and the bound computed from them falls again, down to
                // the load's own depth. A threshold its interrupts are measured to fill is
                // reached, not cut short by the timer: what the bound guards against is not
                // happening, and it stays allowed while the load does.
                // A step past the bound is judged by what it buys, not by its fill.
                if s.fill < TIMER_CUT_FILL {
                    s.filled = 0;
                } else if s.past.is_none() && s.t > s.filled {
                    s.filled = s.t;
                    s.filled_work = w;
                }
                // Over its allowance for `STUCK` periods with a threshold the timer cuts
                // short: a longer time is tried (see the module documentation).
                if s.long.is_none()
                    && max_units > 1
                    && beside <= 0.0
                    && s.over >= STUCK
                    && s.fill < TIMER_CUT_FILL
                    && !self.long_failed.contains_key(&c.name)
                {
                    s.long = Some((period, w, false));
                    s.last_change = period;
                }
            }
            // A new load: what was measured to fill at the old one says nothing.
            if s.filled > 0 && ((w - s.filled_work) / s.filled_work).abs() > FLOOR_RESET {
                s.filled = 0;
            }
            match s.long {
                // Judged after `DWELL` periods: kept when it bought completions, undone when
                // not (a closed loop whose reads only wait longer).
                Some((since, w0, false)) if period - since >= DWELL => {
                    if w >= w0 * (1.0 + PAST_GAIN) {
                        s.long = Some((period, w, true));
                    } else {
                        self.long_failed.insert(c.name.clone(), Failed::at(w0));
                        s.long = None;
                        s.last_change = period;
                    }
                }
                // Kept until the load leaves (its completions fall by a quarter from the most
                // seen on it).
                Some((since, w0, true)) => {
                    if w < w0 * (1.0 - FLOOR_RESET) {
                        s.long = None;
                        s.last_change = period;
                    } else if w > w0 {
                        s.long = Some((since, w, true));
                    }
                }
                _ => {}
            }
            // A fall its own threshold caused (a step past the bound making every read wait
            // for the timer, a relax step down) is no new load: judged only at the threshold
            // the extra was proven at.
            if s.extra > 0
                && s.past.is_none()
                && s.t == s.extra_t
                && w < s.extra_work * (1.0 - FLOOR_RESET)
            {
                s.extra = 0;
            }
            if let Some(p) = s.past {
                let Past {
                    since,
                    work: w0,
                    beside: b0,
                    held,
                    aim: aim0,
                    noise,
                } = p;
                if period - since < DWELL && (aim - aim0).abs() <= 0.01 * aim0 {
                    continue;
                }
                s.past = None;
                if (aim - aim0).abs() > 0.01 * aim0 {
                    // The target moved under it: no verdict either way, back to the bound.
                    // Unless it cost its own reads a quarter of their completions with no NIC
                    // beside for it to buy: no move of the target explains that, and tried
                    // again at the next probe it costs them as much (held-out gen-52-5: three
                    // drives at iodepth 1, a step made every read wait the timer, -71%, unjudged
                    // twice, 0.7% of all reads held 100 us, p99 1.04x static's).
                    s.t = s.t.min(s.bound(tmax));
                    s.last_change = period;
                    if b0 <= 0.0 && w0 > 0.0 && w < w0 * (1.0 - FLOOR_RESET) {
                        self.past_failed.insert(c.name.clone(), Failed::at(w0));
                    } else {
                        unjudged.push(c.name.clone());
                    }
                    continue;
                }
                // What the step cost the controller, against what it bought beside it.
                let own = if w0 > 0.0 { w / w0 - 1.0 } else { 0.0 };
                let beside = if b0 > 0.0 {
                    self.beside / b0 - 1.0
                } else {
                    0.0
                };
                // The NIC beside held at its ceiling (when the step was set, or now that its
                // effect shows: a NIC climbing back to it after a knee probe) and still short
                // of DMA: the drives are held as long as it is (their timer), for as long as
                // that buys it work.
                let for_nic = (held || self.beside_held) && beside >= PAST_GAIN;
                // Its own gain, over the dwell's last periods against those before the step,
                // past their noise.
                let (gain, bar) = match (noise, judged(&s.recent)) {
                    (Some(e0), Some((w1, e1))) if w0 > 0.0 => (
                        w1 / w0 - 1.0,
                        (Z * e0.hypot(e1)).clamp(MIN_EFFECT, PAST_GAIN),
                    ),
                    _ if w0 > 0.0 => (w / w0 - 1.0, PAST_GAIN),
                    // Nothing completed before the step: whatever it does now is no loss.
                    _ => (0.0, 0.0),
                };
                // A gain past the least effect that the spread before the step kept under its
                // bar (a baseline still moving: the steps before it settling), or that had no
                // spread measured, is no verdict yet: back to the bound, and asked once more
                // from a baseline of `JUDGED` periods there (held-out gen-42-18: steps buying
                // 2.2-2.7% were marked as buying nothing at a baseline spread by the step
                // before).
                let unclear = gain >= MIN_EFFECT && gain < bar && s.retry.is_none();
                if gain >= bar || (beside > 0.0 && own + beside >= PAST_GAIN) || for_nic {
                    s.extra = s.t.saturating_sub(tmax);
                    s.extra_work = w;
                    s.extra_t = s.t;
                    s.retry = None;
                } else {
                    if unclear {
                        s.retry = Some(period + JUDGED as u64);
                    } else {
                        s.retry = None;
                        self.past_failed.insert(c.name.clone(), Failed::at(w0));
                        if held {
                            failed_at.push(s.extra);
                        }
                    }
                    s.t = s.t.min(s.bound(tmax));
                    s.last_change = period;
                }
            }
        }
        // The controllers at the grid step a group's step past the bound failed from, not yet
        // tried: the same step would buy them nothing either (one group pays for the verdict).
        for c in inputs {
            let (extra, past) = self
                .ctrls
                .get(&c.name)
                .map_or((0, false), |s| (s.extra, s.past.is_some()));
            if !past && failed_at.contains(&extra) {
                if let Some(w) = c.completions {
                    self.past_failed
                        .entry(c.name.clone())
                        .or_insert(Failed::at(w));
                }
            }
        }
        // Over target: feedforward thresholds, then round some down while the sum holds.
        let capped: Vec<&CtrlInput> = inputs.iter().filter(|c| c.allowance.is_some()).collect();
        // Steps past the bound go a group at a time (a quarter of the controllers, those
        // fewest grid points past their bound first), one group judged at a time: the work
        // beside answers for that group alone, and the steps stop where it stops buying (a
        // NIC at its line rate).
        // Only for the NIC at its ceiling: steps judged by the drives' own completions (a host
        // freed of interrupts) gain one by one, and go together as before.
        let grouped = self.beside_held;
        let in_past = grouped && self.ctrls.values().any(|s| s.past.is_some());
        let group = if grouped {
            inputs.len().div_ceil(4).max(1)
        } else {
            inputs.len()
        };
        let mut may: Vec<(u16, &str)> = capped
            .iter()
            .filter(|c| {
                let p = self.capped_plan(c);
                c.in_flight_per_vector.is_some()
                    && c.completions.is_some()
                    && !self.past_failed.contains_key(&c.name)
                    && !unjudged.contains(&c.name)
                    && self
                        .ctrls
                        .get(&c.name)
                        .and_then(|s| s.retry)
                        .is_none_or(|at| period >= at)
                    && p.t >= self.bound(c)
                    && p.need() > f64::from(self.bound(c))
            })
            .map(|c| {
                (
                    self.ctrls.get(&c.name).map_or(0, |s| s.extra),
                    c.name.as_str(),
                )
            })
            .collect();
        may.sort_unstable();
        let pass_group: Vec<String> = if in_past {
            Vec::new()
        } else {
            may.iter().take(group).map(|m| m.1.to_string()).collect()
        };
        let mut plan: Vec<Planned> = Vec::new();
        // Controllers planned one grid point past their bound: (name, completions, bound).
        let beside = self.beside;
        let beside_held = self.beside_held;
        let mut passing: Vec<(String, f64, u16)> = Vec::new();
        self.at_limit = false;
        for c in &capped {
            let planned = self.capped_plan(c);
            let (cur, work) = (planned.t, planned.work);
            let state = self.ctrls.get(&c.name);
            let need = planned.need();
            let tmax = self.bound(c);
            let probing = state.is_some_and(|s| s.past.is_some());
            // One grid point past the bound, unless that bought nothing at this load (see the
            // module documentation).
            let may_pass = pass_group.contains(&c.name);
            // Waiting for its group's turn is not being held at the bound.
            let waiting = may.iter().any(|m| m.1 == c.name);
            let reach = if probing {
                cur.max(tmax)
            } else if need > tmax as f64 && may_pass {
                (tmax + 1).min(MAX_THRESHOLD)
            } else {
                tmax
            };
            let note = if c.in_flight_per_vector.is_none() {
                Some(format!(
                    "{}: not coalesced: its reads in flight are unknown (no /proc/diskstats), and a threshold above them would make every read wait",
                    c.name
                ))
            } else if need > reach as f64 && !probing && !waiting {
                Some(format!(
                    "{}: needs more completions per interrupt than its vectors have reads in flight: threshold held at {tmax}",
                    c.name
                ))
            } else {
                None
            };
            self.at_limit |= note.is_some();
            match note {
                Some(n) if self.said.get(&c.name) != Some(&n) => {
                    self.said.insert(c.name.clone(), n.clone());
                    notes.push(n);
                }
                Some(_) => {}
                None => {
                    self.said.remove(&c.name);
                }
            }
            let t = (need as u16).min(reach).max(cur.min(reach));
            plan.push(Planned { t, ..planned });
            if t > tmax && !probing {
                passing.push((c.name.clone(), work, tmax));
            }
        }
        // Rounding down where the allowances together still hold (largest slack first), never
        // below where a controller is while over target.
        let allowance: f64 = plan.iter().map(|p| p.allowance).sum();
        let lowest: Vec<u16> = plan
            .iter()
            .map(|p| self.ctrls.get(&p.name).map_or(1, |s| s.t).max(1))
            .collect();
        land_between(&mut plan, &lowest, allowance);
        for Planned { name, t, work, .. } in plan {
            if let Some(&(_, w0, tmax)) = passing.iter().find(|p| p.0 == name) {
                if t > tmax {
                    let s = self.ctrls.entry(name.clone()).or_default();
                    // One period's spread over the last ones (a baseline still moving, a load
                    // arriving, reads as spread: the bar stays at `PAST_GAIN`).
                    let noise = judged(&s.recent).map(|b| b.1 * (JUDGED as f64).sqrt());
                    s.past = Some(Past {
                        since: period,
                        work: w0,
                        beside,
                        held: beside_held,
                        aim,
                        noise,
                    });
                }
            }
            let s = self.ctrls.entry(name).or_default();
            if t > s.t {
                // Going up soon after a step down: that step did not hold at this load.
                if s.last_down.is_some_and(|d| period - d <= 4 * DWELL) {
                    s.floor = t;
                    s.floor_work = work;
                }
                s.t = t;
                s.last_change = period;
            }
        }
        // The target rose: each controller down to what its share of the new aim needs, some
        // a grid point further where the total still fits the aim, so that the machine lands
        // in the band at once (rounding every one up left it under the band, and the rest came
        // one grid point per `DWELL`, while the knee search waited at every step).
        if raised && total > 0.0 && total < aim {
            let mut plan: Vec<Planned> = Vec::new();
            let mut lowest: Vec<u16> = Vec::new();
            for c in inputs.iter().filter(|c| c.allowance.is_none()) {
                let (Some(s), Some(w)) = (self.ctrls.get(&c.name), c.completions) else {
                    continue;
                };
                if w <= 0.0 {
                    continue;
                }
                // Its share of the new aim, as every held NIC queue gets.
                let mut p = Planned {
                    name: c.name.clone(),
                    t: s.t,
                    work: w,
                    allowance: c.rate * aim / total,
                    fill: s.planned_fill(),
                    now: (s.t, c.rate),
                };
                if s.timer_bound() {
                    // Its rate at a lower threshold is not its share's arithmetic (see
                    // [`Ctrl::rate_below`]): down only as far as the most it could make there
                    // fits its share, and no further in the rounding.
                    let units = self.time_units(&c.name);
                    let mut t = s.t;
                    while t > s.floor.max(1) && s.rate_below(c, t - 1, units) <= p.allowance {
                        t -= 1;
                    }
                    p.t = t;
                    p.fill = if t == s.t { s.fill } else { 1.0 };
                    lowest.push(t);
                } else {
                    p.t = (p.need() as u16).max(s.floor).max(1).min(s.t);
                    lowest.push(s.floor.max(1));
                }
                plan.push(p);
            }
            let budget: f64 = plan.iter().map(|p| p.allowance).sum();
            land_between(&mut plan, &lowest, budget);
            for Planned { name, t, .. } in plan {
                if let Some(s) = self.ctrls.get_mut(&name) {
                    if t < s.t {
                        s.t = t;
                        s.last_change = period;
                    }
                }
            }
        }
        // Under target: one grid point down where the rate it would make still fits.
        let mut total = total;
        for c in inputs.iter().filter(|c| c.allowance.is_none()) {
            let tmax = self.bound(c);
            let units = self.time_units(&c.name);
            let s = self.ctrls.entry(c.name.clone()).or_default();
            if s.t > tmax && s.past.is_none() {
                // Fewer reads in flight than the threshold: lower it at once (latency).
                let r = c.rate * s.t as f64 / tmax as f64;
                total += r - c.rate;
                s.t = tmax;
                s.last_change = period;
                continue;
            }
            if let Some(w) = c.completions {
                if s.floor > 1
                    && s.floor_work > 0.0
                    && ((w - s.floor_work) / s.floor_work).abs() > FLOOR_RESET
                {
                    s.floor = 1;
                }
            }
            if !relax || s.t <= s.floor.max(1) || period - s.last_change < DWELL {
                continue;
            }
            let r = s.rate_below(c, s.t - 1, units);
            if total - c.rate + r <= aim {
                total += r - c.rate;
                s.t -= 1;
                s.last_change = period;
                s.last_down = Some(period);
            }
        }
        // A proven extra outlives a lowered threshold (a knee probe's raise): the load is the
        // same, and back over target the controller returns to it at once.
        // A controller just stepped down to 1 is kept too: were it forgotten, a step back up
        // soon after would not set the floor that ends a cycle between 1 and 2.
        self.ctrls.retain(|_, s| {
            s.t > 1
                || s.floor > 1
                || s.extra > 0
                || s.last_down.is_some_and(|d| period - d <= 4 * DWELL)
        });
        notes
    }
}

#[cfg(test)]
mod tests;
