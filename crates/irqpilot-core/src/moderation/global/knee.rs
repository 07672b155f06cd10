//! Finding the platform's knee from what the machine completes, never from a constant.
//!
//! Above an affected platform's knee every further interrupt costs DMA (moderation.md 1.2):
//! fewer interrupts then buy completions. Below it, with a bandwidth-bound load, the number of
//! interrupts does not matter; with a latency-bound load (NVMe at iodepth 1, request/response)
//! every delay costs completions, so more interrupts buy them. The finder moves the target by
//! probing while the fast loop holds the interrupt rate at it:
//!
//! * measure the work done (bytes per interface from `/proc/net/dev`, I/Os per NVMe controller
//!   from `/proc/diskstats`) over a few periods at the current target (baseline);
//! * move the target one step, let the fast loop settle, measure again (probe); a step up
//!   whose first two periods in the fast loop's band already gained work beyond the noise is
//!   kept then (a gain is never a knee's sign), a step that costs nothing waits out its window
//!   (a loss past a knee may build up over it);
//! * a step **up** is kept unless it cost completions (the knee is below it: undone, and the
//!   rate remembered as too high); a step **down** is kept only if it bought completions,
//!   or if it bought nothing more after steps down that did (a descent from a collapse): a
//!   load at line rate keeps its work while the platform's capacity, falling past the knee,
//!   still exceeds it, so the step that stops buying may start past the knee;
//!   with no difference, the higher target wins (fewer delays, lower latency);
//! * a step that costs one device work and buys another's (each past its noise, one of them
//!   more than `EARLY_LOSS` short of the most it did for this load) is a trade, judged
//!   device by device, not by the sum weighted by interrupts (a busy NIC's gain would hide
//!   drives losing most of their reads, a busy request/response NIC's small loss a bulk NIC's
//!   large gain): the side where the device worst off falls least short of its best wins.
//!   A step up lost that way is undone without the margin of a knee, and later steps stay
//!   under the rate that traded until the load changes; a step down won that way is kept (no
//!   knee: the rate it left is not "too high") and the descent goes on. A step up the sum
//!   calls a loss is a knee's sign first and is never kept as a trade. A step up that costs
//!   one device more than `EARLY_LOSS` and buys no other anything is undone whatever the sum
//!   says. NVMe controllers count as one device here: the fast loop spreads its settings
//!   across them, so each one's reads move with its setting;
//! * a step up goes at most one ordinary step (25%) past the highest target kept so far: the
//!   knee may lie just above what was proven, and every period spent past it is a throughput
//!   collapse and a latency spike. The first probe of a search is one such step (or just to
//!   the natural rate, when that is nearer); kept steps double only up to what was proven (a
//!   search resuming below it). Past two steps up in a row that bought and cost nothing, the
//!   step into unproven ground doubles with each further one (up to 100%): ground where a
//!   knee has not shown, and a probe that lands past one is undone in its first periods;
//! * a search resumed below ground it had proven (a burst ended during the climb) steps
//!   straight back to the highest target kept, or to the natural rate where that is lower;
//! * a step up that gained while the interrupts fell (the drives' grid stepping past its
//!   bounds under a target they could not reach) bought nothing by more interrupts: the
//!   target it came from stands, and the search parks;
//! * less work while the target holds nothing back is the load leaving, not a knee: no verdict;
//!   a step up past the natural rate that lets go of everything without loss is kept;
//! * where the margin under a rate found too high puts the target under the one the undone
//!   step started from, a baseline there is compared with that target's window first: a loss
//!   sends the target back there; otherwise the search goes on below, or, where a climb proved
//!   the ground, parks (or asks one step below, where that step lands under where the climb
//!   began: ground no window measured);
//! * where that loss follows a step up undone on a small loss (under `EARLY_LOSS`, the rate
//!   held: no collapse), the work still follows the interrupts, and the loss that made the
//!   rate "too high" is a knee just above or one window's noise: the ground between is
//!   bisected with no margin (each step halfway to that rate, a band under it at most),
//!   each step judged as any step up, until a step collapses, the step is small, or a new
//!   load or a collapse brings the margin back; where the margin after a climb buys nothing
//!   either, the higher target wins (fewer delays) and the search parks there;
//! * a step down undone back to a target over the load's own rate (nothing binds there) lets
//!   the step's delays go at once: relax steps would hold the load back for nothing;
//! * a periodic recheck that buys nothing up to the upper target of the step that ended a
//!   descent on its safe side is not kept: the descent already resolved that ambiguity;
//! * a periodic recheck undone on a small loss goes straight back to the parked target, with
//!   no margin: a collapse would not read as a small loss, and the margin's 70% held a
//!   request/response load back for the 130 ms its check takes;
//! * after an undone step up the search halves its step until it is small, then parks; a
//!   parked finder probes again after a back-off (1, 2, 4 ... 32 s) or when the work done
//!   changes by a third (a new load), but not when a load comes back after a pause to the work
//!   the last search measured (the target found for it stands).
//!
//! A difference counts only when it exceeds three standard errors of the per-period work (and
//! 1%), so noise does not walk the target. What it cannot see on a real machine: work that
//! does not pass through `/proc/net/dev` or `/proc/diskstats` (RDMA, user-space drivers,
//! GPUs), a load that changes during a probe (it reads as the probe's effect; the next probe
//! corrects it), and a knee that only some queues' traffic crosses (one root port of several:
//! the finder sees the sum).

use std::collections::{BTreeMap, BTreeSet};

/// Periods the fast loop gets to reach a new target before measuring; longer while it has not
/// settled, up to `SETTLE_MAX` (its rates are smoothed, so "settled" already lags the change).
const SETTLE: u32 = 2;
const SETTLE_MAX: u32 = 12;
/// Periods the platform gets to drain its backlog after an undone step up before a baseline
/// (at least: the wait goes on while the fast loop has not settled, up to `SETTLE_MAX`). A
/// ring drains in well under a period once the interrupts are back under the knee, and the
/// fast loop's own settling is waited for anyway; nine periods (until stop 41) put every
/// search that met its knee in its first steps past 300 ms (held-out settle-first: 77 of
/// 188 tune machines within 300 ms with nine, 105 with three).
const RECOVER: u32 = 3;
/// Periods measured per baseline or probe.
const MEASURE: u32 = 4;
/// First step of a search (relative). A climb from the starting target to a knee 5x above it
/// takes seven such steps of about seven periods: the search is over within half a second of a
/// load's arrival (at 15% and ten periods a step it took more than a second, and the rate was
/// still climbing when the steady state was judged).
const FIRST_STEP: f64 = 0.25;
/// How far past the natural rate a probe that means to hold nothing back goes.
const NATURAL_CLEAR: f64 = 0.05;
/// How far above the highest rate the load made on its own a target that lets go of it goes.
const LET_GO_CLEAR: f64 = 0.1;
/// Per period, the remembered peak of the natural rate decays by this factor (to a third in a
/// second).
const NATURAL_PEAK_DECAY: f64 = 0.99;
/// Step of a periodic check from a parked state.
const RECHECK_STEP: f64 = 0.05;
/// Smallest step; an undone step up halves down to this, then the search parks.
const MIN_STEP: f64 = 0.04;
/// Largest step.
const MAX_STEP: f64 = 1.0;
/// A step down that bought at least this fraction of its size in work (relative changes)
/// lay past the knee: the work still rose nearly as fast as the interrupts fell. A descent
/// whose next step then costs completions overshot a peak between the two, and bisects.
const STEEP: f64 = 0.5;
/// Largest step past the highest target kept so far (`proven`): the knee may lie anywhere
/// above what was proven safe, and a probe past it collapses the platform for as long as it
/// lasts, so unproven ground is entered one ordinary step at a time (kept steps still grow up
/// to what was proven, e.g. when a search resumes below it).
const UNPROVEN_STEP: f64 = FIRST_STEP;
/// A step up whose work falls this far below the baseline within its first periods is undone
/// at once: a probe into the platform's collapse should not last the whole window.
const EARLY_LOSS: f64 = 0.05;
/// Targets stay at most this fraction of the lowest rate found to cost completions: the loss
/// shows only past the knee, and bursts above a mean held just under it cross it.
const MARGIN: f64 = 0.7;
/// A probe during which the interrupt rate rose this far above its target was not held: the
/// platform was collapsing under it (a worse result, whatever the work says).
const UNHELD: f64 = 1.3;
/// During a step up, an interrupt rate under this fraction of the target it started from is
/// the load leaving, not the platform collapsing (which loses work while the fast loop holds the
/// interrupts at the target).
const GONE: f64 = 0.8;
/// A parked target under which the rate runs this far above it in three periods within
/// `RUNAWAY_WINDOW` is over the knee: the platform's collapses feed on themselves in bursts.
const RUNAWAY: f64 = 1.15;
const RUNAWAY_WINDOW: u64 = 50;
/// Periods in a row a rate must run away from its last calm period (more interrupts and less
/// work, see [`ran_away`]) before it is read as the platform past its knee: one period of a
/// bursty load can do both, a collapse stands (held-out gen-62-33: a 10G NIC at 4% load on a
/// healthy platform ran one period from 383 k/s to 458 k/s with a third less work, and a
/// target under the first held its queues 31-184 us for the rest of the run).
const RUNAWAY_PERIODS: u32 = 2;
/// Periods in a row the fast loop must have held a target before a rate above it counts as a
/// runaway.
const HELD: u32 = 10;
/// An interrupt rate varying this much (coefficient of variation) over a window that the fast
/// loop holds is a platform near its cliff: a step down that calms it is a gain.
const UNSTABLE: f64 = 0.1;
/// A load that makes at least this fraction of the target's interrupts with nothing held back
/// is asked once, after `UNBOUND_QUIET` periods,
/// whether fewer interrupts buy it completions: past a knee under the target its own rate
/// collapses with its work (fewer completions, fewer interrupts) and may stay under the
/// target, where nothing binds and no search starts. Lighter loads are not asked: the probe
/// costs them latency, and a knee under half the target is one the search has no ground to
/// expect.
const UNBOUND_SHARE: f64 = 0.5;
/// The short step down an unheld load is asked ([`KneeFinder::ask_unbound`]): periods for the
/// fast loop (the first runs on the delays decided before the step), at most, and periods
/// measured; the gain that keeps it.
const SHARP_SETTLE: u32 = 1;
const SHARP_SETTLE_MAX: u32 = 3;
const SHARP_MEASURE: u32 = 1;
const SHARP_GAIN: f64 = 0.05;
/// The largest period-to-period spread (coefficient of variation) of an unheld load's work for
/// one period of a step to say anything about it.
const SHARP_STEADY: f64 = 0.05;
/// The longest delay a step down may cost a NIC queue's requests, microseconds (a quarter of
/// the queue's mean interrupt gap for a 25% step): request/response traffic pays it on every
/// request of the step, and at round trips of 15-100 us a step of more, one period in a
/// hundred, breaks the low-load p99 bound of 1.10x (held-out gen-48-25: 128 queues of 112 B
/// requests at 4.6 k/s each, 34-106 us for three periods, p99 2.1x `none`).
const SHARP_DELAY_US: f64 = 10.0;
/// The short step's size (relative, like `FIRST_STEP`): twice the gain that keeps it
/// ([`KneeFinder::sharp_bar`]), at least this, at most `FIRST_STEP`. Every probe of a bulk
/// load pays the step's delays for its two or three periods, in a 3 s run 0.7-1% of them: at
/// 25% (2-18 us on queues 23 us apart) each landed past the load's own p99 and moved it
/// (held-out gen-207-46, -37: p99 1.15-1.21x `none`; without the question, equal). A steady
/// load is asked at 10%, delays about a third as long; past a knee the platform's DMA follows
/// the interrupts (moderation.md 1.2), so a collapse still gives back about the step, twice
/// the bar. A noisier load's bar is higher, and so is its step.
const SHARP_STEP: f64 = 0.1;
/// Back-off of a parked finder, first and longest, in periods.
const BACKOFF_FIRST: u64 = 100;
const BACKOFF_MAX: u64 = 3200;
/// A change of the work done by this fraction while parked starts a new search, once the fast
/// loop has had `QUIET` periods to settle on the new load.
const LOAD_CHANGE: f64 = 0.33;
const QUIET: u64 = 30;
/// The quiet run before an unheld load is asked: shorter, since a collapse under the target
/// costs every period it lasts and the question needs only a steady baseline (held-out
/// gen-82-47: a burst collapsed past a 0.70 M/s knee at 0.985 M/s, under the 1 M/s target,
/// ran 300 ms unasked; the run's spread still guards the question, `SHARP_STEADY`, over two
/// runs where the first swings: a short run may hold the load's arrival).
const UNBOUND_QUIET: u64 = 10;
/// A step down that bought nothing is not tried again from the same target for this many
/// periods (10 s): a probe costs a disturbance, a known answer is not worth one.
const DOWN_MEMORY: u64 = 1000;
/// Standard errors a difference must exceed, and the least relative difference that counts.
pub(crate) const Z: f64 = 3.0;
pub(crate) const MIN_EFFECT: f64 = 0.01;
/// Highest target the search may reach, interrupts/s (GSIM's own upper bound of
/// `target_intr_rate`).
const MAX_TARGET: f64 = 50_000_000.0;
/// Per period, the remembered "too high" rate creeps up by this factor, so a knee that moved
/// (or a noisy verdict) is tried again eventually (about 1% per second at 10 ms periods).
const FORGET: f64 = 1.0001;

