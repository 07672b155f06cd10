//! `irqpilot daemon`: the placement and moderation loop. Each period: snapshot, rates, the
//! decisions of the placement policy and of the moderators (`global-moderation`,
//! `kernel-soft-moderation`, configured by `[moderation]`; see `irqpilot moderate`), one
//! journaled apply of the merged plan ([`irqpilot_core::Controller`], the loop the twin runs
//! too); then it sleeps the period placement asks for (short after changes, long when steady),
//! or `[moderation] period_ms` when any IRQ has a NIC or NVMe moderation knob.
//!
//! * Signals arrive through signal-hook on the service's event channel ([`crate::service`]):
//!   SIGHUP re-reads the configuration (a bad file is logged and the old one kept) without
//!   moving the next period's deadline; new `[moderation]` values restart the moderators (the
//!   journal still holds every value from before irqpilot's first change).
//! * SIGTERM / SIGINT end the loop cleanly; with `--restore-on-exit` (or
//!   `[daemon] restore_on_exit`) the journal is reverted first, on every way out
//!   ([`restore::RestoreOnExit`]: an error or a panic too).
//! * It owns the root for its whole life ([`irqpilot_linux::owner`]): `apply`, `revert`,
//!   `isolate --apply` and `moderate --apply` refuse while it runs, naming its pid, and the
//!   journal on disk is the only copy of the old values.
//! * A period whose sample cannot be read (a malformed `/proc/interrupts`) is skipped and
//!   logged; failures in a row back off ([`backoff::Backoff`]) instead of ending the daemon.
//! * New IRQs are placed within about a second: the wait checks `/proc/irq` once a second and
//!   ends early when IRQs come or go, and the controller re-reads the inventory when
//!   `/proc/interrupts` gains or loses rows.
//! * Under systemd (`Type=notify`) it says `READY=1` once the first snapshot is taken and the
//!   metrics endpoint is bound, `RELOADING=1`/`READY=1` around reloads, `STOPPING=1`, and pings
//!   the watchdog (`WatchdogSec=`) from the loop itself, so a hung loop gets restarted.
//! * `--metrics ADDR` serves Prometheus metrics ([`crate::metrics`]); if that endpoint dies the
//!   daemon logs it and goes on.
//! * At start-up it keeps only the capabilities the machine calls for
//!   ([`irqpilot_linux::privileges`]).
//! * It refuses to start while irqbalance runs (a `comm` of `irqbalance` under `<root>/proc`):
//!   two owners of the same masks fight (balancing.md 4.3). `--force` or
//!   `[daemon] allow_irqbalance = true` overrides.
//!
//! Logs (see [`crate::logging`]): at default verbosity a start-up summary, every change made
//! and every refusal, one summary line a minute, reloads, IRQs coming or going, errors. One
//! line per period only with `-v`; `--format json` prints each period as a JSON line on stdout
//! (`{period, at_ns, moves, written, refused, next_interval_ms}`).

mod apps;
pub mod backoff;
pub mod restore;

use super::placement_common::{EXIT_PARTIAL, journaled, take_root};
use crate::Settings;
use crate::cli::{DaemonArgs, Format};
use crate::config::Config;
use crate::metrics::{self, DaemonStats, Endpoint, Scraper, Shared, SharedState};
use crate::service::{Events, Systemd};
use anyhow::{Result, bail};
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
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use summary::Minute;
use wait::{Schedule, Wake};

mod summary;
mod wait;

