//! Running a scenario, with irqpilot's policies in the loop when the scenario asks for them.
//!
//! Policies run exactly as in the daemon: `irqpilot_core::Controller::step` on a [`SimPlatform`]
//! every control period, the platform's `sleep` advancing simulated time.

use crate::config::Scenario;
use crate::report::Report;
use crate::sim::Sim;
use crate::sim_platform::SimPlatform;
use irqpilot_core::moderation::global::GlobalModerator;
use irqpilot_core::{Controller, Policy};

/// Runs a scenario to its end and reports. `progress` is called with the fraction done (0-1)
/// at each control period or every 5% of the run.
pub fn run_scenario(sc: Scenario, mut progress: impl FnMut(f64)) -> Result<Report, String> {
    let mut moderator = sc.moderator.clone().map(GlobalModerator::new);
    let period_ms = moderator
        .as_ref()
        .map_or(0, |m| m.config().period_ms.max(1));
    let sim = Sim::new(sc)?;
    let end = sim.end().ns();
    let mut platform = SimPlatform::new(sim);
    let mut policies: Vec<&mut dyn Policy> = Vec::new();
    if let Some(m) = moderator.as_mut() {
        policies.push(m);
    }
    if policies.is_empty() {
        let step = (end / 20).max(1);
        let mut t = 0;
        while t < end {
            t = (t + step).min(end);
            platform.sleep_until(t);
            progress(t as f64 / end as f64);
        }
    } else {
        let mut controller = Controller::new(&mut platform).map_err(|e| e.to_string())?;
        let period = period_ms * 1_000_000;
        while platform.sim().now().ns() < end {
            irqpilot_core::Platform::sleep(&mut platform, period);
            controller
                .step(&mut platform, &mut policies)
                .map_err(|e| e.to_string())?;
            progress(platform.sim().now().ns() as f64 / end as f64);
        }
    }
    Ok(platform.into_sim().report())
}