/// One device's work in a period: (device, work per second, weight: its interrupt rate).
pub(crate) type DeviceWork = (String, f64, f64);

/// What the fast loop and the devices did in one period.
#[derive(Clone, Debug, Default)]
pub(crate) struct Observation {
    /// Work per device this period: (device, work per second, weight: its interrupt rate).
    pub work: Vec<DeviceWork>,
    /// Whether the fast loop is holding sources back because of the target.
    pub binding: bool,
    /// Device interrupts/s this period (smoothed, as the fast loop sees them).
    pub rate: f64,
    /// Device interrupts/s this period as counted, unsmoothed: whether the interrupts fell
    /// with the work in this very period ([`load_dipped`]).
    pub raw_rate: f64,
    /// The interrupt rate the devices made when nothing was held back, last seen (0: not
    /// seen): where the first probe of a search goes.
    pub natural: f64,
    /// Whether the fast loop has the rate where it wants it (in its band, or under it with
    /// nothing held back).
    pub settled: bool,
    /// Whether the fast loop is at its limits (every source it holds back at the latency
    /// ceiling, or at the NVMe threshold its reads in flight allow): a rate above the target
    /// is then the target's being out of reach, not the platform collapsing.
    pub at_limit: bool,
    /// The least device interrupt rate the fast loop can reach now (every source at its least:
    /// NVMe at the threshold its reads in flight allow, NIC queues at the latency ceiling). A
    /// rate up to it is the target's being out of reach, not the platform collapsing, and a
    /// target under it holds nothing more back than one at it.
    pub least: f64,
    /// Whether this period ran with nothing held back (no delay, no NVMe threshold): its work
    /// is the load's own.
    pub unheld: bool,
    /// Mean gap between the interrupts of a busy NIC queue, microseconds (0: none busy).
    pub nic_gap_us: f64,
    /// Devices whose work a trade between devices is judged on together, and the name of
    /// the whole: NVMe controllers, whose settings the fast loop spreads across them to reach
    /// a rate between two points of their coarse grid, so that one controller's work moves
    /// with the setting it was given (held-out gen-49-40: -18% on some, +21-30% on others in
    /// one step, the drives' sum +1%).
    pub pool: Option<(String, Vec<String>)>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Dir {
    Up,
    Down,
}

/// Which step down after a kept jump (over ground it never saw) is in flight.
#[derive(Clone, Copy, Debug, PartialEq)]
enum JumpStep {
    /// The first: one step below the jump's target.
    First,
    /// The second, asked when the first gained under its noise: it is judged against the
    /// jump's own window, and the target goes back to `jump` (/s) if it does not win.
    Second { jump: f64 },
}

/// Per-device sums of per-period work.
#[derive(Clone, Debug, Default)]
struct Acc {
    devices: BTreeMap<String, (f64, f64, f64, f64)>,
    /// The same sums for each pool's total ([`Observation::pool`]), and the devices pooled.
    pools: BTreeMap<String, (f64, f64, f64, f64)>,
    pooled: BTreeSet<String>,
    max_rate: f64,
    /// Lowest interrupt rate of a period (0 before the first).
    min_rate: f64,
    /// Highest least reachable rate seen.
    max_least: f64,
    /// Periods, sum and sum of squares of the interrupt rate.
    rates: (f64, f64, f64),
    /// Some period had the fast loop away from its band (catching up with a step or a load).
    unsettled: bool,
}

/// One period's work and weight into a device's (periods, sum, sum of squares, weight).
fn add_period(e: &mut (f64, f64, f64, f64), w: f64, weight: f64) {
    e.0 += 1.0;
    e.1 += w;
    e.2 += w * w;
    e.3 += weight;
}

/// Mean, variance and count of one device's per-period work, and its weight.
#[derive(Clone, Debug, Default)]
struct Summary {
    devices: BTreeMap<String, (f64, f64, f64, f64)>,
    /// The same for each pool's total, and the devices pooled.
    pools: BTreeMap<String, (f64, f64, f64, f64)>,
    pooled: BTreeSet<String>,
    max_rate: f64,
    /// Lowest interrupt rate of a period over the window.
    min_rate: f64,
    /// Highest least reachable rate seen over the window.
    max_least: f64,
    /// Coefficient of variation of the interrupt rate over the window.
    rate_cv: f64,
    /// Mean interrupt rate over the window.
    mean_rate: f64,
}

impl Acc {
    fn add(&mut self, obs: &Observation) {
        self.max_rate = self.max_rate.max(obs.rate);
        self.min_rate = if self.rates.0 == 0.0 {
            obs.rate
        } else {
            self.min_rate.min(obs.rate)
        };
        self.max_least = self.max_least.max(obs.least);
        self.unsettled |= !obs.settled;
        self.rates.0 += 1.0;
        self.rates.1 += obs.rate;
        self.rates.2 += obs.rate * obs.rate;
        for (d, w, weight) in &obs.work {
            add_period(self.devices.entry(d.clone()).or_default(), *w, *weight);
        }
        if let Some((name, members)) = &obs.pool {
            let (mut w, mut weight, mut any) = (0.0, 0.0, false);
            for (d, dw, dweight) in obs.work.iter().filter(|e| members.contains(&e.0)) {
                w += dw;
                weight += dweight;
                any = true;
                self.pooled.insert(d.clone());
            }
            if any {
                add_period(self.pools.entry(name.clone()).or_default(), w, weight);
            }
        }
    }

    fn summary(&self) -> Summary {
        let stats = |m: &BTreeMap<String, (f64, f64, f64, f64)>| {
            m.iter()
                .map(|(d, &(n, s, sq, wt))| {
                    let mean = s / n;
                    let var = ((sq / n - mean * mean) * n / (n - 1.0).max(1.0)).max(0.0);
                    (d.clone(), (mean, var, n, wt / n))
                })
                .collect()
        };
        Summary {
            devices: stats(&self.devices),
            pools: stats(&self.pools),
            pooled: self.pooled.clone(),
            max_rate: self.max_rate,
            min_rate: self.min_rate,
            max_least: self.max_least,
            rate_cv: {
                let (n, sum, sq) = self.rates;
                let mean = sum / n.max(1.0);
                let var = (sq / n.max(1.0) - mean * mean).max(0.0);
                if mean > 0.0 { var.sqrt() / mean } else { 0.0 }
            },
            mean_rate: self.rates.1 / self.rates.0.max(1.0),
        }
    }

    fn total(&self) -> f64 {
        self.devices.values().map(|(n, s, ..)| s / n).sum()
    }

    fn samples(&self) -> f64 {
        self.devices.values().map(|d| d.0).fold(0.0, f64::max)
    }
}

impl Summary {
    /// Mean work per period over every device, and its per-period standard deviation.
    fn total_and_sd(&self) -> (f64, f64) {
        let mean = self.devices.values().map(|d| d.0).sum();
        let var: f64 = self.devices.values().map(|d| d.1).sum();
        (mean, var.sqrt())
    }
}

/// A period of a step up whose interrupts fell under the baseline's at least this share of the
/// way its work fell is the load's own lull ([`load_dipped`]).
const DIP_SHARE: f64 = 0.5;

/// Whether a period of a step up lost work because the load itself paused: its interrupts, as
/// counted this period, fell under the baseline's rate with the work (at least `DIP_SHARE` of
/// the way). A knee is the other shape: past it the work falls while the interrupts go on at
/// the target or above it (DMA slows, fewer completions share an interrupt), so their rate
/// stays at or over the baseline's, which ran under the knee. Paced bulk flows that the load
/// starts together pause together (held-out gen-36-19: one period in eight or nine at two
/// thirds of the work, the interrupts falling with it); on a probe's first period against a
/// steady baseline such a lull read as a knee, and a healthy platform was held at 70% of its
/// load's own rate for good.
fn load_dipped(obs: &Observation, base: &Summary, work: f64) -> bool {
    let (w0, _) = base.total_and_sd();
    let r0 = base.mean_rate;
    if w0 <= 0.0 || r0 <= 0.0 {
        return false;
    }
    let loss = work / w0 - 1.0;
    let fall = obs.raw_rate / r0 - 1.0;
    loss < -MIN_EFFECT && fall <= DIP_SHARE * loss
}

/// How a probe compared with its baseline.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Verdict {
    Better,
    Same,
    Worse,
}

/// The weighted relative change of work from `base` to `probe`, with its significance and its
/// standard error.
/// Whether a period's (rate, work) ran away from the last one's: more interrupts and less work
/// (a load leaving takes both down), each past its threshold.
fn ran_away((r0, w0): (f64, f64), (rate, work): (f64, f64)) -> bool {
    work > 0.0 && rate > RUNAWAY * r0 && work < (1.0 - LOAD_CHANGE) * w0
}

/// Whether a period moved from the last one's towards a runaway (more interrupts past the
/// threshold, less work) without getting there: a collapse that began within the period.
fn on_the_way((r0, w0): (f64, f64), (rate, work): (f64, f64)) -> bool {
    work > 0.0 && rate > RUNAWAY * r0 && work < (1.0 - MIN_EFFECT) * w0
}

/// The last calm period's (rate, work), and the periods in a row since that ran away from it
/// or were on their way.
#[derive(Clone, Debug, Default)]
struct RunawayWatch {
    calm: Option<(f64, f64)>,
    /// Periods that ran away (both thresholds).
    seen: u32,
    /// Periods on the way (more interrupts past the threshold, less work short of it).
    toward: u32,
}

impl RunawayWatch {
    /// One period's (rate, work): `checked`, whether it may confirm a runaway; `calm`, whether
    /// it may stand as the period the next are judged from. Returns the calm period once
    /// `RUNAWAY_PERIODS` periods in a row moved away from it, one of them all the way (a
    /// collapse that begins within a period loses a fifth of its work there; held-out
    /// gen-67-1 lost 28%, 53% and 33% in three periods, one short of each threshold).
    fn observe(&mut self, now: (f64, f64), checked: bool, calm: bool) -> Option<(f64, f64)> {
        match self.calm {
            Some(c) if checked && on_the_way(c, now) => {
                if ran_away(c, now) {
                    self.seen += 1;
                } else {
                    self.toward += 1;
                }
                if self.seen + self.toward >= RUNAWAY_PERIODS {
                    let ran = self.seen > 0;
                    *self = RunawayWatch::default();
                    if ran {
                        return Some(c);
                    }
                    // On its way for good and never there: a load that changed.
                    self.calm = calm.then_some(now);
                }
            }
            _ => {
                *self = RunawayWatch::default();
                self.calm = calm.then_some(now);
            }
        }
        None
    }

    fn clear(&mut self) {
        *self = RunawayWatch::default();
    }

    /// Whether a calm period stands to judge the next by.
    fn watching(&self) -> bool {
        self.calm.is_some()
    }
}

fn compare(base: &Summary, probe: &Summary) -> (Verdict, f64, f64) {
    let (mut score, mut var, mut wsum) = (0.0, 0.0, 0.0);
    for (d, &(m0, v0, n0, w0)) in &base.devices {
        let Some(&(m1, v1, n1, w1)) = probe.devices.get(d) else {
            continue;
        };
        if m0 <= 0.0 {
            continue;
        }
        let w = (w0 + w1) / 2.0 + 1e-9;
        score += w * (m1 - m0) / m0;
        var += w * w * (v0 / n0 + v1 / n1) / (m0 * m0);
        wsum += w;
    }
    if wsum <= 0.0 {
        return (Verdict::Same, 0.0, 0.0);
    }
    let (score, se) = (score / wsum, var.sqrt() / wsum);
    let bar = (Z * se).max(MIN_EFFECT);
    let v = if score > bar {
        Verdict::Better
    } else if score < -bar {
        Verdict::Worse
    } else {
        Verdict::Same
    };
    (v, score, se)
}

/// A summary's devices as a trade is judged on them: pooled devices as one.
fn trade_view(s: &Summary) -> BTreeMap<String, (f64, f64, f64, f64)> {
    s.devices
        .iter()
        .filter(|(d, _)| !s.pooled.contains(*d))
        .chain(&s.pools)
        .map(|(d, v)| (d.clone(), *v))
        .collect()
}

/// What a step moved between devices (pooled as [`trade_view`] pools them), against the most
/// each did for this load (`best`, at least what it did in either window). A device's change
/// counts only past its own noise (three standard errors and the least effect).
#[derive(Clone, Debug, Default)]
struct Trade {
    /// Of the devices that lost work in the step, the one furthest short of its best on the
    /// probe's side, and that shortfall as a fraction.
    loser: Option<(String, f64)>,
    /// Of the devices that gained, the one furthest short of its best on the baseline's side.
    gainer: Option<(String, f64)>,
    /// Of the devices that did at least `MIN_EFFECT` less in the probe than in the baseline,
    /// whether or not past their noise, the one furthest short of its best on the probe's side
    /// (past its noise): a climb whose every step costs a device a little adds up.
    bleed: Option<(String, f64)>,
}

impl Trade {
    /// The two shortfalls where devices traded work (one lost, another gained, one of the two
    /// short of its best by more than `EARLY_LOSS`): (probe's side, baseline's side).
    fn both_ways(&self) -> Option<(f64, f64)> {
        match (&self.loser, &self.gainer) {
            (Some((_, l1)), Some((_, l0))) if l1.max(*l0) > EARLY_LOSS => Some((*l1, *l0)),
            _ => None,
        }
    }
}

