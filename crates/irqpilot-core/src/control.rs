//! The control loop shared by the daemon and the digital twin:
//!
//! ```text
//! snapshot -> Rates::between(prev, cur) -> each policy decides -> one merged Plan -> apply
//! ```
//!
//! [`Controller::step`] runs one period against any [`Platform`]; the caller owns the clock
//! (`Platform::sleep`), signals and logging, so `irqpilot daemon` on Linux and `irqpilot sim`
//! drive exactly the same code.

use crate::ids::MonoNs;
use crate::machine::Machine;
use crate::plan::{ApplyReport, Plan};
use crate::platform::{Platform, PlatformError};
use crate::policy::{Policy, PolicyInput};
use crate::rates::{Rates, RowStatus};
use crate::snapshot::Snapshot;

/// What one period did.
#[derive(Clone, Debug, Default)]
pub struct StepReport {
    /// Platform time at the snapshot.
    pub at: MonoNs,
    /// Each policy's plan, by policy name, in policy order.
    pub plans: Vec<(&'static str, Plan)>,
    /// What applying the merged plan did.
    pub applied: ApplyReport,
    /// Whether rates were available (false on the first period).
    pub had_rates: bool,
    /// Whether the inventory was re-read this period (IRQs appeared or vanished, or a plan
    /// changed something).
    pub refreshed_inventory: bool,
}

/// State carried between periods.
#[derive(Debug)]
pub struct Controller {
    machine: Machine,
    prev: Snapshot,
    cur: Snapshot,
    rates: Rates,
    refresh: bool,
}

impl Controller {
    /// Reads the inventory and a first snapshot.
    pub fn new<P: Platform + ?Sized>(platform: &mut P) -> Result<Controller, PlatformError> {
        let machine = platform.machine()?;
        let mut prev = Snapshot::default();
        platform.snapshot_into(&mut prev)?;
        Ok(Controller {
            machine,
            prev,
            cur: Snapshot::default(),
            rates: Rates::default(),
            refresh: false,
        })
    }

    /// The inventory as last read (affinities reflect applied plans after the next refresh).
    pub fn machine(&self) -> &Machine {
        &self.machine
    }

    /// Rates of the last period.
    pub fn rates(&self) -> &Rates {
        &self.rates
    }

    /// The latest snapshot.
    pub fn snapshot(&self) -> &Snapshot {
        &self.prev
    }

