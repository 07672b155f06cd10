//! Per-device inputs of one control period: the NVMe controllers' rates, allowances and reads
//! in flight, and the light-device rule (a NIC device beside a rest that cannot reach the target
//! pays no longer delay than that rest).

use super::{GlobalModerator, Src};
use crate::ids::IrqNum;
use crate::moderation::global::nic::programmed_usecs;
use crate::moderation::global::nvme::{CtrlInput, NVME_TIMER_US};
use crate::moderation::knobs::Knob;
use crate::rates::Rates;
use std::collections::{BTreeMap, HashMap};

/// One NIC device's queues, for the light-device rule.
#[derive(Clone, Debug, Default)]
struct NicDevice {
    /// Interrupts/s its queues would make at the ceiling.
    at_ceiling: f64,
    /// The longest delay it imposes now, us.
    longest: f64,
    /// Per queue: rate and delay now.
    queues: Vec<(f64, f64)>,
}

/// Per NVMe controller: its vectors' rates, completions and reads in flight (allowances
/// none yet: [`nvme_allowances`] adds them once the budgets are shared).
pub(super) fn nvme_inputs(
    knobs: &BTreeMap<IrqNum, Knob>,
    srcs: &[Src],
    rates: &Rates,
) -> BTreeMap<String, CtrlInput> {
    let mut nvme_in: BTreeMap<String, CtrlInput> = BTreeMap::new();
    let mut nvme_active: BTreeMap<String, usize> = BTreeMap::new();
    for s in srcs {
        if let Some(Knob::NvmeController { controller, .. }) = knobs.get(&s.irq) {
            let e = nvme_in
                .entry(controller.clone())
                .or_insert_with(|| CtrlInput {
                    name: controller.clone(),
                    rate: 0.0,
                    allowance: None,
                    completions: None,
                    in_flight_per_vector: None,
                    wait_us: None,
                });
            e.rate += s.rate;
            if s.rate > 0.0 {
                *nvme_active.entry(controller.clone()).or_default() += 1;
            }
        }
    }
    // Reads in flight of each controller's namespaces together, for the mean wait.
    let mut in_flight: BTreeMap<String, f64> = BTreeMap::new();
    for d in &rates.disks {
        let Some(c) = d.nvme_controller.as_ref().and_then(|c| nvme_in.get_mut(c)) else {
            continue;
        };
        c.completions = Some(c.completions.unwrap_or(0.0) + d.ios_per_sec);
        let active = nvme_active.get(&c.name).copied().unwrap_or(1).max(1) as f64;
        c.in_flight_per_vector = Some(c.in_flight_per_vector.unwrap_or(0.0) + d.in_flight / active);
        *in_flight.entry(c.name.clone()).or_default() += d.in_flight;
    }
    // Little's law: the mean time a read is in flight is the reads in flight over the
    // completions per second (the interrupt's delay included: a read is accounted done in
    // its completion's handler).
    for (name, q) in in_flight {
        if let Some(c) = nvme_in.get_mut(&name) {
            c.wait_us = c
                .completions
                .filter(|&w| w > 0.0 && q > 0.0)
                .map(|w| q / w * 1e6);
        }
    }
    nvme_in
}

/// Adds each controller's allowance: the sum of its vectors' allowances, where some vector
/// has one (its uncapped vectors counted at their own rate).
pub(super) fn nvme_allowances(
    nvme_in: &mut BTreeMap<String, CtrlInput>,
    knobs: &BTreeMap<IrqNum, Knob>,
    srcs: &[Src],
) {
    for s in srcs {
        if let (Some(Knob::NvmeController { controller, .. }), Some(a)) =
            (knobs.get(&s.irq), s.allowance)
        {
            if let Some(e) = nvme_in.get_mut(controller) {
                e.allowance = Some(e.allowance.unwrap_or(0.0) + a);
            }
        }
    }
    for s in srcs {
        if let (Some(Knob::NvmeController { controller, .. }), None) =
            (knobs.get(&s.irq), s.allowance)
        {
            if let Some(e) = nvme_in.get_mut(controller) {
                if let Some(a) = e.allowance.as_mut() {
                    *a += s.rate;
                }
            }
        }
    }
}

/// An NVMe controller whose reads are in flight this many times the aggregation timer or
/// longer pays at most a tenth of their time when its interrupts wait for the timer: such
/// vectors are held before anything else ([`GlobalModerator::cheap_floors`]).
const CHEAP_WAIT: f64 = 10.0;
/// ... when holding them cuts their interrupts by a third at least.
const CHEAP_CARRY: f64 = 1.5;