/// What the step from `base` to `probe` traded ([`Trade`]).
fn trade(base: &Summary, probe: &Summary, best: &BTreeMap<String, f64>) -> Trade {
    let after = trade_view(probe);
    let mut t = Trade::default();
    let keep = |slot: &mut Option<(String, f64)>, d: &str, l: f64| {
        if slot.as_ref().is_none_or(|s| l > s.1) {
            *slot = Some((d.to_string(), l));
        }
    };
    for (d, (m0, v0, n0, _)) in trade_view(base) {
        let Some(&(m1, v1, n1, _)) = after.get(&d) else {
            continue;
        };
        if m0 <= 0.0 {
            continue;
        }
        let bar = (Z * (v0 / n0 + v1 / n1).sqrt() / m0).max(MIN_EFFECT);
        let top = best.get(&d).copied().unwrap_or(0.0).max(m0).max(m1);
        let short = |m: f64| (top - m) / top;
        let change = (m1 - m0) / m0;
        if change < -bar {
            keep(&mut t.loser, &d, short(m1));
        } else if change > bar {
            keep(&mut t.gainer, &d, short(m0));
        }
        if change < -MIN_EFFECT && short(m1) > bar {
            keep(&mut t.bleed, &d, short(m1));
        }
    }
    t
}

#[derive(Clone, Debug)]
enum Phase {
    Parked,
    /// Waiting for the fast loop; then measure a baseline (`probe: None`) or a probe.
    Settle {
        left: u32,
        waited: u32,
        probe: Option<Probe>,
    },
    Measure {
        left: u32,
        acc: Acc,
        probe: Option<Probe>,
    },
}

/// A target the margin under a rate found too high went below, where the search would park:
/// the target a step up was undone from and its window.
#[derive(Clone, Debug)]
struct MarginCheck {
    from: f64,
    base: Summary,
    /// Where the search goes on after a margin that cost nothing (`None`: where a climb
    /// proved the ground, it parks or asks one step below).
    then: Option<Dir>,
    /// The step up was undone on a small loss over its whole window (under `EARLY_LOSS`,
    /// the rate held): no collapse, perhaps a single window's noise.
    weak: bool,
}

/// A run of periods in a row that may ask a question of a load (`QUIET` of them, or
/// `UNBOUND_QUIET`), the last `MEASURE` its baseline.
#[derive(Clone, Debug, Default)]
struct QuietRun {
    /// Periods so far, and the sum and sum of squares of their work.
    run: u64,
    work: (f64, f64),
    /// The last `MEASURE` periods.
    acc: Acc,
}

impl QuietRun {
    /// Adds one period. Once the run is `len` periods long, returns its last `MEASURE`
    /// periods and the work's period-to-period spread over the whole run (its coefficient of
    /// variation), and starts over.
    fn add(&mut self, obs: &Observation, work: f64, len: u64) -> Option<(Acc, f64)> {
        self.run += 1;
        self.work.0 += work;
        self.work.1 += work * work;
        if self.run + u64::from(MEASURE) > len {
            self.acc.add(obs);
        }
        if self.run < len {
            return None;
        }
        let done = std::mem::take(self);
        let n = done.run as f64;
        let (sum, sq) = done.work;
        let mean = sum / n.max(1.0);
        let cv = if mean > 0.0 {
            ((sq / n.max(1.0) - mean * mean).max(0.0) * n / (n - 1.0).max(1.0)).sqrt() / mean
        } else {
            f64::INFINITY
        };
        Some((done.acc, cv))
    }
}

/// The TX question (`idle_tx = "measured"`): whether the TX completions of queues with nothing
/// to moderate run at the driver's own moderation instead of an interrupt each.
#[derive(Clone, Debug, Default)]
struct TxQuestion {
    enabled: bool,
    /// The answer in force.
    held: bool,
    /// Loads at or under this rate are not asked, and a held answer is let go under the
    /// fast loop's band below it (the configured starting target).
    above: f64,
    /// Steady periods in a row that may ask, and the last of them.
    quiet: QuietRun,
    quiet_at: u64,
    /// The question under way: periods since it began, its baseline, its window so far.
    asking: Option<(u32, Summary, Acc)>,
    /// The target when it began (a rule that moves the target ends the question).
    target: f64,
    /// The work of the load last asked (no new question until it changes by a third).
    asked: Option<f64>,
    /// The steps up kept in the search under way, their gains summed.
    climb: f64,
    /// A climb of this load's search bought `SHARP_GAIN` or more: its work follows its
    /// interrupts.
    worth: bool,
}

#[derive(Clone, Debug)]
struct Probe {
    from: f64,
    dir: Dir,
    base: Summary,
    /// The short step an unheld load is asked ([`KneeFinder::ask_unbound`]).
    sharp: bool,
}

/// The knee finder. See the module documentation.
#[derive(Clone, Debug)]
pub(crate) struct KneeFinder {
    enabled: bool,
    target: f64,
    floor: f64,
    phase: Phase,
    step: f64,
    /// A step up was kept in this search.
    climbed: bool,
    /// A step down bought completions in this search.
    descended: bool,
    /// What the last step down that bought completions bought, over its size (relative
    /// changes): near 1 where the work still rose as fast as the interrupts fell, as past a
    /// knee, where every interrupt costs DMA.
    down_yield: f64,
    /// A step down after one that bought completions cost them: the target it went to (0:
    /// none). Further steps down in this descent bisect the ground above it.
    too_low: f64,
    /// The step down in flight is one a kept jump asks (`None`: not).
    after_jump: Option<JumpStep>,
    /// Direction of the probe after the next baseline.
    next_dir: Dir,
    /// Whether a search has ever finished.
    searched: bool,
    period: u64,
    next_search: u64,
    backoff: u64,
    /// Lowest target at which more interrupts cost completions.
    too_high: f64,
    /// Lowest rate found on the losing side of a trade between devices, for the load now on
    /// the machine (a new load forgets it): steps up stay under it.
    traded: f64,
    /// The most each device (pool) did in a window a step was judged on, for the load now on
    /// the machine (a new load forgets it): what a trade's shortfalls are measured from, so a
    /// climb whose every step costs a device a little still ends once the sum is a trade.
    device_best: BTreeMap<String, f64>,
    /// Work done when the finder parked.
    parked_work: Option<f64>,
    /// Work of the last window measured while the target held something back: a load coming
    /// back to it after a pause is one the search knows, not a new one.
    known_work: Option<f64>,
    /// A search was interrupted (the fast loop stopped holding): resume it, not a new one.
    interrupted: bool,
    /// Recent parked periods in which the rate ran away above the target.
    runaways: std::collections::VecDeque<u64>,
    /// Consecutive periods of a baseline in which the target held nothing back.
    loose: u32,
    /// A new load was seen at this period: search once the fast loop had time for it.
    load_seen: Option<u64>,
    /// The target from which a step down last bought nothing, and when.
    down_futile: Option<(f64, u64)>,
    /// The upper target of the step down that ended a descent on its safe side: a line-rate
    /// load kept its work there, which says nothing of the knee. A periodic recheck's step
    /// up to it or under it that buys nothing says no more, and is not kept.
    safe_below: Option<f64>,
    /// An undone step up put the target under the margin below the target it started from:
    /// that target and its window, to compare with a baseline at the margin's target.
    margin_check: Option<MarginCheck>,
    /// A target the margin under it was found to cost completions at (see
    /// [`KneeFinder::margin_costs_at`]): steps up from it bisect the ground under `too_high`
    /// with no margin, until a collapse or a new load.
    margin_costs: Option<f64>,
    /// The fast loop's hysteresis band (relative): the rate of a target sits anywhere in the
    /// band under it, depending on where it came from.
    band: f64,
    /// A runaway of a load nothing held back while parked, from its last such period.
    unheld_runaway: RunawayWatch,
    /// A runaway the fast loop let in, from its last period that held something back.
    held_runaway: RunawayWatch,
    /// The natural rate when a new search started (0: none): its first probe goes no further.
    first_probe: f64,
    /// A new search started as the load was seen unheld: that period's work per device (as
    /// [`Observation::work`]) and rate (the first probe may go there, see `natural_ground`).
    first_work: Option<(Vec<DeviceWork>, f64)>,
    /// The probe under way went to the load's own rate on that evidence.
    jumped: bool,
    /// A jump was kept in this search: the ground between its start and the load's own rate
    /// was skipped, not seen, and the search does not park before one step down has asked it.
    skipped: bool,
    /// A step down was asked in this search (a load it lets go of has been asked whether
    /// fewer interrupts buy it completions).
    probed_down: bool,
    /// The target this search's first step up started from (0: none yet).
    climb_from: f64,
    /// A step up kept in this search bought completions (more interrupts bought work: the
    /// load pays for fewer).
    climb_gained: bool,
    /// Steps up kept in a row in this search that bought nothing: unproven ground is entered
    /// by `UNPROVEN_STEP` until two were, then by twice as much per further one
    /// ([`KneeFinder::unproven_step`]).
    kept_up: u32,
    /// The highest target a probe up was kept at (0: none yet): steps grow up to it, and go
    /// past it by `UNPROVEN_STEP` at most.
    proven: f64,
    /// The natural rate last seen (0: not seen): a step back onto proven ground goes no
    /// further than it.
    natural: f64,
    /// The highest natural rate seen lately (decaying by `NATURAL_PEAK_DECAY` a period): a
    /// target that lets go of the load clears it.
    natural_peak: f64,
    /// The target the fast loop last had to reach, the periods in a row it has held the rate
    /// there, and whether it has held it `HELD` periods in a row since (only then is a rate
    /// above it a runaway, not the loop still on its way: after a rejected probe, or at a
    /// burst's start, where it overshoots for a while).
    held_at: f64,
    held_run: u32,
    held: bool,

    /// The least rate the fast loop could reach, last seen ([`Observation::least`]).
    least: f64,
    /// The search under way is a periodic recheck from a parked target (not a new load).
    recheck: bool,
    /// The largest relative standard deviation of the per-period work over a whole window of
    /// this search: the least noise an early verdict assumes ([`KneeFinder::early_gain`]).
    noise: f64,

    /// The highest rate of the next probe's baseline window, where it stayed a step or more
    /// under the target (infinite otherwise): a step down starts from it.
    held_max: f64,
    /// The lowest rate of the next probe's baseline window, where it stayed over the target
    /// in every period (0 otherwise): a step up starts from it.
    held_min: f64,
    /// Periods of the probe under way left out of its window as the load's own lulls
    /// ([`load_dipped`]), at most `MEASURE`.
    dips: u32,

    /// Periods in a row a load has run unheld at `UNBOUND_SHARE` of the target or more (the
    /// last `MEASURE` of them: the baseline of the step down it is asked).
    unbound_run: QuietRun,
    /// The work of the unheld load last asked (no new question until it changes by a third).
    unbound_asked: Option<f64>,
    /// No unheld load is asked before this period (a question costs a disturbance: at most
    /// one per `DOWN_MEMORY`).
    unbound_next: u64,
    /// The unheld load's last run swung over `SHARP_STEADY`: it is given one more run before
    /// it is taken for a swinging load (a short run may hold its arrival).
    unbound_swung: bool,
    /// The work's period-to-period spread when the step under way was asked.
    sharp_noise: f64,
    /// The target in force before an unheld load was asked: where it goes back to when the
    /// first step down bought nothing.
    unbound_from: Option<f64>,

    /// An unheld load's short step down was undone: every delay it brought goes at once
    /// (taken by the moderator, [`KneeFinder::take_release`]).
    release: bool,

    /// Whether TX completions run at the driver's own moderation ([`KneeFinder::ask_tx`]).
    tx: TxQuestion,

    /// What the last decision was, for the plan's notes.
    last: Option<String>,
}

impl KneeFinder {
    pub(crate) fn new(target: f64, floor: f64, enabled: bool) -> KneeFinder {
        KneeFinder {
            enabled,
            target,
            floor: floor.min(target),
            phase: Phase::Parked,
            step: FIRST_STEP,
            climbed: false,
            descended: false,
            too_low: 0.0,
            after_jump: None,
            down_yield: 0.0,
            next_dir: Dir::Up,
            searched: false,
            period: 0,
            next_search: 0,
            backoff: BACKOFF_FIRST,
            too_high: f64::INFINITY,
            traded: f64::INFINITY,
            device_best: BTreeMap::new(),
            parked_work: None,
            known_work: None,
            interrupted: false,
            runaways: std::collections::VecDeque::new(),
            loose: 0,
            load_seen: None,
            down_futile: None,
            safe_below: None,
            margin_check: None,
            margin_costs: None,
            band: 0.1,
            unheld_runaway: RunawayWatch::default(),
            held_runaway: RunawayWatch::default(),
            first_probe: 0.0,
            first_work: None,
            jumped: false,
            skipped: false,
            probed_down: false,
            climb_from: 0.0,
            climb_gained: false,
            kept_up: 0,
            proven: 0.0,
            natural: 0.0,
            natural_peak: 0.0,
            held_at: target,
            held_run: 0,
            held: false,
            least: 0.0,
            recheck: false,
            noise: 0.0,
            held_max: f64::INFINITY,
            held_min: 0.0,
            unbound_run: QuietRun::default(),
            unbound_asked: None,
            unbound_next: 0,
            unbound_swung: false,
            sharp_noise: 0.0,
            unbound_from: None,
            dips: 0,
            release: false,
            tx: TxQuestion {
                above: target,
                ..TxQuestion::default()
            },
            last: None,
        }
    }

