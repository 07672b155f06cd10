//! irqpilot's global moderator: GSIM's goals on today's kernels, through the knobs hardware
//! already has (NIC `rx-usecs`/`rx-frames` per queue, NVMe interrupt coalescing per controller).
//!
//! Each control period it measures every moderatable source's interrupt rate and:
//!
//! 1. **Global budget, shared max-min fairly.** If the platform-wide rate exceeds
//!    `target_intr_rate`, it finds the water level `f` with `sum(min(r_s, f)) = budget` (the
//!    budget is the target minus what unmoderatable sources use) and caps only sources above `f`.
//!    A CPU that takes most of the interrupts is never singled out: every heavy source gets the
//!    same allowance, and light ones none of the cut. (This answers the GSIM reviewers' "this can
//!    starve out a particular CPU which handles the bulk of interrupts": GSIM decides per CPU from
//!    its own share; water-filling decides per source from everyone's.)
//! 2. **Per-CPU hardirq time.** A CPU above `hardirq_percent` has its sources' allowances cut in
//!    proportion to the excess.
//! 3. **Delay from allowance, by feedback.** A source's new delay is its current one times
//!    `r_s / allowance` (rate falls inversely with a holdoff delay), started at
//!    `1e6 / allowance` us, capped at `delay_us`; rounded to what the knob can express.
//! 4. **Back to zero.** Below `target * (1 - hysteresis)` and under the hardirq limit, delays
//!    shrink by `relax` per period; under `min_delay_us` the source gets its original (driver
//!    default) setting back.
//!
//! Every constant is a field of [`GlobalModerationConfig`], documented there.

use crate::ids::IrqNum;
use crate::machine::Machine;
use crate::moderation::knobs::Knob;
use crate::placement::glob_match;
use crate::plan::{Action, CoalesceParams, Plan};
use crate::policy::{Policy, PolicyInput};
use crate::snapshot::RowLabel;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

/// Parameters of the global moderator (`[moderation]` in the configuration file).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GlobalModerationConfig {
    /// Platform-wide device interrupt rate to stay under (GSIM's suggestion: 1,000,000; the
    /// affected platforms' knee is 1-3 M/s, moderation.md 1.2).
    pub target_intr_rate: f64,
    /// Per-CPU hardirq share to stay under, percent (GSIM's suggestion: 70).
    pub hardirq_percent: f64,
    /// Largest delay the moderator may impose on any source, microseconds (GSIM: 100).
    pub delay_us: u32,
    /// Smallest delay worth programming; below it the source's original setting is restored.
    pub min_delay_us: u32,
    /// Relative band under the target where delays are held rather than relaxed (0.1 = act at
    /// 100%, relax below 90%): keeps the loop from oscillating around the target.
    pub hysteresis: f64,
    /// Fraction by which delays shrink per period when under target (GSIM shrinks by 1/16 per
    /// 5 ms epoch; 1/8 per 10 ms period is similar).
    pub relax: f64,
    /// `rx-frames` paired with a programmed `rx-usecs`, so a queue whose timer restarts at every
    /// packet (mlx5 CQE mode) still interrupts at least every this many packets.
    pub rx_frames: u32,
    /// Control period, milliseconds (the daemon's and the twin's sampling interval).
    pub period_ms: u64,
    /// Weight of the newest period in the smoothed per-source rates (1 = no smoothing). Rates
    /// measured over one short period are noisy; acting on noise makes a loop oscillate.
    pub smoothing: f64,
    /// Devices the moderators never touch, by interface, NVMe controller or PCI address (globs
    /// with `*` and `?`): e.g. the management interface, or a NIC whose driver resets its queues
    /// when coalescing changes. Their interrupts still count against the target.
    pub exclude: Vec<String>,
    /// Whether to configure the kernel's own software moderation (GSIM) where the kernel has it.
    /// Off: GSIM's parameters and per-IRQ switches are left as they are.
    pub kernel_soft: bool,
}

/// A `[moderation]` value the moderators cannot work with.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("moderation.{field} = {value}: {why}")]
pub struct ModerationConfigError {
    /// The key.
    pub field: &'static str,
    /// The value given.
    pub value: String,
    /// The range.
    pub why: &'static str,
}

impl Default for GlobalModerationConfig {
    fn default() -> Self {
        GlobalModerationConfig {
            target_intr_rate: 1_000_000.0,
            hardirq_percent: 70.0,
            delay_us: 100,
            min_delay_us: 2,
            hysteresis: 0.1,
            relax: 0.125,
            rx_frames: 64,
            period_ms: 10,
            smoothing: 0.5,
            exclude: Vec::new(),
            kernel_soft: true,
        }
    }
}

