//! irqpilot's global moderator: GSIM's goals on today's kernels, through the knobs hardware
//! already has (NIC `rx-usecs`/`rx-frames` and their TX twins per queue, NVMe interrupt
//! coalescing per controller), and beyond GSIM where its fixed targets fall short.
//!
//! It owns the settings it moderates. At low load every queue runs at the lowest-latency
//! setting the device accepts (`idle = "none"`: no delay, an interrupt per completion, the
//! driver's adaptive moderation off; or the driver's own setting with `idle =
//! "driver-default"`), and it raises delays only under measured overload. Relaxing, or
//! `irqpilot revert`, gives back everything it changed: RX and TX delays, frame counts and
//! adaptive flags.
//!
//! Each control period, on exact interrupt counts (`/proc/interrupts` deltas):
//!
//! 1. **Global budget, shared max-min fairly.** Above the target, the water level `f` with
//!    `sum(min(r_s, f)) = budget` caps only sources above `f`; light ones keep their rate.
//!    (This answers the GSIM reviewers' "this can starve out a particular CPU which handles the
//!    bulk of interrupts": GSIM decides per CPU from its own share; water-filling decides per
//!    source from everyone's.) Except that drives whose reads wait ten aggregation timers or
//!    more (deep queues: their reads lose a tenth of their time at most when their interrupt
//!    waits the timer) are held first where the level would hold other sources, and those
//!    others are spared, their delays relaxing, while the drives can carry the budget
//!    (`share_budget` in `global/moderator.rs`).
//! 2. **Delay from allowance, by feedback**, each NIC queue's delay times `r_s / allowance`,
//!    bounded by a ceiling derived from the target: `active queues / target` (no queue needs
//!    more to meet a reachable target), itself bounded by the latency ceiling `delay_us`. When
//!    even the ceiling cannot reach the target, the plan says so (`unreachable`). A NIC device
//!    whose holding cannot bring the rest's least under the target (NVMe at its largest
//!    thresholds) pays no longer delay than the rest does, when that adds little.
//! 3. **NVMe on a coarse grid** (`global/nvme.rs`): feature 08h counts time in 100 us units and
//!    thresholds in whole entries, one setting per controller. The threshold does the work and
//!    never exceeds the reads a vector has in flight (else every read would wait for the
//!    timer); steps down the grid are taken only when the rate one step down is predicted to
//!    stay under the target, and a step that had to be undone is not retried until the load
//!    changes: no limit cycle between two grid points.
//! 4. **Per-CPU hardirq time** (`global/hardirq.rs`), from `/proc/stat`, whose 10 ms ticks make one
//!    period's share read 0% or 100%: a window of ticks and a confidence bound decide, and only
//!    a CPU whose lower bound exceeds `hardirq_percent` gets its sources' rate capped.
//! 5. **The knee** (`global/knee.rs`): the target starts at `target_intr_rate` and moves by probing:
//!    a step up that costs completions (bytes from `/proc/net/dev`, I/Os from `/proc/diskstats`)
//!    is undone, a step down that buys completions is kept; with neither, fewer delays win.
//!
//! Every constant is a field of [`GlobalModerationConfig`] or documented where it is defined.

mod hardirq;
mod knee;
mod moderator;
mod nic;
mod nvme;

pub use hardirq::{HardirqVerdict, hardirq_verdict};
pub use moderator::{GlobalModerator, water_level};

use crate::ids::IrqNum;
use crate::machine::Machine;
use crate::moderation::knobs::Knob;
use crate::placement::glob_match;
use serde::{Deserialize, Serialize};

/// What a queue runs at while the moderator has no reason to delay it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Idle {
    /// The lowest-latency setting the device accepts: `rx-usecs 0 rx-frames 1 tx-usecs 0
    /// tx-frames 1` (TX as `idle_tx` says), adaptive moderation off; NVMe coalescing off. The
    /// GSIM cover letter's baseline ("compared with no moderation at all").
    #[default]
    None,
    /// Whatever the driver had before the moderator first changed it.
    DriverDefault,
}