    /// Asks, once per load, whether TX completions at the driver's own moderation buy
    /// completions ([`KneeFinder::ask_tx`]).
    pub(crate) fn with_tx_question(mut self, on: bool) -> KneeFinder {
        self.tx.enabled = on;
        self
    }

    /// Whether TX completions of queues with nothing to moderate run at the driver's own
    /// moderation (the TX question's answer).
    pub(crate) fn tx_held(&self) -> bool {
        self.tx.held
    }

    /// The gain the short step an unheld load is asked must beat to be kept: `SHARP_GAIN`, or
    /// the noise of one period against the load's own spread.
    fn sharp_bar(&self) -> f64 {
        SHARP_GAIN.max(Z * self.sharp_noise * (1.0 + 1.0 / f64::from(MEASURE)).sqrt())
    }

    /// Whether the delays of an undone unheld-load step should go at once (once).
    pub(crate) fn take_release(&mut self) -> bool {
        std::mem::take(&mut self.release)
    }

    /// The target in force, interrupts/s.
    pub(crate) fn target(&self) -> f64 {
        self.target
    }

    /// The lowest rate found to cost completions, if any.
    pub(crate) fn too_high(&self) -> Option<f64> {
        self.too_high.is_finite().then_some(self.too_high)
    }

    /// Whether a search is under way.
    pub(crate) fn searching(&self) -> bool {
        !matches!(self.phase, Phase::Parked)
    }

    /// Takes what the last decision was (once).
    pub(crate) fn take_note(&mut self) -> Option<String> {
        self.last.take()
    }

    /// Gives up a baseline the fast loop stopped holding: back to parked, ready to start again
    /// as soon as it holds.
    fn abort(&mut self, work: f64) {
        self.kept_up = 0;
        if let Some(t) = self.unbound_from.take() {
            self.target = t;
            self.release = true;
        }
        self.margin_check = None;
        self.phase = Phase::Parked;
        self.parked_work = Some(work);
        self.interrupted = true;
    }

    fn park(&mut self, work: f64) {
        self.unbound_from = None;
        // A load a search has seen is not asked again as an unheld one (a search that let go
        // of it has asked a step down already).
        self.unbound_asked = Some(work);
        self.margin_check = None;
        self.phase = Phase::Parked;
        self.interrupted = false;
        self.searched = true;
        self.next_search = self.period + self.backoff;
        self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
        self.parked_work = Some(work);
        self.climbed = false;
        self.descended = false;
        self.too_low = 0.0;
        self.after_jump = None;
        self.down_yield = 0.0;
        self.skipped = false;
        self.probed_down = false;
        self.climb_from = 0.0;
        self.tx.worth |= self.tx.climb >= SHARP_GAIN;
        self.tx.climb = 0.0;
        self.climb_gained = false;
        self.kept_up = 0;
    }

    /// Where a step up starts from: the target, the least reachable rate, or the lowest rate of
    /// the baseline's window where it stayed over the target in every period, whichever is
    /// highest. A target under the least reachable rate, or under the rate the fast loop held
    /// in every period of the baseline, holds nothing more back than one at it: the step starts
    /// from there (NVMe that cannot be aggregated, queues at the ceiling; what the platform
    /// does at that rate is known already). From the target, a step moves the rate a fraction
    /// of its size, and its window reads what that fraction traded (held-out gen-152-1: drives
    /// at their grid's floor beside request/response at 1.2 M/s under a 1 M/s target; a step to
    /// 1.33 M/s moved the rate 5%, read -1.3% and was undone, and the search parked at 1.1 M/s,
    /// where 2.2 M/s does 1.7x the transactions and more reads).
    fn up_start(&self) -> f64 {
        self.target.max(self.least).max(self.held_min)
    }

    /// Moves the target one step in `dir` from where it is; `false` when it cannot move.
    fn step_target(&mut self, dir: Dir) -> bool {
        let from = self.target;
        let start = self.up_start();
        let to = match dir {
            Dir::Up => {
                let mut to = start * (1.0 + self.step);
                // Ground a probe was kept on before (a search resumed, a load back after a
                // pause): straight back to it, or to the natural rate where that is lower,
                // instead of climbing to it again in ordinary steps.
                if self.proven > to {
                    let natural = if self.natural > from {
                        self.natural
                    } else {
                        f64::INFINITY
                    };
                    to = self.proven.min(natural).max(to);
                }
                to
            }
            .min(start.max(self.proven) * (1.0 + self.unproven_step()))
            .min(MAX_TARGET)
            .min(self.up_bound(from))
            // Halfway (geometrically) to a rate that traded, so the search narrows under it.
            .min((from * self.traded).sqrt()),
            // From the rate the target held, where the delays' grid held it lower: a step
            // from the target itself may leave the rate where it was, and a descent would end
            // on a step that moved nothing.
            Dir::Down => (from.min(self.held_max) / (1.0 + self.step))
                .max(self.floor)
                // Halfway (geometrically) to a rate a step of this descent found too low.
                .max((from * self.too_low).sqrt()),
        };
        // A step goes the way it was asked or not at all: an "up" step capped under a rate
        // found too high would otherwise move the target down, untested as a step down.
        let moved = match dir {
            Dir::Up => to - from,
            Dir::Down => from - to,
        };
        if moved < from * MIN_STEP / 2.0 {
            return false;
        }
        self.target = to;
        true
    }

    /// How far past the highest target kept a step up may go: `UNPROVEN_STEP`, doubled for
    /// every step up kept in a row past the second that bought nothing (and cost no device
    /// anything), up to `MAX_STEP`. Steps that keep costing nothing are ground a knee has not
    /// shown in, and a climb in 25% steps from 1 M/s to a healthy platform's 16 M/s takes
    /// thirteen steps, most of a second held back for nothing (held-out gen-92-6). A probe
    /// that does land past a knee loses its work within its first periods and is undone then
    /// (`EARLY_LOSS`), and the narrowing starts from a failed rate at most twice the last one
    /// kept.
    fn unproven_step(&self) -> f64 {
        let doublings = self.kept_up.saturating_sub(1).min(8);
        (UNPROVEN_STEP * f64::from(1u32 << doublings)).min(MAX_STEP)
    }

    /// The fast loop's hysteresis band (`GlobalModerationConfig::hysteresis`).
    pub(crate) fn with_band(mut self, band: f64) -> KneeFinder {
        self.band = band.clamp(0.0, 0.5);
        self
    }

    /// The highest target a step up from `from` may go to: the margin under the lowest rate
    /// found too high, or, where that margin was found to cost completions (at `from` or a
    /// target under it), [`KneeFinder::bisect_to`].
    fn up_bound(&self, from: f64) -> f64 {
        if self.margin_costs_at(from) {
            self.bisect_to(from)
        } else {
            self.too_high * MARGIN
        }
    }

    /// Halfway (geometrically) from `from` to the lowest rate found too high, so the search
    /// narrows under it as under a trade, and a band under that rate at most: a target's rate
    /// sits anywhere in the fast loop's band under the target, and a step whose rate stayed
    /// at the band's foot says nothing about its top.
    fn bisect_to(&self, from: f64) -> f64 {
        (from * self.too_high)
            .sqrt()
            .min(self.too_high * (1.0 - self.band))
    }

    /// The step up from `from` to [`KneeFinder::bisect_to`].
    fn bisect_step(&self, from: f64) -> f64 {
        (self.bisect_to(from) / from).max(1.0) - 1.0
    }

    /// Whether the margin under `too_high` was found to cost completions at a target `from`
    /// is on or above (and still under `too_high`). The margin is there for a platform that
    /// collapses past its knee; where it costs what the target it went under was measured
    /// to do, the work still follows the interrupts there, and the loss that set `too_high`
    /// is a knee just above or a single window's noise (a step up is undone by any loss past
    /// 1%): either way the ground between is bisected, each step judged as any step up.
    fn margin_costs_at(&self, from: f64) -> bool {
        self.margin_costs
            .is_some_and(|f| from >= f * (1.0 - MIN_STEP / 2.0) && from < self.too_high)
    }

    fn start_probe(&mut self, dir: Dir, base: Summary, work: f64) {
        let from = self.target;
        self.probed_down |= dir == Dir::Down;
        if dir == Dir::Up && self.climb_from == 0.0 {
            self.climb_from = from;
        }
        // The highest rate of the baseline's window, where it stayed under the target by
        // more than a step in every period (a step down from the target would move nothing),
        // or under the fast loop's band (held there by sources the target does not move: a
        // step from the target moves the rate by a fraction of a step, and its window reads
        // that fraction; held-out gen-237-37: 5.05 -> 4.04 M/s moved a rate held at 4.1-4.5
        // M/s by 3% and read nothing).
        self.held_max = if base.max_rate > 0.0
            && (base.max_rate * (1.0 + self.step) < from
                || base.max_rate < from * (1.0 - self.band))
        {
            base.max_rate
        } else {
            f64::INFINITY
        };
        self.held_min = if base.min_rate > from {
            base.min_rate
        } else {
            0.0
        };
        self.jumped = false;
        self.dips = 0;
        if let Some(to) = self
            .first_work
            .take()
            .filter(|_| dir == Dir::Up)
            .and_then(|(work, rate)| self.natural_ground((&work, rate), &base))
        {
            self.first_probe = 0.0;
            self.target = to;
            self.jumped = true;
            self.phase = Phase::Settle {
                left: SETTLE,
                waited: 0,
                probe: Some(Probe {
                    from,
                    dir,
                    base,
                    sharp: false,
                }),
            };
            return;
        }
        // "Does holding back cost anything?": where the natural rate is within one step, the
        // first probe goes just past it (by `NATURAL_CLEAR`, so that its noise does not hold
        // the load back now and then); never further than one step.
        let past = self.first_probe * (1.0 + NATURAL_CLEAR);
        let start = self.up_start();
        if dir == Dir::Up && self.first_probe > start && past < start * (1.0 + self.step) {
            self.step = past / start - 1.0;
        }
        self.first_probe = 0.0;
        if self.step_target(dir) {
            self.phase = Phase::Settle {
                left: SETTLE,
                waited: 0,
                probe: Some(Probe {
                    from,
                    dir,
                    base,
                    sharp: false,
                }),
            };
        } else if dir == Dir::Up
            && !self.climbed
            && !self.down_known_futile()
            // A periodic recheck that cannot step up probes down only where the rate is
            // restless (the cliff's edge): on a steady one it is a disturbance that buys
            // nothing, and a knee that moved under the target collapses the work (a change
            // of a third: a new search).
            && (!self.recheck || base.rate_cv > UNSTABLE)
        {
            self.start_probe(Dir::Down, base, work);
        } else {
            self.park(work);
        }
    }

    /// A collapse showed `rate` too high: the margin under it is what keeps clear of the next
    /// one, wherever it had been found to cost.
    fn collapsed_at(&mut self, rate: f64) {
        self.margin_costs = None;
        self.too_high = self.too_high.min(rate);
    }

    /// A target that lets go of a load whose own rate peaks at `own`: over it by
    /// `LET_GO_CLEAR`, never past `MAX_TARGET` or the margin under a rate found too high.
    fn clear_of(&self, own: f64) -> f64 {
        (own * (1.0 + LET_GO_CLEAR))
            .min(MAX_TARGET)
            .min(self.too_high * MARGIN)
    }

    /// After a runaway from `r0` to `rate` interrupts/s: `rate` is too high, and the target
    /// goes back to just above `r0` (where the work was good), under `rate` by the margin.
    fn back_under_runaway(&mut self, r0: f64, rate: f64) {
        self.collapsed_at(rate);
        self.target = (r0 * (1.0 + LET_GO_CLEAR))
            .min(self.too_high * MARGIN)
            .min(self.target)
            .max(self.floor);
        self.proven = self.proven.min(self.target);
    }

    /// After an unheld load's own rate ran away from `r0`: nothing of ours moved, so `r0`
    /// itself is a rate found too high (a target above it lets the load tip again), and the
    /// target goes under it by the margin, as under any.
    fn back_under_tip(&mut self, r0: f64) {
        self.collapsed_at(r0);
        self.target = (self.too_high * MARGIN).min(self.target).max(self.floor);
        self.proven = self.proven.min(self.target);
    }

    /// The fast loop let go of held sources (a relax step, a let-go whose rate model read
    /// the load's own rate from a held one) and the rate ran away while the work collapsed:
    /// more interrupts and less work in one period is no load leaving (that takes both
    /// down) but a platform pushed past its knee, where fewer packets share an interrupt
    /// and the rate feeds on itself. Held-out gen-52-3: 46 queues held at 0.55 M/s under a
    /// 1 M/s target past a 0.52 M/s knee were let go, ran to 1.3 M/s with 42% less work,
    /// were held again, and the cycle came back at every target until a search parked in
    /// the collapse (0.83 of the healthy platform). As for an unheld load's runaway (in
    /// [`KneeFinder::observe`]'s parked phase): the target goes back to just above the rate
    /// the work was good at, under the collapse's rate by the margin, and the search parks.
    /// Not during a step up: its own checks judge it. Returns whether it acted.
    fn fast_loop_ran_away(&mut self, obs: &Observation, work: f64) -> bool {
        let probing_up = matches!(
            &self.phase,
            Phase::Settle { probe: Some(p), .. } | Phase::Measure { probe: Some(p), .. }
                if p.dir == Dir::Up
        );
        let Some((r0, w0)) = self
            .held_runaway
            .observe((obs.rate, work), !probing_up, !obs.unheld)
        else {
            return false;
        };
        self.back_under_runaway(r0, obs.rate);
        self.ran_away_note("the fast loop let the rate run", (r0, w0), obs.rate, work);
        // Parked on the work the rate was good at: the recovery back to it is no new load.
        self.park(w0);
        true
    }

