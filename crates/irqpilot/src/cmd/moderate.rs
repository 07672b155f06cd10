//! `irqpilot moderate --plan | --apply [--sample 1s]`: what the moderators would change now,
//! and why; with `--apply`, change it.
//!
//! One control period of the daemon's loop, run once: the inventory with every IRQ's moderation
//! knob (`Machine::moderation`), two snapshots `--sample` apart, the rates between them, and the
//! decisions of the moderation policies configured by `[moderation]`:
//!
//! * `global-moderation` ([`GlobalModerator`]): NIC coalescing and NVMe interrupt coalescing so
//!   that the platform-wide device interrupt rate and each CPU's hardirq time stay under target;
//! * `kernel-soft-moderation` ([`KernelSoftModeration`]): on a kernel with GSIM, the same
//!   targets written into the kernel and GSIM enabled on the device IRQs that offer it.
//!
//! Each action is shown with the IRQs it acts on and their measured rates. `--apply` then
//! carries the plan out through the apply journal (every old value recorded before it is
//! written, so `irqpilot revert` restores it; [`irqpilot_linux::journal`]), writing only what
//! differs and reading back; every outcome is printed. A refused action does not stop the
//! others; the exit status is 3 when some were refused (as for `apply`).
//!
//! `--format json` prints one [`ModerateReport`] object; its field names are a stable interface.

mod report;

pub use report::*;

use super::placement_common::{EXIT_PARTIAL, journaled, platform, take_root};
use crate::Settings;
use crate::cli::{Format, ModerateArgs};
use anyhow::Result;
use irqpilot_core::moderation::global::GlobalModerator;
use irqpilot_core::moderation::kernel_soft::KernelSoftModeration;
use irqpilot_core::{ApplyReport, Machine, Plan, Platform, Policy, PolicyInput, Rates};
use std::io::Write;
use std::process::ExitCode;

/// What one period of moderation decided.
#[derive(Debug)]
pub struct Decision {
    /// The inventory, knobs included.
    pub machine: Machine,
    /// Rates over the sample; `None` with `--sample 0`.
    pub rates: Option<Rates>,
    /// Each policy's plan, in policy order.
    pub plans: Vec<(&'static str, Plan)>,
}

impl Decision {
    /// Every policy's actions and notes, in order: what `--apply` applies.
    pub fn merged(&self) -> Plan {
        let mut plan = Plan::default();
        for (_, p) in &self.plans {
            plan.actions.extend(p.actions.iter().cloned());
            plan.notes.extend(p.notes.iter().cloned());
        }
        plan
    }
}

/// Reads the inventory, measures over `sample_ns` (no rates when 0) and asks every policy.
/// Writes nothing.
pub fn decide<P: Platform + ?Sized>(
    platform: &mut P,
    policies: &mut [&mut dyn Policy],
    sample_ns: u64,
) -> Result<Decision> {
    let machine = platform.machine()?;
    let (rates, now) = if sample_ns == 0 {
        (None, platform.now())
    } else {
        let first = platform.snapshot()?;
        platform.sleep(sample_ns);
        let second = platform.snapshot()?;
        (Some(Rates::between(&first, &second)?), second.taken_at)
    };
    let input = PolicyInput {
        machine: &machine,
        rates: rates.as_ref(),
        now,
    };
    let plans = policies
        .iter_mut()
        .map(|p| (p.name(), p.decide(&input)))
        .collect();
    Ok(Decision {
        machine,
        rates,
        plans,
    })
}

/// The moderation policies `[moderation]` configures, in the order the daemon runs them.
pub fn policies(settings: &Settings) -> (GlobalModerator, KernelSoftModeration) {
    let cfg = settings.config.moderation.clone();
    (
        GlobalModerator::new(cfg.clone()),
        KernelSoftModeration::new(cfg),
    )
}

/// Runs `irqpilot moderate`: `--plan` on the Linux platform, `--apply` on the same platform
/// behind the apply journal.
pub fn run(args: &ModerateArgs, settings: &Settings) -> Result<ExitCode> {
    if args.apply {
        let mut p = journaled(settings, args.journal.journal.as_deref())?;
        let _owner = take_root(
            settings,
            "moderate --apply",
            args.journal.journal.as_deref(),
        )?;
        run_on(&mut p, args, settings)
    } else {
        run_on(&mut platform(settings)?, args, settings)
    }
}

/// [`run`] on any platform (tests drive it with emulated devices).
pub fn run_on<P: Platform + ?Sized>(
    platform: &mut P,
    args: &ModerateArgs,
    settings: &Settings,
) -> Result<ExitCode> {
    let (mut global, mut kernel) = policies(settings);
    let sample_ns = u64::try_from(args.sample.as_nanos()).unwrap_or(u64::MAX);
    let decision = decide(platform, &mut [&mut global, &mut kernel], sample_ns)?;
    let applied: Option<ApplyReport> = if args.apply {
        let plan = decision.merged();
        Some(if plan.is_empty() {
            ApplyReport::default()
        } else {
            platform.apply(&plan)
        })
    } else {
        None
    };
    let report = ModerateReport::build(
        &settings.root.display().to_string(),
        &settings.config.moderation,
        &decision,
        applied.as_ref(),
    );
    let mut out = std::io::stdout().lock();
    match settings.format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut out, &report)?;
            out.write_all(b"\n")?;
        }
        Format::Table => out.write_all(report.render().as_bytes())?,
    }
    out.flush()?;
    let refused = applied.as_ref().map_or(0, ApplyReport::failures);
    Ok(if refused > 0 {
        ExitCode::from(EXIT_PARTIAL)
    } else {
        ExitCode::SUCCESS
    })
}
