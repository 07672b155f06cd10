//! `irqpilot plan`: what the placement policy would do, without writing anything.
//!
//! JSON (`--format json`), stable: an object with `moves` (each `{irq, from, to, mask_before,
//! load, reason}`, CPU sets as cpulists), `default_affinity`, `per_cpu_load_before` and
//! `per_cpu_load_after` (each `{cpu, load, vectors, allowed}`, load in CPU shares),
//! `imbalance_before`/`imbalance_after` (max/mean load over the allowed CPUs), `basis`,
//! `allowed`, `heavy`, `held`, `stuck` and `notes`.

use super::placement_common::{platform, sample};
use crate::Settings;
use crate::cli::{Format, PlanArgs};
use anyhow::Result;
use irqpilot_core::placement::{
    CpuLoad, Decision, HeavyIrq, Held, Learned, LoadBasis, Move, decide, irq_list,
};
use irqpilot_core::{Action, CpuSet, IrqNum, Machine, MonoNs, PolicyInput, Rates};
use serde::Serialize;
use std::fmt::Write as _;
use std::io::Write;
use std::process::ExitCode;

/// The JSON document of `irqpilot plan`.
#[derive(Debug, Serialize)]
pub struct PlanReport {
    /// The root read.
    pub root: String,
    /// Where loads came from (`null` without a sample).
    pub basis: Option<LoadBasis>,
    /// CPUs IRQs may use.
    pub allowed: CpuSet,
    /// Affinity writes.
    pub moves: Vec<Move>,
    /// New `/proc/irq/default_smp_affinity`, when it changes.
    pub default_affinity: Option<CpuSet>,
    /// Per online CPU, before.
    pub per_cpu_load_before: Vec<CpuLoad>,
    /// Per online CPU, after.
    pub per_cpu_load_after: Vec<CpuLoad>,
    /// max/mean load over the allowed CPUs, before.
    pub imbalance_before: Option<f64>,
    /// The same, after.
    pub imbalance_after: Option<f64>,
    /// Heavy IRQs (balanced), heaviest first.
    pub heavy: Vec<HeavyIrq>,
    /// IRQs left alone and why.
    pub held: Vec<Held>,
    /// IRQs that must move but have nowhere to go.
    pub stuck: Vec<IrqNum>,
    /// Facts.
    pub notes: Vec<String>,
}

impl PlanReport {
    /// Builds the report from a decision.
    pub fn new(root: &str, d: Decision) -> PlanReport {
        let default_affinity = d.plan.actions.iter().find_map(|a| match a {
            Action::SetDefaultAffinity { cpus } => Some(cpus.clone()),
            _ => None,
        });
        PlanReport {
            root: root.to_string(),
            basis: d.basis,
            allowed: d.allowed,
            moves: d.moves,
            default_affinity,
            per_cpu_load_before: d.per_cpu_load_before,
            per_cpu_load_after: d.per_cpu_load_after,
            imbalance_before: d.imbalance_before,
            imbalance_after: d.imbalance_after,
            heavy: d.heavy,
            held: d.held,
            stuck: d.stuck,
            notes: d.plan.notes,
        }
    }
}

/// The decision the placement policy makes on `machine` with `rates` and the configuration.
pub fn decide_now(settings: &Settings, machine: &Machine, rates: Option<&Rates>) -> Decision {
    decide(
        &super::placement_common::placement_config(settings),
        &Learned::default(),
        &PolicyInput {
            machine,
            rates,
            now: MonoNs(0),
        },
    )
}

/// Runs `irqpilot plan`.
pub fn run(args: &PlanArgs, settings: &Settings) -> Result<ExitCode> {
    let mut p = platform(settings)?;
    let (machine, rates) = sample(&mut p, args.sample)?;
    let d = decide_now(settings, &machine, rates.as_ref());
    let report = PlanReport::new(&settings.root.display().to_string(), d);
    let mut out = std::io::stdout().lock();
    match settings.format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut out, &report)?;
            out.write_all(b"\n")?;
        }
        Format::Table => out.write_all(render(&report, &machine).as_bytes())?,
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

fn opt(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_string(), |x| format!("{x:.2}"))
}

/// The table form.
pub fn render(r: &PlanReport, machine: &Machine) -> String {
    let mut s = String::new();
    let basis = r
        .basis
        .map_or("no sample".to_string(), |b| format!("{b:?}").to_lowercase());
    let _ = writeln!(
        s,
        "placement plan for {} (load basis: {basis}; allowed CPUs {})",
        r.root, r.allowed
    );
    let migrations = r.moves.iter().filter(|m| m.from != m.to).count();
    if r.moves.is_empty() {
        let _ = writeln!(s, "no affinity changes");
    } else {
        let _ = writeln!(
            s,
            "{} affinity writes, {migrations} migrations:",
            r.moves.len()
        );
        let _ = writeln!(
            s,
            "  {:>5}  {:>5}  {:>5}  {:>6}  {:<10}  NAME",
            "IRQ", "FROM", "TO", "LOAD", "REASON"
        );
        for m in &r.moves {
            let name = machine
                .irqs
                .get(&m.irq)
                .map(|i| i.name())
                .unwrap_or_default();
            let reason = serde_json::to_value(m.reason)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            let _ = writeln!(
                s,
                "  {:>5}  {:>5}  {:>5}  {:>6.3}  {:<10}  {name}",
                m.irq.0,
                m.from.to_list_string(),
                m.to.to_list_string(),
                m.load,
                reason
            );
        }
    }
    if let Some(d) = &r.default_affinity {
        let _ = writeln!(s, "default_smp_affinity -> {d}");
    }
    let _ = writeln!(
        s,
        "imbalance (max/mean load over allowed CPUs): {} -> {}",
        opt(r.imbalance_before),
        opt(r.imbalance_after)
    );
    let changed: Vec<(&CpuLoad, &CpuLoad)> = r
        .per_cpu_load_before
        .iter()
        .zip(&r.per_cpu_load_after)
        .filter(|(a, b)| (a.load - b.load).abs() > 1e-9 || a.vectors != b.vectors)
        .collect();
    if !changed.is_empty() {
        let _ = writeln!(s, "CPUs that change ({}):", changed.len());
        let _ = writeln!(
            s,
            "  {:>4}  {:>7}  {:>7}  {:>7}  {:>7}",
            "CPU", "LOAD", "AFTER", "VECTORS", "AFTER"
        );
        for (a, b) in changed {
            let _ = writeln!(
                s,
                "  {:>4}  {:>7.3}  {:>7.3}  {:>7}  {:>7}",
                a.cpu.0, a.load, b.load, a.vectors, b.vectors
            );
        }
    }
    if !r.stuck.is_empty() {
        let _ = writeln!(
            s,
            "stuck (no free vector anywhere allowed): IRQ {}",
            irq_list(&r.stuck)
        );
    }
    for n in &r.notes {
        let _ = writeln!(s, "note: {n}");
    }
    s
}
