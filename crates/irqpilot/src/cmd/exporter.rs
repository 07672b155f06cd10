//! `irqpilot exporter [--listen 127.0.0.1:9877]`: Prometheus / OpenMetrics metrics of the root's
//! interrupts over HTTP ([`crate::metrics`]). Read-only: it changes nothing and needs no root
//! (NVMe coalescing delays need `CAP_SYS_ADMIN` to be read and are left out without it).
//!
//! The root is read once before anything is served, so an unreadable root is an error naming
//! the file, exit 1. The inventory is re-read every `--inventory-interval` and at once when a
//! scrape sees IRQs it does not know; SIGHUP re-reads the configuration (`[findings]`
//! thresholds, `[moderation] target_intr_rate`); SIGTERM / SIGINT end it. Under systemd it
//! speaks the notification protocol like the daemon. If the listener dies, the exporter has
//! nothing left to do: it says why and exits 1 (a unit's `Restart=` brings it back).

use crate::Settings;
use crate::cli::ExporterArgs;
use crate::config::Config;
use crate::metrics::{self, Endpoint, Scraper, Shared, SharedState};
use crate::service::{Event, Events, Systemd};
use anyhow::{Context, Result, bail};
use irqpilot_core::Platform;
use irqpilot_linux::LinuxPlatform;
use std::path::Path;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Where the exporter listens when neither `--listen` nor `[metrics] listen` says.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9877";

/// Runs `irqpilot exporter`.
pub fn run(
    args: &ExporterArgs,
    settings: &Settings,
    config_path: Option<&Path>,
) -> Result<ExitCode> {
    let cfg = &settings.config.metrics;
    let (text, what) = match (&args.listen, &cfg.listen) {
        (Some(a), _) => (a.as_str(), "--listen"),
        (None, Some(a)) => (a.as_str(), "metrics.listen"),
        (None, None) => (DEFAULT_LISTEN, "--listen"),
    };
    let addr = metrics::listen_address(
        text,
        args.options.metrics_allow_remote || cfg.allow_remote,
        what,
    )?;
    if args.inventory_interval.is_zero() {
        bail!("--inventory-interval must be more than 0");
    }
    let root = &settings.root;
    let mut platform = LinuxPlatform::with_root(root);
    platform
        .snapshot()
        .with_context(|| format!("cannot read root {}", root.display()))?;
    let machine = platform
        .machine()
        .with_context(|| format!("cannot read root {}", root.display()))?;
    let events = Events::install()?;
    let mut systemd = Systemd::from_env();
    let irqs = machine.irqs.len();
    let shared: SharedState = Arc::new(Mutex::new(Shared {
        machine: Some(Arc::new(machine)),
        findings: settings.config.findings.clone(),
        moderation_target_per_sec: settings.config.moderation.target_intr_rate,
        daemon: None,
    }));
    let scraper = Scraper::new(
        root,
        Arc::clone(&shared),
        args.options.per_cpu_irqs || cfg.per_cpu_irqs,
        Some(events.sender()),
    );
    let endpoint = Endpoint::start(addr, scraper, Some(events.sender()))?;
    let status = format!(
        "serving http://{}/metrics for root {} ({irqs} IRQs)",
        endpoint.local_addr(),
        root.display()
    );
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        "exporter started: {status}"
    );
    systemd.ready(&status);
    let mut next_refresh = Instant::now() + args.inventory_interval;
    let mut known = irqs;
    loop {
        systemd.ping_if_due(Instant::now());
        let until = systemd
            .next_ping()
            .map_or(next_refresh, |p| p.min(next_refresh));
        match events.wait_until(until) {
            Some(Event::Terminate(_)) => break,
            Some(Event::MetricsDown(why)) => {
                systemd.stopping();
                bail!("{why}");
            }
            Some(Event::Reload) => {
                systemd.reloading();
                match Config::load(config_path) {
                    Ok(c) => {
                        let mut sh = metrics::lock(&shared);
                        sh.findings = c.findings;
                        sh.moderation_target_per_sec = c.moderation.target_intr_rate;
                        tracing::info!("configuration reloaded");
                    }
                    Err(e) => tracing::error!(
                        error = %crate::error_text(&e),
                        "reload failed; keeping the old configuration"
                    ),
                }
                systemd.ready(&status);
            }
            Some(Event::RefreshInventory) => {
                refresh(&mut platform, &shared, &mut known);
                next_refresh = Instant::now() + args.inventory_interval;
            }
            None => {
                if Instant::now() >= next_refresh {
                    refresh(&mut platform, &shared, &mut known);
                    next_refresh = Instant::now() + args.inventory_interval;
                }
            }
        }
    }
    systemd.stopping();
    endpoint.stop();
    Ok(ExitCode::SUCCESS)
}

/// Re-reads the inventory off the scrape path and hands it to the endpoint.
fn refresh(platform: &mut LinuxPlatform, shared: &SharedState, known: &mut usize) {
    match platform.machine() {
        Ok(m) => {
            if m.irqs.len() != *known {
                tracing::info!(before = *known, now = m.irqs.len(), "IRQs came or went");
                *known = m.irqs.len();
            }
            metrics::lock(shared).machine = Some(Arc::new(m));
        }
        Err(e) => tracing::warn!(error = %e, "inventory not re-read; keeping the last one"),
    }
}
