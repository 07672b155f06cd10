//! `irqpilot bench notify`: the user-space notification latency benchmark (`irqpilot-notify`):
//! ping-pong round trips for every mechanism (shared-memory spin, futex, eventfd blocking and
//! polled, pipe, socketpair, signals, io_uring MSG_RING, hybrid spin-then-futex, user interrupts
//! where present) and every placement the topology offers, back to back and with idle gaps.
//!
//! JSON (a contract): `results`, one object per mechanism and placement with `mechanism`,
//! `placement`, `available` (+ `reason` when false), `rtt_ns` {`p50`, `p99`, `p999`, `max`, ...}
//! and `cpu_ns_per_rtt`; plus the environment and the targets' verdicts.

use crate::Settings;
use crate::cli::{BenchArgs, BenchWhat, Format, NotifyArgs};
use crate::progress::Progress;
use anyhow::{Context, Result, bail};
use irqpilot_core::Platform;
use irqpilot_linux::LinuxPlatform;
use irqpilot_notify::{BenchConfig, Mode, parse_gap, run_with_progress};
use std::io::Write;
use std::process::ExitCode;

/// Runs `irqpilot bench ...`.
pub fn run(args: &BenchArgs, settings: &Settings) -> Result<ExitCode> {
    match &args.what {
        BenchWhat::Notify(a) => notify(a, settings),
    }
}

fn list<T: std::str::FromStr>(flag: &str, items: &[String]) -> Result<Vec<T>>
where
    T::Err: std::fmt::Display,
{
    items
        .iter()
        .map(|x| {
            x.trim()
                .parse::<T>()
                .map_err(|e| crate::UsageError(format!("{flag} {x:?}: {e}")).into())
        })
        .collect()
}

/// The benchmark configuration from the flags (defaults: a run under a minute).
pub fn config(a: &NotifyArgs) -> Result<BenchConfig> {
    let mut c = match a.scale {
        Some(f) if f > 0.0 && f.is_finite() => BenchConfig::scaled(f),
        Some(f) => return crate::usage(format!("--scale {f}: must be a positive number")),
        None => BenchConfig::default(),
    };
    if let Some(n) = a.iterations {
        c.iterations = n;
    }
    if let Some(n) = a.warmup {
        c.warmup = n;
    }
    if let Some(n) = a.gap_iterations {
        c.gap_iterations = n;
    }
    if let Some(n) = a.rounds {
        c.rounds = n;
    }
    if let Some(g) = &a.gaps {
        c.gaps = if g.len() == 1 && g[0] == "none" {
            Vec::new()
        } else {
            g.iter()
                .map(|s| parse_gap(s).with_context(|| format!("--gaps {s:?}")))
                .collect::<Result<_>>()?
        };
    }
    if let Some(d) = &a.duration {
        c.time_budget = if d == "none" {
            None
        } else {
            let secs: f64 = d
                .parse()
                .with_context(|| format!("--duration {d:?}: seconds or none"))?;
            Some(std::time::Duration::from_secs_f64(secs.max(0.001)))
        };
    }
    if !a.mechanisms.is_empty() {
        c.mechanisms = list("--mechanisms", &a.mechanisms)?;
    }
    if !a.placements.is_empty() {
        c.placements = list("--placements", &a.placements)?;
    }
    if a.processes {
        c.mode = Mode::Processes;
    }
    if let Some(n) = a.max_spin_ns {
        c.hybrid.max_spin_ns = n;
    }
    Ok(c)
}

fn notify(a: &NotifyArgs, settings: &Settings) -> Result<ExitCode> {
    let cfg = config(a)?;
    // Threads are pinned to this machine's CPUs, so its topology decides the placements; a
    // --root tree only makes sense to rehearse placement selection.
    let mut platform = LinuxPlatform::new(irqpilot_linux::Root::new(&settings.root));
    let topology = platform.machine()?.topology;
    if topology.online.is_empty() {
        bail!("no online CPUs found under {}", settings.root.display());
    }
    // A bar on a terminal's stderr; the rows as they finish go above it (not in JSON or
    // Markdown mode, whose output is for files).
    let quiet = settings.format == Format::Json || a.markdown;
    let progress = Progress::counted(1, "bench notify");
    let report = run_with_progress(&cfg, &topology, |row, at| {
        progress.set_length(at.planned as u64);
        progress.set(at.done as u64);
        if quiet {
            return;
        }
        let what = match (&row.rtt_ns, &row.error) {
            (Some(r), _) => format!("p50 {} ns, p99 {} ns", r.p50, r.p99),
            (None, Some(e)) => format!("failed: {e}"),
            (None, None) => "unavailable".to_string(),
        };
        progress.suspend(|| {
            eprintln!(
                "  {:<20} {:<13} gap {:>9} ns: {what}",
                row.mechanism.name(),
                row.placement.name(),
                row.gap_ns
            );
        });
    });
    progress.finish();
    if let Some(path) = &a.save_json {
        let json = serde_json::to_string_pretty(&report)?;
        std::fs::write(path, json).with_context(|| format!("writing {}", path.display()))?;
    }
    let mut out = std::io::stdout().lock();
    if settings.format == Format::Json {
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    } else if a.markdown {
        writeln!(out, "{}", report.render_markdown())?;
    } else {
        writeln!(out, "{}", report.render_table())?;
    }
    Ok(ExitCode::SUCCESS)
}
