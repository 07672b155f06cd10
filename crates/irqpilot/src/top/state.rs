//! What `top` shows, kept apart from drawing it: the figures of the last interval (per-CPU
//! rows, the busiest IRQs), the imbalance over the last minute, the findings, the affinity
//! changes seen and the daemon's line, plus the view's own state (sort, filters, fold,
//! selection, pause, interval). Keys change the view state; [`State::update`] takes a sample.

use super::cpus::{self, CpuFigures, CpuMeta, CpuRow, CpuSort, Fold};
use crate::cmd::watch::push_top_cpus;
use crate::live::Sampler;
use crate::live::affinity::{Change, describe};
use crate::live::devices::DeviceIndex;
use irqpilot_core::findings::{Finding, FindingsConfig, Severity, findings};
use irqpilot_core::{CpuId, CpuSet, IrqNum, Machine};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

/// How long the imbalance sparkline looks back.
pub const HISTORY_NS: u64 = 60_000_000_000;
/// Findings are recomputed at most this often (a pass over every IRQ and CPU).
const FINDINGS_EVERY_NS: u64 = 5_000_000_000;
/// Affinity changes kept for the status line.
const CHANGES_KEPT: usize = 50;

/// Sampling intervals the `+`/`-` keys step through.
pub const INTERVALS_MS: [u64; 9] = [100, 200, 500, 1000, 2000, 5000, 10_000, 30_000, 60_000];

/// Which panel has the keyboard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Panel {
    /// The CPU rows.
    Cpus,
    /// The IRQ rows.
    Irqs,
}

/// The sort of the IRQ panel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IrqSort {
    /// Interrupts/s.
    Rate,
    /// IRQ number.
    Irq,
    /// Device name.
    Device,
}

impl IrqSort {
    /// The next column.
    pub fn next(self) -> IrqSort {
        match self {
            IrqSort::Rate => IrqSort::Irq,
            IrqSort::Irq => IrqSort::Device,
            IrqSort::Device => IrqSort::Rate,
        }
    }

    /// The column's header.
    pub fn name(self) -> &'static str {
        match self {
            IrqSort::Rate => "RATE/s",
            IrqSort::Irq => "IRQ",
            IrqSort::Device => "DEVICE",
        }
    }
}

/// What is being typed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputKind {
    /// A device name (or any part of an IRQ's name).
    Device,
    /// A CPU list.
    Cpus,
}

/// One row of the IRQ panel.
#[derive(Clone, Debug, PartialEq)]
pub struct IrqRow {
    /// The IRQ number, or the row's name (`LOC`, `NMI`).
    pub label: String,
    /// The IRQ, for numbered rows.
    pub irq: Option<IrqNum>,
    /// Interrupts/s.
    pub rate: f64,
    /// Device name.
    pub device: String,
    /// Queue label.
    pub queue: String,
    /// The CPUs that took it, with their share.
    pub cpus: String,
    /// The CPUs that took any of it.
    pub on: Vec<CpuId>,
    /// Its actions.
    pub name: String,
}

/// A replay's place and pace.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReplayInfo {
    /// First and last sample, monotonic ns.
    pub first_ns: u64,
    /// Last sample.
    pub last_ns: u64,
    /// Recorded seconds per wall second (`None`: as fast as possible).
    pub speed: Option<f64>,
    /// Whether the end was reached.
    pub ended: bool,
}

/// Wall-clock time of monotonic sample times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WallClock {
    /// Wall time at `mono_ns`, ns since the Unix epoch.
    pub unix_ns: u64,
    /// The monotonic time it corresponds to.
    pub mono_ns: u64,
}

