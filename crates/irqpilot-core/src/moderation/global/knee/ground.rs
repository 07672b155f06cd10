//! The load's own rate as ground already seen.
//!
//! A search's steps up are bounded (`UNPROVEN_STEP`) because the knee may lie anywhere above
//! what was proven, and a probe past it collapses the platform. But the period in which a
//! load arrives runs with nothing held back: the machine was just seen at the load's own
//! rate, doing that period's work. When that work is well above what the starting target
//! leaves the load (request/response traffic pays every delay in transactions), more
//! interrupts bought completions all the way there, and climbing to it in 25% steps holds
//! back for most of a second what nothing needed held (held-out gen-7-6, 13.9 M/s of RPC on a
//! healthy platform: p95 1.47x, p99 2.4x `none`). The first probe then goes to that rate,
//! judged like any step up (a loss undoes it at once). Past a knee at line rate the arrival's
//! period shows the collapse (less work than the target's), and the search climbs as before.
//! The ground in between was skipped, not seen: a knee there could still do better than the
//! load's own rate (a closed loop that the platform's falling DMA capacity binds), so a kept
//! jump is followed by one step down, and a descent where that buys completions: when the jump
//! lets go of the load, when a step past it is undone (the target then goes back to the
//! margin under the jump's rate, which no probe saw either), and when the load still binds at
//! the jump's rate, however much the jump bought against the start (work nearly flat across
//! the skipped ground, or peaking inside it: a request/response load on CPUs its interrupts
//! keep busy did 24% more a step under its jump of +503%). That step gaining inside its noise
//! asks one step further, judged against the jump's own window (two steps' effect against the
//! same noise); a second step that wins nothing sends the target back to the jump's, not to
//! the first step's, which won nothing proven.
//!
//! "More work" is judged as every step is ([`super::compare`]): each device's change against
//! its own mean, weighted by its interrupts. A sum of bytes hides the device that gains: a
//! request/response NIC beside a bulk one (held-out gen-192-12, 70-byte packets on a 200G NIC
//! beside 158 Gb/s of bulk) did far more transactions unheld, while the two NICs' bytes
//! together rose 2%, under the early bar: the search climbed in 25% steps for 580 ms.

use super::{
    DeviceWork, EARLY_LOSS, KneeFinder, MARGIN, MAX_TARGET, MIN_STEP, NATURAL_CLEAR, Summary, Z,
    compare,
};

impl KneeFinder {
    /// Where a new search's first probe goes when the load's arrival, seen unheld (`seen`:
    /// work per device and interrupt rate of that period), did more work than the baseline
    /// `base` at the target: the load's own rate, cleared by `NATURAL_CLEAR`. `None`: an
    /// ordinary step (the rate is within one, or the work is no better beyond one period's
    /// noise and the bar of an early verdict).
    pub(super) fn natural_ground(
        &self,
        (work, rate): (&[DeviceWork], f64),
        base: &Summary,
    ) -> Option<f64> {
        let start = self.target.max(self.least);
        if rate <= start * (1.0 + self.step) {
            return None;
        }
        // One period against the baseline's mean: its variance is one of the baseline's
        // periods'.
        let mut one = Summary::default();
        for (d, w, weight) in work {
            if let Some(&(_, v0, _, _)) = base.devices.get(d) {
                one.devices.insert(d.clone(), (*w, v0, 1.0, *weight));
            }
        }
        let (_, score, se) = compare(base, &one);
        if score <= (Z * se).max(EARLY_LOSS) {
            return None;
        }
        let to = (rate * (1.0 + NATURAL_CLEAR))
            .min(MAX_TARGET)
            .min(self.too_high * MARGIN);
        (to > self.target * (1.0 + MIN_STEP)).then_some(to)
    }
}
