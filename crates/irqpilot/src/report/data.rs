//! What a report plots, gathered sample by sample from a [`Sampler`] (a replayed recording, or
//! the twin looked at as it runs): per-CPU device interrupts/s and interrupt time in time bins,
//! each device's interrupt rate in the same bins, the imbalance of every sample, the findings
//! with when they first and last held, and the affinity changes. Bins keep a long recording's
//! plots to a few hundred columns whatever its length; every sample still counts towards its
//! bin (rates are averaged over the bin's time, not sampled).

use crate::live::Sampler;
use crate::live::affinity::{Change, describe};
use crate::live::devices::DeviceIndex;
use irqpilot_core::findings::{Finding, FindingsConfig, Severity, findings};
use irqpilot_core::{CpuId, IrqNum, Machine};
use std::collections::{BTreeMap, HashMap};

/// Most time bins in a plot.
pub const MAX_BINS: u64 = 300;
/// Most findings evaluations over a report (each one walks every IRQ and CPU): one per bin.
pub const MAX_FINDINGS_CHECKS: u64 = MAX_BINS;
/// Devices drawn by name; the rest are summed as "other devices".
pub const MAX_DEVICES: usize = 10;

/// A finding and when it held.
#[derive(Clone, Debug, PartialEq)]
pub struct FindingSpan {
    /// How much it matters.
    pub severity: Severity,
    /// Its description, as last seen.
    pub text: String,
    /// When it was first seen, s from the start.
    pub first_s: f64,
    /// When it was last seen.
    pub last_s: f64,
    /// Checks that saw it.
    pub seen: u64,
}

/// Everything a report plots.
#[derive(Clone, Debug, Default)]
pub struct ReportData {
    /// Width of a bin, s.
    pub bin_s: f64,
    /// End of each bin, s from the start.
    pub times_s: Vec<f64>,
    /// CPU columns.
    pub cpus: Vec<CpuId>,
    /// Per bin, per CPU: device interrupts/s.
    pub cpu_rate: Vec<Vec<f64>>,
    /// Per bin, per CPU: hardirq + softirq time, % (`None` without `/proc/stat`).
    pub cpu_time: Vec<Vec<Option<f64>>>,
    /// Devices by total interrupts, each with its interrupts/s per bin.
    pub devices: Vec<(String, Vec<f64>)>,
    /// (time s, imbalance) of every sample with device load.
    pub imbalance: Vec<(f64, f64)>,
    /// Findings in order of first appearance.
    pub findings: Vec<FindingSpan>,
    /// Seconds between findings checks.
    pub findings_every_s: f64,
    /// (time s, text) of each affinity change or new inventory.
    pub changes: Vec<(f64, String)>,
    /// Samples that produced rates.
    pub samples: u64,
    /// Time covered, s.
    pub span_s: f64,
}

/// The identity of a finding across checks: its JSON without the measured (floating-point)
/// values, so the same problem with a new rate is the same finding.
fn identity(f: &Finding) -> String {
    fn strip(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(m) => {
                m.retain(|_, x| !x.as_number().is_some_and(serde_json::Number::is_f64));
                m.values_mut().for_each(strip);
            }
            serde_json::Value::Array(a) => {
                a.retain(|x| !x.as_number().is_some_and(serde_json::Number::is_f64));
                a.iter_mut().for_each(strip);
            }
            _ => {}
        }
    }
    let mut v = serde_json::to_value(f).unwrap_or_default();
    strip(&mut v);
    v.to_string()
}

#[derive(Debug, Default, Clone)]
struct Bin {
    seconds: f64,
    per_cpu: Vec<f64>,
    time: Vec<(f64, f64)>,
    devices: Vec<f64>,
}