impl GlobalModerationConfig {
    /// Checks every value is in a range the moderators can work with.
    pub fn validate(&self) -> Result<(), ModerationConfigError> {
        let bad = |field, value: String, why| Err(ModerationConfigError { field, value, why });
        let f = |v: f64, lo_open: f64, hi: f64| v.is_finite() && v > lo_open && v <= hi;
        if !f(self.target_intr_rate, 0.0, 1e9) {
            return bad(
                "target_intr_rate",
                self.target_intr_rate.to_string(),
                "must be a rate in (0, 1e9] (interrupts/s)",
            );
        }
        if !f(self.hardirq_percent, 0.0, 100.0) {
            return bad(
                "hardirq_percent",
                self.hardirq_percent.to_string(),
                "must be in (0, 100]",
            );
        }
        // GSIM's own range is 0-500 us (moderation.md 2); NVMe's coalescing time ends at
        // 25.5 ms. Past 10 ms a delay is an outage, not moderation.
        if !(1..=10_000).contains(&self.delay_us) {
            return bad(
                "delay_us",
                self.delay_us.to_string(),
                "must be in 1-10000 (microseconds)",
            );
        }
        if self.min_delay_us > self.delay_us {
            return bad(
                "min_delay_us",
                self.min_delay_us.to_string(),
                "must not exceed delay_us",
            );
        }
        if !(self.hysteresis.is_finite() && (0.0..1.0).contains(&self.hysteresis)) {
            return bad(
                "hysteresis",
                self.hysteresis.to_string(),
                "must be in [0, 1)",
            );
        }
        if !f(self.relax, 0.0, 1.0) {
            return bad("relax", self.relax.to_string(), "must be in (0, 1]");
        }
        if !(1..=65_535).contains(&self.rx_frames) {
            return bad(
                "rx_frames",
                self.rx_frames.to_string(),
                "must be in 1-65535 (packets)",
            );
        }
        if !(1..=60_000).contains(&self.period_ms) {
            return bad(
                "period_ms",
                self.period_ms.to_string(),
                "must be in 1-60000 (milliseconds)",
            );
        }
        if !f(self.smoothing, 0.0, 1.0) {
            return bad("smoothing", self.smoothing.to_string(), "must be in (0, 1]");
        }
        for p in &self.exclude {
            if let Err(why) = crate::placement::check_glob(p) {
                return bad("exclude", format!("{p:?}"), why);
            }
        }
        Ok(())
    }

    /// Whether `irq` (with `knob`) belongs to a device listed in `exclude`.
    pub fn excludes(&self, machine: &Machine, irq: IrqNum, knob: &Knob) -> bool {
        if self.exclude.is_empty() {
            return false;
        }
        let info = machine.irqs.get(&irq);
        let names = [
            match knob {
                Knob::NicQueue { device, .. } => Some(device.clone()),
                Knob::NvmeController { controller, .. } => Some(controller.clone()),
                Knob::Soft { .. } => None,
            },
            info.and_then(|i| i.queue.as_ref()).map(|q| q.owner.clone()),
            info.and_then(|i| i.device.as_ref()).map(|d| d.to_string()),
        ];
        names
            .iter()
            .flatten()
            .any(|n| self.exclude.iter().any(|p| glob_match(p, n)))
    }
}

/// The moderator. Keeps, per IRQ, the delay it last decided and the knob's original setting.
#[derive(Clone, Debug)]
pub struct GlobalModerator {
    cfg: GlobalModerationConfig,
    /// Delay (us, fractional) the moderator wants per NIC IRQ; absent = not moderated by us.
    delay: BTreeMap<IrqNum, f64>,
    /// Aggregation threshold (entries, fractional) wanted per NVMe controller; absent = off.
    nvme_threshold: BTreeMap<String, f64>,
    /// Knob settings found before the moderator first changed them, restored when it lets go.
    original: BTreeMap<IrqNum, Knob>,
    /// Smoothed interrupt rate per IRQ.
    smoothed: BTreeMap<IrqNum, f64>,
}

/// What a source's rate calls for this period.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Verdict {
    /// Bring the rate down to this allowance (interrupts/s).
    Cap(f64),
    /// Under target: moderate less.
    Relax,
    /// In the hysteresis band: keep.
    Hold,
}

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

