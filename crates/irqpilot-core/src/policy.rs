//! The `Policy` trait: pure decision code. A policy sees the machine, the measured rates and the
//! platform's time, and returns a [`Plan`]. It does no I/O and reads no clock or randomness of
//! its own; it may keep state between calls (e.g. a controller's current delay), so the same
//! sequence of inputs always gives the same sequence of plans.

use crate::ids::MonoNs;
use crate::machine::Machine;
use crate::plan::{ApplyReport, Plan};
use crate::rates::Rates;

/// What a policy sees each control period.
#[derive(Clone, Copy, Debug)]
pub struct PolicyInput<'a> {
    /// The machine's inventory (topology, isolation, IRQs with their current affinities).
    pub machine: &'a Machine,
    /// Rates over the last period; `None` on the first call.
    pub rates: Option<&'a Rates>,
    /// The platform's time.
    pub now: MonoNs,
}

/// A decision maker: placement, moderation, isolation.
pub trait Policy {
    /// A short name for logs and reports.
    fn name(&self) -> &'static str;

    /// Decides what to change. Deciding again on the machine after applying the returned plan
    /// (with the same rates) must return an empty plan: policies are sticky, never oscillating.
    fn decide(&mut self, input: &PolicyInput<'_>) -> Plan;

    /// What applying the merged plan of the last period did (every policy's actions, in plan
    /// order). A policy learns the kernel's permanent refusals here (a kernel-managed IRQ, a CPU
    /// out of vectors) so it never retries them (balancing.md 8.1-8.2). Default: ignore.
    fn observe(&mut self, report: &ApplyReport) {
        let _ = report;
    }

    /// The control period this policy wants before its next decision, in nanoseconds of the
    /// platform's time: short after load shifts or moves, long while steady. `None` (the
    /// default) leaves the period to the caller. A loop with several policies sleeps the
    /// shortest wanted period ([`crate::control::next_interval_ns`]).
    fn next_interval_ns(&self) -> Option<u64> {
        None
    }
}