/// Gathers [`ReportData`] sample by sample.
#[derive(Debug)]
pub struct Builder {
    start_ns: u64,
    bin_ns: u64,
    findings_every_ns: u64,
    last_check_ns: Option<u64>,
    machine: Machine,
    config: FindingsConfig,
    index: DeviceIndex,
    device_of: HashMap<IrqNum, Option<usize>>,
    device_names: Vec<String>,
    cpus: Vec<CpuId>,
    column_of: HashMap<CpuId, usize>,
    bins: Vec<Bin>,
    imbalance: Vec<(f64, f64)>,
    spans: Vec<FindingSpan>,
    span_of: HashMap<String, usize>,
    changes: Vec<(f64, String)>,
    samples: u64,
    last_ns: u64,
    /// Per-sample scratch (reused): the bin column of each CPU, device shares.
    cols: Vec<usize>,
    dev_add: Vec<(usize, f64)>,
}

impl Builder {
    /// A builder for samples from `start_ns` over about `span_ns`, taken about every
    /// `interval_ns` (these set the bin width, at least one interval, and how often findings
    /// are checked; later samples still fit).
    pub fn new(
        machine: &Machine,
        config: FindingsConfig,
        start_ns: u64,
        span_ns: u64,
        interval_ns: u64,
    ) -> Builder {
        let cpus: Vec<CpuId> = machine.topology.online.iter().collect();
        Builder {
            start_ns,
            bin_ns: (span_ns / MAX_BINS).max(interval_ns).max(1),
            findings_every_ns: (span_ns / MAX_FINDINGS_CHECKS).max(interval_ns).max(1),
            last_check_ns: None,
            index: DeviceIndex::new(machine),
            machine: machine.clone(),
            config,
            device_of: HashMap::new(),
            device_names: Vec::new(),
            column_of: cpus.iter().enumerate().map(|(i, c)| (*c, i)).collect(),
            cpus,
            bins: Vec::new(),
            imbalance: Vec::new(),
            spans: Vec::new(),
            span_of: HashMap::new(),
            changes: Vec::new(),
            samples: 0,
            last_ns: start_ns,
            cols: Vec::new(),
            dev_add: Vec::new(),
        }
    }

    fn secs(&self, ns: u64) -> f64 {
        ns.saturating_sub(self.start_ns) as f64 / 1e9
    }

    /// A new inventory (IRQs came or went).
    pub fn machine(&mut self, m: &Machine, at_ns: u64) {
        self.machine = m.clone();
        self.index = DeviceIndex::new(m);
        self.device_of.clear();
        self.changes.push((
            self.secs(at_ns),
            "inventory read again (IRQs came or went)".into(),
        ));
    }

    /// Affinity changes seen.
    pub fn affinity(&mut self, changes: &[Change]) {
        for c in changes {
            if let Some(i) = self.machine.irqs.get_mut(&c.irq) {
                i.requested.clone_from(&c.after.requested);
                i.effective.clone_from(&c.after.effective);
            }
            let label = self.index.known(c.irq).cloned().unwrap_or_default();
            self.changes.push((
                self.secs(c.at_ns),
                format!(
                    "IRQ {} {} {}: {} -> {}",
                    c.irq,
                    label.device,
                    label.queue,
                    describe(&c.before),
                    describe(&c.after)
                ),
            ));
        }
    }

    fn column(&mut self, cpu: CpuId) -> usize {
        if let Some(c) = self.column_of.get(&cpu) {
            return *c;
        }
        self.cpus.push(cpu);
        let c = self.cpus.len() - 1;
        self.column_of.insert(cpu, c);
        c
    }

    fn device(&mut self, irq: IrqNum, name: &str, sampler_says_device: bool) -> Option<usize> {
        if let Some(d) = self.device_of.get(&irq) {
            return *d;
        }
        let label = self.index.label(irq, name);
        let d = (sampler_says_device && !label.device.is_empty()).then(|| {
            match self.device_names.iter().position(|n| *n == label.device) {
                Some(i) => i,
                None => {
                    self.device_names.push(label.device.clone());
                    self.device_names.len() - 1
                }
            }
        });
        self.device_of.insert(irq, d);
        d
    }

