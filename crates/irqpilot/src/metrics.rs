//! Prometheus / OpenMetrics metrics of a root's interrupts.
//!
//! `irqpilot exporter` serves them read-only; `irqpilot daemon --metrics` serves the same plus
//! what the daemon did (migrations, changes, refusals, periods, reloads). Both run one
//! [`Scraper`] behind one HTTP [`Endpoint`] (tiny_http, loopback unless
//! `--metrics-allow-remote`):
//!
//! * counters come from the files at scrape time (`/proc/interrupts`, `/proc/stat`,
//!   `/proc/softirqs`: three reads, about a millisecond on a 256-CPU server), so Prometheus'
//!   `rate()` is exact whatever the scrape interval;
//! * labels (IRQ names, devices, queues), isolation and moderation delays come from the
//!   inventory, which the service re-reads off the scrape path ([`Shared::machine`]);
//! * the imbalance index and the findings use rates between samples at least a second apart.
//!
//! Every family is listed in [`catalog`]; `docs/metrics.md` is the user's view.

pub mod catalog;
mod encode;
mod frame;
mod http;

pub use frame::{Frame, MIN_RATE_INTERVAL_NS};
pub use http::{Endpoint, listen_address};

use crate::service::Event;
use irqpilot_core::findings::FindingsConfig;
use irqpilot_core::{Action, ApplyError, ApplyReport, Machine, Platform, PlatformError};
use irqpilot_linux::LinuxPlatform;
use prometheus_client::registry::Registry;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// What the service hands the metrics side: the inventory as it last read it, thresholds, the
/// moderation target and, for the daemon, what it did.
#[derive(Debug, Clone, Default)]
pub struct Shared {
    /// The inventory (labels, isolation, moderation knobs); `None` until read.
    pub machine: Option<Arc<Machine>>,
    /// Thresholds of the findings (`[findings]`).
    pub findings: FindingsConfig,
    /// `irqpilot_moderation_target_per_second`.
    pub moderation_target_per_sec: f64,
    /// What the daemon did; `None` for the exporter.
    pub daemon: Option<DaemonStats>,
}

/// The state shared between the service's loop and the endpoint.
pub type SharedState = Arc<Mutex<Shared>>;

/// Locks the shared state (a panicked holder left it consistent: every field is written whole).
pub fn lock(state: &SharedState) -> std::sync::MutexGuard<'_, Shared> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Kinds of `irqpilot_changes_total`.
pub const CHANGE_ACTIONS: &[&str] = &[
    "affinity",
    "default-affinity",
    "channels",
    "nic-coalescing",
    "nvme-coalescing",
    "soft-moderation",
];

/// Kinds of `irqpilot_apply_errors_total`.
pub const ERROR_KINDS: &[&str] = ApplyError::KIND_NAMES;

/// What the daemon did since it started.
#[derive(Debug, Clone, PartialEq)]
pub struct DaemonStats {
    /// Periods run.
    pub periods: u64,
    /// Affinity changes written.
    pub migrations: u64,
    /// Changes written, by [`CHANGE_ACTIONS`].
    pub changes: BTreeMap<&'static str, u64>,
    /// Refusals, by [`ERROR_KINDS`].
    pub apply_errors: BTreeMap<&'static str, u64>,
    /// The current period, seconds.
    pub period_seconds: f64,
    /// Reloads that took.
    pub reloads_ok: u64,
    /// Reloads that failed (old configuration kept).
    pub reloads_error: u64,
}

impl Default for DaemonStats {
    fn default() -> Self {
        DaemonStats {
            periods: 0,
            migrations: 0,
            changes: CHANGE_ACTIONS.iter().map(|a| (*a, 0)).collect(),
            apply_errors: ERROR_KINDS.iter().map(|k| (*k, 0)).collect(),
            period_seconds: 0.0,
            reloads_ok: 0,
            reloads_error: 0,
        }
    }
}

