//! `irqpilot daemon`: the placement and moderation loop. Each period: snapshot, rates, the
//! decisions of the placement policy and of the moderators (`global-moderation`,
//! `kernel-soft-moderation`, configured by `[moderation]`; see `irqpilot moderate`), one
//! journaled apply of the merged plan ([`irqpilot_core::Controller`], the loop the twin runs
//! too); then it sleeps the period placement asks for (short after changes, long when steady),
//! or `[moderation] period_ms` when any IRQ has a NIC or NVMe moderation knob.
//!
//! * SIGHUP re-reads the configuration (a bad file is logged and the old one kept); new
//!   `[moderation]` values restart the moderators (the journal still holds every value from
//!   before irqpilot's first change).
//! * SIGTERM / SIGINT end the loop cleanly; with `--restore-on-exit` (or
//!   `[daemon] restore_on_exit`) the journal is reverted first, on every way out
//!   ([`restore::RestoreOnExit`]: an error or a panic too).
//! * It owns the root for its whole life ([`irqpilot_linux::owner`]): `apply`, `revert`,
//!   `isolate --apply` and `moderate --apply` refuse while it runs, naming its pid, and the
//!   journal on disk is the only copy of the old values.
//! * A period whose sample cannot be read (a malformed `/proc/interrupts`) is skipped and
//!   logged; failures in a row back off ([`backoff::Backoff`]) instead of ending the daemon.
//! * New IRQs are placed within about a second: the sleep checks `/proc/irq` once a second and
//!   ends early when IRQs come or go, and the controller re-reads the inventory when
//!   `/proc/interrupts` gains or loses rows.
//! * It refuses to start while irqbalance runs (a `comm` of `irqbalance` under `<root>/proc`):
//!   two owners of the same masks fight (balancing.md 4.3). `--force` or
//!   `[daemon] allow_irqbalance = true` overrides.
//!
//! Output: one line per period (JSON lines with `--format json`: `{period, at_ns, moves,
//! written, refused, next_interval_ms}`).

pub mod backoff;
pub mod restore;

use super::placement_common::{EXIT_PARTIAL, journaled, take_root};
use crate::Settings;
use crate::cli::{DaemonArgs, Format};
use crate::config::Config;
use anyhow::{Context, Result, bail};
use irqpilot_core::Machine;
use irqpilot_core::moderation::global::{GlobalModerationConfig, GlobalModerator};
use irqpilot_core::moderation::kernel_soft::KernelSoftModeration;
use irqpilot_core::moderation::knobs::Knob;
use irqpilot_core::placement::PlacementPolicy;
use irqpilot_core::{Controller, Policy};
use serde::Serialize;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

static HUP: AtomicBool = AtomicBool::new(false);
static TERM: AtomicBool = AtomicBool::new(false);

extern "C" fn on_hup(_: libc::c_int) {
    HUP.store(true, Ordering::SeqCst);
}

extern "C" fn on_term(_: libc::c_int) {
    TERM.store(true, Ordering::SeqCst);
}

/// Installs the handlers: they only set flags (async-signal-safe); the loop polls them.
fn install_signals() -> Result<()> {
    for (sig, handler) in [
        (libc::SIGHUP, on_hup as extern "C" fn(libc::c_int)),
        (libc::SIGTERM, on_term),
        (libc::SIGINT, on_term),
    ] {
        // SAFETY: a zeroed sigaction is valid; the handler is an extern "C" fn that only
        // stores to an atomic, which is async-signal-safe.
        let rc = unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = handler as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut())
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error()).context("installing signal handlers");
        }
    }
    Ok(())
}

/// The pid of a running irqbalance under `root`, if any (`proc/<pid>/comm`).
pub fn irqbalance_pid(root: &Path) -> Option<u32> {
    let dir = std::fs::read_dir(root.join("proc")).ok()?;
    let mut pids: Vec<u32> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    pids.sort_unstable();
    pids.into_iter().find(|pid| {
        std::fs::read_to_string(root.join(format!("proc/{pid}/comm")))
            .is_ok_and(|c| c.trim_end() == "irqbalance")
    })
}

/// Number of IRQs the kernel lists under `proc/irq` (one directory each).
fn irq_count(root: &Path) -> usize {
    std::fs::read_dir(root.join("proc/irq"))
        .map(|d| {
            d.filter(|e| e.as_ref().is_ok_and(|e| e.path().is_dir()))
                .count()
        })
        .unwrap_or(0)
}

/// Sleeps `ns`, waking early for a signal, or when IRQs are registered or freed (checked once
/// a second: a readdir of `/proc/irq`), so a new IRQ is placed within a second even while the
/// steady period is long.
fn nap(ns: u64, root: &Path, irqs: &mut usize) {
    let end = std::time::Instant::now() + Duration::from_nanos(ns);
    let mut next_check = std::time::Instant::now() + Duration::from_secs(1);
    while !TERM.load(Ordering::SeqCst) && !HUP.load(Ordering::SeqCst) {
        let now = std::time::Instant::now();
        if now >= end {
            break;
        }
        if now >= next_check {
            next_check = now + Duration::from_secs(1);
            let n = irq_count(root);
            if n != *irqs {
                *irqs = n;
                tracing::info!(irqs = n, "IRQs came or went: deciding now");
                break;
            }
        }
        std::thread::sleep((end - now).min(Duration::from_millis(50)));
    }
}