    /// Takes in a sample that produced rates.
    pub fn add(&mut self, s: &Sampler) {
        let r = s.rates();
        let t = s.snapshot().taken_at.0;
        let dt = r.interval_ns as f64 / 1e9;
        if dt <= 0.0 {
            return;
        }
        self.samples += 1;
        self.last_ns = self.last_ns.max(t);
        // Columns first (a CPU may come online mid-recording).
        let mut cols = std::mem::take(&mut self.cols);
        cols.clear();
        cols.extend(r.cpus.iter().map(|c| self.column(*c)));
        let n = self.cpus.len();
        let loads = s.device_loads();
        let mut dev_add = std::mem::take(&mut self.dev_add);
        dev_add.clear();
        for (i, row) in r.rows.iter().enumerate() {
            let Some(irq) = row.label.irq() else { continue };
            if row.total_per_sec <= 0.0 {
                continue;
            }
            if let Some(d) = self.device(irq, s.name(i), s.is_device_row(i)) {
                dev_add.push((d, row.total_per_sec));
            }
        }
        let ndev = self.device_names.len();
        // The interval (t - dt, t] is shared among the bins it overlaps, by time.
        let from = t
            .saturating_sub(r.interval_ns)
            .saturating_sub(self.start_ns);
        let to = t.saturating_sub(self.start_ns);
        let first_bin = (from / self.bin_ns) as usize;
        let last_bin = (to.saturating_sub(1) / self.bin_ns) as usize;
        if self.bins.len() <= last_bin {
            self.bins.resize(last_bin + 1, Bin::default());
        }
        for bin in first_bin..=last_bin {
            let b0 = bin as u64 * self.bin_ns;
            let overlap = (to.min(b0 + self.bin_ns).saturating_sub(from.max(b0))) as f64 / 1e9;
            if overlap <= 0.0 {
                continue;
            }
            let b = &mut self.bins[bin];
            b.per_cpu.resize(n, 0.0);
            b.time.resize(n, (0.0, 0.0));
            b.devices.resize(ndev, 0.0);
            b.seconds += overlap;
            for (j, &col) in cols.iter().enumerate() {
                b.per_cpu[col] += loads.get(j).copied().unwrap_or(0.0) * overlap;
                if let Some(c) = r.per_cpu.get(j) {
                    if let (Some(h), Some(so)) = (c.hardirq_pct, c.softirq_pct) {
                        b.time[col].0 += (h + so) * overlap;
                        b.time[col].1 += overlap;
                    }
                }
            }
            for (d, v) in &dev_add {
                b.devices[*d] += v * overlap;
            }
        }
        self.cols = cols;
        self.dev_add = dev_add;
        if let Some(v) = s.imbalance() {
            self.imbalance.push((self.secs(t), v));
        }
        if self
            .last_check_ns
            .is_none_or(|c| t.saturating_sub(c) >= self.findings_every_ns)
        {
            self.last_check_ns = Some(t);
            let at = self.secs(t);
            for f in findings(&self.machine, Some(r), &self.config) {
                let key = identity(&f);
                match self.span_of.get(&key) {
                    Some(&i) => {
                        let sp = &mut self.spans[i];
                        sp.last_s = at;
                        sp.seen += 1;
                        sp.text = f.describe();
                    }
                    None => {
                        self.span_of.insert(key, self.spans.len());
                        self.spans.push(FindingSpan {
                            severity: f.severity(),
                            text: f.describe(),
                            first_s: at,
                            last_s: at,
                            seen: 1,
                        });
                    }
                }
            }
        }
    }