    /// Runs one period: snapshot, rates since the previous one, every policy's decision, one
    /// apply of the merged plan. Policies see the same input; later policies' actions follow
    /// earlier ones in the merged plan.
    pub fn step<P: Platform + ?Sized>(
        &mut self,
        platform: &mut P,
        policies: &mut [&mut dyn Policy],
    ) -> Result<StepReport, PlatformError> {
        platform.snapshot_into(&mut self.cur)?;
        let had_rates = self.rates.update(&self.prev, &self.cur).is_ok();
        let churn = had_rates
            && (!self.rates.vanished.is_empty()
                || self
                    .rates
                    .rows
                    .iter()
                    .any(|r| matches!(r.status, RowStatus::New | RowStatus::Replaced)));
        let mut refreshed = false;
        if self.refresh || churn {
            self.machine = platform.machine()?;
            self.refresh = false;
            refreshed = true;
        }
        let at = self.cur.taken_at;
        let input = PolicyInput {
            machine: &self.machine,
            rates: had_rates.then_some(&self.rates),
            now: at,
        };
        let mut plans = Vec::with_capacity(policies.len());
        let mut merged = Plan::default();
        for p in policies.iter_mut() {
            let plan = p.decide(&input);
            merged.actions.extend(plan.actions.iter().cloned());
            merged.notes.extend(plan.notes.iter().cloned());
            plans.push((p.name(), plan));
        }
        let applied = if merged.is_empty() {
            ApplyReport::default()
        } else {
            platform.apply(&merged)
        };
        for p in policies.iter_mut() {
            p.observe(&applied);
        }
        // Anything written changes the inventory (affinities, moderation): re-read next period.
        self.refresh = applied.written() > 0;
        std::mem::swap(&mut self.prev, &mut self.cur);
        Ok(StepReport {
            at,
            plans,
            applied,
            had_rates,
            refreshed_inventory: refreshed,
        })
    }
}

/// The period to sleep before the next step: the shortest that any policy wants
/// ([`Policy::next_interval_ns`]), else `default_ns`.
pub fn next_interval_ns(policies: &[&mut dyn Policy], default_ns: u64) -> u64 {
    policies
        .iter()
        .filter_map(|p| p.next_interval_ns())
        .min()
        .unwrap_or(default_ns)
}

/// Runs the loop for `duration_ns` of platform time, sleeping each period as long as the
/// policies want ([`next_interval_ns`], `default_ns` when none says). Returns every step's
/// report. This is how the daemon paces itself, so the twin can run the same schedule.
pub fn run_adaptive<P: Platform + ?Sized>(
    platform: &mut P,
    policies: &mut [&mut dyn Policy],
    default_ns: u64,
    duration_ns: u64,
) -> Result<Vec<StepReport>, PlatformError> {
    let mut c = Controller::new(platform)?;
    let start = platform.now();
    let mut out = Vec::new();
    loop {
        // A policy wanting 0 ns must not spin the loop forever.
        let wait = next_interval_ns(policies, default_ns).max(1);
        let elapsed = platform.now().since(start).unwrap_or(0);
        if elapsed.saturating_add(wait) > duration_ns {
            break;
        }
        platform.sleep(wait);
        out.push(c.step(platform, policies)?);
    }
    Ok(out)
}

/// Runs `periods` periods of `interval_ns` each: sleep, then step. Returns every step's report.
pub fn run_periods<P: Platform + ?Sized>(
    platform: &mut P,
    policies: &mut [&mut dyn Policy],
    interval_ns: u64,
    periods: u64,
) -> Result<Vec<StepReport>, PlatformError> {
    let mut c = Controller::new(platform)?;
    let mut out = Vec::new();
    for _ in 0..periods {
        platform.sleep(interval_ns);
        out.push(c.step(platform, policies)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpuset::CpuSet;
    use crate::ids::{CpuId, IrqNum};
    use crate::irq::Irq;
    use crate::plan::{Action, Outcome};
    use crate::snapshot::{InterruptTable, RowLabel};

    /// A machine with one IRQ whose count grows by 100 per ms on its effective CPU.
    struct Fake {
        now: u64,
        cpu: u32,
        counts: [u64; 2],
        machine_reads: u32,
    }

    impl Platform for Fake {
        fn machine(&mut self) -> Result<Machine, PlatformError> {
            self.machine_reads += 1;
            let mut m = Machine::default();
            let mut irq = Irq::new(IrqNum(30));
            irq.effective = Some(CpuSet::single(CpuId(self.cpu)));
            m.irqs.insert(irq.irq, irq);
            Ok(m)
        }
        fn snapshot_into(&mut self, s: &mut Snapshot) -> Result<(), PlatformError> {
            let mut t = InterruptTable::with_kernel_header(vec![CpuId(0), CpuId(1)], 3);
            t.push_kernel_row(RowLabel::Irq(IrqNum(30)), 3, &self.counts, " x");
            s.interrupts = t;
            s.taken_at = MonoNs(self.now);
            Ok(())
        }
        fn apply(&mut self, plan: &Plan) -> ApplyReport {
            let mut outcomes = Vec::new();
            for a in &plan.actions {
                if let Action::SetAffinity { cpus, .. } = a {
                    let old = self.cpu.to_string();
                    let new = cpus.first().map_or(self.cpu, |c| c.0);
                    let changed = new != self.cpu;
                    self.cpu = new;
                    outcomes.push(Outcome {
                        action: a.clone(),
                        old: Some(old),
                        result: Ok(changed),
                    });
                }
            }
            ApplyReport { outcomes }
        }
        fn now(&mut self) -> MonoNs {
            MonoNs(self.now)
        }
        fn sleep(&mut self, ns: u64) {
            self.counts[self.cpu as usize] += 100 * ns / 1_000_000;
            self.now += ns;
        }
    }

    /// Moves IRQ 30 to CPU 1 when it sees it busy on CPU 0.
    struct MoveOff0;
    impl Policy for MoveOff0 {
        fn name(&self) -> &'static str {
            "move-off-0"
        }
        fn decide(&mut self, input: &PolicyInput<'_>) -> Plan {
            let busy_on_0 = input
                .rates
                .is_some_and(|r| r.per_cpu.first().is_some_and(|c| c.irq_per_sec > 0.0));
            let on_0 = input
                .machine
                .irqs
                .values()
                .any(|i| i.effective == Some(CpuSet::single(CpuId(0))));
            let mut plan = Plan::default();
            if busy_on_0 && on_0 {
                plan.actions.push(Action::SetAffinity {
                    irq: IrqNum(30),
                    cpus: CpuSet::single(CpuId(1)),
                });
            }
            plan
        }
    }

    #[test]
    fn loop_measures_decides_applies_and_refreshes() {
        let mut p = Fake {
            now: 0,
            cpu: 0,
            counts: [0, 0],
            machine_reads: 0,
        };
        let mut pol = MoveOff0;
        let reports = run_periods(&mut p, &mut [&mut pol], 10_000_000, 4).unwrap();
        assert!(reports[0].had_rates);
        assert_eq!(reports[0].applied.written(), 1);
        assert_eq!(p.cpu, 1);
        // The next period re-reads the inventory and, the IRQ having moved, decides nothing.
        assert!(reports[1].refreshed_inventory);
        assert!(reports[1].plans[0].1.is_empty() && reports[2].plans[0].1.is_empty());
        assert_eq!(p.machine_reads, 2);
        assert!(reports[3].at > reports[0].at);
    }

    /// Counts what it observed and asks for a 3 ms period.
    struct Watcher {
        seen: usize,
    }
    impl Policy for Watcher {
        fn name(&self) -> &'static str {
            "watcher"
        }
        fn decide(&mut self, _input: &PolicyInput<'_>) -> Plan {
            Plan::default()
        }
        fn observe(&mut self, report: &ApplyReport) {
            self.seen += report.outcomes.len();
        }
        fn next_interval_ns(&self) -> Option<u64> {
            Some(3_000_000)
        }
    }

    #[test]
    fn adaptive_loop_sleeps_what_policies_want_and_reports_back() {
        let mut p = Fake {
            now: 0,
            cpu: 0,
            counts: [0, 0],
            machine_reads: 0,
        };
        let (mut mover, mut watcher) = (MoveOff0, Watcher { seen: 0 });
        let reports = run_adaptive(
            &mut p,
            &mut [&mut mover, &mut watcher],
            50_000_000,
            20_000_000,
        )
        .unwrap();
        // 20 ms at the 3 ms the watcher wants (shorter than the 50 ms default): 6 periods.
        assert_eq!(reports.len(), 6);
        assert_eq!(reports[1].at.0 - reports[0].at.0, 3_000_000);
        // The mover's one write was reported to every policy.
        assert_eq!(watcher.seen, 1);
        assert_eq!(next_interval_ns(&[&mut MoveOff0], 7), 7);
    }
}