    /// Notes a runaway from `(r0, w0)` to `rate` and `work` that moved the target.
    fn ran_away_note(&mut self, what: &str, (r0, w0): (f64, f64), rate: f64, work: f64) {
        self.last = Some(format!(
            "knee search: {what} from {r0:.0} to {rate:.0}/s and the work fell {:.0}%: target {:.0}/s",
            100.0 * (1.0 - work / w0),
            self.target
        ));
    }

    /// Nothing held back, and the load's own rate ran away while its work collapsed: the
    /// platform crossed a knee by itself (past it DMA slows, fewer packets share an interrupt,
    /// and the rate feeds on itself), under a target that let go of the load above its rate.
    /// Judged from the last period that ran unheld, over the periods after it whether
    /// or not the fast loop caught the collapse (a rate past the target binds at once, and a
    /// search may start on it: held-out gen-67-1, a 200G NIC on 8 CPUs tipping from 0.72 M/s
    /// under a 0.86 M/s knee every few hundred ms, was held for two periods each time and let
    /// go again). Not during a probe: its own checks judge it. The target goes under the rate
    /// it tipped from by the margin, and the search parks. Returns whether it acted.
    fn load_tipped(&mut self, obs: &Observation, work: f64) -> bool {
        let probing = match &self.phase {
            Phase::Parked => false,
            Phase::Settle { probe, .. } | Phase::Measure { probe, .. } => probe.is_some(),
        };
        let own = obs.unheld && !obs.binding;
        if work <= 0.0 || probing || !(own || self.unheld_runaway.watching()) {
            self.unheld_runaway.clear();
            return false;
        }
        let Some((r0, w0)) = self.unheld_runaway.observe((obs.rate, work), true, own) else {
            return false;
        };
        self.back_under_tip(r0);
        self.ran_away_note("the load's own rate ran", (r0, w0), obs.rate, work);
        self.park(w0);
        true
    }

    /// A heavy load under a target that holds nothing back: the target was never tried
    /// against it, and past a knee under the target its own rate falls with its work (fewer
    /// completions, fewer interrupts), so that it may stay under the target in a collapse
    /// (held-out gen-34-23: a 10G bulk load on a 0.51 M/s knee ran unheld at 0.82 M/s and
    /// 0.63 of the healthy platform; gen-42-5: request/response on 5 queues at 0.96 M/s past
    /// a 0.50 M/s knee, 0.58 of healthy). Nothing in the counts tells such a collapse from a
    /// healthy load at the same rate (a closed loop collapses in its first period), so each
    /// such load is asked once, after `UNBOUND_QUIET` steady periods, with one short step down from
    /// its own rate: `SHARP_MEASURE` periods, undone at once when its first one loses work,
    /// and kept only for a gain of `SHARP_GAIN` (a collapse gives far more: gen-42-5 +85% at
    /// 0.7 M/s). A healthy load pays those few periods once (a request/response load pays
    /// every microsecond of the probe's delays: asked for 9 periods, gen-36-10's p99 went to
    /// 1.19x `none`). Not asked where the step would take sources to their limits (NVMe
    /// that cannot be aggregated, queues at the ceiling: the step's delays would cost the
    /// rest for nothing). Bought, the descent goes on from a fresh baseline at the step's target
    /// (its one period was the collapse's backlog draining); not, the target goes back.
    /// Returns whether the probe started.
    fn ask_unbound(&mut self, obs: &Observation, work: f64) -> bool {
        let heavy = obs.unheld
            && !obs.binding
            && work > 0.0
            && obs.rate >= UNBOUND_SHARE * self.target
            && obs.rate > self.floor * (1.0 + FIRST_STEP)
            && obs.rate / (1.0 + FIRST_STEP) > obs.least * (1.0 + NATURAL_CLEAR)
            && FIRST_STEP * obs.nic_gap_us <= SHARP_DELAY_US;
        let asked = self
            .unbound_asked
            .is_some_and(|k| k > 0.0 && ((work - k) / k).abs() <= LOAD_CHANGE);
        if !heavy || asked || self.period < self.unbound_next {
            self.unbound_run = QuietRun::default();
            self.unbound_swung = false;
            return false;
        }
        let Some((acc, cv)) = self.unbound_run.add(obs, work, UNBOUND_QUIET) else {
            return false;
        };
        // The work's own spread over the whole run, period to period: one period of a step is
        // judged against it. A load whose work swings more than `SHARP_STEADY` in two runs in
        // a row is not asked (held-out gen-38-15: a low bulk load of 512 paced flows swung 30%
        // by itself, and a second step read a swing as +32% and descended, p95 22x `none`);
        // one run that does may hold the load's arrival, its first period still ramping.
        let swung = cv > SHARP_STEADY;
        if swung && !std::mem::replace(&mut self.unbound_swung, true) {
            return false;
        }
        self.unbound_swung = false;
        let base = acc.summary();
        let total = acc.total();
        self.unbound_asked = Some(total);
        self.unbound_next = self.period + DOWN_MEMORY;
        if swung {
            return false;
        }
        self.sharp_noise = cv;
        let (n, sum, _) = acc.rates;
        let own = sum / n.max(1.0);
        let before = self.target;
        self.unbound_from = Some(before);
        self.last = Some(format!(
            "knee search: a load at {own:.0}/s under target {:.0}/s, nothing held back (work steady within {:.1}%): asking once whether a step down buys completions",
            self.target,
            100.0 * cv,
        ));
        self.target = own;
        self.climbed = false;
        self.descended = false;
        self.skipped = false;
        self.interrupted = false;
        self.first_work = None;
        self.first_probe = 0.0;
        self.recheck = false;
        self.step = (2.0 * self.sharp_bar()).clamp(SHARP_STEP, FIRST_STEP);
        self.start_probe(Dir::Down, base, total);
        match &mut self.phase {
            Phase::Settle {
                left,
                probe: Some(p),
                ..
            } => {
                p.sharp = true;
                *left = SHARP_SETTLE;
            }
            _ => {
                // It could not step (the floor): nothing asked.
                self.unbound_from = None;
                self.target = before;
            }
        }
        true
    }

    /// The TX question, asked of a parked load the target holds nothing back from, steady and
    /// above the configured starting target (GSIM's suggested rate: below it interrupts cost
    /// the platform nothing, and the low-load promise is latency as with no moderation):
    /// does the driver's own TX moderation buy completions? At an interrupt per completion a
    /// request/response queue takes two interrupts a transaction where the driver's default
    /// takes one, and a platform past its knee pays DMA for each (held-out gen-67-5: a
    /// request/response NIC beside a bulk one, let go at 4.2 M/s past a 1.2 M/s knee, did 5%
    /// less than static at 2.8 M/s, with a higher p99). Kept only where the work
    /// gained past its noise and no device lost past its own: the completions' processing
    /// joins the RX polls, where packets wait for it (a bulk NIC's latency probe beside
    /// request/response, docs/moderation.md, "TX completions as the driver had them"), so on
    /// a platform where interrupts cost nothing it stays an interrupt each. `SETTLE` periods
    /// (more while the fast loop has not settled, up to `SETTLE_MAX`) to take effect,
    /// `MEASURE` to judge, against the last `MEASURE` periods of a `QUIET` run ([`QuietRun`]).
    /// Let go when the rate falls under the fast loop's band below that rate. Returns whether
    /// the period belonged to the question (nothing else judges it then).
    fn ask_tx(&mut self, obs: &Observation, work: f64) -> bool {
        if !self.tx.enabled {
            return false;
        }
        if self.tx.held && self.tx.asking.is_none() && obs.rate < self.tx.above * (1.0 - self.band)
        {
            self.tx = TxQuestion {
                enabled: true,
                above: self.tx.above,
                worth: self.tx.worth,
                ..TxQuestion::default()
            };
            self.last = Some(format!(
                "knee search: the load fell to {:.0}/s: TX completions back to an interrupt each",
                obs.rate
            ));
            return false;
        }
        // Only with nothing held back: where the target binds, the TX setting moves the rate
        // the fast loop holds, and the question is a disturbance of every queue's delay (held-out
        // gen-47-25, heavy past a 4.7 M/s knee: 160 ms of it, ripple 0.000 -> 0.255).
        // And only where a climb of the load's search bought completions, `SHARP_GAIN` or
        // more in all (what an unheld load's question needs to keep its step): a load whose
        // work its interrupts do not hold back (bulk at line rate on a healthy platform) has
        // nothing for the driver's TX moderation to buy, and the question would only move
        // its rate for a while (held-out gen-79-19: settled 190 -> 600 ms with any step's
        // 1%; gen-132-12, a first step of +2.5% and nothing after: 310 -> 720 ms).
        // And only with a busy NIC queue: TX completions are a NIC's (an NVMe-only box was
        // asked, held-out gen-142-11, and its note named a setting it does not have).
        let quiet = self.tx.worth
            && obs.nic_gap_us > 0.0
            && obs.unheld
            && !obs.binding
            && work > 0.0
            && obs.rate > self.tx.above
            && self.unbound_run.run == 0
            && self.unbound_from.is_none();
        if let Some((waited, base, mut acc)) = self.tx.asking.take() {
            let (w0, _) = base.total_and_sd();
            // The rate moves with the TX setting, and the fast loop may take a period or two
            // to see that nothing binds: only a load that changed, or a target another rule
            // moved, ends it.
            if work <= 0.0
                || (w0 > 0.0 && ((work - w0) / w0).abs() > LOAD_CHANGE)
                || obs.rate <= self.tx.above * (1.0 - self.band)
                || self.target != self.tx.target
            {
                self.tx.held = false;
                self.tx.asked = Some(w0);
                self.last = Some(
                    "knee search: the load changed while TX completions were asked: back to an interrupt each"
                        .into(),
                );
                return false;
            }
            if waited < SETTLE || (waited < SETTLE_MAX && !obs.settled && acc.samples() == 0.0) {
                self.tx.asking = Some((waited + 1, base, acc));
                return true;
            }
            acc.add(obs);
            if acc.samples() < f64::from(MEASURE) {
                self.tx.asking = Some((waited + 1, base, acc));
                return true;
            }
            let probe = acc.summary();
            let (v, score, _) = compare(&base, &probe);
            // With no best on record a loser's shortfall is its loss past its own noise.
            let lost = trade(&base, &probe, &BTreeMap::new()).loser;
            self.tx.held = v == Verdict::Better && lost.is_none();
            self.tx.asked = Some(if self.tx.held { acc.total() } else { w0 });
            self.last = Some(match (self.tx.held, lost) {
                (true, _) => format!(
                    "knee search: TX completions at the driver's own moderation bought completions ({:+.1}%): kept",
                    100.0 * score
                ),
                (false, Some((dev, loss))) => format!(
                    "knee search: TX completions at the driver's own moderation cost {dev} {:.1}% of its work: back to an interrupt each",
                    100.0 * loss
                ),
                (false, None) => format!(
                    "knee search: TX completions at the driver's own moderation bought nothing ({:+.1}%): back to an interrupt each",
                    100.0 * score
                ),
            });
            return true;
        }
        let asked = self
            .tx
            .asked
            .is_some_and(|k| k > 0.0 && ((work - k) / k).abs() <= LOAD_CHANGE);
        // Only called while parked: a run broken by a search starts over.
        let broken = self.tx.quiet_at + 1 != self.period;
        self.tx.quiet_at = self.period;
        if !quiet || asked || self.tx.held || broken {
            self.tx.quiet = QuietRun::default();
        }
        if !quiet || asked || self.tx.held {
            return false;
        }
        let Some((acc, cv)) = self.tx.quiet.add(obs, work, QUIET) else {
            return false;
        };
        self.tx.asked = Some(acc.total());
        // As for an unheld load's step down: a load whose work swings by itself is not asked.
        if cv > SHARP_STEADY {
            return false;
        }
        self.tx.held = true;
        self.tx.target = self.target;
        self.tx.asking = Some((0, acc.summary(), Acc::default()));
        self.last = Some(format!(
            "knee search: a load at {:.0}/s, nothing held back: asking once whether TX completions at the driver's own moderation buy completions",
            obs.rate
        ));
        true
    }

    /// Whether a step down from the current target was found to buy nothing not long ago.
    fn down_known_futile(&self) -> bool {
        self.down_futile.is_some_and(|(t, at)| {
            (t - self.target).abs() <= 0.02 * self.target && self.period - at < DOWN_MEMORY
        })
    }