/// A queue making `r` interrupts/s at delay `cur` (us) makes about this at delay `d` (the rate
/// model `1 / (1/r0 + d)`, its natural gap inferred from the current one).
pub(super) fn rate_at(r: f64, cur: f64, d: f64) -> f64 {
    if r <= 0.0 {
        return 0.0;
    }
    let gap = (1.0 / r - cur * 1e-6).max(1e-9);
    1.0 / (gap + d * 1e-6)
}

/// A delayed queue whose interrupts come further apart than this many delays is not held by
/// its delay: the rate model `1 / (1/r0 + d)` then gives its own rate within a factor of two.
/// Closer together, the delay may be what spaces them, and its own rate is unknown.
const UNHELD_SPACING: f64 = 2.0;

impl GlobalModerator {
    /// What the devices would make with every NIC delay let go: each delayed queue at its own
    /// rate from the rate model, NVMe controllers as they are (their grid lets go on its own),
    /// the rest as it is. `None` where some delayed queue's interrupts come within
    /// [`UNHELD_SPACING`] delays of each other: that delay may be what holds it, and what it
    /// would make without it is unknown.
    pub(super) fn rate_let_go(
        &self,
        knobs: &BTreeMap<IrqNum, Knob>,
        srcs: &[Src],
        fixed_use: f64,
    ) -> Option<f64> {
        let mut total = fixed_use;
        for s in srcs {
            let d = match knobs.get(&s.irq) {
                Some(Knob::NicQueue { min_usecs, .. }) => self
                    .delay
                    .get(&s.irq)
                    .map_or(0.0, |&d| programmed_usecs(d, *min_usecs) as f64),
                _ => 0.0,
            };
            if d > 0.0 && s.rate > 0.0 && 1e6 / s.rate < UNHELD_SPACING * d {
                return None;
            }
            total += rate_at(s.rate, d, 0.0);
        }
        Some(total)
    }

    /// Per source, the rate it can be held to for next to nothing, where there is one: an NVMe
    /// vector of a controller whose reads are in flight [`CHEAP_WAIT`] timer units or longer
    /// (Little's law over `/proc/diskstats`: a saturated drive's deep queues) and whose
    /// interrupts, at the one-unit timer and its threshold bound, would carry [`CHEAP_CARRY`]
    /// completions or more. Its reads then wait a tenth of their time at most, and a drive
    /// that is the bottleneck completes as many. Other sources, and vectors already at that
    /// rate or under it, `None`.
    pub(super) fn cheap_floors(
        &self,
        knobs: &BTreeMap<IrqNum, Knob>,
        srcs: &[Src],
        nvme_in: &BTreeMap<String, CtrlInput>,
    ) -> Vec<Option<f64>> {
        srcs.iter()
            .map(|s| {
                let Some(Knob::NvmeController { controller, .. }) = knobs.get(&s.irq) else {
                    return None;
                };
                let c = nvme_in.get(controller)?;
                let (w, q, wait) = (c.completions?, c.in_flight_per_vector?, c.wait_us?);
                if wait < CHEAP_WAIT * NVME_TIMER_US || c.rate <= 0.0 || s.rate <= 0.0 {
                    return None;
                }
                // This vector's completions: its share of the controller's interrupts.
                let mine = w * s.rate / c.rate;
                let t = f64::from(self.nvme.bound(c));
                let carry = t.min(1.0 + mine * NVME_TIMER_US * 1e-6).min(q);
                let floor = mine / carry.max(1.0);
                (carry >= CHEAP_CARRY && floor < s.rate).then_some(floor)
            })
            .collect()
    }

    /// Whether the sources with a cheap floor, held there, leave the rest room in `budget` for
    /// what it would make with every NIC delay let go (the rate model per delayed queue; a
    /// queue its delay may be what spaces, [`UNHELD_SPACING`], counts at its rate now).
    pub(super) fn spares(
        &self,
        knobs: &BTreeMap<IrqNum, Knob>,
        srcs: &[Src],
        floors: &[Option<f64>],
        budget: f64,
    ) -> bool {
        if floors.iter().all(Option::is_none) {
            return false;
        }
        let mut total = 0.0;
        for (s, f) in srcs.iter().zip(floors) {
            total += match (f, knobs.get(&s.irq)) {
                (Some(f), _) => f.min(s.rate),
                (None, Some(Knob::NicQueue { min_usecs, .. })) => {
                    let d = self
                        .delay
                        .get(&s.irq)
                        .map_or(0.0, |&d| programmed_usecs(d, *min_usecs) as f64);
                    if d > 0.0 && s.rate > 0.0 && 1e6 / s.rate >= UNHELD_SPACING * d {
                        rate_at(s.rate, d, 0.0)
                    } else {
                        s.rate
                    }
                }
                (None, _) => s.rate,
            };
        }
        total <= budget
    }