impl WallClock {
    /// `HH:MM:SS` (UTC) of a monotonic time.
    pub fn hms(&self, mono_ns: u64) -> String {
        let unix = self.unix_ns as i128 + mono_ns as i128 - self.mono_ns as i128;
        let secs = (unix / 1_000_000_000).rem_euclid(86_400) as u64;
        format!("{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60)
    }
}

/// Totals of the last interval.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Totals {
    /// Device IRQs per second.
    pub device: f64,
    /// All numbered IRQs.
    pub numbered: f64,
    /// Timer and IPIs.
    pub arch: f64,
}

/// The view's state: what the keys change.
#[derive(Clone, Debug)]
pub struct View {
    /// Panel with the keyboard.
    pub focus: Panel,
    /// CPU sort and direction.
    pub cpu_sort: CpuSort,
    /// Reverse the CPU sort.
    pub cpu_reverse: bool,
    /// IRQ sort.
    pub irq_sort: IrqSort,
    /// Reverse the IRQ sort.
    pub irq_reverse: bool,
    /// CPU grouping.
    pub fold: Fold,
    /// Groups listing their CPUs.
    pub open: BTreeSet<String>,
    /// Device filter (case-insensitive part of the device, queue or IRQ name).
    pub device_filter: Option<String>,
    /// CPU filter.
    pub cpu_filter: Option<CpuSet>,
    /// Being typed.
    pub input: Option<(InputKind, String)>,
    /// No sampling.
    pub paused: bool,
    /// Sampling interval.
    pub interval: Duration,
    /// Selected CPU row.
    pub cpu_selected: usize,
    /// Selected IRQ row.
    pub irq_selected: usize,
    /// Help shown.
    pub help: bool,
    /// A message for the status line (bad input).
    pub message: Option<String>,
    /// Rows the CPU and IRQ panels showed at the last draw (page keys move by them).
    pub page: [usize; 2],
}

/// Everything `top` shows (see the module documentation).
#[derive(Debug)]
pub struct State {
    /// The root, as shown in the title.
    pub source: String,
    machine: Machine,
    meta: BTreeMap<CpuId, CpuMeta>,
    devices: DeviceIndex,
    findings_config: FindingsConfig,
    figures: Vec<CpuFigures>,
    all_irqs: Vec<IrqRow>,
    /// IRQ rows after the filters, sorted.
    pub irqs: Vec<IrqRow>,
    /// CPU rows after the filter, folded and sorted.
    pub cpu_rows: Vec<CpuRow>,
    /// Totals of the last interval.
    pub totals: Totals,
    /// Imbalance of the last interval.
    pub imbalance: Option<f64>,
    /// (time, imbalance) over the last minute.
    pub history: VecDeque<(u64, f64)>,
    /// Findings, warnings first.
    pub findings: Vec<Finding>,
    findings_at: Option<u64>,
    /// Affinity changes and inventory re-reads, newest last.
    pub changes: VecDeque<String>,
    /// The daemon's status line.
    pub daemon: String,
    /// Time of the latest sample, monotonic ns.
    pub sample_ns: Option<u64>,
    /// Interval the figures cover, ns.
    pub covered_ns: u64,
    /// Wall clock of sample times.
    pub clock: WallClock,
    /// Replay state, when replaying.
    pub replay: Option<ReplayInfo>,
    /// Recording, when recording: the file and its size.
    pub recording: Option<(String, u64)>,
    /// Why the last sample failed, if it did.
    pub error: Option<String>,
    /// View state.
    pub view: View,
}