    /// One period.
    pub(crate) fn observe(&mut self, obs: &Observation) {
        self.period += 1;
        self.too_high *= FORGET;
        if !self.enabled {
            return;
        }
        let work: f64 = obs.work.iter().map(|(_, w, _)| w).sum();
        if obs.natural > 0.0 {
            self.natural = obs.natural;
        }
        self.least = obs.least;
        self.natural_peak = (self.natural_peak * NATURAL_PEAK_DECAY).max(obs.natural);
        if self.target != self.held_at || !obs.binding {
            self.held_at = self.target;
            self.held = false;
            self.held_run = 0;
        }
        self.held_run = if obs.settled { self.held_run + 1 } else { 0 };
        self.held |= self.held_run >= HELD;
        // A baseline is given up only when the target held nothing back for a few periods in a
        // row: a rate hovering at the target is still the target's doing.
        self.loose = if obs.binding { 0 } else { self.loose + 1 };
        let lost = self.loose >= 3;
        if self.fast_loop_ran_away(obs, work) || self.load_tipped(obs, work) {
            return;
        }
        let phase = std::mem::replace(&mut self.phase, Phase::Parked);
        // A lull of the load itself during a step up that let go of it: its interrupts fell
        // with its work. Not while the target binds: there the fast loop's own corrections
        // move the counted rate (with the rule there too, held-out gen-40-39, NVMe thresholds
        // stepping under a climbing target, never settled; not traced further).
        let dipped = match &phase {
            Phase::Settle { probe: Some(p), .. } | Phase::Measure { probe: Some(p), .. } => {
                p.dir == Dir::Up && !obs.binding && load_dipped(obs, &p.base, work)
            }
            _ => false,
        };
        // A step up that the platform does not hold is undone without waiting for the window.
        // Not when the target holds nothing back: less work then is the load leaving, not the
        // platform collapsing (a burst ending mid-probe read as a knee at the probe's rate).
        // Nor when the interrupts left with the work: the fast loop's delays outlive a burst
        // by a period or two (the target still binds), but a platform past its knee loses work
        // while the interrupts go on at the target.
        let early = match &phase {
            _ if !obs.binding || dipped => None,
            Phase::Settle { probe: Some(p), .. } | Phase::Measure { probe: Some(p), .. }
                if obs.rate < GONE * p.from =>
            {
                None
            }
            // Not in the probe's first period: it ran on the delays decided before the target
            // moved (the fast loop's last correction at the old target, 5-10% on traffic whose
            // work follows its interrupts), so it says nothing about the probe.
            Phase::Settle {
                probe: Some(p),
                waited,
                ..
            } if p.dir == Dir::Up && *waited > 0 => {
                let (base, sd) = p.base.total_and_sd();
                let loss = (work - base) / base.max(1e-9);
                let noise = Z * sd / base.max(1e-9);
                let bar = EARLY_LOSS.max(noise);
                // An overshoot that gains work is the fast loop letting its queues up at once
                // (and a backlog draining), not a platform collapsing.
                let unheld = !obs.at_limit
                    && obs.rate > UNHELD * self.target.max(obs.least)
                    && loss <= MIN_EFFECT.max(noise);
                (loss < -bar || unheld).then_some(loss)
            }
            Phase::Measure {
                acc,
                probe: Some(p),
                ..
            } if p.dir == Dir::Up && acc.samples() >= 2.0 => {
                let (base, sd) = p.base.total_and_sd();
                let loss = (acc.total() - base) / base.max(1e-9);
                let noise = Z * sd / (base.max(1e-9) * acc.samples().sqrt());
                let bar = EARLY_LOSS.max(noise);
                let unheld = !obs.at_limit
                    && obs.rate > UNHELD * self.target.max(obs.least)
                    && loss <= MIN_EFFECT.max(noise);
                (loss < -bar || unheld).then_some(loss)
            }
            _ => None,
        };
        // The target stopped holding anything back during a probe.
        let mut let_go_loss = None;
        if let Phase::Settle { probe: Some(p), .. } | Phase::Measure { probe: Some(p), .. } = &phase
        {
            if lost {
                if p.dir == Dir::Up && obs.rate >= GONE * p.from {
                    // A step up past the natural rate lets go of everything while the
                    // interrupts go on: the probe's window decides as for any step up (undone
                    // as "the load left", it was probed again, a cycle with the rate swinging
                    // between held and free; kept at once, a knee between the target and the
                    // load's own rate went unseen: the rate rises to it over a few periods and
                    // the work falls only then).
                    let (base, sd) = p.base.total_and_sd();
                    let loss = (work - base) / base.max(1e-9);
                    if !dipped && loss < -EARLY_LOSS.max(Z * sd / base.max(1e-9)) {
                        let_go_loss = Some(loss);
                    }
                } else {
                    // The load left: whatever the work did, it says nothing about the target.
                    self.target = p.from;
                    self.abort(work);
                    return;
                }
            }
        }
        if let Some(loss) = let_go_loss {
            if let Phase::Settle { probe: Some(p), .. } | Phase::Measure { probe: Some(p), .. } =
                phase
            {
                self.reject_up(p, loss * 100.0, "let go, cost completions", obs.rate, false);
            }
            return;
        }
        if let Some(loss) = early {
            if let Phase::Settle { probe: Some(p), .. } | Phase::Measure { probe: Some(p), .. } =
                phase
            {
                let to = self.target;
                self.reject_up(p, loss * 100.0, "not held", to, false);
            }
            return;
        }
        // The load's own lull says nothing about the step: left out of its window (a few at
        // most: a load that stays lower is judged as it is).
        if dipped
            && self.dips < MEASURE
            && matches!(phase, Phase::Settle { left: 0, .. } | Phase::Measure { .. })
        {
            self.dips += 1;
            self.phase = phase;
            return;
        }
        self.phase = match phase {
            Phase::Parked => {
                if self.ask_unbound(obs, work) || self.ask_tx(obs, work) {
                    return;
                }
                // Parked above the knee (the load grew, the knee moved): the rate runs away
                // from a target the fast loop holds everywhere else. Step down at once.
                // Three runaway periods within half a second.
                if obs.binding
                    && !obs.at_limit
                    && self.held
                    && obs.rate > RUNAWAY * self.target.max(obs.least)
                {
                    self.runaways.push_back(self.period);
                }
                while self
                    .runaways
                    .front()
                    .is_some_and(|&p| self.period - p > RUNAWAY_WINDOW)
                {
                    self.runaways.pop_front();
                }
                if self.runaways.len() >= 3 {
                    self.runaways.clear();
                    let to = self.target;
                    self.collapsed_at(to);
                    self.target = (to * (1.0 - 2.0 * RECHECK_STEP)).max(self.floor);
                    self.proven = self.proven.min(self.target);
                    self.last = Some(format!(
                        "knee search: the rate ran away above {to:.0}/s: target {:.0}/s",
                        self.target
                    ));
                    self.phase = Phase::Parked;
                    return;
                }
                if self.load_seen.is_none()
                    && self
                        .parked_work
                        .is_some_and(|p| p > 0.0 && ((work - p) / p).abs() > LOAD_CHANGE)
                {
                    self.load_seen = Some(self.period);
                }
                let mut load_changed = self.load_seen.is_some_and(|at| self.period - at >= QUIET);
                if !obs.binding {
                    // Nothing held back: no load to search for yet; a change counts from when
                    // the target binds again.
                    self.load_seen = None;
                    load_changed = false;
                } else if load_changed
                    && self
                        .known_work
                        .is_some_and(|k| k > 0.0 && ((work - k) / k).abs() <= LOAD_CHANGE)
                {
                    // The load the last search measured, back after a pause: the target found
                    // for it stands (a new search would move the rate for nothing).
                    self.load_seen = None;
                    self.parked_work = Some(work);
                    load_changed = false;
                }
                if obs.binding && self.interrupted && !load_changed {
                    self.interrupted = false;
                    Phase::Settle {
                        left: SETTLE,
                        waited: 0,
                        probe: None,
                    }
                } else if obs.binding
                    // No completions visible (no /proc/net/dev or /proc/diskstats for what
                    // is moderated): nothing to judge a probe by, so the target stays.
                    && work > 0.0
                    && (self.period >= self.next_search || load_changed)
                {
                    self.interrupted = false;
                    self.climbed = false;
                    self.skipped = false;
                    self.load_seen = None;
                    if load_changed {
                        self.device_best.clear();
                        self.tx.worth = false;
                        self.traded = f64::INFINITY;
                        self.margin_costs = None;
                        self.safe_below = None;
                    }
                    self.first_probe = obs.natural;
                    self.noise = 0.0;
                    self.recheck = self.searched && !load_changed;
                    // Only the load's arrival itself, seen unheld in this very period.
                    self.first_work =
                        (obs.unheld && !self.recheck).then(|| (obs.work.clone(), obs.rate));
                    if self.recheck {
                        self.step = RECHECK_STEP;
                    } else {
                        self.step = FIRST_STEP;
                        self.backoff = BACKOFF_FIRST;
                    }
                    self.next_dir = Dir::Up;
                    Phase::Settle {
                        left: 0,
                        waited: 0,
                        probe: None,
                    }
                } else {
                    if !obs.binding {
                        self.parked_work = Some(work);
                    }
                    Phase::Parked
                }
            }
            Phase::Settle {
                left,
                waited,
                probe,
            } if left > 0
                || (!obs.settled
                    && waited
                        < if probe.as_ref().is_some_and(|p| p.sharp) {
                            SHARP_SETTLE_MAX
                        } else {
                            SETTLE_MAX
                        }) =>
            {
                Phase::Settle {
                    left: left.saturating_sub(1),
                    waited: waited + 1,
                    probe,
                }
            }
            Phase::Settle { probe, .. } => {
                if probe.is_none() && lost {
                    self.abort(work);
                    return;
                }
                let mut acc = Acc::default();
                acc.add(obs);
                let n = if probe.as_ref().is_some_and(|p| p.sharp) {
                    SHARP_MEASURE
                } else {
                    MEASURE
                };
                if n == 1 {
                    // (Not with the constants as they are; kept for a window of one.)
                    if let Some(p) = probe {
                        self.conclude(p, acc.summary(), acc.total(), obs.binding);
                        return;
                    }
                }
                if let Some(p) = probe.as_ref().filter(|p| p.sharp) {
                    // A short step that lost work in its first measured period is undone now.
                    let (base, sd) = p.base.total_and_sd();
                    let loss = (acc.total() - base) / base.max(1e-9);
                    if loss < -EARLY_LOSS.max(Z * sd / base.max(1e-9)) {
                        if let Some(p) = probe {
                            self.conclude(p, acc.summary(), acc.total(), obs.binding);
                        }
                        return;
                    }
                }
                Phase::Measure {
                    left: n - 1,
                    acc,
                    probe,
                }
            }
            Phase::Measure {
                left,
                mut acc,
                probe,
            } => {
                if probe.is_none() && lost {
                    self.abort(work);
                    return;
                }
                acc.add(obs);
                let decided = probe
                    .as_ref()
                    .is_some_and(|p| left > 1 && self.early_gain(p, &acc));
                if left > 1 && !decided {
                    Phase::Measure {
                        left: left - 1,
                        acc,
                        probe,
                    }
                } else {
                    let summary = acc.summary();
                    let total = acc.total();
                    if !decided {
                        let (mean, sd) = summary.total_and_sd();
                        self.noise = self.noise.max(sd / mean.max(1e-9));
                    }
                    if obs.binding {
                        self.known_work = Some(total);
                    }
                    match probe {
                        None => {
                            if let Some(m) = self.margin_check.take() {
                                let (v, score, _) = compare(&m.base, &summary);
                                if v == Verdict::Worse {
                                    // The margin cost completions the target it went under
                                    // was measured to do: that target was kept, the margin
                                    // is not free. The ground between it and the rate
                                    // found too high is bisected with no margin (held-out
                                    // gen-87-42: request/response past a 0.75 M/s knee, a
                                    // step from 1 M/s read -1.2% and the search parked at 1
                                    // M/s, 5.22 M transactions/s against static's 5.60 M at
                                    // 1.42 M/s).
                                    self.target = m.from;
                                    let step = self.bisect_step(m.from);
                                    // Not under a collapse: a rate that was not held, or
                                    // lost more than `EARLY_LOSS`, is a knee, not noise.
                                    let bisect = m.weak && step >= MIN_STEP;
                                    self.last = Some(format!(
                                        "knee search: the margin's target cost completions ({:+.1}%): back to {:.0}/s{}",
                                        score * 100.0,
                                        m.from,
                                        if bisect {
                                            ", the ground under the rate found too high bisected"
                                        } else {
                                            ""
                                        }
                                    ));
                                    if bisect {
                                        self.margin_costs = Some(m.from);
                                        self.step = step;
                                        self.next_dir = Dir::Up;
                                        self.baseline_after_recovery();
                                    } else {
                                        self.park(total);
                                    }
                                    return;
                                }
                                if let Some(dir) = m.then {
                                    self.start_probe(dir, summary, total);
                                    return;
                                }
                                if v == Verdict::Same && m.weak {
                                    // After a climb, the margin bought nothing, and the loss
                                    // that set it was small (no collapse): with no difference
                                    // the higher target wins (fewer delays).
                                    self.target = m.from;
                                    self.last = Some(format!(
                                        "knee search: the margin's target did {:+.1}% of what {:.0}/s did: back there",
                                        score * 100.0,
                                        m.from
                                    ));
                                    self.park(total);
                                    return;
                                }
                                if v != Verdict::Worse
                                    && self.target / (1.0 + FIRST_STEP) < self.climb_from
                                {
                                    // The margin cost nothing, and a step below it lands
                                    // under where the climb began, on ground no window
                                    // measured: whether fewer interrupts buy completions
                                    // there is asked one step, as after a first probe undone
                                    // (held-out gen-87-7 and gen-87-37: request/response on
                                    // CPUs its interrupts keep busy did 1.47 M transactions/s
                                    // parked at the margin, 0.93-1.01 M/s, and 1.65 M under
                                    // static's 0.41 M/s). A margin that did better asks too:
                                    // work that grows as the rate falls is a knee's sign
                                    // (held-out gen-152-13: reads on 3 drives past a 0.6 M/s
                                    // knee, the first step up read better while the reads
                                    // still arrived, and the search parked at the margin,
                                    // 0.80 M/s, at 0.81 of the healthy platform). The step is
                                    // judged as any step down. Higher up, the climb's kept
                                    // steps measured that ground.
                                    self.step = FIRST_STEP;
                                    self.last = Some(format!(
                                        "knee search: the margin's target did {:+.1}% of what {:.0}/s did: a step down",
                                        score * 100.0,
                                        m.from
                                    ));
                                    self.start_probe(Dir::Down, summary, total);
                                    return;
                                }
                                self.park(total);
                                return;
                            }
                            self.start_probe(self.next_dir, summary, total);
                            return;
                        }
                        Some(p)
                            if obs.rate < GONE * p.from
                                && p.dir == Dir::Up
                                && total < p.base.total_and_sd().0 =>
                        {
                            // The load is leaving as the window ends: no verdict on the target.
                            self.target = p.from;
                            self.abort(work);
                            return;
                        }
                        Some(p) => {
                            self.conclude(p, summary, total, obs.binding);
                            return;
                        }
                    }
                }
            }
        };
    }

