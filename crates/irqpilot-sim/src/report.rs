//! The result of a run, as stable JSON (the contract scripts rely on) and as a table.

use crate::config::WorkloadCfg;
use crate::metrics::SeriesPoint;
use crate::sim::Sim;
use crate::time::SEC;
use serde::Serialize;

/// Request or I/O latency percentiles, microseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Latency {
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Mean.
    pub mean: f64,
    /// Samples.
    pub count: u64,
}

/// One CPU over the measured interval.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CpuReport {
    /// CPU id.
    pub cpu: u32,
    /// Device interrupts handled per second.
    pub interrupts_per_sec: f64,
    /// Share of time in hardirq, %.
    pub hardirq_pct: f64,
    /// Share of time in softirq, %.
    pub softirq_pct: f64,
    /// Share of time in application work, %.
    pub app_pct: f64,
}

/// One interrupt vector.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SourceReport {
    /// Linux IRQ number.
    pub irq: u32,
    /// Action name.
    pub name: String,
    /// Effective CPU at the end.
    pub cpu: u32,
    /// Interrupts per second.
    pub interrupts_per_sec: f64,
    /// Programmed moderation delay at the end, us.
    pub moderation_delay_us: f64,
    /// The interrupt rate the driver reports for its programmed throttle (AIM: FreeBSD's
    /// `interrupt_rate` sysctl, e.g. 20,032 for the 20,000 class).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver_rate_per_sec: Option<u32>,
}

/// Platform MSI delivery.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PlatformReport {
    /// The knee in force (interrupts/s).
    pub knee_per_sec: f64,
    /// MSI writes per second over the measured interval.
    pub msi_per_sec: f64,
}

/// How evenly units of equal demand were served over the measured interval, within one
/// workload (units of different workloads are never pooled: bytes per flow and I/Os per queue
/// are not one population): bulk flows (bytes delivered), bulk-transmit queues (bytes sent),
/// RPC clients (transactions), NVMe queues of a fio workload (I/Os completed). Units that did
/// nothing at all are left out (they never started). [`Report::fairness`] is the least fair
/// workload's.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Fairness {
    /// Jain's index `(sum x)^2 / (n sum x^2)`: 1 = equal, 1/n = one queue gets everything.
    pub jain: f64,
    /// Least-served over best-served queue.
    pub min_over_max: f64,
    /// Units counted.
    pub units: usize,
}

/// Jain's index and min/max of non-zero work amounts.
pub fn fairness(work: &[f64]) -> Option<Fairness> {
    let x: Vec<f64> = work.iter().copied().filter(|v| *v > 0.0).collect();
    if x.is_empty() {
        return None;
    }
    let sum: f64 = x.iter().sum();
    let sq: f64 = x.iter().map(|v| v * v).sum();
    let max = x.iter().copied().fold(0.0, f64::max);
    let min = x.iter().copied().fold(f64::INFINITY, f64::min);
    Some(Fairness {
        jain: round(sum * sum / (x.len() as f64 * sq), 4),
        min_over_max: round(min / max, 4),
        units: x.len(),
    })
}

/// One workload's results.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct WorkloadReport {
    /// Its index in the scenario's `[[workload]]` list.
    pub index: usize,
    /// `bulk`, `bulk-tx`, `poisson`, `rpc` or `fio`.
    pub kind: &'static str,
    /// Latency of its requests or I/Os (a bulk workload's: its latency probe's round trips).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_us: Option<Latency>,
    /// Fairness among its units of demand, and what a unit's work counts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fairness: Option<Fairness>,
    /// The unit of [`WorkloadReport::fairness`].
    pub fairness_unit: &'static str,
}

fn latency_of(h: &hdrhistogram::Histogram<u64>) -> Latency {
    Latency {
        p50: round(h.value_at_quantile(0.50) as f64 / 1000.0, 3),
        p95: round(h.value_at_quantile(0.95) as f64 / 1000.0, 3),
        p99: round(h.value_at_quantile(0.99) as f64 / 1000.0, 3),
        p999: round(h.value_at_quantile(0.999) as f64 / 1000.0, 3),
        mean: round(h.mean() / 1000.0, 3),
        count: h.len(),
    }
}

/// Packets and I/Os lost.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Drops {
    /// Packets dropped at the NIC (buffer or RX ring full).
    pub nic_packets: u64,
}

/// GSIM at the end of the run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct GsimReport {
    /// Mean per-CPU delay (`mod_ns`) over CPUs that took moderated interrupts, us.
    pub mean_delay_us: f64,
    /// Largest per-CPU delay, us.
    pub max_delay_us: f64,
    /// Epochs, over all CPUs, that ended above target.
    pub epochs_above: u64,
}

/// Simulation bookkeeping (deterministic counts only; wall time is never in the JSON).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SimStats {
    /// Events handled.
    pub events: u64,
    /// Packets simulated (received and transmitted), in trains.
    pub packets: u64,
}

