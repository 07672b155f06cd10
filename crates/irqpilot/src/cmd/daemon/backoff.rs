//! A period whose sample or inventory could not be read (a malformed `/proc/interrupts`, a file
//! that vanished mid-read) is skipped and logged, never fatal: the daemon has knobs changed and
//! must live to restore them. Failures in a row stretch the wait before the next try, doubling
//! from the normal period up to [`MAX_BACKOFF_NS`], so a file that stays bad costs a log line a
//! minute, not one per period.

use irqpilot_core::PlatformError;

/// The longest wait between two tries while every period fails.
pub const MAX_BACKOFF_NS: u64 = 60_000_000_000;

/// Failed periods in a row.
#[derive(Debug, Default)]
pub struct Backoff {
    failures: u32,
}

impl Backoff {
    /// A period failed with `error`: logged, with the wait before the next try.
    pub fn failed(&mut self, error: &PlatformError, period_ns: u64) {
        self.failures = self.failures.saturating_add(1);
        tracing::warn!(
            error = %error,
            failures_in_a_row = self.failures,
            next_try_ms = self.wait_ns(period_ns) / 1_000_000,
            "sample skipped: nothing decided or written this period"
        );
    }

    /// A period went through: back to the normal pace.
    pub fn succeeded(&mut self) {
        if self.failures > 0 {
            tracing::warn!(
                skipped = self.failures,
                "sampling works again after skipped periods"
            );
        }
        self.failures = 0;
    }

    /// How long to wait before the next period: `period_ns`, doubled for each failure in a row
    /// after the first, at most [`MAX_BACKOFF_NS`] (or `period_ns` if that is longer).
    pub fn wait_ns(&self, period_ns: u64) -> u64 {
        let doublings = self.failures.saturating_sub(1).min(32);
        period_ns
            .saturating_mul(1u64 << doublings)
            .min(MAX_BACKOFF_NS.max(period_ns))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_up_to_a_minute_and_reset_on_success() {
        let mut b = Backoff::default();
        let e = PlatformError::Other("bad".into());
        assert_eq!(b.wait_ns(1_000), 1_000);
        b.failed(&e, 1_000);
        assert_eq!(
            b.wait_ns(1_000),
            1_000,
            "the first retry comes at the normal pace"
        );
        b.failed(&e, 1_000);
        assert_eq!(b.wait_ns(1_000), 2_000);
        for _ in 0..100 {
            b.failed(&e, 1_000_000_000);
        }
        assert_eq!(b.wait_ns(1_000_000_000), MAX_BACKOFF_NS);
        assert_eq!(b.wait_ns(120_000_000_000), 120_000_000_000);
        b.succeeded();
        assert_eq!((b.failures, b.wait_ns(5)), (0, 5));
    }
}