impl State {
    /// A state for `machine`, sampling every `interval`.
    pub fn new(
        source: String,
        machine: Machine,
        findings_config: FindingsConfig,
        interval: Duration,
        clock: WallClock,
    ) -> State {
        let meta = cpus::cpu_meta(&machine);
        let nodes: BTreeSet<_> = meta.values().filter_map(|m| m.node).collect();
        // More CPUs than a screen has rows: start folded by node (or package).
        let fold = if meta.len() > 32 {
            if nodes.len() > 1 {
                Fold::Node
            } else {
                Fold::Package
            }
        } else {
            Fold::None
        };
        State {
            source,
            devices: DeviceIndex::new(&machine),
            meta,
            machine,
            findings_config,
            figures: Vec::new(),
            all_irqs: Vec::new(),
            irqs: Vec::new(),
            cpu_rows: Vec::new(),
            totals: Totals::default(),
            imbalance: None,
            history: VecDeque::new(),
            findings: Vec::new(),
            findings_at: None,
            changes: VecDeque::new(),
            daemon: String::new(),
            sample_ns: None,
            covered_ns: 0,
            clock,
            replay: None,
            recording: None,
            error: None,
            view: View {
                focus: Panel::Cpus,
                cpu_sort: CpuSort::Irq,
                cpu_reverse: false,
                irq_sort: IrqSort::Rate,
                irq_reverse: false,
                fold,
                open: BTreeSet::new(),
                device_filter: None,
                cpu_filter: None,
                input: None,
                paused: false,
                interval,
                cpu_selected: 0,
                irq_selected: 0,
                help: false,
                message: None,
                page: [10, 10],
            },
        }
    }

    /// The machine's inventory.
    pub fn machine(&self) -> &Machine {
        &self.machine
    }

    /// What a CPU is.
    pub fn cpu_meta(&self, cpu: CpuId) -> Option<&CpuMeta> {
        self.meta.get(&cpu)
    }

    /// A new inventory (IRQs came or went).
    pub fn set_machine(&mut self, machine: Machine) {
        self.meta = cpus::cpu_meta(&machine);
        self.devices = DeviceIndex::new(&machine);
        self.machine = machine;
        self.findings_at = None;
        self.note(None, "inventory read again (IRQs came or went)".into());
    }

    /// Records a line for the status area, stamped with the sample time.
    pub fn note(&mut self, at_ns: Option<u64>, text: String) {
        let t = at_ns
            .or(self.sample_ns)
            .map_or(String::new(), |t| format!("{} ", self.clock.hms(t)));
        self.changes.push_back(format!("{t}{text}"));
        while self.changes.len() > CHANGES_KEPT {
            self.changes.pop_front();
        }
    }

    /// Affinity changes seen after a sample.
    pub fn affinity_changes(&mut self, changes: &[Change]) {
        for c in changes {
            if let Some(i) = self.machine.irqs.get_mut(&c.irq) {
                i.requested.clone_from(&c.after.requested);
                i.effective.clone_from(&c.after.effective);
            }
            let label = self.devices.label(c.irq, "");
            let what = if label.device.is_empty() {
                String::new()
            } else {
                format!(" ({} {})", label.device, label.queue)
            };
            self.note(
                Some(c.at_ns),
                format!(
                    "IRQ {}{what} moved {} -> {}",
                    c.irq,
                    describe(&c.before),
                    describe(&c.after)
                ),
            );
            self.findings_at = None;
        }
    }

