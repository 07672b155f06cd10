//! What one scrape encodes: the newest counters, rates between samples at least
//! [`MIN_RATE_INTERVAL_NS`] apart (for the imbalance index and the load-based findings), label
//! strings built once per inventory, and a copy of the service's [`Shared`] state.
//!
//! Everything is kept between scrapes and refilled in place: after the first scrapes a scrape
//! reads three files and allocates little (the label strings live as long as the inventory).

use super::{DaemonStats, Shared};
use irqpilot_core::findings::{FindingsConfig, findings};
use irqpilot_core::moderation::knobs::Knob;
use irqpilot_core::{CpuSet, IrqNum, Machine, Rates, RowLabel, Snapshot};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// Rates (imbalance, findings) are taken over at least this much time, so two Prometheus
/// servers scraping a few ms apart do not compute them over a sliver of time.
pub const MIN_RATE_INTERVAL_NS: u64 = 1_000_000_000;

/// `/proc/stat` counts time in USER_HZ ticks, 100 a second on every Linux ABI (proc(5)).
pub const USER_HZ: f64 = 100.0;

/// Labels of one IRQ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IrqLabels {
    /// The number.
    pub irq: String,
    /// Its actions, as `/proc/interrupts` lists them.
    pub name: String,
    /// Interface, NVMe controller or PCI device; empty for platform IRQs.
    pub device: String,
    /// Queue (`rx0`, `txrx3`, `io7`, `misc`), or empty.
    pub queue: String,
}

/// Label strings and facts derived from one inventory.
#[derive(Debug, Default)]
pub struct Labels {
    machine: Option<Arc<Machine>>,
    /// Per IRQ of the inventory.
    pub irqs: HashMap<IrqNum, IrqLabels>,
    /// CPUs kept free of device interrupts.
    pub isolated: CpuSet,
    /// CPUs device interrupts may use.
    pub housekeeping: CpuSet,
    /// `(device, queue, delay_us)` per moderation knob.
    pub delays: Vec<(String, String, f64)>,
}

impl Labels {
    fn build(machine: &Arc<Machine>) -> Labels {
        let m = machine.as_ref();
        let mut irqs = HashMap::with_capacity(m.irqs.len());
        let mut device_of: HashMap<&str, String> = HashMap::new();
        for dev in m.devices.values() {
            let its: Vec<&irqpilot_core::Irq> = m.device_irqs(dev).collect();
            device_of.insert(
                dev.addr.as_str(),
                crate::cmd::status::device_name(dev, &its),
            );
        }
        for i in m.irqs.values() {
            let device = match (&i.device, &i.queue) {
                (Some(addr), _) => device_of
                    .get(addr.as_str())
                    .cloned()
                    .unwrap_or_else(|| addr.to_string()),
                (None, Some(q)) => q.owner.clone(),
                (None, None) => String::new(),
            };
            irqs.insert(
                i.irq,
                IrqLabels {
                    irq: i.irq.0.to_string(),
                    name: i.name(),
                    device,
                    queue: crate::cmd::status::queue_label(i.queue.as_ref()),
                },
            );
        }
        let online = &m.topology.online;
        let mut delays = Vec::new();
        let mut controllers = std::collections::BTreeSet::new();
        for knob in m.moderation.knobs.values() {
            match knob {
                Knob::NicQueue {
                    device,
                    queue,
                    per_queue,
                    rx_usecs,
                    ..
                } => {
                    let q = if *per_queue {
                        queue.to_string()
                    } else {
                        String::new()
                    };
                    delays.push((device.clone(), q, f64::from(*rx_usecs)));
                }
                Knob::NvmeController {
                    controller,
                    time_100us,
                    ..
                } => {
                    if controllers.insert(controller.clone()) {
                        delays.push((
                            controller.clone(),
                            String::new(),
                            f64::from(*time_100us) * 100.0,
                        ));
                    }
                }
                Knob::Soft { .. } => {}
            }
        }
        delays.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        // A device-wide NIC setting is one value, listed once.
        delays.dedup_by(|a, b| a.0 == b.0 && a.1 == b.1);
        Labels {
            machine: Some(Arc::clone(machine)),
            irqs,
            isolated: m.isolation.isolated_cpus(),
            housekeeping: m.isolation.housekeeping(online).cpus,
            delays,
        }
    }

    fn is(&self, machine: &Arc<Machine>) -> bool {
        self.machine
            .as_ref()
            .is_some_and(|m| Arc::ptr_eq(m, machine))
    }
}

/// The sampling state behind one endpoint.
#[derive(Debug, Default)]
pub struct Frame {
    snaps: [Snapshot; 2],
    /// Slot of the newest snapshot.
    newest: usize,
    /// Slot the next rates are computed from.
    base: usize,
    /// Number of snapshots read so far (0, 1 or more).
    reads: u64,
    rates: Rates,
    has_rates: bool,
    /// Labels of the current inventory.
    pub labels: Labels,
    /// The imbalance index over the housekeeping CPUs.
    pub imbalance: Option<f64>,
    /// Findings by `(severity, kind)`.
    pub findings: BTreeMap<(&'static str, String), u64>,
    /// Numbered-IRQ interrupts per column of the newest `/proc/interrupts`.
    pub cpu_totals: Vec<u64>,
    /// `cpu` label strings, by CPU id.
    pub cpu_names: Vec<String>,
    /// The moderation target.
    pub target_per_sec: f64,
    /// What the daemon did, in daemon mode.
    pub daemon: Option<DaemonStats>,
    /// Whether per-IRQ-per-CPU series are wanted.
    pub per_cpu_irqs: bool,
    /// IRQ rows of the newest snapshot that the inventory does not know yet.
    pub unknown_irqs: usize,
    findings_cfg: FindingsConfig,
}

impl Frame {
    /// An empty frame.
    pub fn new(per_cpu_irqs: bool) -> Frame {
        Frame {
            per_cpu_irqs,
            ..Frame::default()
        }
    }