    /// The data, devices ordered by their total interrupts.
    pub fn finish(self) -> ReportData {
        let n = self.cpus.len();
        let ndev = self.device_names.len();
        let mut times_s = Vec::new();
        let mut cpu_rate = Vec::new();
        let mut cpu_time = Vec::new();
        let mut dev_rate = vec![Vec::new(); ndev];
        for (k, b) in self.bins.iter().enumerate() {
            if b.seconds <= 0.0 {
                continue;
            }
            times_s.push((k as u64 + 1) as f64 * self.bin_ns as f64 / 1e9);
            let mut rates = b.per_cpu.clone();
            rates.resize(n, 0.0);
            cpu_rate.push(rates.iter().map(|v| v / b.seconds).collect());
            let mut time = b.time.clone();
            time.resize(n, (0.0, 0.0));
            cpu_time.push(
                time.iter()
                    .map(|(v, s)| (*s > 0.0).then(|| v / s))
                    .collect(),
            );
            for (d, series) in dev_rate.iter_mut().enumerate() {
                series.push(b.devices.get(d).copied().unwrap_or(0.0) / b.seconds);
            }
        }
        let mut devices: Vec<(String, Vec<f64>)> =
            self.device_names.into_iter().zip(dev_rate).collect();
        devices.sort_by(|a, b| {
            let sa: f64 = a.1.iter().sum();
            let sb: f64 = b.1.iter().sum();
            sb.total_cmp(&sa).then(a.0.cmp(&b.0))
        });
        if devices.len() > MAX_DEVICES {
            let rest: Vec<(String, Vec<f64>)> = devices.split_off(MAX_DEVICES - 1);
            let count = rest.len();
            let mut sum = vec![0.0; times_s.len()];
            for (_, s) in &rest {
                for (a, b) in sum.iter_mut().zip(s) {
                    *a += b;
                }
            }
            devices.push((format!("{count} other devices"), sum));
        }
        let mut cpus_by_id: BTreeMap<CpuId, usize> = BTreeMap::new();
        for (i, c) in self.cpus.iter().enumerate() {
            cpus_by_id.insert(*c, i);
        }
        // Columns in CPU order (they were numbered as first seen).
        let order: Vec<usize> = cpus_by_id.values().copied().collect();
        let reorder = |rows: Vec<Vec<f64>>| -> Vec<Vec<f64>> {
            rows.into_iter()
                .map(|r| {
                    order
                        .iter()
                        .map(|&i| r.get(i).copied().unwrap_or(0.0))
                        .collect()
                })
                .collect()
        };
        let cpu_time = cpu_time
            .into_iter()
            .map(|r: Vec<Option<f64>>| order.iter().map(|&i| r.get(i).copied().flatten()).collect())
            .collect();
        ReportData {
            bin_s: self.bin_ns as f64 / 1e9,
            times_s,
            cpus: cpus_by_id.keys().copied().collect(),
            cpu_rate: reorder(cpu_rate),
            cpu_time,
            devices,
            imbalance: self.imbalance,
            findings: self.spans,
            findings_every_s: self.findings_every_ns as f64 / 1e9,
            changes: self.changes,
            samples: self.samples,
            span_s: self.last_ns.saturating_sub(self.start_ns) as f64 / 1e9,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use irqpilot_core::{CpuSet, NodeId};

    #[test]
    fn identity_ignores_measured_rates() {
        let a = Finding::DeviceIrqOnIsolatedCpu {
            irq: IrqNum(5),
            name: "eth0-TxRx-5".into(),
            cpus: CpuSet::single(CpuId(5)),
            rate_per_sec: Some(1234.5),
            managed: Some(false),
        };
        let mut b = a.clone();
        if let Finding::DeviceIrqOnIsolatedCpu { rate_per_sec, .. } = &mut b {
            *rate_per_sec = Some(99.0);
        }
        assert_eq!(identity(&a), identity(&b));
        let c = Finding::RemoteNumaIrq {
            irq: IrqNum(5),
            name: "x".into(),
            device_node: NodeId(0),
            cpu: CpuId(1),
            cpu_node: NodeId(1),
        };
        assert_ne!(identity(&a), identity(&c));
    }
}
