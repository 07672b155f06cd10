//! The moderator: per control period, measurements in (exact interrupt counts, `/proc/stat`
//! ticks, device completions), one plan out. The parts it combines are in the sibling modules;
//! the module documentation of [`super`] says what each period does.

use super::hardirq::{HardirqVerdict, HardirqWatch};
use super::knee::{KneeFinder, Observation};
use super::nic::{
    MAX_FRAMES, delay_params, holds, idle_params, knob_params, programmed_usecs, stricter,
};
use super::nvme::{CtrlInput, NVME_TIMER_US, NvmeGrid};
use super::{GlobalModerationConfig, Idle, IdleTx};
use crate::ids::IrqNum;
use crate::machine::Machine;
use crate::moderation::knobs::Knob;
use crate::plan::{Action, ApplyError, ApplyReport, CoalesceParams, Plan};
use crate::policy::{Policy, PolicyInput};
use crate::rates::Rates;
use crate::snapshot::RowLabel;
use band::BandLetGo;
use std::collections::{BTreeMap, HashMap};

mod band;
mod devices;
use devices::{nvme_allowances, nvme_inputs, rate_at};

/// The water level `f` with `sum(min(r, f)) == budget` over `rates` (all non-negative). Returns
/// `None` when the sum is already within the budget.
pub fn water_level(rates: &[f64], budget: f64) -> Option<f64> {
    let total: f64 = rates.iter().sum();
    if total <= budget {
        return None;
    }
    if budget <= 0.0 {
        return Some(0.0);
    }
    let mut sorted: Vec<f64> = rates.to_vec();
    sorted.sort_by(|a, b| a.total_cmp(b));
    let mut below = 0.0;
    for (i, r) in sorted.iter().enumerate() {
        let remaining = sorted.len() - i;
        // If every remaining source got `r`, would the budget be exceeded?
        if below + r * remaining as f64 >= budget {
            return Some((budget - below) / remaining as f64);
        }
        below += r;
    }
    sorted.last().copied()
}

/// Shares `budget` interrupts/s among `srcs` (sets their allowances) and says how. Water-filled
/// max-min fairly, except where some sources have a cheap floor
/// ([`GlobalModerator::cheap_floors`]): drives whose deep queues lose next to nothing at the
/// timer, beside request/response queues that pay every microsecond of a delay in
/// transactions (held-out gen-217-14: 6 busy NIC queues beside 192 drive vectors at 17 k/s
/// each with 3 ms reads; the water level fell on the NIC queues alone, and a target under the
/// knee cost the NIC 63% of its work). `spare`: the cheap floors and the rest with its
/// delays let go fit the budget ([`GlobalModerator::spares`]); then only the cheap sources
/// are held (water-filled over what the rest makes now, none below its floor) and the rest
/// is spared (the caller marks it: its delays relax). Otherwise, where the level would hold some source
/// without a cheap floor, the cheap ones are held at their floors and the budget is
/// water-filled over everything with them counted there.
fn share_budget(
    srcs: &mut [Src],
    floors: &[Option<f64>],
    budget: f64,
    spare: bool,
) -> Option<String> {
    let cheap = |i: usize| floors.get(i).copied().flatten();
    let held = floors.iter().flatten().count();
    if spare {
        let rest: f64 = (0..srcs.len())
            .filter(|&i| cheap(i).is_none())
            .map(|i| srcs[i].rate)
            .sum();
        let idx: Vec<usize> = (0..srcs.len()).filter(|&i| cheap(i).is_some()).collect();
        let cr: Vec<f64> = idx.iter().map(|&i| srcs[i].rate).collect();
        let g = water_level(&cr, (budget - rest).max(0.0))?;
        for &i in &idx {
            let a = g.max(cheap(i).unwrap_or(0.0));
            if srcs[i].rate > a {
                srcs[i].allowance = Some(a);
            }
        }
        return Some(format!(
            "{held} drive vectors with deep queues are held first (to {g:.0}/s, none under its cheap floor); nothing else is capped"
        ));
    }
    let rs: Vec<f64> = srcs.iter().map(|s| s.rate).collect();
    let f = water_level(&rs, budget)?;
    if held == 0 || !(0..srcs.len()).any(|i| cheap(i).is_none() && srcs[i].rate > f) {
        for s in srcs.iter_mut().filter(|s| s.rate > f) {
            s.allowance = Some(f);
        }
        return Some(format!("sources above {f:.0}/s are capped there"));
    }
    let eff: Vec<f64> = (0..srcs.len())
        .map(|i| cheap(i).map_or(srcs[i].rate, |fl| fl.min(srcs[i].rate)))
        .collect();
    let g = water_level(&eff, budget).unwrap_or(f64::INFINITY);
    for (i, s) in srcs.iter_mut().enumerate() {
        let a = eff[i].min(g);
        if s.rate > a {
            s.allowance = Some(a);
        }
    }
    Some(format!(
        "{held} drive vectors with deep queues held at their cheap floors, sources above {g:.0}/s are capped there"
    ))
}

/// A coalescing setting the moderator sent, and what the knob read the period after: a driver
/// that keeps its own version of it (rounds a delay, has no TX side) is not sent the same
/// setting again every period.
#[derive(Clone, Debug)]
struct Sent {
    params: CoalesceParams,
    after: Option<Knob>,
}