    /// Takes in the latest sample.
    pub fn update(&mut self, s: &Sampler) {
        let snap_ns = s.snapshot().taken_at.0;
        self.sample_ns = Some(snap_ns);
        self.error = None;
        let r = s.rates();
        self.covered_ns = r.interval_ns;
        self.figures = cpus::figures(r);
        let mut totals = Totals::default();
        self.all_irqs.clear();
        let mut text = String::new();
        for (i, row) in r.rows.iter().enumerate() {
            match row.label.irq() {
                Some(_) => {
                    totals.numbered += row.total_per_sec;
                    if s.is_device_row(i) {
                        totals.device += row.total_per_sec;
                    }
                }
                None => totals.arch += row.total_per_sec,
            }
            if row.total_per_sec <= 0.0 {
                continue;
            }
            let name = s.name(i).to_string();
            let label = match row.label.irq() {
                Some(n) => self.devices.label(n, &name),
                None => Default::default(),
            };
            text.clear();
            push_top_cpus(&mut text, &r.cpus, &row.per_cpu_per_sec, row.total_per_sec);
            self.all_irqs.push(IrqRow {
                label: row.label.to_string(),
                irq: row.label.irq(),
                rate: row.total_per_sec,
                device: label.device,
                queue: label.queue,
                cpus: text.clone(),
                on: row
                    .per_cpu_per_sec
                    .iter()
                    .zip(&r.cpus)
                    .filter(|(v, _)| **v > 0.0)
                    .map(|(_, c)| *c)
                    .collect(),
                name,
            });
        }
        self.totals = totals;
        self.imbalance = s.imbalance();
        if let Some(v) = self.imbalance {
            self.history.push_back((snap_ns, v));
        }
        while self
            .history
            .front()
            .is_some_and(|(t, _)| snap_ns.saturating_sub(*t) > HISTORY_NS)
        {
            self.history.pop_front();
        }
        let due = self
            .findings_at
            .is_none_or(|t| snap_ns.saturating_sub(t) >= FINDINGS_EVERY_NS || snap_ns < t);
        if due {
            self.findings_at = Some(snap_ns);
            let mut f = findings(&self.machine, Some(r), &self.findings_config);
            // Warnings first; the order within a severity stays deterministic.
            f.sort_by_key(|x| std::cmp::Reverse(x.severity()));
            self.findings = f;
        }
        self.refilter();
    }

    /// Whether an IRQ row passes the filters. Named rows (timer, IPIs: the CPU panel's
    /// TIMER+IPI column) show only when the device filter names them.
    fn irq_matches(&self, row: &IrqRow) -> bool {
        if row.irq.is_none() && self.view.device_filter.is_none() {
            return false;
        }
        if let Some(text) = &self.view.device_filter {
            let t = text.to_lowercase();
            let hit = [&row.device, &row.queue, &row.name, &row.label]
                .iter()
                .any(|f| f.to_lowercase().contains(&t));
            if !hit {
                return false;
            }
        }
        self.view
            .cpu_filter
            .as_ref()
            .is_none_or(|only| row.on.iter().any(|c| only.contains(*c)))
    }

    /// Recomputes the shown rows after a filter, sort or fold change.
    pub fn refilter(&mut self) {
        self.cpu_rows = cpus::rows(
            &self.figures,
            &self.meta,
            self.view.cpu_filter.as_ref(),
            self.view.fold,
            &self.view.open,
            self.view.cpu_sort,
            self.view.cpu_reverse,
        );
        self.irqs = self
            .all_irqs
            .iter()
            .filter(|row| self.irq_matches(row))
            .cloned()
            .collect();
        let by = self.view.irq_sort;
        self.irqs.sort_by(|a, b| {
            let o = match by {
                IrqSort::Rate => b.rate.total_cmp(&a.rate),
                IrqSort::Irq => {
                    let n = |r: &IrqRow| r.irq.map_or(u32::MAX, |i| i.0);
                    n(a).cmp(&n(b))
                }
                IrqSort::Device => a.device.cmp(&b.device).then(b.rate.total_cmp(&a.rate)),
            };
            o.then(a.label.cmp(&b.label))
        });
        if self.view.irq_reverse {
            self.irqs.reverse();
        }
        self.view.cpu_selected = self
            .view
            .cpu_selected
            .min(self.cpu_rows.len().saturating_sub(1));
        self.view.irq_selected = self
            .view
            .irq_selected
            .min(self.irqs.len().saturating_sub(1));
    }

    /// Rows of the focused panel on one screen.
    pub fn page_rows(&self) -> usize {
        match self.view.focus {
            Panel::Cpus => self.view.page[0],
            Panel::Irqs => self.view.page[1],
        }
        .max(1)
    }

    /// Findings counted by severity: (warnings, infos).
    pub fn finding_counts(&self) -> (usize, usize) {
        let w = self
            .findings
            .iter()
            .filter(|f| f.severity() == Severity::Warning)
            .count();
        (w, self.findings.len() - w)
    }
}