impl GlobalModerator {
    /// A moderator with these parameters.
    pub fn new(cfg: GlobalModerationConfig) -> GlobalModerator {
        GlobalModerator {
            cfg,
            delay: BTreeMap::new(),
            nvme_threshold: BTreeMap::new(),
            original: BTreeMap::new(),
            smoothed: BTreeMap::new(),
        }
    }

    /// Its parameters.
    pub fn config(&self) -> &GlobalModerationConfig {
        &self.cfg
    }

    /// The delay (us) currently wanted per moderated IRQ.
    pub fn delays(&self) -> &BTreeMap<IrqNum, f64> {
        &self.delay
    }

    /// The platform-wide device interrupt rate it keeps under, per second (what the metrics
    /// export as `irqpilot_moderation_target_per_second`).
    pub fn target_per_sec(&self) -> f64 {
        self.cfg.target_intr_rate
    }

    /// Computes wanted delays from the input; returns reasons for the plan notes.
    fn update_delays(&mut self, input: &PolicyInput<'_>) -> Vec<String> {
        let mut notes = Vec::new();
        let Some(rates) = input.rates else {
            return notes;
        };
        let m = input.machine;
        let knobs = &m.moderation.knobs;
        // Per-IRQ rates of this period.
        let mut rate: HashMap<IrqNum, f64> = HashMap::new();
        let w = self.cfg.smoothing.clamp(0.01, 1.0);
        for row in &rates.rows {
            if let RowLabel::Irq(n) = row.label {
                let prev = self.smoothed.get(&n).copied().unwrap_or(row.total_per_sec);
                let r = prev + w * (row.total_per_sec - prev);
                self.smoothed.insert(n, r);
                rate.insert(n, r);
            }
        }
        let device_total: f64 = m
            .irqs
            .values()
            .filter(|i| i.is_device())
            .filter_map(|i| rate.get(&i.irq))
            .sum();
        let movable: Vec<(IrqNum, f64)> = knobs
            .iter()
            .filter(|(_, k)| !matches!(k, Knob::Soft { .. }))
            .filter(|(irq, k)| !self.cfg.excludes(m, **irq, k))
            .map(|(irq, _)| (*irq, rate.get(irq).copied().unwrap_or(0.0)))
            .collect();
        let fixed_use = device_total - movable.iter().map(|(_, r)| r).sum::<f64>();
        // Aim at the middle of the hysteresis band, not its edge, so a correction lands where
        // the loop holds still.
        let aim = self.cfg.target_intr_rate * (1.0 - self.cfg.hysteresis / 2.0);
        let budget = (aim - fixed_use).max(0.0);
        let level = if device_total > self.cfg.target_intr_rate {
            water_level(&movable.iter().map(|(_, r)| *r).collect::<Vec<_>>(), budget)
        } else {
            None
        };
        // Per-CPU hardirq excess: allowance multiplier for sources on that CPU.
        let mut cpu_factor: HashMap<u32, f64> = HashMap::new();
        for c in &rates.per_cpu {
            if let Some(h) = c.hardirq_pct.filter(|h| *h > self.cfg.hardirq_percent) {
                cpu_factor.insert(c.cpu.0, self.cfg.hardirq_percent / h);
            }
        }
        let relax_below = self.cfg.target_intr_rate * (1.0 - self.cfg.hysteresis);
        let max = self.cfg.delay_us as f64;
        let min = self.cfg.min_delay_us as f64;
        if let Some(f) = level {
            notes.push(format!(
                "device interrupts {device_total:.0}/s above target {:.0}/s: sources above {f:.0}/s are capped there",
                self.cfg.target_intr_rate
            ));
        }
        // Per NVMe controller: the largest rate/allowance ratio of its vectors (> 1 = too many
        // interrupts) or whether all of them may relax.
        let mut nvme: BTreeMap<String, (f64, bool)> = BTreeMap::new();
        for (irq, r) in movable {
            let cpu = m
                .irqs
                .get(&irq)
                .and_then(|i| i.delivered_to())
                .and_then(|s| s.first())
                .map(|c| c.0);
            let hard = cpu.and_then(|c| cpu_factor.get(&c)).copied();
            let mut allowance = match level {
                Some(f) if r > f => Some(f),
                _ => None,
            };
            if let Some(h) = hard {
                allowance = Some(allowance.unwrap_or(r) * h);
            }
            let verdict = match allowance {
                Some(a) => Verdict::Cap(a),
                None if device_total < relax_below => Verdict::Relax,
                None => Verdict::Hold,
            };
            match knobs.get(&irq) {
                Some(Knob::NvmeController { controller, .. }) => {
                    let e = nvme.entry(controller.clone()).or_insert((0.0, true));
                    match verdict {
                        Verdict::Cap(a) => {
                            e.0 = e.0.max(if a > 0.0 { r / a } else { f64::INFINITY });
                            e.1 = false;
                        }
                        Verdict::Hold => e.1 = false,
                        Verdict::Relax => {}
                    }
                }
                _ => {
                    let cur = self.delay.get(&irq).copied().unwrap_or(0.0);
                    let next = match verdict {
                        Verdict::Cap(a) if a > 0.0 => {
                            let scaled = if cur > 0.0 { cur * r / a } else { 1e6 / a };
                            scaled.max(cur).max(min).min(max)
                        }
                        Verdict::Cap(_) => max,
                        Verdict::Relax => cur * (1.0 - self.cfg.relax),
                        Verdict::Hold => cur,
                    };
                    if next >= min {
                        self.delay.insert(irq, next);
                    } else {
                        self.delay.remove(&irq);
                    }
                }
            }
        }
        // NVMe: the aggregation time bounds the delay (100 us units), the threshold sets the
        // rate; interrupts fall roughly in proportion to the threshold.
        for (controller, (ratio, relax)) in nvme {
            let cur = self.nvme_threshold.get(&controller).copied().unwrap_or(1.0);
            let next = if ratio > 1.0 {
                (cur * ratio).min(256.0)
            } else if relax {
                cur * (1.0 - self.cfg.relax)
            } else {
                cur
            };
            if next >= 1.5 && self.cfg.delay_us >= 100 {
                self.nvme_threshold.insert(controller, next);
            } else {
                self.nvme_threshold.remove(&controller);
            }
        }
        for (cpu, h) in &cpu_factor {
            notes.push(format!(
                "CPU {cpu} above {:.0}% hardirq: its sources' allowances x{h:.2}",
                self.cfg.hardirq_percent
            ));
        }
        notes
    }