/// The pid of a running irqbalance under `root`, if any (`proc/<pid>/comm`).
pub fn irqbalance_pid(root: &Path) -> Option<u32> {
    let pids = irqpilot_linux::apps::pids_named(&irqpilot_linux::Root::new(root), "irqbalance");
    pids.ok()?.first().copied()
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
    let events = Events::install()?;
    let mut systemd = Systemd::from_env();
    let root = irqpilot_linux::Root::new(&settings.root);
    let (mut apps, placement) =
        apps::AppWatch::new(settings.config.placement.clone(), &root, Instant::now());
    let mut policy = PlacementPolicy::new(placement)?;
    let mut moderation = settings.config.moderation.clone();
    let (mut global, mut kernel) = super::moderate::policies(settings);
    let restore = args.restore_on_exit || settings.config.daemon.restore_on_exit;
    let mut guard = restore::RestoreOnExit::new(journaled(settings, journal)?, restore);
    let platform = &mut guard.platform;
    let mut controller = Controller::new(platform)?;
    settle_privileges(controller.machine(), &moderation);
    let metrics = start_metrics(args, settings, &events, controller.machine(), &global)?;
    let limit = if args.once { Some(1) } else { args.iterations };
    let mut backoff = backoff::Backoff::default();
    let mut skipped = 0u64;
    let mut out = std::io::stdout().lock();
    let mut refused_total = 0usize;
    let mut period = 0u64;
    let first = interval_ns(&policy, controller.machine(), &moderation);
    let mut schedule = Schedule::new(&settings.root, first);
    let mut minute = Minute::new(Duration::from_secs(60));
    let mut stats = DaemonStats::default();
    let mut handed = Handed {
        at: Instant::now(),
        newer: false,
    };
    let started = summary::startup(controller.machine(), &settings.root, first / 1_000_000);
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        metrics = metrics.as_ref().map(|(e, _)| e.local_addr().to_string()),
        "daemon started: {started}"
    );
    systemd.ready(&format!("running: {started}"));
    while limit.is_none_or(|n| period < n) {
        match schedule.wait(&events, &mut systemd) {
            Wake::Terminate => break,
            Wake::Period => {}
            Wake::Reload => {
                systemd.reloading();
                match reload(
                    config_path,
                    &root,
                    &mut apps,
                    &mut policy,
                    &mut moderation,
                    &mut global,
                    &mut kernel,
                ) {
                    Ok(findings) => {
                        stats.reloads_ok += 1;
                        tracing::info!("configuration reloaded");
                        if let Some((_, shared)) = &metrics {
                            let mut sh = metrics::lock(shared);
                            sh.findings = findings;
                            sh.moderation_target_per_sec = global.target_per_sec();
                        }
                    }
                    Err(e) => {
                        stats.reloads_error += 1;
                        tracing::error!(error = %crate::error_text(&e), "reload failed; keeping the old configuration")
                    }
                }
                // A shorter period in the new configuration takes effect now; the deadline is
                // otherwise kept, so reloads never hold periods back.
                schedule.at_most_in(interval_ns(&policy, controller.machine(), &moderation));
                systemd.ready("running: configuration reloaded");
                if let Some((_, shared)) = &metrics {
                    metrics::lock(shared).daemon = Some(stats.clone());
                }
                continue;
            }
        }
        period += 1;
        if let Some(cfg) = apps.poll(&root, policy.config(), Instant::now()) {
            if let Err(e) = policy.set_config(cfg) {
                tracing::error!(error = %e, "application CPUs not taken; keeping the placement configuration");
            }
        }
        let step = match controller.step(platform, &mut [&mut policy, &mut global, &mut kernel]) {
            Ok(step) => step,
            Err(e) => {
                let normal = interval_ns(&policy, controller.machine(), &moderation);
                backoff.failed(&e, normal);
                skipped += 1;
                schedule.next_in(backoff.wait_ns(normal));
                continue;
            }
        };
        backoff.succeeded();
        let moves = step.plans.iter().map(|(_, p)| p.actions.len()).sum();
        for (name, plan) in &step.plans {
            // A plan's notes explain changes: worth the journal when it changed something.
            let acted = !plan.actions.is_empty() && step.applied.written() > 0;
            for n in &plan.notes {
                // A target the latency ceiling cannot reach is the operator's to resolve.
                if n.contains("unreachable") {
                    tracing::warn!(policy = *name, note = n.as_str(), "decided");
                } else if acted {
                    tracing::info!(policy = *name, note = n.as_str(), "decided");
                } else {
                    tracing::debug!(policy = *name, note = n.as_str(), "decided");
                }
            }
        }
        // Each change and each refusal was logged where it was made (the platform).
        refused_total += step.applied.failures();
        let next = interval_ns(&policy, controller.machine(), &moderation);
        schedule.next_in(next);
        stats.record(&step.applied);
        stats.period_seconds = next as f64 / 1e9;
        minute.add(&step.applied, step.had_rates.then(|| controller.rates()));
        let line = PeriodLine {
            period,
            at_ns: step.at.0,
            moves,
            written: step.applied.written(),
            refused: step.applied.failures(),
            next_interval_ms: next / 1_000_000,
        };
        tracing::debug!(
            period,
            changes = line.moves,
            written = line.written,
            refused = line.refused,
            next_ms = line.next_interval_ms,
            "period done"
        );
        if settings.format == Format::Json {
            serde_json::to_writer(&mut out, &line)?;
            out.write_all(b"\n")?;
            out.flush()?;
        }
        if let Some((_, shared)) = &metrics {
            hand_over(
                shared,
                &stats,
                &global,
                step.refreshed_inventory,
                controller.machine(),
                &mut handed,
            );
        }
        if let Some(text) = minute.due(next / 1_000_000) {
            tracing::info!("{text}");
            systemd.status(&format!("running: {text}"));
        }
    }
    systemd.stopping();
    if let Some((endpoint, _)) = &metrics {
        endpoint.stop();
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

/// Capability names for a log line: `CAP_NET_ADMIN,CAP_SYS_ADMIN`, or `none`.
fn list(caps: &[&str]) -> String {
    if caps.is_empty() {
        "none".to_string()
    } else {
        caps.join(",")
    }
}

/// Keeps the capabilities the machine calls for, drops the rest, and says which.
fn settle_privileges(machine: &Machine, moderation: &GlobalModerationConfig) {
    use irqpilot_linux::privileges;
    let s = privileges::settle(&privileges::uses(machine, moderation));
    if !s.kept.is_empty() || !s.dropped.is_empty() {
        tracing::info!(
            kept = %list(&s.kept),
            dropped = %list(&s.dropped),
            "capabilities: kept what the moderation knobs need, dropped the rest"
        );
    }
    for cap in &s.missing {
        tracing::warn!(
            capability = *cap,
            "needed for this machine's moderation knobs but not held: those changes will be refused"
        );
    }
    for (cap, e) in &s.failed {
        tracing::warn!(capability = *cap, error = %e, "could not drop an unneeded capability");
    }
}

/// Starts the metrics endpoint when `--metrics` or `[metrics] listen` asks for one.
fn start_metrics(
    args: &DaemonArgs,
    settings: &Settings,
    events: &Events,
    machine: &Machine,
    global: &GlobalModerator,
) -> Result<Option<(Endpoint, SharedState)>> {
    let cfg = &settings.config.metrics;
    let (text, what) = match (&args.metrics, &cfg.listen) {
        (Some(a), _) => (a, "--metrics"),
        (None, Some(a)) => (a, "metrics.listen"),
        (None, None) => return Ok(None),
    };
    let opts = &args.metrics_options;
    let addr = metrics::listen_address(text, opts.metrics_allow_remote || cfg.allow_remote, what)?;
    let shared: SharedState = Arc::new(Mutex::new(Shared {
        machine: Some(Arc::new(machine.clone())),
        findings: settings.config.findings.clone(),
        moderation_target_per_sec: global.target_per_sec(),
        daemon: Some(DaemonStats::default()),
    }));
    let scraper = Scraper::new(
        &settings.root,
        Arc::clone(&shared),
        opts.per_cpu_irqs || cfg.per_cpu_irqs,
        Some(events.sender()),
    );
    let endpoint = Endpoint::start(addr, scraper, Some(events.sender()))?;
    Ok(Some((endpoint, shared)))
}

/// Re-reads the configuration into the policies (a moderation change restarts the
/// moderators); returns the new `[findings]` thresholds for the metrics.
fn reload(
    config_path: Option<&Path>,
    root: &irqpilot_linux::Root,
    apps: &mut apps::AppWatch,
    policy: &mut PlacementPolicy,
    moderation: &mut GlobalModerationConfig,
    global: &mut GlobalModerator,
    kernel: &mut KernelSoftModeration,
) -> Result<irqpilot_core::FindingsConfig> {
    let c = Config::load(config_path)?;
    // Processes named in the new configuration are looked up now, as at start.
    let (watch, placement) = apps::AppWatch::new(c.placement, root, Instant::now());
    policy.set_config(placement)?;
    *apps = watch;
    if c.moderation != *moderation {
        *moderation = c.moderation;
        *global = GlobalModerator::new(moderation.clone());
        *kernel = KernelSoftModeration::new(moderation.clone());
    }
    Ok(c.findings)
}

/// When the metrics side last got the inventory, and whether a newer one waits.
#[derive(Debug)]
struct Handed {
    at: Instant,
    newer: bool,
}

/// Hands what the daemon did and its inventory to the metrics side. The inventory is re-read
/// after every change; a newer one is handed over at most once a second (a 10 ms moderation
/// period would otherwise copy it 100 times a second), at once when IRQs came or went.
fn hand_over(
    shared: &SharedState,
    stats: &DaemonStats,
    global: &GlobalModerator,
    refreshed: bool,
    machine: &Machine,
    handed: &mut Handed,
) {
    handed.newer |= refreshed;
    let mut sh = metrics::lock(shared);
    sh.daemon = Some(stats.clone());
    sh.moderation_target_per_sec = global.target_per_sec();
    let irqs_changed = sh
        .machine
        .as_ref()
        .is_none_or(|m| m.irqs.len() != machine.irqs.len());
    if handed.newer && (handed.at.elapsed() >= Duration::from_secs(1) || irqs_changed) {
        sh.machine = Some(Arc::new(machine.clone()));
        *handed = Handed {
            at: Instant::now(),
            newer: false,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use irqpilot_core::{Irq, IrqNum};

    /// A newer inventory skipped because the last hand-over was recent still reaches the
    /// metrics side a second later, without waiting for another re-read.
    #[test]
    fn a_skipped_inventory_is_handed_over_later() {
        let shared: SharedState = Arc::new(Mutex::new(Shared::default()));
        let global = GlobalModerator::new(GlobalModerationConfig::default());
        let stats = DaemonStats::default();
        let mut old = Machine::default();
        old.irqs.insert(IrqNum(1), Irq::new(IrqNum(1)));
        metrics::lock(&shared).machine = Some(Arc::new(old.clone()));
        let mut new = old.clone();
        new.irqs
            .entry(IrqNum(1))
            .and_modify(|i| i.chip = Some("changed".into()));
        let mut handed = Handed {
            at: Instant::now(),
            newer: false,
        };
        hand_over(&shared, &stats, &global, true, &new, &mut handed);
        assert_eq!(metrics::lock(&shared).machine.as_deref(), Some(&old));
        assert!(handed.newer);
        handed.at = Instant::now() - Duration::from_secs(2);
        hand_over(&shared, &stats, &global, false, &new, &mut handed);
        assert_eq!(metrics::lock(&shared).machine.as_deref(), Some(&new));
        assert!(!handed.newer);
        // IRQs that came or went go over at once.
        let mut more = new.clone();
        more.irqs.insert(IrqNum(2), Irq::new(IrqNum(2)));
        hand_over(&shared, &stats, &global, true, &more, &mut handed);
        assert_eq!(metrics::lock(&shared).machine.as_deref(), Some(&more));
    }
}