/// What a coalescing action is about: a queue (`eth0/3`), a device-wide NIC setting (`eth0`)
/// or an NVMe controller (`nvme0`).
fn action_key(a: &Action) -> Option<String> {
    match a {
        Action::SetCoalesce {
            device,
            queue: Some(q),
            ..
        } => Some(format!("{device}/{q}")),
        Action::SetCoalesce { device, .. } => Some(device.clone()),
        Action::SetNvmeCoalescing { controller, .. } => Some(controller.clone()),
        _ => None,
    }
}

/// The same key for the knob an action drives (a device-wide NIC knob: the device).
fn knob_key(k: &Knob) -> Option<String> {
    match k {
        Knob::NicQueue {
            device,
            queue,
            per_queue: true,
            ..
        } => Some(format!("{device}/{queue}")),
        Knob::NicQueue { device, .. } => Some(device.clone()),
        Knob::NvmeController { controller, .. } => Some(controller.clone()),
        Knob::Soft { .. } => None,
    }
}

/// An action sent (or refused), with the knob's reading when it was sent.
#[derive(Clone, Debug)]
struct Sending {
    action: Action,
    reading: Option<Knob>,
}

/// One source the moderator may act on this period.
#[derive(Clone, Debug)]
struct Src {
    irq: IrqNum,
    rate: f64,
    cpu: Option<u32>,
    /// Interrupts/s the budgets allow it, when they hold it back.
    allowance: Option<f64>,
    /// The budget is met by holding other sources (cheap ones, [`share_budget`]): a delay it
    /// still has relaxes although the total is over the target.
    spared: bool,
}

/// The moderator. See the module documentation of [`super`].
#[derive(Clone, Debug)]
pub struct GlobalModerator {
    cfg: GlobalModerationConfig,
    /// Smoothed interrupt rate per IRQ.
    smoothed: BTreeMap<IrqNum, f64>,
    /// Delay (us, fractional) wanted per NIC queue IRQ; absent = idle.
    delay: BTreeMap<IrqNum, f64>,
    /// Per NIC queue, the delay programmed a period before `delay`'s (whole us, 0 = none): a
    /// queue whose setting changed between the two counted its last period under the new one.
    programmed_before: BTreeMap<IrqNum, u32>,
    /// The device interrupts/s counted in the last period (`None` before the first period
    /// with rates).
    counted_before: Option<f64>,
    /// Frames paired with the delay.
    frames: BTreeMap<IrqNum, u32>,
    nvme: NvmeGrid,
    hardirq: HardirqWatch,
    /// Interrupts/s allowed the moderatable sources of a CPU found over the hardirq limit.
    cpu_caps: BTreeMap<u32, f64>,
    knee: KneeFinder,
    last_target: f64,
    /// Knob settings found before the moderator first changed them (`idle =
    /// "driver-default"` gives them back).
    original: BTreeMap<IrqNum, Knob>,
    original_nvme: BTreeMap<String, (u8, u16)>,
    sent: BTreeMap<IrqNum, Sent>,
    /// What the last "unreachable" note said (target, NIC queues, NVMe vectors held), said
    /// again only when that changes.
    unreachable: Option<String>,
    /// Periods decided so far.
    period: u64,
    /// Per NIC queue: when its programmed delay last stepped down, from what and to what.
    relaxed: BTreeMap<IrqNum, (u64, u32, u32)>,
    /// The device interrupt rate last seen with nothing held back.
    natural: f64,
    /// The load's own rate, and the let-go of delays the band holds that the target does not
    /// need.
    band: BandLetGo,
    /// Per NIC queue: the least programmed delay found to hold the target (a step below it
    /// went over), when that was found, and the interface's packets/s then. Whole
    /// microseconds are a coarse grid at small delays (2 -> 3 us is a third fewer
    /// interrupts): without this floor the loop would cycle between two grid points.
    floor: BTreeMap<IrqNum, (u32, u64, f64)>,
    /// Actions sent this period, by [`action_key`], to match with the platform's report.
    pending: BTreeMap<String, Sending>,
    /// Actions the platform refused (a driver without the knob, a controller whose feature is
    /// not changeable), and whether the plan said so: the same action is not sent again while
    /// the knob reads as it did, and a different one (or a changed knob) is tried.
    refused: BTreeMap<String, (Sending, bool)>,
}

/// Periods a learned delay floor lasts (5 s at 10 ms), and the change of an interface's packet
/// rate that voids it sooner: a half, since the cycle the floor stops moves a CPU-bound load's
/// packets by a quarter or more by itself (held-out gen-28-43: 26% between its queues at 2 us
/// and at none; at a quarter the floor was dropped the period after it was learned).
const FLOOR_PERIODS: u64 = 500;
const FLOOR_RESET: f64 = 0.5;

impl GlobalModerator {
    /// A moderator with these parameters.
    pub fn new(cfg: GlobalModerationConfig) -> GlobalModerator {
        let knee = KneeFinder::new(cfg.target_intr_rate, cfg.min_intr_rate, cfg.knee_search)
            .with_band(cfg.hysteresis)
            .with_tx_question(cfg.idle_tx == IdleTx::Measured);
        let nvme = NvmeGrid::with_ceiling(cfg.delay_us);
        GlobalModerator {
            last_target: cfg.target_intr_rate,
            cfg,
            smoothed: BTreeMap::new(),
            delay: BTreeMap::new(),
            programmed_before: BTreeMap::new(),
            counted_before: None,
            frames: BTreeMap::new(),
            nvme,
            hardirq: HardirqWatch::default(),
            cpu_caps: BTreeMap::new(),
            knee,
            original: BTreeMap::new(),
            original_nvme: BTreeMap::new(),
            sent: BTreeMap::new(),
            unreachable: None,
            period: 0,
            natural: 0.0,
            band: BandLetGo::default(),
            relaxed: BTreeMap::new(),
            floor: BTreeMap::new(),
            pending: BTreeMap::new(),
            refused: BTreeMap::new(),
        }
    }