    /// The newest snapshot (empty before the first read).
    pub fn newest(&self) -> &Snapshot {
        &self.snaps[self.newest]
    }

    /// The slot the next read goes into: never the rates' base.
    pub fn slot_for_read(&mut self) -> &mut Snapshot {
        let slot = if self.reads == 0 { 0 } else { 1 - self.base };
        &mut self.snaps[slot]
    }

    /// The read into [`Frame::slot_for_read`] failed half-way: the newest complete snapshot is
    /// the rates' base (never read into).
    pub fn read_failed(&mut self) {
        if self.reads > 0 {
            self.newest = self.base;
        }
    }

    /// Takes the read that went into [`Frame::slot_for_read`], with the service's state:
    /// refreshes labels when the inventory changed, rates and what depends on them when the
    /// base is old enough, and the per-CPU sums.
    pub fn take_read(&mut self, shared: &Shared) {
        let slot = if self.reads == 0 { 0 } else { 1 - self.base };
        self.reads += 1;
        self.newest = slot;
        self.target_per_sec = shared.moderation_target_per_sec;
        self.daemon.clone_from(&shared.daemon);
        let mut derive = false;
        if shared.findings != self.findings_cfg {
            self.findings_cfg = shared.findings.clone();
            derive = true;
        }
        if let Some(m) = &shared.machine {
            if !self.labels.is(m) {
                self.labels = Labels::build(m);
                derive = true;
            }
        }
        if self.reads == 1 {
            self.base = slot;
        } else {
            let (base, cur) = (&self.snaps[self.base], &self.snaps[slot]);
            let elapsed = cur.taken_at.since(base.taken_at).unwrap_or(0);
            if elapsed >= MIN_RATE_INTERVAL_NS {
                self.has_rates = self.rates.update(base, cur).is_ok();
                self.base = slot;
                derive = true;
            }
        }
        if derive {
            self.derive();
        }
        self.sum_cpus();
    }

    /// The imbalance index and the findings, from the labels and the rates.
    fn derive(&mut self) {
        let rates = self.has_rates.then_some(&self.rates);
        self.imbalance = rates.and_then(|r| self.device_imbalance(r));
        self.findings.clear();
        for kind in super::catalog::FINDING_KINDS {
            for sev in ["info", "warning"] {
                self.findings.insert((sev, (*kind).to_string()), 0);
            }
        }
        let Some(m) = &self.labels.machine else {
            return;
        };
        for f in findings(m, rates, &self.findings_cfg) {
            let sev = match f.severity() {
                irqpilot_core::findings::Severity::Info => "info",
                irqpilot_core::findings::Severity::Warning => "warning",
            };
            let kind = serde_json::to_value(&f)
                .ok()
                .and_then(|v| v.get("kind")?.as_str().map(str::to_string))
                .unwrap_or_else(|| "other".to_string());
            *self.findings.entry((sev, kind)).or_insert(0) += 1;
        }
    }

    /// max / mean of device-IRQ interrupts/s over the housekeeping CPUs (all numbered IRQs when
    /// the inventory knows no device IRQ).
    fn device_imbalance(&self, r: &Rates) -> Option<f64> {
        let l = &self.labels;
        let any_device = l.irqs.values().any(|i| !i.device.is_empty());
        let mut loads = vec![0.0; r.cpus.len()];
        for row in &r.rows {
            let Some(n) = row.label.irq() else { continue };
            if any_device && l.irqs.get(&n).is_none_or(|i| i.device.is_empty()) {
                continue;
            }
            for (slot, v) in loads.iter_mut().zip(&row.per_cpu_per_sec) {
                *slot += v;
            }
        }
        let hk: Vec<f64> = r
            .cpus
            .iter()
            .zip(&loads)
            .filter(|(c, _)| l.housekeeping.is_empty() || l.housekeeping.contains(**c))
            .map(|(_, v)| *v)
            .collect();
        irqpilot_core::rates::imbalance(&hk)
    }

    /// Per-CPU sums of the numbered rows, CPU label strings, and the count of unknown IRQs.
    fn sum_cpus(&mut self) {
        let snap = &self.snaps[self.newest];
        let t = &snap.interrupts;
        self.cpu_totals.clear();
        self.cpu_totals.resize(t.cpus.len(), 0);
        let mut unknown = 0;
        for row in t.rows() {
            let RowLabel::Irq(n) = row.label else {
                continue;
            };
            if !self.labels.irqs.contains_key(&n) {
                unknown += 1;
            }
            for (slot, v) in self.cpu_totals.iter_mut().zip(t.counts(row)) {
                *slot += v;
            }
        }
        self.unknown_irqs = if self.labels.machine.is_some() {
            unknown
        } else {
            0
        };
        let ids = t
            .cpus
            .iter()
            .chain(snap.softirqs.iter().flat_map(|s| s.cpus.iter()))
            .chain(
                snap.stat
                    .iter()
                    .flat_map(|s| s.per_cpu.iter().map(|(c, _)| c)),
            );
        for c in ids {
            let i = c.0 as usize;
            if self.cpu_names.len() <= i {
                self.cpu_names.resize(i + 1, String::new());
            }
            if self.cpu_names[i].is_empty() {
                self.cpu_names[i] = c.0.to_string();
            }
        }
    }

    /// The `cpu` label of a CPU id.
    pub fn cpu_name(&self, cpu: irqpilot_core::CpuId) -> &str {
        self.cpu_names
            .get(cpu.0 as usize)
            .map_or("", String::as_str)
    }
}
