//! The benchmark's clock: `CLOCK_MONOTONIC` through the vDSO, absolute-deadline sleeps, and a
//! measurement of the clock's own cost (reported, not subtracted).

use crate::error::{Op, WireError};
use rustix::thread::clock_nanosleep_absolute;
use rustix::time::{ClockId, Timespec, clock_gettime};
use serde::Serialize;

/// Nanoseconds on `CLOCK_MONOTONIC` (never `CLOCK_REALTIME`, which NTP may slew).
#[inline]
pub fn now_ns() -> u64 {
    let ts = clock_gettime(ClockId::Monotonic);
    // A monotonic clock is never negative.
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// Sleeps until `deadline_ns` on `CLOCK_MONOTONIC` (`clock_nanosleep(TIMER_ABSTIME)`), so that
/// time spent between sleeps does not accumulate as drift. Returns at once if the deadline passed.
pub fn sleep_until(deadline_ns: u64) -> Result<(), WireError> {
    let ts = Timespec {
        tv_sec: (deadline_ns / 1_000_000_000) as _,
        tv_nsec: (deadline_ns % 1_000_000_000) as _,
    };
    loop {
        match clock_nanosleep_absolute(ClockId::Monotonic, &ts) {
            Ok(()) => return Ok(()),
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(WireError::os(Op::Sleep, e)),
        }
    }
}

/// What the timer costs, measured with back-to-back reads.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TimerInfo {
    /// The clock used for every sample.
    pub clock: &'static str,
    /// Smallest difference between two back-to-back reads, ns.
    pub overhead_min_ns: u64,
    /// Median difference between two back-to-back reads, ns. Every RTT sample includes about
    /// one such read; it is not subtracted.
    pub overhead_median_ns: u64,
    /// The kernel's current clocksource (`tsc`, `kvm-clock`, ...), when readable.
    pub clocksource: Option<String>,
}

/// Measures the cost of [`now_ns`] with `samples` back-to-back pairs.
pub fn measure_overhead(samples: usize) -> TimerInfo {
    let samples = samples.max(1);
    let mut deltas = Vec::with_capacity(samples);
    for _ in 0..samples {
        let a = now_ns();
        let b = now_ns();
        deltas.push(b.saturating_sub(a));
    }
    deltas.sort_unstable();
    TimerInfo {
        clock: "CLOCK_MONOTONIC (vDSO clock_gettime)",
        overhead_min_ns: deltas.first().copied().unwrap_or(0),
        overhead_median_ns: deltas.get(deltas.len() / 2).copied().unwrap_or(0),
        clocksource: std::fs::read_to_string(
            "/sys/devices/system/clocksource/clocksource0/current_clocksource",
        )
        .ok()
        .map(|s| s.trim().to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_and_sleep_until_reaches_deadline() {
        let a = now_ns();
        let deadline = a + 200_000;
        sleep_until(deadline).unwrap();
        let b = now_ns();
        assert!(b >= deadline, "woke at {b}, before deadline {deadline}");
        // A deadline in the past returns at once.
        sleep_until(a).unwrap();
    }

    #[test]
    fn overhead_is_plausible() {
        let t = measure_overhead(1000);
        assert!(t.overhead_min_ns <= t.overhead_median_ns);
        assert!(t.overhead_median_ns < 1_000_000);
    }
}