    /// What the NVMe controllers make at the least they can be held to: a controller at its
    /// largest threshold makes what it makes (its timer may fire before the threshold fills);
    /// below it, its completions over that threshold. With the delay they impose when some
    /// can be coalesced at all (their 100 us timer).
    pub(super) fn nvme_least(&self, nvme_in: &BTreeMap<String, CtrlInput>) -> (f64, f64) {
        let mut least = 0.0;
        let mut pays: f64 = 0.0;
        for c in nvme_in.values() {
            let t = self.nvme.bound(c);
            least += match c.completions {
                Some(w) if c.in_flight_per_vector.is_some() && self.nvme.threshold(&c.name) < t => {
                    c.rate.min(w / (t as f64 * self.nvme.fill(&c.name)))
                }
                _ => c.rate,
            };
            if t >= 2 {
                // One timer unit: what a read of a threshold-bound controller waits at most.
                // A longer time (`NvmeGrid::time_units`) binds only where reads come too far
                // apart to fill the threshold, and a light NIC device beside gains the target
                // nothing by paying it too.
                pays = NVME_TIMER_US;
            }
        }
        (least, pays)
    }

    /// The least device interrupt rate the fast loop can reach now: fixed sources as they
    /// are, NVMe controllers at their least, every NIC queue at the latency ceiling. A rate
    /// under it is out of reach whatever the target: interrupts the moderator cannot act on
    /// (NVMe whose reads in flight are too few to aggregate, queues already at the ceiling)
    /// are no sign that the platform is collapsing. `nvme_least`: [`Self::nvme_least`]'s rate.
    pub(super) fn least_rate(
        &self,
        knobs: &BTreeMap<IrqNum, Knob>,
        srcs: &[Src],
        nvme_least: f64,
        fixed_use: f64,
    ) -> f64 {
        let latency_ceiling = self.cfg.delay_us as f64;
        let nic: f64 = srcs
            .iter()
            .filter(|s| matches!(knobs.get(&s.irq), Some(Knob::NicQueue { .. })))
            .map(|s| {
                let cur = self.delay.get(&s.irq).copied().unwrap_or(0.0);
                rate_at(s.rate, cur, latency_ceiling.max(cur))
            })
            .sum();
        fixed_use + nvme_least + nic
    }

    /// Ceilings for light NIC devices: a device the target is unreachable without (the rest,
    /// each source at its least, plus this device at the ceiling still make more than the
    /// target) gains the target nothing by paying the ceiling, while request/response traffic
    /// pays every microsecond in transactions. Such a device pays no more than the rest does
    /// (the NVMe timer of coalesced controllers, the delays of other NIC devices), provided
    /// what that adds stays within half the hysteresis band. Devices absent from the map keep
    /// `ceiling`. `nvme`: [`Self::nvme_least`] (the controllers' least rate, their delay).
    pub(super) fn light_devices(
        &self,
        knobs: &BTreeMap<IrqNum, Knob>,
        srcs: &[Src],
        nvme: (f64, f64),
        fixed_use: f64,
        target: f64,
        ceiling: f64,
    ) -> HashMap<String, f64> {
        let mut nic: BTreeMap<&str, NicDevice> = BTreeMap::new();
        for s in srcs {
            if let Some(Knob::NicQueue { device, .. }) = knobs.get(&s.irq) {
                let cur = self.delay.get(&s.irq).copied().unwrap_or(0.0);
                let e = nic.entry(device.as_str()).or_default();
                e.at_ceiling += rate_at(s.rate, cur, ceiling);
                e.longest = e.longest.max(cur);
                e.queues.push((s.rate, cur));
            }
        }
        let (nvme_least, nvme_pays) = nvme;
        // Every source at its least (NIC devices at the ceiling) still over the target: no
        // device's holding is needed to reach it, whatever it holds.
        let least: f64 = fixed_use + nvme_least + nic.values().map(|d| d.at_ceiling).sum::<f64>();
        let mut out = HashMap::new();
        if least <= target {
            return out;
        }
        let min = self.cfg.min_delay_us as f64;
        for (dev, nd) in &nic {
            let others = nic
                .iter()
                .filter(|(d, _)| *d != dev)
                .map(|(_, e)| e.longest)
                .fold(nvme_pays, f64::max);
            let d = others.max(min).min(ceiling);
            let extra: f64 = nd
                .queues
                .iter()
                .map(|&(r, cur)| rate_at(r, cur, d) - rate_at(r, cur, ceiling))
                .sum();
            if d < ceiling && extra <= target * self.cfg.hysteresis / 2.0 {
                out.insert((*dev).to_string(), d);
            }
        }
        out
    }
}
