//! Running a scenario, with irqpilot's policies in the loop when the scenario asks for them.
//!
//! Policies run exactly as in the daemon: `irqpilot_core::Controller::step` on a [`SimPlatform`]
//! every control period, the platform's `sleep` advancing simulated time. In-twin placement
//! models that are not irqpilot (the 2.5 kernel's rotation, a static binding) act on the same
//! platform through `Platform::apply`, so every move meets the same kernel rules.

use crate::config::Scenario;
use crate::error::SimError;
use crate::export::{ExportOptions, OutsideWrite, TreeExport};
use crate::placement::{Irqpilot, PlacementLog, PlacementPolicy, Rotation};
use crate::report::{PlacementReport, Report};
use crate::sim::Sim;
use crate::sim_platform::SimPlatform;
use irqpilot_core::control::next_interval_ns;
use irqpilot_core::moderation::global::GlobalModerator;
use irqpilot_core::{Controller, Platform, Policy, StepReport};
use std::path::Path;

/// Control period when no policy says how long it wants (1 s, the daemon's default).
const DEFAULT_PERIOD_NS: u64 = 1_000_000_000;

/// Runs a scenario to its end and reports. `progress` is called with the fraction done (0-1)
/// at each control period or every 5% of the run.
pub fn run_scenario(sc: Scenario, progress: impl FnMut(f64)) -> Result<Report, SimError> {
    run_scenario_observed(sc, progress, |_| {})
}

/// [`run_scenario`], also handing every control period's [`StepReport`] (each policy's plan and
/// what applying the merged plan did) to `on_step`.
pub fn run_scenario_observed(
    sc: Scenario,
    progress: impl FnMut(f64),
    on_step: impl FnMut(&StepReport),
) -> Result<Report, SimError> {
    refuse_irqbalance(&sc)?;
    drive(sc, progress, on_step, None).map(|(r, _)| r)
}

/// irqbalance is a real program: it runs against the exported tree, never inside the twin.
fn refuse_irqbalance(sc: &Scenario) -> Result<(), SimError> {
    if sc.placement.policy == PlacementPolicy::Irqbalance {
        return Err(SimError::IrqbalanceOutside);
    }
    Ok(())
}

/// Something that looks at the machine every `period_ns` of simulated time (from the start,
/// warm-up included), as a sampler on a real machine would: `irqpilot sim --report` and
/// `--record` read [`SimPlatform`] snapshots through it.
pub struct Sampling<'a> {
    /// Simulated time between two looks, ns.
    pub period_ns: u64,
    /// Called at time 0 and then every period until the end; an error ends the run with it
    /// (the caller's own failure: [`SimError::Sampling`]).
    pub look: &'a mut dyn FnMut(&mut SimPlatform) -> Result<(), SimError>,
}

impl std::fmt::Debug for Sampling<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sampling")
            .field("period_ns", &self.period_ns)
            .finish_non_exhaustive()
    }
}

/// [`run_scenario_observed`] with a [`Sampling`] looking at the machine as it runs.
pub fn run_scenario_sampled(
    sc: Scenario,
    progress: impl FnMut(f64),
    on_step: impl FnMut(&StepReport),
    sampling: Sampling<'_>,
) -> Result<Report, SimError> {
    refuse_irqbalance(&sc)?;
    drive_sampled(sc, progress, on_step, None, Some(sampling)).map(|(r, _)| r)
}

/// [`run_scenario`] with the machine exported as a live tree under `root` (see
/// [`crate::export`]): outside tools may read it and write affinities while it runs. Returns
/// the report and every outside write with its outcome.
pub fn run_scenario_exported(
    sc: Scenario,
    root: &Path,
    opts: ExportOptions,
    progress: impl FnMut(f64),
) -> Result<(Report, Vec<OutsideWrite>), SimError> {
    let (report, export) = drive(sc, progress, |_| {}, Some((root, opts)))?;
    Ok((report, export.map(|e| e.writes).unwrap_or_default()))
}

fn drive(
    sc: Scenario,
    progress: impl FnMut(f64),
    on_step: impl FnMut(&StepReport),
    export_to: Option<(&Path, ExportOptions)>,
) -> Result<(Report, Option<TreeExport>), SimError> {
    drive_sampled(sc, progress, on_step, export_to, None)
}