/// What a queue's TX completions run at while the moderator has no reason to delay it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IdleTx {
    /// An interrupt per completion (`tx-usecs 0 tx-frames 1`).
    #[default]
    None,
    /// Whatever the driver had before the moderator first changed it.
    DriverDefault,
    /// An interrupt per completion, unless a load that makes more than `target_intr_rate`
    /// interrupts with nothing held back was measured to complete more with the driver's own
    /// TX moderation (the knee search asks it once per load, docs/moderation.md, "TX
    /// completions asked").
    Measured,
}

/// Parameters of the global moderator (`[moderation]` in the configuration file).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GlobalModerationConfig {
    /// Platform-wide device interrupt rate to stay under (GSIM's suggestion: 1,000,000; the
    /// affected platforms' knee is 1-3 M/s, moderation.md 1.2).
    pub target_intr_rate: f64,
    /// Per-CPU hardirq share to stay under, percent (GSIM's suggestion: 70).
    pub hardirq_percent: f64,
    /// The latency ceiling: the largest delay the moderator may impose on any source,
    /// microseconds (GSIM's `delay_us`, which it also bounds; GSIM accepts up to 500). The
    /// working ceiling is derived from the target (`active queues / target`), bounded by this.
    pub delay_us: u32,
    /// Smallest delay worth programming; below it the source gets its idle setting.
    pub min_delay_us: u32,
    /// Relative band under the target where delays are held rather than relaxed (0.1 = act at
    /// 100%, relax below 90%): keeps the loop from oscillating around the target.
    pub hysteresis: f64,
    /// Fraction by which delays shrink per period when under target (GSIM shrinks by 1/16 per
    /// 5 ms epoch; 1/8 per 10 ms period is similar).
    pub relax: f64,
    /// Least `rx-frames` paired with a programmed `rx-usecs` (the moderator pairs a delay `d`
    /// with the packets the queue receives in `1.25 d`, at least this many). A queue whose timer
    /// restarts at every packet (mlx5's CQE mode) never fires on its timer while its packets
    /// come closer together than `d`: only the frame count ends its wait, so a floor far above
    /// what the queue receives in `d` makes its rate fall off a cliff at the packet gap instead
    /// of following the delay (2: one interrupt per two packets at most, the least that is
    /// still coalescing).
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
    /// The setting of a queue with nothing to moderate: `none` (the lowest-latency setting)
    /// or `driver-default` (what the driver had).
    pub idle: Idle,
    /// TX completions of a queue with nothing to moderate: `none` (an interrupt per
    /// completion), `driver-default` (what the driver had; a delay the moderator programs
    /// then never puts them under it) or `measured` (an interrupt per completion unless a
    /// load past `target_intr_rate` with nothing held back completes more with the driver's
    /// own setting, measured by the knee search). A completion is written after its packet
    /// has left: holding it back delays no packet of its own, but at 0 a request/response
    /// queue takes two interrupts a transaction (the request, the response's completion) where
    /// the driver's default takes one, and held back its processing joins the next RX poll,
    /// where the packets of that poll wait for it (docs/moderation.md, "TX completions").
    pub idle_tx: IdleTx,
    /// Whether to find the platform's knee by probing (the target then moves away from
    /// `target_intr_rate`, which is where it starts); off: the target stays fixed, as GSIM's.
    pub knee_search: bool,
    /// The lowest target the knee search may settle on, interrupts/s (`target_intr_rate` where
    /// that is lower).
    pub min_intr_rate: f64,
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
            delay_us: 250,
            min_delay_us: 2,
            hysteresis: 0.1,
            relax: 0.125,
            rx_frames: 2,
            period_ms: 10,
            smoothing: 0.5,
            exclude: Vec::new(),
            kernel_soft: true,
            idle: Idle::None,
            idle_tx: IdleTx::Measured,
            knee_search: true,
            min_intr_rate: 100_000.0,
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
        // A target below it is its own floor: a low target needs no second key changed.
        if !f(self.min_intr_rate, 0.0, 1e9) {
            return bad(
                "min_intr_rate",
                self.min_intr_rate.to_string(),
                "must be a rate in (0, 1e9] (interrupts/s)",
            );
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

#[cfg(test)]
mod tests;