#[derive(Serialize)]
struct PeriodLine {
    period: u64,
    at_ns: u64,
    moves: usize,
    written: usize,
    refused: usize,
    next_interval_ms: u64,
}

/// How long to sleep before the next period: what placement asks for (1 s when it says
/// nothing), shortened to `[moderation] period_ms` while some IRQ has a NIC or NVMe moderation
/// knob for the global moderator to drive.
pub fn interval_ns(
    placement: &PlacementPolicy,
    machine: &Machine,
    moderation: &GlobalModerationConfig,
) -> u64 {
    let wanted = placement.next_interval_ns().unwrap_or(1_000_000_000);
    let moderated = machine
        .moderation
        .knobs
        .values()
        .any(|k| matches!(k, Knob::NicQueue { .. } | Knob::NvmeController { .. }));
    if moderated {
        wanted.min(moderation.period_ms.max(1).saturating_mul(1_000_000))
    } else {
        wanted
    }
}

/// Runs `irqpilot daemon`.
pub fn run(args: &DaemonArgs, settings: &Settings, config_path: Option<&Path>) -> Result<ExitCode> {
    let allow = args.force || settings.config.daemon.allow_irqbalance;
    if let Some(pid) = irqbalance_pid(&settings.root) {
        if !allow {
            bail!(
                "irqbalance is running (pid {pid}): two daemons would fight over the same masks; \
                 stop it, or pass --force"
            );
        }
        tracing::warn!(pid, "irqbalance is running; going on because told to");
    }
    let journal = args
        .journal
        .journal
        .as_deref()
        .or(settings.config.daemon.journal.as_deref());
    // Declared before the platform: on the way out the journal is restored while it is held.
    let _owner = take_root(settings, irqpilot_linux::owner::DAEMON, journal)?;
    install_signals()?;
    let mut policy = PlacementPolicy::new(super::placement_common::placement_config(settings))?;
    let mut moderation = settings.config.moderation.clone();
    let (mut global, mut kernel) = super::moderate::policies(settings);
    let restore = args.restore_on_exit || settings.config.daemon.restore_on_exit;
    let mut guard = restore::RestoreOnExit::new(journaled(settings, journal)?, restore);
    let platform = &mut guard.platform;
    let mut controller = Controller::new(platform)?;
    let limit = if args.once { Some(1) } else { args.iterations };
    let mut backoff = backoff::Backoff::default();
    let mut skipped = 0u64;
    let mut out = std::io::stdout().lock();
    let mut refused_total = 0usize;
    let mut period = 0u64;
    let mut irqs = irq_count(&settings.root);
    while limit.is_none_or(|n| period < n) {
        let wait = backoff.wait_ns(interval_ns(&policy, controller.machine(), &moderation));
        nap(wait, &settings.root, &mut irqs);
        if TERM.load(Ordering::SeqCst) {
            break;
        }
        if HUP.swap(false, Ordering::SeqCst) {
            match Config::load(config_path).and_then(|c| {
                policy.set_config(c.placement)?;
                if c.moderation != moderation {
                    moderation = c.moderation;
                    global = GlobalModerator::new(moderation.clone());
                    kernel = KernelSoftModeration::new(moderation.clone());
                }
                Ok(())
            }) {
                Ok(()) => tracing::info!("configuration reloaded"),
                Err(e) => {
                    tracing::error!(error = %crate::error_text(&e), "reload failed; keeping the old configuration")
                }
            }
            continue;
        }
        period += 1;
        let step = match controller.step(platform, &mut [&mut policy, &mut global, &mut kernel]) {
            Ok(step) => step,
            Err(e) => {
                backoff.failed(&e, interval_ns(&policy, controller.machine(), &moderation));
                skipped += 1;
                continue;
            }
        };
        backoff.succeeded();
        let moves = step.plans.iter().map(|(_, p)| p.actions.len()).sum();
        for (name, plan) in &step.plans {
            for n in &plan.notes {
                tracing::info!(policy = *name, note = n.as_str(), "decided");
            }
        }
        for o in &step.applied.outcomes {
            if let Err(e) = &o.result {
                tracing::warn!(action = o.action.describe(), error = %e, "refused");
            }
        }
        refused_total += step.applied.failures();
        let line = PeriodLine {
            period,
            at_ns: step.at.0,
            moves,
            written: step.applied.written(),
            refused: step.applied.failures(),
            next_interval_ms: interval_ns(&policy, controller.machine(), &moderation) / 1_000_000,
        };
        match settings.format {
            Format::Json => {
                serde_json::to_writer(&mut out, &line)?;
                out.write_all(b"\n")?;
            }
            Format::Table => writeln!(
                out,
                "period {}: {} changes, {} written, {} refused; next in {} ms",
                line.period, line.moves, line.written, line.refused, line.next_interval_ms
            )?,
        }
        out.flush()?;
    }
    if let Some(rep) = guard.finish()? {
        writeln!(
            out,
            "restored {} values from the journal ({} already so, {} gone, {} kept)",
            rep.restored(),
            rep.already(),
            rep.gone(),
            rep.kept
        )?;
        if rep.partial() {
            return Ok(ExitCode::from(EXIT_PARTIAL));
        }
    }
    Ok(if (refused_total > 0 || skipped > 0) && limit.is_some() {
        // A bounded run (tests, --once) says "partial" like apply does.
        ExitCode::from(EXIT_PARTIAL)
    } else {
        ExitCode::SUCCESS
    })
}