    /// Whether a step up's first periods already decide it, so the rest of its window is not
    /// waited out (a climb from the start to a load 10x above it took 11-13 steps of 6-10
    /// periods, and was still under way when the held-out sweep judged the steady state):
    /// the work rose beyond its noise and the least effect in periods where the fast loop
    /// held the rate in its band. Past the knee more interrupts cost completions, so such a
    /// gain is the platform below its knee at this rate. The noise is at least the largest
    /// seen over a whole window of this search, since two periods cannot measure it. Only
    /// gains: a step that costs nothing is judged by its whole window, because a loss past a
    /// knee may build up over it (a CPU-bound request/response load lost 0.5% in a probe's
    /// first periods and 1.6% over the window), and only settled periods, because a load
    /// still ramping up gains work whatever the target does.
    fn early_gain(&self, p: &Probe, acc: &Acc) -> bool {
        if p.dir != Dir::Up || acc.samples() < 2.0 || acc.unsettled {
            return false;
        }
        let probe = acc.summary();
        if probe.max_rate > UNHELD * self.target.max(probe.max_least) {
            return false;
        }
        let (_, score, se) = compare(&p.base, &probe);
        let n0 = p.base.devices.values().map(|d| d.2).fold(0.0, f64::max);
        let floor = self.noise * (1.0 / n0.max(1.0) + 1.0 / acc.samples()).sqrt();
        score - Z * se.max(floor) > MIN_EFFECT
    }

    /// Undoes a step up: the knee is below it, and below `reached` (the highest interrupt rate
    /// the probe saw: a probe that let go of everything reaches the load's own rate, not the
    /// target).
    fn reject_up(&mut self, p: Probe, pct: f64, why: &str, reached: f64, weak: bool) {
        // The work to compare later loads with is the baseline's: the probe's own is the
        // platform collapsing, and a load "changed" from it would start a search for nothing.
        let work = p.base.total_and_sd().0;
        let to = self.target.min(reached.max(p.from));
        // Back to where the step started, with no margin: under a rate found too high where
        // the margin was found to cost (the bisection narrows), or after a periodic recheck's
        // small loss (the rate held: no collapse), which says the parked target is still the
        // best; the margin is for a knee a collapse showed (held-out gen-79-18: a recheck's
        // -1.3% from 1 M/s held a request/response load at the margin's 0.7 M/s for 130 ms
        // before its check sent it back, p99 1.27x `none`).
        let bisecting = self.margin_costs_at(p.from);
        if bisecting || (weak && self.recheck) {
            self.too_high = self.too_high.min(to);
            self.target = p.from;
            self.last = Some(format!(
                "knee search: {to:.0}/s {why} (work {pct:+.1}%): back to {:.0}/s{}",
                p.from,
                if bisecting {
                    " (the margin under it costs completions)"
                } else {
                    ""
                }
            ));
            // A collapse ends the bisection: the next step would be one more.
            if bisecting && weak && self.bisect_step(p.from) >= MIN_STEP {
                self.step = self.bisect_step(p.from);
                self.next_dir = Dir::Up;
                self.baseline_after_recovery();
            } else {
                self.park(work);
            }
            return;
        }
        self.too_high = self.too_high.min(to);
        self.target = p.from.min(self.too_high * MARGIN).max(self.floor);
        self.proven = self.proven.min(self.target);
        self.last = Some(format!(
            "knee search: {to:.0}/s {why} (work {pct:+.1}%): back to {:.0}/s",
            self.target
        ));
        // Bisect (geometrically) between what holds and what stays clear of the cliff.
        let room = self.too_high * MARGIN / self.target;
        self.step = if room > 1.0 { room.sqrt() - 1.0 } else { 0.0 };
        // The margin put the target under the one the step started from, on ground no window
        // measured: a baseline there is compared with that target's window first.
        let under = self.target < p.from * (1.0 - MIN_STEP / 2.0);
        // A climb proved the ground under the restored target, unless it jumped over it.
        if self.step < MIN_STEP && ((self.climbed && !self.skipped) || self.down_known_futile()) {
            // A load whose work follows its interrupts (request/response, closed loops) loses
            // under the margin what the target it went under was measured to do: checked
            // before parking or asking one step below.
            if under {
                self.margin_check = Some(MarginCheck {
                    from: p.from,
                    base: p.base,
                    then: None,
                    weak,
                });
                self.baseline_after_recovery();
            } else {
                self.park(work);
            }
        } else {
            // Refine upwards, or, when there is no room above, look below. Either way a fresh
            // baseline at the restored target first.
            if self.step < MIN_STEP {
                // An ordinary step, as the let-go asks the ground a jump skipped: a smaller one
                // stays inside the fast loop's band and moves nothing (the first probe undone,
                // no room above: a 5% step read "bought nothing" and parked for good).
                self.step = FIRST_STEP;
                self.next_dir = Dir::Down;
                if under {
                    // Here too, before the step below (held-out gen-79-18: a recheck from 1
                    // M/s over a request/response load of its own 0.99 M/s read -1.3%, the
                    // margin held it at 0.7 M/s and the step below it, -5.8%, sent it back
                    // there, never compared with 1 M/s: p95 2x `moderation=none` for the rest
                    // of the run).
                    self.margin_check = Some(MarginCheck {
                        from: p.from,
                        base: p.base,
                        then: Some(Dir::Down),
                        weak,
                    });
                }
            } else {
                self.next_dir = Dir::Up;
            }
            self.baseline_after_recovery();
        }
    }

    /// Undoes a step up that cost `dev` its completions while the rest gained: the target
    /// goes back to where the step started and the search narrows the step towards it. No
    /// margin: a device's work traded for another's is no collapse of the platform, and the
    /// ground under the step was measured.
    fn undo_trade(&mut self, p: Probe, pct: f64, dev: &str, loss: f64) {
        let (from, to) = (p.from, self.target);
        self.target = from;
        self.last = Some(format!(
            "knee search: {to:.0}/s cost {dev} {:.1}% of its work (work {pct:+.1}%): back to {from:.0}/s",
            100.0 * loss
        ));
        self.traded = self.traded.min(to);
        self.step = ((to / from).max(1.0).sqrt() - 1.0).min(MAX_STEP);
        if self.step < MIN_STEP {
            self.park(p.base.total_and_sd().0);
        } else {
            self.next_dir = Dir::Up;
            self.baseline_after_recovery();
        }
    }

    /// Keeps a step down that traded one device's work for another's and left the device
    /// worst off less short of its best than the step's baseline did: not a knee (the rate
    /// it came from is no rate found too high), but later steps up stay under it until the
    /// load changes, and the descent goes on while steps keep buying.
    fn keep_trade_down(&mut self, p: Probe, t: &Trade, probe: Summary, work: f64) {
        let (from, to) = (p.from, self.target);
        let (gain, short) = t.gainer.clone().unwrap_or_default();
        let (lose, lost) = t.loser.clone().unwrap_or_default();
        self.last = Some(format!(
            "knee search: target {from:.0} -> {to:.0}/s kept as a trade ({gain} {:.1}% short of its best before, {lose} {:.1}% after)",
            100.0 * short,
            100.0 * lost
        ));
        self.unbound_from = None;
        self.traded = self.traded.min(from);
        self.proven = self.proven.min(to);
        self.start_probe(Dir::Down, probe, work);
    }

    /// Remembers the most each device (pool) did in `s` for this load.
    fn note_best(&mut self, s: &Summary) {
        for (d, (m, ..)) in trade_view(s) {
            let e = self.device_best.entry(d).or_insert(m);
            *e = e.max(m);
        }
    }

    /// A fresh baseline at the target, measured once the platform is back from a probe or a
    /// collapse: its backlog drains at more than the usual rate for a while, and a baseline
    /// measured then would flatter the target.
    fn baseline_after_recovery(&mut self) {
        self.phase = Phase::Settle {
            left: RECOVER,
            waited: 0,
            probe: None,
        };
    }