    /// The action that programs `delay` (us; `None` = restore the original) on `irq`'s knob.
    fn action_for(&self, irq: IrqNum, knob: &Knob, delay: Option<f64>) -> Option<Action> {
        match (knob, delay) {
            (
                Knob::NicQueue {
                    device,
                    queue,
                    per_queue,
                    min_usecs,
                    ..
                },
                Some(d),
            ) => Some(Action::SetCoalesce {
                device: device.clone(),
                queue: per_queue.then_some(*queue),
                // TX completions share the vector: hold them off alike.
                params: CoalesceParams {
                    rx_usecs: Some(programmed_usecs(d, *min_usecs)),
                    rx_max_frames: Some(self.cfg.rx_frames),
                    tx_usecs: Some(programmed_usecs(d, *min_usecs)),
                    tx_max_frames: Some(self.cfg.rx_frames),
                    use_adaptive_rx: Some(false),
                    use_adaptive_tx: Some(false),
                },
            }),
            (
                Knob::NicQueue {
                    device,
                    queue,
                    per_queue,
                    ..
                },
                None,
            ) => {
                let Some(Knob::NicQueue {
                    rx_usecs,
                    rx_max_frames,
                    adaptive_rx,
                    ..
                }) = self.original.get(&irq)
                else {
                    return None;
                };
                Some(Action::SetCoalesce {
                    device: device.clone(),
                    queue: per_queue.then_some(*queue),
                    params: CoalesceParams {
                        rx_usecs: Some(*rx_usecs),
                        rx_max_frames: Some(*rx_max_frames),
                        use_adaptive_rx: Some(*adaptive_rx),
                        ..CoalesceParams::default()
                    },
                })
            }
            _ => None,
        }
    }
}

/// The `rx-usecs` that programs a delay of `d` us: whole microseconds, at least 1 and at
/// least the driver's least real time (below it Intel's ITR drivers read a mode number).
fn programmed_usecs(d: f64, min_usecs: u32) -> u32 {
    (d.round().max(1.0) as u32).max(min_usecs)
}

/// NVMe coalescing `(time_100us, threshold)` for a wanted threshold (`None` = off): the time
/// bounds the added delay at `delay_us` in the field's 100 us units.
fn nvme_setting(threshold: Option<f64>, delay_us: u32) -> (u8, u16) {
    match threshold {
        Some(t) if delay_us >= 100 => (
            (delay_us / 100).min(255) as u8,
            (t.round() as u16).clamp(2, 256),
        ),
        _ => (0, 1),
    }
}

