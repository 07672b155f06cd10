//! The seam between the twin and irqpilot's own policy code (`irqpilot_core::placement` and
//! `irqpilot_core::isolation::plan`), for `placement = "irqpilot"`.

use super::PlacementPolicy;
use crate::config::Scenario;
use irqpilot_core::{Action, ApplyReport, Plan};

/// irqpilot as the twin runs it for `placement = "irqpilot"`: first what `irqpilot isolate
/// --apply` does on a machine booted with isolated CPUs (`irqpilot_core::isolation::plan`:
/// channel cuts when the housekeeping CPUs lack vectors, every IRQ off the isolated CPUs, the
/// default affinity), then the daemon's placement policy (`irqpilot_core::placement`) every
/// period it asks for. This is the seam between the twin and irqpilot's policy code.
#[derive(Debug)]
pub struct Irqpilot {
    /// The placement policy, run through `Controller::step`.
    pub policy: irqpilot_core::PlacementPolicy,
}

impl Irqpilot {
    /// irqpilot for a scenario whose policy is `irqpilot`.
    pub fn of(sc: &Scenario) -> Result<Option<Irqpilot>, crate::error::BuildError> {
        if sc.placement.policy != PlacementPolicy::Irqpilot {
            return Ok(None);
        }
        let mut cfg = sc.placement.irqpilot.clone();
        if cfg.applications.is_empty() {
            // What the daemon reads on Linux from the threads' `Cpus_allowed_list`: where each
            // request/response workload's threads are pinned.
            cfg.applications = applications(sc);
        }
        let policy = irqpilot_core::PlacementPolicy::new(cfg)?;
        Ok(Some(Irqpilot { policy }))
    }

    /// What `irqpilot isolate --cpus <isolated> --apply` does on a machine booted with
    /// isolated CPUs, step for step (`crates/irqpilot/src/cmd/isolate.rs`): plan; apply the
    /// channel cuts; if they changed something, plan again on the machine as it now is; apply
    /// the rest. Returns the first plan and everything applied; `None` without isolated CPUs.
    pub fn isolate(
        &self,
        platform: &mut crate::SimPlatform,
    ) -> Option<(irqpilot_core::isolation::plan::IsolationPlan, ApplyReport)> {
        use irqpilot_core::Platform;
        use irqpilot_core::isolation::plan::plan_isolation;
        let machine = platform.sim().machine();
        let isolated = machine.isolation.isolated_cpus();
        if isolated.is_empty() {
            return None;
        }
        let cfg = self.policy.config();
        let plan = plan_isolation(&machine, &isolated, cfg, None).ok()?;
        let is_channels = |a: &Action| matches!(a, Action::SetChannels { .. });
        let channels: Vec<Action> = plan
            .plan
            .actions
            .iter()
            .filter(|a| is_channels(a))
            .cloned()
            .collect();
        let mut rest = plan.plan.clone();
        rest.actions.retain(|a| !is_channels(a));
        let mut report = ApplyReport::default();
        if !channels.is_empty() {
            report = platform.apply(&Plan {
                actions: channels,
                notes: Vec::new(),
            });
            if report.written() > 0 {
                let now = platform.sim().machine();
                if let Ok(again) = plan_isolation(&now, &isolated, cfg, None) {
                    rest = again.plan;
                    rest.actions.retain(|a| !is_channels(a));
                }
            }
        }
        report.outcomes.extend(platform.apply(&rest).outcomes);
        Some((plan, report))
    }
}

/// The application CPUs of the scenario's workloads, per NIC (CPU lists that name no CPU are
/// left out: building the machine reports them).
fn applications(sc: &Scenario) -> Vec<irqpilot_core::placement::Application> {
    sc.workload
        .iter()
        .filter_map(crate::apps::app_settings)
        .filter_map(|s| {
            let (nic, cpus) = (s.nic, s.app_cpus);
            let cpus = irqpilot_core::CpuSet::parse_list(cpus?).ok()?;
            if cpus.is_empty() {
                return None;
            }
            Some(irqpilot_core::placement::Application {
                device: nic.to_string(),
                cpus,
                process: None,
            })
        })
        .collect()
}
