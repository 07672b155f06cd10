//! What the daemon says at default verbosity besides each change: a start-up summary and one
//! line a minute (also the `STATUS=` line `systemctl status` shows).

use crate::render::human;
use irqpilot_core::moderation::knobs::Knob;
use irqpilot_core::{ApplyReport, Machine, Rates};
use std::time::{Duration, Instant};

/// The start-up line: what the daemon found and will do.
pub fn startup(machine: &Machine, root: &std::path::Path, period_ms: u64) -> String {
    let t = &machine.topology;
    let hk = machine.isolation.housekeeping(&t.online).cpus;
    let isolated = machine.isolation.isolated_cpus();
    let device_irqs = machine.irqs.values().filter(|i| i.is_device()).count();
    let (mut nic, mut nvme) = (0, std::collections::BTreeSet::new());
    for k in machine.moderation.knobs.values() {
        match k {
            Knob::NicQueue { .. } => nic += 1,
            Knob::NvmeController { controller, .. } => {
                nvme.insert(controller.as_str());
            }
            Knob::Soft { .. } => {}
        }
    }
    let soft = if machine.moderation.soft.is_some() {
        "present"
    } else {
        "absent"
    };
    format!(
        "root {}; {} CPUs online, housekeeping {}{}; {} IRQs ({} of devices); moderation knobs: {} NIC queues, {} NVMe controllers, kernel soft moderation {}; first period in {} ms",
        root.display(),
        t.online.len(),
        hk,
        if isolated.is_empty() {
            String::new()
        } else {
            format!(", isolated {isolated}")
        },
        machine.irqs.len(),
        device_irqs,
        nic,
        nvme.len(),
        soft,
        period_ms,
    )
}

/// Counts between two summary lines.
#[derive(Debug)]
pub struct Minute {
    every: Duration,
    since: Instant,
    periods: u64,
    changes: usize,
    refused: usize,
    last_rate: Option<f64>,
}

impl Minute {
    /// Summaries every `every`.
    pub fn new(every: Duration) -> Minute {
        Minute {
            every,
            since: Instant::now(),
            periods: 0,
            changes: 0,
            refused: 0,
            last_rate: None,
        }
    }

    /// Counts one period.
    pub fn add(&mut self, applied: &ApplyReport, rates: Option<&Rates>) {
        self.periods += 1;
        self.changes += applied.written();
        self.refused += applied.failures();
        if let Some(r) = rates {
            self.last_rate = Some(r.total_irq_per_sec());
        }
    }

    /// The summary line if one is due, then starts counting again.
    pub fn due(&mut self, interval_ms: u64) -> Option<String> {
        let elapsed = self.since.elapsed();
        if elapsed < self.every {
            return None;
        }
        let line = self.line(elapsed, interval_ms);
        *self = Minute::new(self.every);
        Some(line)
    }

    fn line(&self, elapsed: Duration, interval_ms: u64) -> String {
        format!(
            "last {}s: {} periods, {} changes, {} refused; {} interrupts/s; period now {} ms",
            elapsed.as_secs(),
            self.periods,
            self.changes,
            self.refused,
            self.last_rate.map_or_else(|| "-".to_string(), human::si),
            interval_ms,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_minute_line_names_its_unit_once() {
        let mut m = Minute::new(Duration::from_secs(60));
        m.periods = 6000;
        m.changes = 12;
        m.last_rate = Some(1.2e6);
        assert_eq!(
            m.line(Duration::from_secs(60), 10),
            "last 60s: 6000 periods, 12 changes, 0 refused; 1.20M interrupts/s; period now 10 ms"
        );
        m.last_rate = None;
        assert!(
            m.line(Duration::from_secs(61), 200)
                .contains("; - interrupts/s; period now 200 ms")
        );
    }

    #[test]
    fn nothing_is_due_before_its_time() {
        let mut m = Minute::new(Duration::from_secs(3600));
        assert_eq!(m.due(10), None);
        let mut m = Minute::new(Duration::ZERO);
        assert!(
            m.due(10)
                .is_some_and(|l| l.starts_with("last 0s: 0 periods"))
        );
    }
}
