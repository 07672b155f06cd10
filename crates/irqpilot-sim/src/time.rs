//! Simulated time: nanoseconds since the start of a run, never wall-clock time.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Nanoseconds in a microsecond.
pub const US: u64 = 1_000;
/// Nanoseconds in a millisecond.
pub const MS: u64 = 1_000_000;
/// Nanoseconds in a second.
pub const SEC: u64 = 1_000_000_000;

/// A point in simulated time, in nanoseconds since the run started.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct SimTime(pub u64);

impl SimTime {
    /// The start of a run.
    pub const ZERO: SimTime = SimTime(0);

    /// Nanoseconds since the start.
    pub const fn ns(self) -> u64 {
        self.0
    }

    /// `self + ns`, saturating.
    pub const fn after(self, ns: u64) -> SimTime {
        SimTime(self.0.saturating_add(ns))
    }

    /// Nanoseconds from `earlier` to `self` (0 if `earlier` is later).
    pub const fn since(self, earlier: SimTime) -> u64 {
        self.0.saturating_sub(earlier.0)
    }

    /// Seconds since the start.
    pub fn secs_f64(self) -> f64 {
        self.0 as f64 / SEC as f64
    }
}

impl fmt::Display for SimTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.6}s", self.secs_f64())
    }
}

/// Microseconds (possibly fractional, from configuration) to nanoseconds, rounded.
pub fn us_to_ns(us: f64) -> u64 {
    if us.is_finite() && us > 0.0 {
        (us * US as f64).round() as u64
    } else {
        0
    }
}
