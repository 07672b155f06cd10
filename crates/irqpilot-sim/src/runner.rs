//! Running a scenario, with irqpilot's policies in the loop when the scenario asks for them.
//!
//! Policies run exactly as in the daemon: `irqpilot_core::Controller::step` on a [`SimPlatform`]
//! every control period, the platform's `sleep` advancing simulated time. In-twin placement
//! models that are not irqpilot (the 2.5 kernel's rotation, a static binding) act on the same
//! platform through `Platform::apply`, so every move meets the same kernel rules.

use crate::config::Scenario;
use crate::placement::{PlacementLog, PlacementPolicy, Rotation};
use crate::report::{PlacementReport, Report};
use crate::sim::Sim;
use crate::sim_platform::SimPlatform;
use irqpilot_core::moderation::global::GlobalModerator;
use irqpilot_core::{Controller, Platform, Policy, StepReport};

/// Control period when no policy says how long it wants (1 s, the daemon's default).
const DEFAULT_PERIOD_NS: u64 = 1_000_000_000;

/// Runs a scenario to its end and reports. `progress` is called with the fraction done (0-1)
/// at each control period or every 5% of the run.
pub fn run_scenario(sc: Scenario, progress: impl FnMut(f64)) -> Result<Report, String> {
    run_scenario_observed(sc, progress, |_| {})
}

/// [`run_scenario`], also handing every control period's [`StepReport`] (each policy's plan and
/// what applying the merged plan did) to `on_step`.
pub fn run_scenario_observed(
    sc: Scenario,
    mut progress: impl FnMut(f64),
    mut on_step: impl FnMut(&StepReport),
) -> Result<Report, String> {
    if sc.placement.policy == PlacementPolicy::Irqbalance {
        return Err(
            "placement=irqbalance: irqbalance runs outside the twin, against its exported tree \
             (scripts/vs-irqbalance.sh)"
                .into(),
        );
    }
    let policy = sc.placement.policy;
    let mut moderator = sc.moderator.clone().map(GlobalModerator::new);
    let moderator_period = moderator
        .as_ref()
        .map(|m| m.config().period_ms.max(1) * 1_000_000);
    let mut placer = crate::placement::irqpilot_policy(&sc)?;
    let has_placer = placer.is_some();
    let mut rotation = Rotation::of(&sc);
    let cap = sc.machine.vectors_per_cpu;
    let sim = Sim::new(sc)?;
    let end = sim.end().ns();
    let mut platform = SimPlatform::new(sim);
    let mut log = PlacementLog::default();
    if policy == PlacementPolicy::Static {
        let plan = crate::placement::static_plan(&platform.sim().machine(), cap);
        log.record(&platform.apply(&plan));
    }
    let mut policies: Vec<&mut dyn Policy> = Vec::new();
    if let Some(m) = moderator.as_mut() {
        policies.push(m);
    }
    if let Some(p) = placer.as_mut() {
        policies.push(p.as_mut());
    }
    if policies.is_empty() && rotation.is_none() {
        let step = (end / 20).max(1);
        let mut t = 0;
        while t < end {
            t = (t + step).min(end);
            platform.sleep_until(t);
            progress(t as f64 / end as f64);
        }
    } else {
        let mut controller = if policies.is_empty() {
            None
        } else {
            Some(Controller::new(&mut platform).map_err(|e| e.to_string())?)
        };
        let period = |_: &[&mut dyn Policy]| moderator_period.unwrap_or(DEFAULT_PERIOD_NS);
        let mut next_step = period(&policies);
        let mut next_rotation = rotation.as_ref().map_or(u64::MAX, Rotation::interval_ns);
        loop {
            let now = platform.sim().now().ns();
            if now >= end {
                break;
            }
            let step_at = if controller.is_some() {
                next_step.min(end)
            } else {
                u64::MAX
            };
            let t = step_at.min(next_rotation).min(end);
            platform.sleep_until(t);
            if let Some(r) = rotation.as_mut().filter(|_| t == next_rotation && t < end) {
                let plan = r.plan(&platform.sim().machine());
                log.record(&platform.apply(&plan));
                next_rotation = t + r.interval_ns();
            }
            if let Some(c) = controller.as_mut().filter(|_| t == step_at) {
                let report = c
                    .step(&mut platform, &mut policies)
                    .map_err(|e| e.to_string())?;
                if has_placer {
                    log.record(&report.applied);
                }
                on_step(&report);
                next_step = t + period(&policies);
            }
            progress(t as f64 / end as f64);
        }
    }
    let sim = platform.into_sim();
    let mut report = sim.report();
    if policy != PlacementPolicy::None {
        report.placement = Some(PlacementReport {
            policy: policy.name().into(),
            rounds: log.rounds,
            writes: log.writes,
            migrations_total: sim.migrations,
            refused: log.refused,
        });
    }
    Ok(report)
}
