//! Waiting between periods. The next period's deadline is fixed when a period ends; the wait
//! blocks on the service's event channel up to the earliest of that deadline, the next check of
//! `/proc/irq` (once a second, so a new IRQ is placed within a second even while the steady
//! period is long) and the next watchdog ping. A reload does not move the deadline: SIGHUPs,
//! however many, never hold periods back.

use crate::service::{Event, Events, Systemd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Why the wait ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wake {
    /// Time for a period.
    Period,
    /// SIGHUP.
    Reload,
    /// SIGTERM or SIGINT.
    Terminate,
}

/// The daemon's clock: when the next period is due and when to look at `/proc/irq` again.
#[derive(Debug)]
pub struct Schedule {
    root: PathBuf,
    next_period: Instant,
    next_irq_check: Instant,
    irqs: usize,
}

/// How often `/proc/irq` is checked for IRQs coming or going.
const IRQ_CHECK_EVERY: Duration = Duration::from_secs(1);

impl Schedule {
    /// The first period `first_ns` from now.
    pub fn new(root: &Path, first_ns: u64) -> Schedule {
        let now = Instant::now();
        Schedule {
            root: root.to_path_buf(),
            next_period: now + Duration::from_nanos(first_ns),
            next_irq_check: now + IRQ_CHECK_EVERY,
            irqs: irq_count(root).unwrap_or(0),
        }
    }

    /// Sets the next period `ns` from now.
    pub fn next_in(&mut self, ns: u64) {
        self.next_period = Instant::now() + Duration::from_nanos(ns);
    }

    /// Brings the next period forward to at most `ns` from now (a reload that shortened it).
    pub fn at_most_in(&mut self, ns: u64) {
        self.next_period = self
            .next_period
            .min(Instant::now() + Duration::from_nanos(ns));
    }

    /// Waits for the next reason to wake. Metrics events are handled here (logged; the daemon
    /// goes on) so the caller sees only what changes its loop.
    pub fn wait(&mut self, events: &Events, systemd: &mut Systemd) -> Wake {
        loop {
            let now = Instant::now();
            systemd.ping_if_due(now);
            if now >= self.next_irq_check {
                self.next_irq_check = now + IRQ_CHECK_EVERY;
                // An unreadable /proc/irq (EMFILE, say) is no news: keep the last count.
                let n = irq_count(&self.root).unwrap_or(self.irqs);
                if n != self.irqs {
                    tracing::info!(
                        before = self.irqs,
                        now = n,
                        "IRQs came or went: deciding now"
                    );
                    self.irqs = n;
                    return Wake::Period;
                }
            }
            if now >= self.next_period {
                return Wake::Period;
            }
            let mut until = self.next_period.min(self.next_irq_check);
            if let Some(ping) = systemd.next_ping() {
                until = until.min(ping);
            }
            match events.wait_until(until) {
                None | Some(Event::RefreshInventory) => {}
                Some(Event::Reload) => return Wake::Reload,
                Some(Event::Terminate(_)) => return Wake::Terminate,
                Some(Event::MetricsDown(why)) => {
                    tracing::error!("{why}; the daemon goes on without metrics");
                    systemd.status("running; metrics endpoint down (see the journal)");
                }
            }
        }
    }
}

/// Number of IRQs the kernel lists under `proc/irq` (one directory each); `None` when it
/// cannot be read.
pub fn irq_count(root: &Path) -> Option<usize> {
    std::fs::read_dir(root.join("proc/irq")).ok().map(|d| {
        d.filter(|e| e.as_ref().is_ok_and(|e| e.path().is_dir()))
            .count()
    })
}