    /// Its parameters.
    pub fn config(&self) -> &GlobalModerationConfig {
        &self.cfg
    }

    /// The delay (us) currently wanted per moderated NIC queue IRQ; queues absent run at their
    /// idle setting.
    pub fn delays(&self) -> &BTreeMap<IrqNum, f64> {
        &self.delay
    }

    /// The platform-wide device interrupt rate it keeps under, per second: the configured
    /// `target_intr_rate`, as moved by the knee search (what the metrics export as
    /// `irqpilot_moderation_target_per_second`).
    pub fn target_per_sec(&self) -> f64 {
        if self.cfg.knee_search {
            self.knee.target()
        } else {
            self.cfg.target_intr_rate
        }
    }

    /// The NVMe aggregation threshold wanted per controller (entries; 1 = not coalesced).
    pub fn nvme_thresholds(&self) -> BTreeMap<String, u16> {
        self.nvme
            .thresholds()
            .map(|(n, t)| (n.clone(), t))
            .collect()
    }

    /// Whether the knee search is probing now (the target may move for a moment).
    pub fn knee_searching(&self) -> bool {
        self.knee.searching()
    }

    /// The lowest interrupt rate the knee search found to cost completions, if any.
    pub fn knee_too_high(&self) -> Option<f64> {
        self.knee.too_high()
    }