impl Policy for GlobalModerator {
    fn name(&self) -> &'static str {
        "global-moderation"
    }

    fn decide(&mut self, input: &PolicyInput<'_>) -> Plan {
        let notes = self.update_delays(input);
        let knobs = &input.machine.moderation.knobs;
        let mut plan = Plan {
            actions: Vec::new(),
            notes,
        };
        let mut nvme: BTreeMap<String, (u8, u16)> = BTreeMap::new();
        for (irq, knob) in knobs {
            if self.cfg.excludes(input.machine, *irq, knob) {
                continue;
            }
            let want = self.delay.get(irq).copied();
            match knob {
                Knob::NicQueue {
                    rx_usecs,
                    rx_max_frames,
                    adaptive_rx,
                    min_usecs,
                    ..
                } => {
                    let matches_want = match want {
                        // A driver without frame counts (e1000, igb, ice, i40e) reads
                        // `rx-frames 0` after every set: the delay alone decides there.
                        Some(d) => {
                            *rx_usecs == programmed_usecs(d, *min_usecs)
                                && (*rx_max_frames == self.cfg.rx_frames || *rx_max_frames == 0)
                                && !adaptive_rx
                        }
                        None => self.original.get(irq).is_none_or(|o| o == knob),
                    };
                    if want.is_some() {
                        self.original.entry(*irq).or_insert_with(|| knob.clone());
                    }
                    if !matches_want {
                        if let Some(a) = self.action_for(*irq, knob, want) {
                            plan.actions.push(a);
                        }
                    }
                    if want.is_none() && self.original.get(irq) == Some(knob) {
                        self.original.remove(irq);
                    }
                }
                Knob::NvmeController {
                    controller,
                    time_100us,
                    threshold,
                    ..
                } => {
                    nvme.entry(controller.clone())
                        .or_insert((*time_100us, *threshold));
                }
                Knob::Soft { .. } => {}
            }
        }
        // Per-queue NIC actions for a device-wide knob collapse to one (the strictest).
        let mut seen_devices: BTreeMap<String, usize> = BTreeMap::new();
        let mut merged: Vec<Action> = Vec::new();
        for a in plan.actions.drain(..) {
            if let Action::SetCoalesce {
                device,
                queue: None,
                params,
            } = &a
            {
                if let Some(&i) = seen_devices.get(device) {
                    if let Action::SetCoalesce { params: p, .. } = &mut merged[i] {
                        p.rx_usecs = p.rx_usecs.max(params.rx_usecs);
                    }
                    continue;
                }
                seen_devices.insert(device.clone(), merged.len());
            }
            merged.push(a);
        }
        plan.actions = merged;
        for (controller, (cur_time, cur_thr)) in nvme {
            let (time, thr) = nvme_setting(
                self.nvme_threshold.get(&controller).copied(),
                self.cfg.delay_us,
            );
            let current = if cur_time == 0 {
                (0, 1)
            } else {
                (cur_time, cur_thr)
            };
            if (time, thr) != current {
                plan.actions.push(Action::SetNvmeCoalescing {
                    controller,
                    time_100us: time,
                    threshold: thr,
                });
            }
        }
        plan
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn water_filling() {
        assert_eq!(water_level(&[1.0, 2.0, 3.0], 10.0), None);
        // 4 + 100 + 100 with budget 104: light source keeps 4, heavies get 50 each.
        assert_eq!(water_level(&[100.0, 4.0, 100.0], 104.0), Some(50.0));
        assert_eq!(water_level(&[10.0, 10.0], 0.0), Some(0.0));
        let r = [5.0, 30.0, 80.0, 200.0];
        let f = water_level(&r, 100.0).unwrap();
        let used: f64 = r.iter().map(|x| x.min(f)).sum();
        assert!((used - 100.0).abs() < 1e-9, "{f} {used}");
    }

    #[test]
    fn nvme_mapping() {
        assert_eq!(nvme_setting(None, 100), (0, 1));
        assert_eq!(nvme_setting(Some(8.4), 50), (0, 1)); // the field cannot express < 100 us
        assert_eq!(nvme_setting(Some(8.4), 100), (1, 8));
        assert_eq!(nvme_setting(Some(1000.0), 250), (2, 256));
    }
}