/// What the placement policy did during the whole run (warm-up included).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PlacementReport {
    /// `none`, `rotate`, `static`, `irqpilot` or `irqbalance`.
    pub policy: String,
    /// Rounds that asked for at least one affinity change (rotations, control periods).
    pub rounds: u64,
    /// Affinity writes that changed an IRQ's requested CPUs.
    pub writes: u64,
    /// Moves of an effective CPU over the whole run (`migrations` counts the measured part).
    pub migrations_total: u64,
    /// Affinity writes the kernel refused, by refusal (`no-vector-space` is ENOSPC,
    /// `managed` EIO/EPERM, `invalid` EINVAL).
    pub refused: std::collections::BTreeMap<String, u64>,
    /// NIC channel counts the policy set (`ethtool -L`), by interface.
    pub channels: std::collections::BTreeMap<String, u32>,
    /// CPUs the machine isolates (`isolcpus=`, `nohz_full=`).
    pub isolated_cpus: Vec<u32>,
    /// Device interrupts per second on those CPUs during the measured interval.
    pub isolated_interrupts_per_sec: f64,
}

/// A run's results.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Report {
    /// Scenario name.
    pub scenario: String,
    /// Seed.
    pub seed: u64,
    /// Measured interval (after warm-up), seconds.
    pub duration_s: f64,
    /// Warm-up excluded, seconds.
    pub warmup_s: f64,
    /// Interrupts per second, all vectors.
    pub interrupts_per_sec: f64,
    /// Received goodput, Gb/s (NIC scenarios).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throughput_gbps: Option<f64>,
    /// Received packets, millions per second (NIC scenarios).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mpps: Option<f64>,
    /// Transmitted goodput, Gb/s (transmit workloads).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_gbps: Option<f64>,
    /// Completed I/Os per second (NVMe scenarios).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iops: Option<f64>,
    /// Completed requests per second (request/response scenarios).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transactions_per_sec: Option<f64>,
    /// Requests per second handed to an application thread on another CPU than the softirq
    /// that received them (workloads with `app_cpus`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote_wakeups_per_sec: Option<f64>,
    /// IPIs per second that RPS sent to schedule another CPU's backlog (workloads with
    /// `steering = "rps"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rps_ipis_per_sec: Option<f64>,
    /// Wake-ups per second that put a scheduled thread on another CPU than it last ran on
    /// (workloads with `app_schedule = "scheduled"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread_migrations_per_sec: Option<f64>,
    /// Request (or I/O) latency.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_us: Option<Latency>,
    /// Per CPU.
    pub per_cpu: Vec<CpuReport>,
    /// Per vector.
    pub per_source: Vec<SourceReport>,
    /// Platform.
    pub platform: PlatformReport,
    /// Losses.
    pub drops: Drops,
    /// How evenly units of demand were served: the least fair workload's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fairness: Option<Fairness>,
    /// Per workload: latency and fairness.
    pub workloads: Vec<WorkloadReport>,
    /// Kernel software moderation (GSIM) state at the end, when enabled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gsim: Option<GsimReport>,
    /// IRQ moves that changed an effective CPU during the measured interval.
    pub migrations: u64,
    /// What the placement policy did, when the scenario has one or isolates CPUs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placement: Option<PlacementReport>,
    /// Time series.
    pub series: Vec<SeriesPoint>,
    /// Bookkeeping.
    pub sim: SimStats,
}

fn round(v: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    (v * f).round() / f
}