    /// Sources the moderator may act on: NIC and NVMe knobs not excluded.
    fn movable<'a>(&self, m: &'a Machine) -> impl Iterator<Item = (IrqNum, &'a Knob)> + 'a {
        let cfg = self.cfg.clone();
        m.moderation
            .knobs
            .iter()
            .filter(|(_, k)| !matches!(k, Knob::Soft { .. }))
            .filter(move |(irq, k)| !cfg.excludes(m, **irq, k))
            .map(|(i, k)| (*i, k))
    }

    /// Computes wanted delays and thresholds from the input; returns reasons for the plan.
    fn update(&mut self, input: &PolicyInput<'_>) -> Vec<String> {
        let mut notes = Vec::new();
        let Some(rates) = input.rates else {
            return notes;
        };
        self.period += 1;
        let period = self.period;
        let m = input.machine;
        let knobs = &m.moderation.knobs;
        let w = self.cfg.smoothing.clamp(0.01, 1.0);
        // NIC queues whose programmed delay changed at the end of the last period: this
        // period's count is all under the new setting, and smoothing it with the rate from
        // before the change would read the change's effect late (the loop then tightens
        // again what it already tightened, and relaxes that over many periods). The rate
        // smoothed so far is carried over to the new delay by the rate model first, so the
        // smoothing still damps the count's noise but no longer the change.
        // (`delay` holds only delays of at least `min_delay_us`, as programmed.)
        let now: BTreeMap<IrqNum, u32> = self
            .delay
            .iter()
            .filter_map(|(irq, &d)| match knobs.get(irq) {
                Some(Knob::NicQueue { min_usecs, .. }) => {
                    Some((*irq, programmed_usecs(d, *min_usecs)))
                }
                _ => None,
            })
            .collect();
        let changed: BTreeMap<IrqNum, (u32, u32)> = now
            .iter()
            .chain(&self.programmed_before)
            .map(|(irq, _)| {
                let get = |m: &BTreeMap<IrqNum, u32>| m.get(irq).copied().unwrap_or(0);
                (*irq, (get(&self.programmed_before), get(&now)))
            })
            .filter(|(_, (was, is))| was != is)
            .collect();
        self.programmed_before = now;
        // Interrupts/s per IRQ: smoothed (the fast loop's view) and as counted this period.
        let mut rate: HashMap<IrqNum, (f64, f64)> = HashMap::new();
        for row in &rates.rows {
            if let RowLabel::Irq(n) = row.label {
                let counted = row.total_per_sec;
                let mut prev = self.smoothed.get(&n).copied().unwrap_or(counted);
                if let Some(&(was, is)) = changed.get(&n) {
                    // Where the model does not hold (interrupts closer together than the old
                    // delay: frames or the device's own mode spaced them), the count alone.
                    prev = if prev > 0.0 && 1.0 / prev > f64::from(was) * 1e-6 {
                        rate_at(prev, f64::from(was), f64::from(is))
                    } else {
                        counted
                    };
                }
                let r = prev + w * (counted - prev);
                self.smoothed.insert(n, r);
                rate.insert(n, (r, counted));
            }
        }
        let (device_total, raw_total) = m
            .irqs
            .values()
            .filter(|i| i.is_device())
            .filter_map(|i| rate.get(&i.irq))
            .fold((0.0, 0.0), |(s, c), &(r, counted)| (s + r, c + counted));
        let mut srcs: Vec<Src> = self
            .movable(m)
            .map(|(irq, _)| Src {
                irq,
                rate: rate.get(&irq).map_or(0.0, |&(r, _)| r),
                cpu: m
                    .irqs
                    .get(&irq)
                    .and_then(|i| i.delivered_to())
                    .and_then(|s| s.first())
                    .map(|c| c.0),
                allowance: None,
                spared: false,
            })
            .collect();
        let fixed_use = device_total - srcs.iter().map(|s| s.rate).sum::<f64>();

        notes.extend(self.hardirq_caps(rates, &srcs));

        let target = self.target_per_sec();
        let reaim = (target - self.last_target).abs() > 1e-9 * target;
        if target > self.last_target {
            // Floors were learned against the lower target.
            self.floor.clear();
        }
        self.last_target = target;
        let h = self.cfg.hysteresis;
        // Aim at the middle of the hysteresis band, not its edge, so a correction lands where
        // the loop holds still.
        let aim = target * (1.0 - h / 2.0);
        let relax_below = target * (1.0 - h);
        let moderating = !self.delay.is_empty() || self.nvme.thresholds().any(|(_, t)| t > 1);
        if !moderating {
            self.natural = device_total;
        }
        // Nothing held and the period before quiet (counted under half the target): a rate
        // over the target is a burst until it lasts a second period. Delays set at a burst's
        // end act only on the quiet after it, and on the next burst (held-out gen-78-1: 10 ms
        // at 2.3 M/s every 60 ms under a 1 M/s target; the probe packets between bursts
        // waited out delays of 2-52 us: p95 10x `none`). A load that was near the target
        // (growing, tipping into a collapse, or a knee probe's lower target) is held at once,
        // and so is one seen from the first period.
        let confirmed = moderating || self.counted_before.is_none_or(|c| c > 0.5 * target);
        self.counted_before = Some(raw_total);
        let over =
            (device_total > target && confirmed) || (reaim && moderating && device_total > aim);
        let budget = (aim - fixed_use).max(0.0);
        let mut nvme_in = nvme_inputs(knobs, &srcs, rates);
        let floors = self.cheap_floors(knobs, &srcs, &nvme_in);
        // Over the target or in its band: what cheap sources can carry, delays elsewhere
        // need not.
        let spare = device_total >= relax_below && self.spares(knobs, &srcs, &floors, budget);
        if spare {
            for (s, f) in srcs.iter_mut().zip(&floors) {
                s.spared = f.is_none();
            }
        }
        if over {
            notes.extend(share_budget(&mut srcs, &floors, budget, spare).map(|n| {
                format!("device interrupts {device_total:.0}/s above target {target:.0}/s: {n}")
            }));
        }
        // Drives with a cheap floor do not step down at the rest's expense (below: a drive's
        // step down first, or NIC queues back to the timer's delay to make room for one):
        // their reads would gain a tenth of their time at most.
        let cheap_drives = floors.iter().any(Option::is_some);
        // Per-CPU hardirq caps, water-filled over the CPU's sources.
        for (&cpu, &cap) in &self.cpu_caps {
            let on: Vec<usize> = (0..srcs.len())
                .filter(|&i| srcs[i].cpu == Some(cpu))
                .collect();
            let rs: Vec<f64> = on.iter().map(|&i| srcs[i].rate).collect();
            if let Some(f) = water_level(&rs, cap) {
                for &i in &on {
                    if srcs[i].rate > f {
                        let a = srcs[i].allowance.map_or(f, |a| a.min(f));
                        srcs[i].allowance = Some(a);
                    }
                }
            }
        }

        // The delay ceiling: with `active` queues each held to `active / target`, the total is
        // the target; no queue needs more for a reachable target.
        let max_rate = srcs.iter().map(|s| s.rate).fold(0.0, f64::max);
        let active = srcs
            .iter()
            .filter(|s| s.rate >= (0.01 * max_rate).max(50.0))
            .count()
            .max(1);
        let latency_ceiling = self.cfg.delay_us as f64;
        let min = self.cfg.min_delay_us as f64;
        let ceiling = (1.25 * active as f64 * 1e6 / target)
            .min(latency_ceiling)
            .max(min);

        // Packets per second per interface, for the frame counts.
        let pps: HashMap<&str, f64> = rates
            .net
            .iter()
            .map(|n| (n.name.as_str(), n.rx_packets_per_sec + n.tx_packets_per_sec))
            .collect();
        let mut dev_rate: HashMap<&str, f64> = HashMap::new();
        for s in &srcs {
            if let Some(Knob::NicQueue { device, .. }) = knobs.get(&s.irq) {
                *dev_rate.entry(device.as_str()).or_default() += s.rate;
            }
        }
        let relax = device_total < relax_below;
        nvme_allowances(&mut nvme_in, knobs, &srcs);
        let nvme_least = self.nvme_least(&nvme_in);
        self.check_reachable(m, &srcs, nvme_least.0, fixed_use, target, &mut notes);
        let dev_ceiling = self.light_devices(knobs, &srcs, nvme_least, fixed_use, target, ceiling);
        let least = self.least_rate(knobs, &srcs, nvme_least.0, fixed_use);
        // Under the band, delays that hold nothing back go at once: when every delayed queue's
        // interrupts come further apart than its delay (the load left, a burst ended) and the
        // devices would stay under the band without any of them, a relax step per period only
        // makes each packet wait out a delay that buys nothing (held-out gen-31-12: bursts held
        // for 10 ms, their delays relaxed over the next 160 ms at 0.4% of the target; p95
        // 2.9x `none`). (An undone step of the knee search lets its delays go at the end of
        // `update`, where the search decides it.)
        let let_go = relax
            && !self.delay.is_empty()
            && self
                .rate_let_go(knobs, &srcs, fixed_use)
                .is_some_and(|r| r < relax_below);
        // Inside the band, delays the target does not need (see `band`); not while the knee
        // search measures, whose steps and settling decide their own delays.
        let band_period = band::Period {
            index: period,
            moderating,
            total: device_total,
            counted: raw_total,
            target,
            over,
            band: h,
        };
        let band_failed = self.band.observe(&band_period);
        let band_go = !let_go
            && !self.knee.searching()
            && self.band.let_go(&band_period, !self.delay.is_empty());
        if band_go {
            notes.push(format!(
                "delays let go: the load's own rate {:.0}/s is under the target {target:.0}/s",
                self.band.own()
            ));
        }
        if let Some(t) = band_failed {
            notes.push(format!(
                "a let-go at target {t:.0}/s went over it: delays held there until the load is seen unheld again"
            ));
        }
        let let_go = let_go || band_go;
        // A timer-bound drive whose step down fits the room under the aim gets it before a
        // NIC's relax steps do (see `NvmeGrid::step_waiting`); where it fits only with what
        // the NIC's queues delayed less than the drives' timer make beyond what they would
        // make at it, those queues go back to the timer's delay: their packets then wait as
        // long as the drives' reads do, and the drive's step buys a completion an interrupt.
        let timer_delay = NVME_TIMER_US.min(ceiling);
        let inputs: Vec<CtrlInput> = nvme_in.into_values().collect();
        let room = aim - device_total;
        let nvme_first = !over && !cheap_drives && self.nvme.step_waiting(&inputs, room);
        let nic_make_room = !over && !cheap_drives && !nvme_first && {
            let nic_spare: f64 = srcs
                .iter()
                .filter(|s| matches!(knobs.get(&s.irq), Some(Knob::NicQueue { .. })))
                .map(|s| {
                    let cur = self.delay.get(&s.irq).copied().unwrap_or(0.0);
                    if s.allowance.is_none() && cur < timer_delay {
                        (s.rate - rate_at(s.rate, cur, timer_delay)).max(0.0)
                    } else {
                        0.0
                    }
                })
                .sum();
            nic_spare > 0.0 && self.nvme.step_waiting(&inputs, room + nic_spare)
        };
        // Whether every NIC queue held back is at its ceiling already.
        let mut nic_at_limit = true;
        let mut nic_capped = false;
        // Whether every delayed NIC queue sits at its ceiling (and some is delayed), that
        // ceiling no shorter than the NVMe timer.
        let (mut nic_held, mut nic_delayed) = (true, false);
        // Whether some NIC queue's delay moved this period (a loop that moves nothing under
        // its band sits on the grid point above it: settled, see `Observation::settled`).
        let mut nic_moved = false;
        for s in &srcs {
            if let Some(Knob::NicQueue {
                device, min_usecs, ..
            }) = knobs.get(&s.irq)
            {
                let cur = self.delay.get(&s.irq).copied().unwrap_or(0.0);
                let dev_pps = pps.get(device.as_str()).copied().unwrap_or(0.0);
                let ceiling = dev_ceiling.get(device.as_str()).copied().unwrap_or(ceiling);
                let prog = |d: f64| {
                    if d >= min {
                        programmed_usecs(d, *min_usecs)
                    } else {
                        0
                    }
                };
                let capped = s.allowance.is_some_and(|a| a < s.rate);
                if capped {
                    if let Some(&(at, before, to)) = self.relaxed.get(&s.irq) {
                        if period - at <= 10 {
                            // The step went over: the floor is the next grid point above
                            // where it landed (a relax step may skip several, and the one
                            // it skipped may hold the band: held at the one it left, a
                            // queue whose rate falls steeply with its delay sits far under
                            // the band). A step to no delay at all skipped none.
                            let floor = if to == 0 {
                                before
                            } else {
                                (to + 1).min(before)
                            };
                            self.floor.insert(s.irq, (floor, period, dev_pps));
                        }
                    }
                }
                if let Some(&(_, at, p)) = self.floor.get(&s.irq) {
                    let moved = p > 0.0 && ((dev_pps - p) / p).abs() > FLOOR_RESET;
                    if period - at > FLOOR_PERIODS || moved {
                        self.floor.remove(&s.irq);
                    }
                }
                let floor = self.floor.get(&s.irq).map_or(0.0, |f| f.0 as f64);
                // A holdoff of `d` spaces a queue's interrupts at least `d` apart beyond
                // its own gaps: rate ~ 1 / (1/r0 + d). Moving from rate `r` to `a` takes
                // `d + 1/a - 1/r` (at large delays the same as `d * r / a`).
                let towards = |a: f64| cur + 1e6 * (1.0 / a - 1.0 / s.rate.max(1.0));
                let next = match s.allowance {
                    Some(a) if a > 0.0 && a < s.rate => towards(a).max(cur).max(min).min(ceiling),
                    Some(a) if a <= 0.0 => ceiling,
                    _ if let_go => 0.0,
                    // Spared while cheaper sources carry the budget: the delay an earlier
                    // budget set relaxes (else it outlives the cap that set it as long as the
                    // total stays over the band).
                    _ if s.spared && cur > 0.0 => cur * (1.0 - self.cfg.relax),
                    _ if nic_make_room && cur < timer_delay => timer_delay,
                    _ if reaim && cur > 0.0 && device_total > 0.0 && device_total < aim => {
                        // The target rose: let every held queue up in proportion at once.
                        towards(s.rate * aim / device_total)
                            .max(0.0)
                            .max(floor.min(cur))
                    }
                    // Under the band: a relax step, but never past the delay the rate
                    // model gives for the aim (a whole step there overshoots the band
                    // and the loop cycles across it).
                    _ if relax && !nvme_first => (cur * (1.0 - self.cfg.relax))
                        .max(if device_total > 0.0 {
                            towards(s.rate * aim / device_total).min(cur)
                        } else {
                            0.0
                        })
                        .max(floor.min(cur)),
                    _ => cur.min(ceiling),
                };
                if capped {
                    nic_capped = true;
                    nic_at_limit &= next >= ceiling * 0.99;
                }
                nic_moved |= (next - cur).abs() > 1e-9;
                // A let-go is no step on the grid: a load that comes back is a new one, not a
                // sign that the step went too far.
                if !capped && !let_go && prog(next) < prog(cur) {
                    self.relaxed.insert(s.irq, (period, prog(cur), prog(next)));
                }
                if next >= min {
                    nic_delayed = true;
                    nic_held &= next >= ceiling * 0.99 && ceiling >= NVME_TIMER_US;
                    self.delay.insert(s.irq, next);
                    let share = s.rate
                        / dev_rate
                            .get(device.as_str())
                            .copied()
                            .unwrap_or(1.0)
                            .max(1.0);
                    let frames = (1.25 * next * dev_pps * share / 1e6).ceil();
                    let frames = (frames.max(0.0) as u32)
                        .clamp(self.cfg.rx_frames.min(MAX_FRAMES), MAX_FRAMES);
                    self.frames.insert(s.irq, frames);
                } else {
                    self.delay.remove(&s.irq);
                    self.frames.remove(&s.irq);
                }
            }
        }
        let raised = reaim && target > self.cfg.min_intr_rate && device_total < aim;
        // What the moderated interfaces moved (bytes/s): work for the knee search, and the
        // work beside the drives that a threshold past the reads in flight may buy.
        let nic_work: Vec<(String, f64, f64)> = rates
            .net
            .iter()
            .filter_map(|n| {
                let r = dev_rate.get(n.name.as_str())?;
                Some((n.name.clone(), n.rx_bytes_per_sec + n.tx_bytes_per_sec, *r))
            })
            .collect();
        self.nvme
            .set_beside(nic_work.iter().map(|w| w.1).sum(), nic_held && nic_delayed);
        notes.extend(self.nvme.update(&inputs, device_total, aim, relax, raised));

        // What the devices completed, for the knee search.
        let nvme_held = self.nvme.thresholds().any(|(_, t)| t > 1);
        let held = !self.delay.is_empty() || nvme_held;
        // Only NIC queues hold and none moved: the loop sits on its grid (NVMe thresholds
        // relax on their own cadence, so a still one is no sign of a held loop).
        let grid_held = !nic_moved && !nvme_held;
        // The mean gap between interrupts of a busy NIC queue: what one step down would cost
        // each of its requests (a quarter of it for a 25% step).
        let (busy, busy_rate) = srcs
            .iter()
            .filter(|s| matches!(knobs.get(&s.irq), Some(Knob::NicQueue { .. })))
            .filter(|s| s.rate >= (0.01 * max_rate).max(50.0))
            .fold((0.0, 0.0), |(n, r), s| (n + 1.0, r + s.rate));
        let nic_gap_us = if busy_rate > 0.0 {
            1e6 * busy / busy_rate
        } else {
            0.0
        };
        let mut obs = Observation {
            work: nic_work,
            nic_gap_us,
            // NVMe controllers are judged together on a trade (see the field).
            pool: (inputs.len() > 1).then(|| {
                (
                    "nvme (all controllers)".to_string(),
                    inputs.iter().map(|c| c.name.clone()).collect(),
                )
            }),
            rate: device_total,
            raw_rate: raw_total,
            natural: self.natural,
            // Under the band with NIC queues held, a loop that moved nothing is held by its
            // grid (the next point down overshoots the band: a queue's floor, or whole
            // microseconds): it will not get nearer (held-out gen-82-47: 4 queues at 2 us,
            // 0.75 M/s under a band from 0.81 M/s, waited out `SETTLE_MAX` each step of a
            // descent past a 0.70 M/s knee).
            settled: device_total <= target.max(least) * 1.02
                && (device_total >= relax_below * 0.98 || !held || grid_held),
            least,
            at_limit: (nic_capped || self.nvme.at_limit)
                && nic_at_limit
                && (!self.nvme_capped(&inputs) || self.nvme.at_limit),
            binding: device_total >= target || held,
            unheld: !moderating,
        };
        for c in &inputs {
            if let Some(w) = c.completions {
                obs.work.push((c.name.clone(), w, c.rate));
            }
        }
        self.knee.observe(&obs);
        if let Some(n) = self.knee.take_note() {
            notes.push(n);
        }
        // An unheld load's short step down was undone: it ran with nothing held back before
        // the step, and does again now, not by relax steps (a bursty load's queues held at
        // 100-180 us for three periods kept some of it for ten more; held-out gen-38-15, p95
        // 6.5x `none`), and in this period's plan, not the next period's fast loop (the
        // step's delays held the load one period more for nothing; held-out gen-207-46, 2-18
        // us on 12 queues for three periods instead of two in a 3 s run, p99 1.21x `none`).
        // Queues on a CPU over its hardirq limit keep their caps.
        if self.knee.take_release() {
            for s in &srcs {
                let nic = matches!(knobs.get(&s.irq), Some(Knob::NicQueue { .. }));
                if nic && s.cpu.is_none_or(|c| !self.cpu_caps.contains_key(&c)) {
                    self.delay.remove(&s.irq);
                    self.frames.remove(&s.irq);
                }
            }
        }
        notes
    }

    /// Whether some NVMe controller is over its allowance this period.
    fn nvme_capped(&self, inputs: &[CtrlInput]) -> bool {
        inputs.iter().any(|c| c.allowance.is_some())
    }

    /// Updates the per-CPU rate caps from the hardirq windows; returns notes.
    fn hardirq_caps(&mut self, rates: &Rates, srcs: &[Src]) -> Vec<String> {
        let mut notes = Vec::new();
        self.hardirq.update(rates);
        let limit = self.cfg.hardirq_percent;
        let mut cpus: Vec<u32> = srcs.iter().filter_map(|s| s.cpu).collect();
        cpus.sort_unstable();
        cpus.dedup();
        for cpu in cpus {
            let cpu_rate: f64 = srcs
                .iter()
                .filter(|s| s.cpu == Some(cpu))
                .map(|s| s.rate)
                .sum();
            match self.hardirq.verdict(cpu, limit) {
                HardirqVerdict::Above {
                    lower_pct,
                    share_pct,
                } => {
                    let want = limit * (1.0 - self.cfg.hysteresis / 2.0);
                    let cap = cpu_rate * want / share_pct.max(want);
                    let cap = self.cpu_caps.get(&cpu).map_or(cap, |c| c.min(cap));
                    self.cpu_caps.insert(cpu, cap);
                    self.hardirq.restart(cpu);
                    notes.push(format!(
                        "CPU {cpu} above {limit:.0}% hardirq ({share_pct:.0}%, at least {lower_pct:.0}% over its last ticks): its sources held to {cap:.0}/s"
                    ));
                }
                HardirqVerdict::Below { .. } => {
                    if let Some(c) = self.cpu_caps.get_mut(&cpu) {
                        *c *= 1.0 + self.cfg.relax;
                        if *c > 2.0 * cpu_rate.max(1.0) {
                            self.cpu_caps.remove(&cpu);
                        }
                    }
                }
                HardirqVerdict::Near | HardirqVerdict::Unknown => {}
            }
        }
        notes
    }

    /// Says (once per change) when the target cannot be met within the latency ceiling: every
    /// active NIC queue held to `delay_us`, and every NVMe controller at its least
    /// ([`Self::nvme_least`]: an interrupt carries at most its reads-in-flight bound), still
    /// make more than the target.
    fn check_reachable(
        &mut self,
        m: &Machine,
        srcs: &[Src],
        nvme_least: f64,
        fixed_use: f64,
        target: f64,
        notes: &mut Vec<String>,
    ) {
        let per_queue = 1e6 / self.cfg.delay_us as f64;
        let (mut least, mut nic, mut nvme) = (fixed_use + nvme_least, 0usize, 0usize);
        for s in srcs {
            match m.moderation.knobs.get(&s.irq) {
                Some(Knob::NicQueue { .. }) if s.rate > per_queue => {
                    least += per_queue;
                    nic += 1;
                }
                Some(Knob::NvmeController { .. }) => nvme += usize::from(s.rate > 0.0),
                _ => least += s.rate.min(per_queue),
            }
        }
        // Said again when the target or what holds it changes, not for every new estimate.
        let key = (least > target).then(|| format!("{target:.0} {nic} {nvme}"));
        if key == self.unreachable {
            return;
        }
        self.unreachable = key;
        if least <= target {
            return;
        }
        let mut held = vec![];
        if nic > 0 {
            held.push(format!(
                "{nic} busy NIC queues at most {per_queue:.0}/s each"
            ));
        }
        if nvme > 0 {
            held.push(format!(
                "{nvme} NVMe vectors at their reads-in-flight bound"
            ));
        }
        if held.is_empty() {
            held.push("sources nothing holds".into());
        }
        notes.push(format!(
            "target {target:.0}/s unreachable within the latency ceiling (delay_us {}): {} still make {least:.0}/s",
            self.cfg.delay_us,
            held.join(" and ")
        ));
    }

    /// The coalescing a NIC queue (now at `knob`) should have, if the moderator has a say.
    fn nic_want(&self, irq: IrqNum, knob: &Knob, min_usecs: u32) -> Option<CoalesceParams> {
        // The driver's own setting: recorded at the first change, the knob itself before it.
        let own = self.original.get(&irq).unwrap_or(knob);
        let tx_own = match self.cfg.idle_tx {
            IdleTx::None => false,
            IdleTx::DriverDefault => true,
            IdleTx::Measured => self.knee.tx_held(),
        }
        .then_some(own);
        match self.delay.get(&irq) {
            Some(&d) => {
                let usecs = programmed_usecs(d, min_usecs);
                let frames = self.frames.get(&irq).copied().unwrap_or(self.cfg.rx_frames);
                Some(delay_params(usecs, frames, tx_own))
            }
            None => match self.cfg.idle {
                Idle::None => Some(idle_params(tx_own)),
                Idle::DriverDefault => self.original.get(&irq).and_then(knob_params),
            },
        }
    }
}