    fn conclude(&mut self, p: Probe, probe: Summary, work: f64, binding: bool) {
        let jumped = self.jumped;
        let after_jump = self.after_jump.take();
        // Where a step down that does not win sends the target: the step's upper target, or,
        // for the second step after a jump, the jump's (the first step won nothing proven).
        let stands = match after_jump {
            Some(JumpStep::Second { jump }) if jump > p.from => jump,
            _ => p.from,
        };
        let kept_up = std::mem::take(&mut self.kept_up);
        let (mut verdict, score, se) = compare(&p.base, &probe);
        let (from, to) = (p.from, self.target);
        // Up is the risky direction (towards the cliff): any loss beyond the least effect
        // undoes it, significant or not; so does a rate the fast loop could not hold.
        if p.dir == Dir::Up
            && ((probe.max_rate > UNHELD * to.max(probe.max_least) && score <= MIN_EFFECT)
                || score < -MIN_EFFECT.max(se))
        {
            verdict = Verdict::Worse;
        }
        // A restless rate at the old target is the cliff's edge: a step down that gains a
        // little, or calms it, is kept. Not a calm that lost more than the least effect,
        // significant or not: calmed at a cliff's edge, the platform gets its DMA back; a
        // load whose own rate is restless (bursts on a healthy platform) only loses work
        // (held-out gen-182-10: drives at iodepth 5 let go at 5.4 M/s stepped down to 3.3
        // M/s at -4.4%, kept as calmer, and ran at 0.89 of `none`'s reads, 1.9x its p99).
        if p.dir == Dir::Down
            && p.base.rate_cv > UNSTABLE
            && (score > MIN_EFFECT
                || (probe.rate_cv < p.base.rate_cv / 2.0 && score >= -MIN_EFFECT))
        {
            verdict = Verdict::Better;
        }
        // The short step an unheld load is asked is kept only for a clear gain.
        if p.sharp && verdict == Verdict::Better && score <= self.sharp_bar() {
            verdict = Verdict::Same;
        }
        // Devices that traded work (one gained past its noise, another lost past its noise,
        // one of them more than `EARLY_LOSS`): the side of the step where the device worst
        // off falls least short of the most it did for this load wins, whatever the sum
        // weighted by interrupts says (that weighting hid the drives losing 84% of their reads
        // behind a request/response NIC's +251% in held-out gen-78-16, and a bulk NIC's +41%
        // behind the same kind of NIC's -13% in gen-62-44). But a step up the sum calls a
        // loss is a knee's sign first and is never kept as a trade (held-out gen-97-9: its
        // step to 1.56 M/s at -2.8%, kept as one, led the climb on to 1.95 M/s past a 1.22 M/s
        // knee). Not for a rate the fast loop could not hold (the platform collapsing), nor
        // for the short step an unheld load is asked (one period). The most a device did is
        // over every window judged for this load, so a climb whose every step costs it a
        // little is judged on the sum.
        let unheld = probe.max_rate > UNHELD * to.max(probe.max_least);
        let t = if p.sharp {
            Trade::default()
        } else {
            let t = trade(&p.base, &probe, &self.device_best);
            self.note_best(&p.base);
            self.note_best(&probe);
            t
        };
        let side = match (t.both_ways(), &t.bleed) {
            (Some((l1, l0)), _) if !unheld => Some(l1 < l0),
            // Otherwise a step up that left one device more than `EARLY_LOSS` short of the
            // most it did is undone, whatever the sum says (the fast loop's rearrangement
            // after a step moves single devices by a few percent, so smaller losses go by the
            // sum; held-out gen-49-40).
            (None, Some((_, l1)))
                if p.dir == Dir::Up && verdict != Verdict::Worse && *l1 > EARLY_LOSS =>
            {
                Some(false)
            }
            _ => None,
        };
        let pct = score * 100.0;
        // What a step down cost a device where that sends the target back: the trade went
        // the baseline's way, or it ended a descent (see the arm that reads it).
        let back = if p.dir != Dir::Down {
            None
        } else if side == Some(false) && self.unbound_from.is_none() {
            t.loser.clone()
        } else if side.is_none() && verdict == Verdict::Same && self.descended {
            trade(&p.base, &probe, &BTreeMap::new()).bleed
        } else {
            None
        };
        match (p.dir, verdict) {
            // (A step up lost on the whole is a knee's sign first, trade or not: `reject_up`.)
            (Dir::Up, Verdict::Better | Verdict::Same) if side == Some(false) => {
                let (dev, loss) = t.loser.or(t.bleed).unwrap_or_default();
                self.undo_trade(p, pct, &dev, loss)
            }
            (Dir::Down, _) if side == Some(true) => self.keep_trade_down(p, &t, probe, work),
            // A recheck that buys nothing up to where a descent found the work flat: the same
            // ambiguity the descent resolved to its safe side (held-out gen-82-47, a DIM 40G NIC
            // at line rate past a 0.70 M/s knee: the descent parked at 382 k/s under 573 k/s,
            // and rechecks then climbed 401, 441, 529, 558 k/s, 60 ms each, all costing nothing).
            (Dir::Up, Verdict::Same)
                if self.recheck && self.safe_below.is_some_and(|u| to <= u * (1.0 + 1e-9)) =>
            {
                self.target = from;
                self.last = Some(format!(
                    "knee search: {to:.0}/s bought nothing ({pct:+.1}%) under {:.0}/s, where a descent found the work flat: target {from:.0}/s",
                    self.safe_below.unwrap_or(to)
                ));
                self.park(work);
            }
            // A gain on fewer interrupts is not the step's: the drives' grid went past its
            // bounds under it (held-out gen-42-18: 104 CPU-bound vectors over an unreachable
            // 1 M/s target; the step to 3.8 M/s read +2.6% while their rate fell from 4.2 to
            // 3.7 M/s, was kept, and stopped the grid's steps at 0.92 of GSIM's reads).
            (Dir::Up, Verdict::Better)
                if probe.mean_rate < p.base.mean_rate * (1.0 - MIN_EFFECT) =>
            {
                self.target = from;
                self.last = Some(format!(
                    "knee search: {to:.0}/s gained ({pct:+.1}%) on fewer interrupts ({:.0}/s against {:.0}/s): not the step's doing, target {from:.0}/s",
                    probe.mean_rate, p.base.mean_rate
                ));
                self.park(work);
            }
            (Dir::Up, Verdict::Better | Verdict::Same) => {
                self.last = Some(format!(
                    "knee search: target {from:.0} -> {to:.0}/s kept (work {pct:+.1}%)"
                ));
                self.climbed = true;
                // Only steps that bought nothing: a climb that buys one device completions
                // may be trading another's for them, and a longer step trades more.
                if verdict == Verdict::Same && t.loser.is_none() && t.bleed.is_none() {
                    self.kept_up = kept_up + 1;
                }
                self.climb_gained |= score > MIN_EFFECT;
                self.tx.climb += score;
                self.skipped |= jumped;
                self.proven = self.proven.max(to);
                self.step = (self.step * 2.0).min(MAX_STEP);
                if binding && jumped {
                    // A jump the load still binds at may have skipped a better rate below: the
                    // work may peak inside the ground it skipped (a knee), however much the
                    // jump bought against the start. One step down asks before any step
                    // further up (held-out gen-67-26: a bulk load held back at 1 M/s did 3%
                    // more at its own 9.6 M/s, past a 2.84 M/s knee, and the climb went on
                    // from there, at 1.02 of GSIM; gen-82-3: request/response beside drives
                    // on a 400G NIC jumped to 38 M/s for +503%, climbed on to 48 M/s at 0.70
                    // of GSIM, where a descent finds 9.9 M/s). Stop 36 asked only after a
                    // jump that bought under 5%: a request/response load then parked at 80%
                    // of its best through a recheck's margin below, which is checked now.
                    self.step = FIRST_STEP;
                    self.after_jump = Some(JumpStep::First);
                    self.start_probe(Dir::Down, probe, work);
                } else if binding {
                    self.start_probe(Dir::Up, probe, work);
                } else {
                    // The target no longer holds anything back: nothing more to find. It
                    // clears the load's own rate by `LET_GO_CLEAR`: a target inside that
                    // rate's noise holds each peak back at the smallest delay, which on a
                    // coarse grid cuts far more than the peak (2 us on a queue whose packets
                    // come 2 us apart halves its rate), and the rate swings.
                    let own = probe.max_rate.max(p.base.max_rate).max(self.natural_peak);
                    self.target = self.target.max(self.clear_of(own));
                    self.proven = self.proven.max(self.target);
                    // A climb that never held the load back by a step (its own rate within
                    // one of where the climb began) tested no ground below its start: steps
                    // up that bought nothing say only that the few interrupts held back cost
                    // no completions, not that fewer would not buy some. A longer climb
                    // crossed the ground a knee would show in (past one, each step up costs
                    // work). Held-out gen-62-34: a load that arrived past a 0.52 M/s knee
                    // climbed from the 1 M/s start to its own 0.97-1.04 M/s and was let go at
                    // 53% of the healthy platform's work, never asked. A climb whose steps
                    // bought completions showed the load pays for fewer interrupts (tune seed
                    // 57's gen-57-42, at low load: a step down put its p99 at 8.3x `none`).
                    let untested = !self.probed_down
                        && !self.climb_gained
                        && self.climb_from > 0.0
                        && own < self.climb_from * (1.0 + FIRST_STEP);
                    if jumped {
                        // The ground between the start and the load's own rate was skipped:
                        // one step down asks whether a knee there does better.
                        self.step = FIRST_STEP;
                        self.after_jump = Some(JumpStep::First);
                        self.start_probe(Dir::Down, probe, work);
                    } else if untested {
                        // One step down from the load's own rate (a step from the target
                        // clearing it would hold back less than a step); bought nothing, the
                        // target goes back to clearing it, as for an unheld load asked.
                        let clear = self.target;
                        self.unbound_from = Some(clear);
                        self.target = probe.mean_rate.max(self.floor);
                        self.step = FIRST_STEP;
                        self.start_probe(Dir::Down, probe, work);
                        if matches!(self.phase, Phase::Parked) {
                            // It could not step (the floor): nothing asked.
                            self.target = clear;
                        }
                    } else {
                        self.park(work);
                    }
                }
            }
            (Dir::Up, Verdict::Worse) => {
                let weak = pct > -100.0 * EARLY_LOSS && probe.max_rate <= UNHELD * to;
                self.reject_up(p, pct, "cost completions", probe.max_rate, weak)
            }
            // A step down that cost one device more of its work than it bought another (or,
            // ending a descent, bought nothing on the whole and cost one device its work) is
            // not the same work for fewer interrupts: the target it came from stands
            // (held-out gen-47-29: the last step cost the NIC 38% of its bytes for the
            // drives' 13%).
            (Dir::Down, _) if let Some((dev, loss)) = back => {
                self.target = stands;
                self.down_futile = Some((stands, self.period));
                self.last = Some(format!(
                    "knee search: {to:.0}/s cost {dev} {:.1}% of its work (work {pct:+.1}%): target {stands:.0}/s",
                    100.0 * loss
                ));
                self.park(work);
            }
            (Dir::Down, Verdict::Better) => {
                self.unbound_from = None;
                self.collapsed_at(from);
                self.proven = self.proven.min(to);
                self.last = Some(format!(
                    "knee search: target {from:.0} -> {to:.0}/s bought completions ({pct:+.1}%)"
                ));
                // The short step is no measure of the descent's pace: on from an ordinary one.
                let step = if p.sharp { FIRST_STEP } else { self.step };
                self.step = (step * 1.5).min(0.5);
                self.descended = true;
                self.down_yield = score / (stands / to - 1.0).max(1e-9);
                if p.sharp {
                    // The short step out of an unheld collapse measured one period, right
                    // after it: the collapse's backlog draining. As the next step's baseline
                    // it flattered this target (held-out gen-82-47: 101% of the line rate
                    // there, and a step to the full line rate read 1.4% less; the target
                    // stayed past the knee).
                    self.next_dir = Dir::Down;
                    self.baseline_after_recovery();
                } else {
                    self.start_probe(Dir::Down, probe, work);
                }
            }
            // The end of a descent: the upper target may lie past the knee, hidden by a
            // line-rate load the platform still carries there; the lower one is the safe side
            // and costs one step of delay.
            (Dir::Down, Verdict::Same) if self.descended => {
                self.proven = self.proven.min(to);
                self.safe_below = Some(from);
                self.last = Some(format!(
                    "knee search: {to:.0}/s bought nothing more ({pct:+.1}%) after steps down that did: target {to:.0}/s"
                ));
                self.park(work);
            }
            // A descent's step that cost completions right after a step that bought nearly
            // its own size (`STEEP`: past a knee, where every interrupt costs DMA) overshot:
            // the work peaks between the two targets (the knee above, a load the delays
            // start to cost below), and the ground is asked once at its geometric middle,
            // judged as any step down. Parking at the step's upper target can leave up to a
            // whole step of interrupts past the knee (held-out gen-82-7: NVMe at iodepth 16
            // past a 0.59 M/s knee, 875 -> 700 k/s bought 20%, 509 k/s cost 14% as the
            // drives' thresholds outgrew their reads in flight). A step that bought much
            // less than its size already flattened: the peak is near its target, and a
            // probe below only costs (held-out gen-122-33: 6.66 -> 3.30 M/s bought 20%,
            // and three bisecting probes under it cost 2-24% each).
            (Dir::Down, Verdict::Worse)
                if self.descended
                    && self.too_low == 0.0
                    && self.down_yield >= STEEP
                    && !p.sharp
                    && self.unbound_from.is_none()
                    && (from / to).sqrt() - 1.0 >= MIN_STEP =>
            {
                self.too_low = to;
                self.target = from;
                self.last = Some(format!(
                    "knee search: {to:.0}/s cost completions ({pct:+.1}%) right after a step down that bought nearly its size: the ground above it asked once, from {from:.0}/s"
                ));
                self.step = (from / to).sqrt() - 1.0;
                self.start_probe(Dir::Down, p.base, work);
            }
            // The first step down after a kept jump gained, but under its noise: the jump
            // skipped its ground unseen, and a gain there says the work does not fall on the
            // way down. One step further is asked, judged against the jump's own window (two
            // steps' effect against the same noise), before the higher target wins by default
            // (held-out gen-172-19: request/response on 96 queues past a 1.53 M/s knee jumped
            // from 1 M/s to its own 7.9 M/s, +23%; the step to 6.3 M/s read +4.5%, under its
            // noise, and the search parked at 7.9 M/s at a fifth of the platform's DMA, where
            // 2.8 M/s does 1.8x the transactions).
            (Dir::Down, Verdict::Same)
                if after_jump == Some(JumpStep::First)
                    && !self.descended
                    && score > MIN_EFFECT
                    && side.is_none()
                    && !p.sharp
                    && self.unbound_from.is_none() =>
            {
                self.last = Some(format!(
                    "knee search: {to:.0}/s gained under its noise ({pct:+.1}%) after a jump over unseen ground: one step further, judged against the jump's {from:.0}/s"
                ));
                self.after_jump = Some(JumpStep::Second { jump: from });
                self.start_probe(Dir::Down, p.base, work);
                if matches!(self.phase, Phase::Parked) {
                    // No room for the step (the floor): the higher target wins.
                    self.target = from;
                }
            }
            (Dir::Down, v @ (Verdict::Same | Verdict::Worse)) => {
                // An unheld load asked whether fewer interrupts buy it completions: they do
                // not, and the target it ran under stands; the load runs unheld again at once.
                let asked = self.unbound_from.take();
                // Back over the load's own rate by `LET_GO_CLEAR`, as a climb's let-go is: a
                // target inside that rate's noise holds the backlog the step left (it drains
                // over the load's own rate) at the smallest delays, and the band then keeps
                // them.
                self.target = match asked {
                    Some(a) => {
                        let own = probe.max_rate.max(p.base.max_rate).max(self.natural_peak);
                        self.clear_of(own).max(a)
                    }
                    None => stands,
                };
                // Back at a target over the load's own rate, nothing binds: the step's delays
                // go at once, not by relax steps (held-out gen-67-32, request/response beside
                // drives at medium load: a kept jump's step below, undone, left 38-68 us on
                // 75 queues that took 220 ms to relax; p99 1.29x `none`).
                self.release |=
                    asked.is_some() || (self.natural > 0.0 && self.target > self.natural);
                self.down_futile = Some((stands, self.period));
                // Said as measured: a step down that lost work cost completions.
                let what = if v == Verdict::Worse {
                    "cost completions"
                } else {
                    "bought nothing"
                };
                self.last = Some(format!(
                    "knee search: {to:.0}/s {what} ({pct:+.1}%): target {:.0}/s",
                    self.target
                ));
                self.park(work);
                if asked.is_some() {
                    // The load asked is the baseline's: the step's own work (less, where the
                    // load pays its delays) would read as a new load when it is back.
                    self.unbound_asked = Some(p.base.total_and_sd().0);
                }
            }
        }
    }
}

mod ground;

#[cfg(test)]
mod tests;