impl Sim {
    /// The report of the run so far (normally called after [`Sim::run`]).
    pub fn report(&self) -> Report {
        let m = &self.m;
        let warm = m.warm_at.unwrap_or(self.now);
        let secs = (self.now.since(warm) as f64 / SEC as f64).max(1e-12);
        let d = m.c.minus(&m.base);
        let has_nic = self.sc.workload.iter().any(|w| {
            matches!(
                w,
                WorkloadCfg::Bulk { .. }
                    | WorkloadCfg::BulkTx { .. }
                    | WorkloadCfg::Rpc { .. }
                    | WorkloadCfg::Poisson { .. }
            )
        });
        let has_tx = self
            .sc
            .workload
            .iter()
            .any(|w| matches!(w, WorkloadCfg::BulkTx { .. }));
        let has_nvme = self
            .sc
            .workload
            .iter()
            .any(|w| matches!(w, WorkloadCfg::Fio { .. }));
        let has_req = self
            .sc
            .workload
            .iter()
            .any(|w| matches!(w, WorkloadCfg::Rpc { .. } | WorkloadCfg::Poisson { .. }));
        let latency = m.latency.as_ref().filter(|h| !h.is_empty()).map(latency_of);
        let now_work = self.queue_work();
        let workloads: Vec<WorkloadReport> = self
            .sc
            .workload
            .iter()
            .enumerate()
            .map(|(i, w)| {
                let (kind, unit) = w.kind_and_unit();
                let base = m.base_queue_work.get(i);
                let work: Vec<f64> = now_work
                    .get(i)
                    .map(|v| {
                        v.iter()
                            .enumerate()
                            .map(|(j, a)| {
                                let b = base.and_then(|b| b.get(j)).copied().unwrap_or(0);
                                a.saturating_sub(b) as f64
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                WorkloadReport {
                    index: i,
                    kind,
                    latency_us: m
                        .latency_by_workload
                        .get(i)
                        .and_then(|h| h.as_ref())
                        .filter(|h| !h.is_empty())
                        .map(latency_of),
                    fairness: fairness(&work),
                    fairness_unit: unit,
                }
            })
            .collect();
        let least_fair = workloads
            .iter()
            .filter_map(|w| w.fairness.as_ref())
            .min_by(|a, b| a.jain.total_cmp(&b.jain))
            .cloned();
        let elapsed_ns = self.now.since(warm).max(1) as f64;
        let per_cpu = self
            .cpus
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let (h0, s0, a0, i0) = m.base_cpu.get(i).copied().unwrap_or_default();
                CpuReport {
                    cpu: i as u32,
                    interrupts_per_sec: round((c.interrupts - i0) as f64 / secs, 1),
                    hardirq_pct: round((c.hard_ns - h0) as f64 * 100.0 / elapsed_ns, 3),
                    softirq_pct: round((c.soft_ns - s0) as f64 * 100.0 / elapsed_ns, 3),
                    app_pct: round((c.app_ns - a0) as f64 * 100.0 / elapsed_ns, 3),
                }
            })
            .collect();
        let per_source = self
            .srcs
            .iter()
            .enumerate()
            .map(|(i, s)| SourceReport {
                irq: s.irq,
                name: s.name.clone(),
                cpu: s.cpu,
                interrupts_per_sec: round(
                    (s.irqs - m.base_src_irqs.get(i).copied().unwrap_or(0)) as f64 / secs,
                    1,
                ),
                moderation_delay_us: round(s.moder.delay_ns() as f64 / 1000.0, 3),
                driver_rate_per_sec: match &s.driver {
                    crate::model::Driver::Aim { aim, .. } => Some(aim.reported_rate()),
                    _ => None,
                },
            })
            .collect();
        let dropped = self.nics.iter().map(|n| n.dropped).sum::<u64>()
            + self.nq.iter().map(|q| q.rx.dropped).sum::<u64>();
        Report {
            scenario: self.sc.name.clone(),
            seed: self.sc.seed,
            duration_s: round(secs, 6),
            warmup_s: round(self.sc.warmup_ms as f64 / 1000.0, 6),
            interrupts_per_sec: round(d.interrupts as f64 / secs, 1),
            throughput_gbps: has_nic.then(|| round(d.rx_bytes as f64 * 8.0 / secs / 1e9, 4)),
            mpps: has_nic.then(|| round(d.rx_pkts as f64 / secs / 1e6, 4)),
            tx_gbps: has_tx.then(|| round(d.tx_bytes as f64 * 8.0 / secs / 1e9, 4)),
            iops: has_nvme.then(|| round(d.ios as f64 / secs, 0)),
            transactions_per_sec: has_req.then(|| round(d.transactions as f64 / secs, 1)),
            remote_wakeups_per_sec: self
                .wls
                .iter()
                .any(|w| !w.app_cpus.is_empty())
                .then(|| round(d.remote_wakeups as f64 / secs, 1)),
            rps_ipis_per_sec: self
                .wls
                .iter()
                .any(|w| w.steering == crate::config::Steering::Rps)
                .then(|| round(d.rps_ipis as f64 / secs, 1)),
            thread_migrations_per_sec: self
                .wls
                .iter()
                .any(|w| !w.threads.is_empty())
                .then(|| round(d.thread_migrations as f64 / secs, 1)),
            latency_us: latency,
            per_cpu,
            per_source,
            platform: PlatformReport {
                knee_per_sec: self.sc.platform.knee_per_sec(),
                msi_per_sec: round(d.interrupts as f64 / secs, 1),
            },
            drops: Drops {
                nic_packets: dropped,
            },
            fairness: least_fair,
            workloads,
            gsim: self.gsim.cfg.enabled.then(|| {
                let active: Vec<f64> = self
                    .gsim
                    .cpus
                    .iter()
                    .filter(|c| c.epoch_start.ns() > 0)
                    .map(|c| c.mod_ns as f64 / 1000.0)
                    .collect();
                GsimReport {
                    mean_delay_us: round(
                        active.iter().sum::<f64>() / active.len().max(1) as f64,
                        3,
                    ),
                    max_delay_us: round(active.iter().copied().fold(0.0, f64::max), 3),
                    epochs_above: self.gsim.cpus.iter().map(|c| c.epochs_above).sum(),
                }
            }),
            migrations: self.migrations - self.migrations_at_warmup.min(self.migrations),
            placement: None,
            series: m.series.clone(),
            sim: SimStats {
                events: self.events.handled(),
                packets: self.nq.iter().map(|q| q.rx_pkts + q.tx_pkts).sum(),
            },
        }
    }
}
