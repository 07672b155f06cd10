//! `irqpilot apply`: one placement, written. Every old value is journaled before anything is
//! written (`revert` restores them); each written `smp_affinity_list` is re-read, and
//! `effective_affinity_list` read back. Exit 0: all applied; 3: some refused, the rest applied.
//!
//! JSON: `{journal, outcomes: [{action, old, result, effective}], written, unchanged, failed,
//! notes}`; `result` is `"written"`, `"unchanged"` or the refusal (`vanished`,
//! `permission-denied`, `managed`, `no-vector-space`, `invalid`, `unsupported`, ...).

use super::placement_common::{EXIT_PARTIAL, journaled, platform, sample, take_root};
use super::plan::decide_now;
use crate::Settings;
use crate::cli::{ApplyArgs, Format};
use anyhow::Result;
use irqpilot_core::{Action, ApplyReport, CpuSet, Platform};
use irqpilot_linux::Root;
use irqpilot_linux::format::procirq;
use irqpilot_linux::root::Backing;
use serde::Serialize;
use std::fmt::Write as _;
use std::io::Write;
use std::process::ExitCode;

/// One action's outcome, for output.
#[derive(Debug, Serialize)]
pub struct OutcomeLine {
    /// What was to be done.
    pub action: Action,
    /// The value replaced.
    pub old: Option<String>,
    /// `written`, `unchanged`, or the refusal's kind.
    pub result: String,
    /// The refusal in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// `effective_affinity_list` read back after a written affinity (a kernel's or the twin's;
    /// a fixture simulates none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effective: Option<CpuSet>,
    /// Why the effective CPUs are not inside the new mask yet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effective_note: Option<String>,
}

/// What a fixture cannot say.
pub const FIXTURE_EFFECTIVE: &str = "fixture: effective affinity not simulated";

/// The JSON document of `apply` (and of the apply step of `isolate --apply`).
#[derive(Debug, Serialize)]
pub struct ApplyOutput {
    /// The journal file.
    pub journal: String,
    /// Per action.
    pub outcomes: Vec<OutcomeLine>,
    /// Actions that wrote something.
    pub written: usize,
    /// Actions already in force.
    pub unchanged: usize,
    /// Refused actions.
    pub failed: usize,
    /// The policy's facts.
    pub notes: Vec<String>,
}

/// Turns a report into output lines, reading effective affinities back under `root` (where
/// a kernel or the twin keeps them).
pub fn outcome_lines(root: &Root, report: &ApplyReport) -> Vec<OutcomeLine> {
    let simulated = root.backing() != Backing::Fixture;
    report
        .outcomes
        .iter()
        .map(|o| {
            let (result, error) = match &o.result {
                Ok(true) => ("written".to_string(), None),
                Ok(false) => ("unchanged".to_string(), None),
                Err(e) => {
                    let kind = serde_json::to_value(e)
                        .ok()
                        .and_then(|v| v.get("kind").and_then(|k| k.as_str().map(str::to_string)))
                        .unwrap_or_else(|| "error".to_string());
                    (kind, Some(e.to_string()))
                }
            };
            let effective = match (&o.action, &o.result) {
                (Action::SetAffinity { irq, .. }, Ok(_)) if simulated => root
                    .read_optional(&format!(
                        "proc/irq/{irq}/{}",
                        procirq::EFFECTIVE_AFFINITY_LIST
                    ))
                    .ok()
                    .flatten()
                    .and_then(|t| procirq::parse_affinity_list(&t).ok()),
                _ => None,
            };
            let effective_note = match (&o.action, &effective) {
                (Action::SetAffinity { cpus, .. }, Some(eff)) if !eff.is_subset(cpus) => {
                    Some("pending: the kernel moves it when the IRQ next fires".to_string())
                }
                _ => None,
            };
            OutcomeLine {
                action: o.action.clone(),
                old: o.old.clone(),
                result,
                error,
                effective,
                effective_note,
            }
        })
        .collect()
}

/// Prints an apply result; returns the exit code it calls for.
pub fn print(settings: &Settings, out: &ApplyOutput) -> Result<ExitCode> {
    let mut w = std::io::stdout().lock();
    match settings.format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut w, out)?;
            w.write_all(b"\n")?;
        }
        Format::Table => {
            let mut s = render_outcomes(&out.outcomes, "");
            let _ = writeln!(
                s,
                "{} written, {} unchanged, {} refused; old values in {}",
                out.written, out.unchanged, out.failed, out.journal
            );
            for n in &out.notes {
                let _ = writeln!(s, "note: {n}");
            }
            w.write_all(s.as_bytes())?;
        }
    }
    w.flush()?;
    Ok(if out.failed > 0 {
        ExitCode::from(EXIT_PARTIAL)
    } else {
        ExitCode::SUCCESS
    })
}

/// One line per outcome: result, action, effective CPUs read back, the refusal.
pub fn render_outcomes(outcomes: &[OutcomeLine], indent: &str) -> String {
    let mut s = String::new();
    for o in outcomes {
        let eff = match (&o.effective, &o.effective_note) {
            (Some(e), Some(n)) => format!(" (effective {e}; {n})"),
            (Some(e), None) => format!(" (effective {e})"),
            _ => String::new(),
        };
        let err = o
            .error
            .as_ref()
            .map(|e| format!(": {e}"))
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "{indent}{:<10} {}{eff}{err}",
            o.result,
            o.action.describe()
        );
    }
    s
}

/// Builds the output of one apply.
pub fn output(
    root: &Root,
    journal: &str,
    report: &ApplyReport,
    mut notes: Vec<String>,
) -> ApplyOutput {
    let outcomes = outcome_lines(root, report);
    let affinity_written = report
        .outcomes
        .iter()
        .any(|o| matches!(o.action, Action::SetAffinity { .. }) && o.result.is_ok());
    if affinity_written && root.backing() == Backing::Fixture {
        notes.push(FIXTURE_EFFECTIVE.to_string());
    }
    ApplyOutput {
        journal: journal.to_string(),
        written: report.written(),
        unchanged: report
            .outcomes
            .iter()
            .filter(|o| o.result == Ok(false))
            .count(),
        failed: report.failures(),
        outcomes,
        notes,
    }
}

/// Runs `irqpilot apply`.
pub fn run(args: &ApplyArgs, settings: &Settings) -> Result<ExitCode> {
    let mut linux = platform(settings)?;
    // Held from before the machine is read until the journal and the knobs are written.
    let _owner = take_root(settings, "apply", args.journal.journal.as_deref())?;
    let (machine, rates) = sample(&mut linux, args.sample)?;
    let d = decide_now(settings, &machine, rates.as_ref());
    let mut p = journaled(settings, args.journal.journal.as_deref())?;
    let report = if d.plan.is_empty() {
        ApplyReport::default()
    } else {
        p.apply(&d.plan)
    };
    let journal = p.journal().path().display().to_string();
    let out = output(&Root::new(&settings.root), &journal, &report, d.plan.notes);
    print(settings, &out)
}