impl DaemonStats {
    /// Counts one period's outcomes.
    pub fn record(&mut self, applied: &ApplyReport) {
        self.periods += 1;
        for o in &applied.outcomes {
            match &o.result {
                Ok(true) => {
                    let kind = action_kind(&o.action);
                    *self.changes.entry(kind).or_insert(0) += 1;
                    if matches!(o.action, Action::SetAffinity { .. }) {
                        self.migrations += 1;
                    }
                }
                Ok(false) => {}
                Err(e) => *self.apply_errors.entry(e.kind_name()).or_insert(0) += 1,
            }
        }
    }
}

/// The `action` label of an action.
pub fn action_kind(a: &Action) -> &'static str {
    match a {
        Action::SetAffinity { .. } => "affinity",
        Action::SetDefaultAffinity { .. } => "default-affinity",
        Action::SetChannels { .. } => "channels",
        Action::SetCoalesce { .. } => "nic-coalescing",
        Action::SetNvmeCoalescing { .. } | Action::SetNvmeVectorCoalescing { .. } => {
            "nvme-coalescing"
        }
        Action::SetSoftModeration { .. } | Action::SetIrqSoftModeration { .. } => "soft-moderation",
    }
}

/// Reads the root and encodes the frame: one scrape.
pub struct Scraper {
    platform: Box<dyn Platform + Send>,
    frame: Arc<Mutex<Frame>>,
    registry: Registry,
    body: String,
    shared: SharedState,
    events: Option<Sender<Event>>,
    last_refresh_request: Option<Instant>,
}

impl std::fmt::Debug for Scraper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scraper")
            .field("body_bytes", &self.body.len())
            .finish_non_exhaustive()
    }
}

/// Least time between two inventory re-reads asked for by scrapes.
const REFRESH_REQUEST_EVERY: Duration = Duration::from_secs(5);

impl Scraper {
    /// A scraper of `root`; `events` receives [`Event::RefreshInventory`] when the counters
    /// show IRQs the inventory does not know.
    pub fn new(
        root: &Path,
        shared: SharedState,
        per_cpu_irqs: bool,
        events: Option<Sender<Event>>,
    ) -> Scraper {
        Scraper::with_platform(
            Box::new(LinuxPlatform::with_root(root)),
            shared,
            per_cpu_irqs,
            events,
        )
    }

    /// A scraper reading counters from `platform` (benchmarks feed it prepared trees).
    pub fn with_platform(
        platform: Box<dyn Platform + Send>,
        shared: SharedState,
        per_cpu_irqs: bool,
        events: Option<Sender<Event>>,
    ) -> Scraper {
        let frame = Arc::new(Mutex::new(Frame::new(per_cpu_irqs)));
        let mut registry = Registry::default();
        registry.register_collector(Box::new(encode::FrameCollector(Arc::clone(&frame))));
        Scraper {
            platform,
            frame,
            registry,
            body: String::new(),
            shared,
            events,
            last_refresh_request: None,
        }
    }

    /// Reads the counters and returns the OpenMetrics text.
    pub fn scrape(&mut self) -> Result<&str, PlatformError> {
        let unknown = {
            let mut frame = self.frame.lock().unwrap_or_else(PoisonError::into_inner);
            if let Err(e) = self.platform.snapshot_into(frame.slot_for_read()) {
                frame.read_failed();
                return Err(e);
            }
            let shared = lock(&self.shared).clone();
            frame.take_read(&shared);
            frame.unknown_irqs
        };
        if unknown > 0 {
            self.ask_for_inventory();
        }
        self.body.clear();
        prometheus_client::encoding::text::encode(&mut self.body, &self.registry)
            .map_err(|e| PlatformError::Other(format!("encoding the metrics: {e}")))?;
        Ok(&self.body)
    }

    fn ask_for_inventory(&mut self) {
        let now = Instant::now();
        if self
            .last_refresh_request
            .is_some_and(|t| now.duration_since(t) < REFRESH_REQUEST_EVERY)
        {
            return;
        }
        if let Some(tx) = &self.events {
            self.last_refresh_request = Some(now);
            let _ = tx.send(Event::RefreshInventory);
        }
    }
}
