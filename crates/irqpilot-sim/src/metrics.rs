//! Run metrics: counters since the end of warm-up, a latency histogram, and a time series.

use crate::time::SimTime;
use hdrhistogram::Histogram;
use serde::Serialize;

/// One point of the time series.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SeriesPoint {
    /// End of the interval, ms.
    pub t_ms: f64,
    /// Interrupts/s over the interval, all sources.
    pub interrupts_per_sec: f64,
    /// Received goodput, Gb/s.
    pub throughput_gbps: f64,
    /// Completed I/Os per second.
    pub iops: f64,
    /// Completed requests per second.
    pub transactions_per_sec: f64,
    /// Platform DMA efficiency at the end of the interval (1 = unaffected).
    pub dma_efficiency: f64,
    /// Mean programmed moderation delay over all vectors, us.
    pub moderation_delay_us: f64,
}

/// Cumulative counters (from the start of the run); reports subtract the warm-up baseline.
#[derive(Clone, Debug, Default)]
pub(crate) struct Counters {
    pub rx_bytes: u64,
    pub rx_pkts: u64,
    pub tx_bytes: u64,
    pub ios: u64,
    pub transactions: u64,
    pub interrupts: u64,
    /// Requests handed to an application thread on another CPU than their softirq's.
    pub remote_wakeups: u64,
    /// IPIs RPS sent to schedule another CPU's backlog.
    pub rps_ipis: u64,
    /// Wake-ups that put a scheduled thread on another CPU than it last ran on.
    pub thread_migrations: u64,
}

impl Counters {
    pub(crate) fn minus(&self, base: &Counters) -> Counters {
        Counters {
            rx_bytes: self.rx_bytes - base.rx_bytes,
            rx_pkts: self.rx_pkts - base.rx_pkts,
            tx_bytes: self.tx_bytes - base.tx_bytes,
            ios: self.ios - base.ios,
            transactions: self.transactions - base.transactions,
            interrupts: self.interrupts - base.interrupts,
            remote_wakeups: self.remote_wakeups - base.remote_wakeups,
            rps_ipis: self.rps_ipis - base.rps_ipis,
            thread_migrations: self.thread_migrations - base.thread_migrations,
        }
    }
}

/// Everything measured during a run.
#[derive(Debug)]
pub(crate) struct Metrics {
    pub c: Counters,
    /// Counters at the end of warm-up.
    pub base: Counters,
    pub warm_at: Option<SimTime>,
    /// Per-vector interrupt counts at the end of warm-up.
    pub base_src_irqs: Vec<u64>,
    /// Per-CPU (hard, soft, app) ns and interrupts at the end of warm-up.
    pub base_cpu: Vec<(u64, u64, u64, u64)>,
    /// Work per unit of demand of each workload at the end of warm-up (`Sim::queue_work`).
    pub base_queue_work: Vec<Vec<u64>>,
    /// Request or I/O latency, ns (`None` only if the histogram could not be built).
    pub latency: Option<Histogram<u64>>,
    /// The same per workload (a bulk workload's are its latency probe's).
    pub latency_by_workload: Vec<Option<Histogram<u64>>>,
    pub series: Vec<SeriesPoint>,
    /// Current sampling step of the series, ms (doubles when the series is full).
    pub series_step_ms: u64,
    pub last_sample: (SimTime, Counters),
}

/// Most points kept in the time series: when full, neighbours are merged and the step doubles,
/// so a long run's memory does not grow with its duration.
pub const MAX_SERIES_POINTS: usize = 4096;

impl Metrics {
    /// Appends a point, halving the resolution when the series is full.
    pub(crate) fn push_point(&mut self, p: SeriesPoint) {
        self.series.push(p);
        if self.series.len() >= MAX_SERIES_POINTS {
            let merged: Vec<SeriesPoint> = self
                .series
                .chunks(2)
                .map(|c| match c {
                    [a, b] => SeriesPoint {
                        t_ms: b.t_ms,
                        interrupts_per_sec: (a.interrupts_per_sec + b.interrupts_per_sec) / 2.0,
                        throughput_gbps: (a.throughput_gbps + b.throughput_gbps) / 2.0,
                        iops: (a.iops + b.iops) / 2.0,
                        transactions_per_sec: (a.transactions_per_sec + b.transactions_per_sec)
                            / 2.0,
                        dma_efficiency: b.dma_efficiency,
                        moderation_delay_us: b.moderation_delay_us,
                    },
                    _ => c[0].clone(),
                })
                .collect();
            self.series = merged;
            self.series_step_ms *= 2;
        }
    }
}

impl Metrics {
    pub(crate) fn new() -> Metrics {
        // 1 ns .. 100 s at 3 significant digits (valid bounds, so this is always Some).
        let latency = Histogram::new_with_bounds(1, 100_000_000_000, 3).ok();
        Metrics {
            c: Counters::default(),
            base: Counters::default(),
            warm_at: None,
            base_src_irqs: Vec::new(),
            base_cpu: Vec::new(),
            base_queue_work: Vec::new(),
            latency,
            latency_by_workload: Vec::new(),
            series: Vec::new(),
            series_step_ms: 0,
            last_sample: (SimTime::ZERO, Counters::default()),
        }
    }

    /// Whether measurements count now.
    pub(crate) fn counting(&self) -> bool {
        self.warm_at.is_some()
    }

    /// Records `n` requests or I/Os of latency `ns`, for workload `wl` when known.
    pub(crate) fn record_latency(&mut self, ns: u64, n: u64, wl: Option<u16>) {
        if !self.counting() {
            return;
        }
        if let Some(h) = self.latency.as_mut() {
            // Values above the bound saturate rather than fail.
            h.saturating_record_n(ns.max(1), n);
        }
        if let Some(wl) = wl.map(usize::from) {
            if self.latency_by_workload.len() <= wl {
                self.latency_by_workload.resize_with(wl + 1, || None);
            }
            let slot = &mut self.latency_by_workload[wl];
            if slot.is_none() {
                *slot = Histogram::new_with_bounds(1, 100_000_000_000, 3).ok();
            }
            if let Some(h) = slot.as_mut() {
                h.saturating_record_n(ns.max(1), n);
            }
        }
    }
}