impl Policy for GlobalModerator {
    fn name(&self) -> &'static str {
        "global-moderation"
    }

    fn observe(&mut self, report: &ApplyReport) {
        for o in &report.outcomes {
            let Some(key) = action_key(&o.action) else {
                continue;
            };
            if !self.pending.get(&key).is_some_and(|s| s.action == o.action) {
                continue; // another policy's action
            }
            let Some(sent) = self.pending.remove(&key) else {
                continue;
            };
            match &o.result {
                // A vanished IRQ or device is no verdict on the setting.
                Ok(_) | Err(ApplyError::Vanished) => {
                    self.refused.remove(&key);
                }
                Err(_) => {
                    self.refused.insert(key, (sent, false));
                }
            }
        }
    }

    fn decide(&mut self, input: &PolicyInput<'_>) -> Plan {
        let mut notes = self.update(input);
        let m = input.machine;
        let mut plan = Plan::default();
        let mut nvme: BTreeMap<String, (u8, u16)> = BTreeMap::new();
        let movable: Vec<(IrqNum, Knob)> = self.movable(m).map(|(i, k)| (i, k.clone())).collect();
        for (irq, knob) in &movable {
            match knob {
                Knob::NicQueue {
                    device,
                    queue,
                    per_queue,
                    min_usecs,
                    ..
                } => {
                    if let Some(s) = self.sent.get_mut(irq) {
                        s.after.get_or_insert_with(|| knob.clone());
                    }
                    let Some(want) = self.nic_want(*irq, knob, *min_usecs) else {
                        continue;
                    };
                    if holds(knob, &want) {
                        self.sent.remove(irq);
                        if !self.delay.contains_key(irq) && self.original.get(irq) == Some(knob) {
                            // Back at the driver's own setting: let go.
                            self.original.remove(irq);
                        }
                        continue;
                    }
                    if self
                        .sent
                        .get(irq)
                        .is_some_and(|s| s.params == want && s.after.as_ref() == Some(knob))
                    {
                        continue; // the driver keeps its own version of what was sent
                    }
                    self.original.entry(*irq).or_insert_with(|| knob.clone());
                    self.sent.insert(
                        *irq,
                        Sent {
                            params: want.clone(),
                            after: None,
                        },
                    );
                    plan.actions.push(Action::SetCoalesce {
                        device: device.clone(),
                        queue: per_queue.then_some(*queue),
                        params: want,
                    });
                }
                Knob::NvmeController {
                    controller,
                    time_100us,
                    threshold,
                    ..
                } => {
                    let cur = if *time_100us == 0 {
                        (0, 1)
                    } else {
                        (*time_100us, *threshold)
                    };
                    nvme.entry(controller.clone()).or_insert(cur);
                }
                Knob::Soft { .. } => {}
            }
        }
        // Per-queue actions for a device-wide knob collapse to one (the strictest).
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        let mut merged: Vec<Action> = Vec::new();
        for a in plan.actions.drain(..) {
            if let Action::SetCoalesce {
                device,
                queue: None,
                params,
            } = &a
            {
                if let Some(&i) = seen.get(device) {
                    if let Action::SetCoalesce { params: p, .. } = &mut merged[i] {
                        *p = stricter(p, params);
                    }
                    continue;
                }
                seen.insert(device.clone(), merged.len());
            }
            merged.push(a);
        }
        plan.actions = merged;
        for (controller, cur) in nvme {
            let t = self.nvme.threshold(&controller);
            let want = if t >= 2 {
                Some((self.nvme.time_units(&controller), t))
            } else {
                match self.cfg.idle {
                    Idle::None => Some((0, 1)),
                    Idle::DriverDefault => self.original_nvme.get(&controller).copied(),
                }
            };
            let Some(want) = want else { continue };
            if want == cur {
                if t < 2 && self.original_nvme.get(&controller) == Some(&cur) {
                    self.original_nvme.remove(&controller);
                }
                continue;
            }
            self.original_nvme.entry(controller.clone()).or_insert(cur);
            plan.actions.push(Action::SetNvmeCoalescing {
                controller,
                time_100us: want.0,
                threshold: want.1,
            });
        }
        self.pending.clear();
        // Each action's knob as read now, by action key (a device-wide one: its first queue's);
        // built only in the periods that send something.
        let mut readings: BTreeMap<String, Knob> = BTreeMap::new();
        if !plan.actions.is_empty() {
            for (_, knob) in &movable {
                if let Some(key) = knob_key(knob) {
                    readings.entry(key).or_insert_with(|| knob.clone());
                }
            }
        }
        let mut kept = Vec::with_capacity(plan.actions.len());
        for action in plan.actions.drain(..) {
            let Some(key) = action_key(&action) else {
                kept.push(action);
                continue;
            };
            let reading = readings.get(&key).cloned();
            if let Some((r, told)) = self.refused.get_mut(&key) {
                if r.action == action && r.reading == reading {
                    if !*told {
                        *told = true;
                        notes.push(format!(
                            "{key}: refused before, not sent again while it reads the same"
                        ));
                    }
                    continue;
                }
            }
            // Something changed (what is wanted, or the knob): try again.
            self.refused.remove(&key);
            self.pending.insert(
                key,
                Sending {
                    action: action.clone(),
                    reading,
                },
            );
            kept.push(action);
        }
        plan.actions = kept;
        if !self.delay.is_empty() && !plan.actions.is_empty() {
            let (lo, hi) = self
                .delay
                .values()
                .fold((f64::INFINITY, 0.0f64), |(a, b), d| (a.min(*d), b.max(*d)));
            notes.push(format!(
                "{} queues delayed {lo:.0}-{hi:.0} us (target {:.0}/s)",
                self.delay.len(),
                self.target_per_sec()
            ));
        }
        plan.notes = notes;
        plan
    }
}