fn drive_sampled(
    sc: Scenario,
    mut progress: impl FnMut(f64),
    mut on_step: impl FnMut(&StepReport),
    export_to: Option<(&Path, ExportOptions)>,
    mut sampling: Option<Sampling<'_>>,
) -> Result<(Report, Option<TreeExport>), SimError> {
    let policy = sc.placement.policy;
    let mut moderator = sc.moderator.clone().map(GlobalModerator::new);
    let moderator_period = moderator
        .as_ref()
        .map(|m| m.config().period_ms.max(1) * 1_000_000);
    let mut irqpilot = Irqpilot::of(&sc)?;
    let has_placer = irqpilot.is_some();
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
    if let Some((_, applied)) = irqpilot.as_ref().and_then(|i| i.isolate(&mut platform)) {
        log.record(&applied);
    }
    let mut export = match export_to {
        Some((root, opts)) => Some(TreeExport::create(&mut platform, root, opts)?),
        None => None,
    };
    let mut policies: Vec<&mut dyn Policy> = Vec::new();
    if let Some(m) = moderator.as_mut() {
        policies.push(m);
    }
    if let Some(p) = irqpilot.as_mut() {
        policies.push(&mut p.policy);
    }
    let sample_step = sampling.as_ref().map(|s| s.period_ns.max(1));
    let mut next_sample = sample_step.map_or(u64::MAX, |_| 0);
    if policies.is_empty() && rotation.is_none() && export.is_none() {
        let step = (end / 20).max(1);
        let mut next_progress = step.min(end);
        let mut t = 0;
        loop {
            if let (Some(s), Some(dt)) = (sampling.as_mut(), sample_step) {
                if t == next_sample {
                    (s.look)(&mut platform)?;
                    next_sample = t + dt;
                }
            }
            if t >= end {
                break;
            }
            t = next_progress.min(next_sample).min(end);
            platform.sleep_until(t);
            if t == next_progress || t == end {
                progress(t as f64 / end as f64);
                next_progress = (t + step).min(end);
            }
        }
    } else {
        let mut controller = if policies.is_empty() {
            None
        } else {
            Some(Controller::new(&mut platform)?)
        };
        // The shortest period any policy wants (the moderator's is fixed).
        let period = |policies: &[&mut dyn Policy]| {
            let wanted = next_interval_ns(policies, DEFAULT_PERIOD_NS);
            moderator_period.map_or(wanted, |m| m.min(wanted)).max(1)
        };
        // A moderator's daemon is running when the load arrives (its first period ends as the
        // load starts): it takes the knobs over before the first packet, as a service started at
        // boot does, instead of leaving 10 ms of load at the driver's default, which parted its
        // run from `none`'s even where it then holds nothing back.
        let mut next_step = if moderator_period.is_some() {
            0
        } else {
            period(&policies)
        };
        let mut next_rotation = rotation.as_ref().map_or(u64::MAX, Rotation::interval_ns);
        let export_step = export.as_ref().map(|e| e.options().step_ns.max(1));
        let mut next_export = export_step.unwrap_or(u64::MAX);
        let mut next_progress = (end / 20).max(1);
        loop {
            let now = platform.sim().now().ns();
            if let (Some(s), Some(dt)) = (sampling.as_mut(), sample_step) {
                if now == next_sample {
                    (s.look)(&mut platform)?;
                    next_sample = now + dt;
                }
            }
            if now >= end {
                break;
            }
            let step_at = if controller.is_some() {
                next_step.min(end)
            } else {
                u64::MAX
            };
            let export_at = next_export.min(end);
            let t = step_at
                .min(next_rotation)
                .min(export_at)
                .min(next_sample)
                .min(end);
            platform.sleep_until(t);
            let exporting = export.as_mut().filter(|_| t == export_at);
            if let Some(e) = exporting {
                let before = e.writes.len();
                e.pick_up(&mut platform)?;
                log.record_outside(&e.writes[before..]);
            }
            if let Some(r) = rotation.as_mut().filter(|_| t == next_rotation && t < end) {
                let plan = r.plan(&platform.sim().machine());
                log.record(&platform.apply(&plan));
                next_rotation = t + r.interval_ns();
            }
            if let Some(c) = controller.as_mut().filter(|_| t == step_at) {
                let report = c.step(&mut platform, &mut policies)?;
                if has_placer {
                    log.record(&report.applied);
                }
                on_step(&report);
                next_step = t + period(&policies);
            }
            if let (Some(e), Some(dt)) = (export.as_mut(), export_step) {
                if t == export_at {
                    e.refresh(&platform)?;
                    next_export = t + dt;
                }
            }
            if t >= next_progress || t == end {
                progress(t as f64 / end as f64);
                next_progress = t + (end / 20).max(1);
            }
        }
    }
    let sim = platform.into_sim();
    let mut report = sim.report();
    let isolated = crate::placement::isolation_of(&sim.sc.machine)
        .map(|iso| iso.isolated_cpus())
        .unwrap_or_default();
    // An isolated machine reports the interrupts its isolated CPUs take even with no placer:
    // that is the baseline the placers are judged against.
    if policy != PlacementPolicy::None || log.rounds > 0 || !isolated.is_empty() {
        let isolated_interrupts_per_sec = report
            .per_cpu
            .iter()
            .filter(|c| isolated.contains(irqpilot_core::CpuId(c.cpu)))
            .map(|c| c.interrupts_per_sec)
            .sum();
        report.placement = Some(PlacementReport {
            policy: policy.name().into(),
            rounds: log.rounds,
            writes: log.writes,
            migrations_total: sim.migrations,
            refused: log.refused,
            channels: log.channels,
            isolated_cpus: isolated.iter().map(|c| c.0).collect(),
            isolated_interrupts_per_sec,
        });
    }
    Ok((report, export))
}
