//! State of the simulated machine: CPUs, interrupt sources (MSI-X vectors), NIC queues, NVMe
//! queues and workloads. Behaviour lives in `sim.rs`; this module only holds data.

use crate::config::{Costs, Scenario};
use crate::cq::{Cq, HwMod};
use crate::time::{SimTime, us_to_ns};
use irqpilot_core::moderation::{aim, dim};
use std::collections::VecDeque;

/// Costs in nanoseconds, resolved once from the scenario.
#[derive(Clone, Debug)]
pub(crate) struct Ns {
    pub hardirq: u64,
    pub indirect: f64,
    pub indirect_gap: f64,
    pub napi_poll: u64,
    pub rx_pkt: f64,
    pub copy_per_byte: f64,
    pub tx_done: f64,
    pub nvme_cqe: u64,
    pub nvme_io_app: u64,
    pub napi_weight: u64,
    pub mask_unmask: u64,
    pub migration: u64,
    pub remote: u64,
    /// Interrupts run cache-cold after a move, and the extra hardirq cost of each.
    pub cold_n: u32,
    pub cold_extra: u64,
    pub remote_packet_factor: f64,
    pub smt_slowdown: f64,
    pub wakeup_ipi: u64,
    pub remote_cache: u64,
    pub remote_node_app: u64,
    pub rx_driver: f64,
}

impl Ns {
    pub(crate) fn new(c: &Costs) -> Ns {
        Ns {
            hardirq: us_to_ns(c.hardirq_us),
            indirect: c.indirect_us.max(0.0) * 1000.0,
            indirect_gap: (c.indirect_full_gap_us * 1000.0).max(1.0),
            napi_poll: us_to_ns(c.napi_poll_us),
            rx_pkt: c.rx_packet_ns.max(0.0),
            copy_per_byte: c.rx_copy_ns_per_byte.max(0.0),
            tx_done: c.tx_completion_ns.max(0.0),
            nvme_cqe: us_to_ns(c.nvme_cqe_us),
            nvme_io_app: us_to_ns(c.nvme_io_app_us),
            napi_weight: c.napi_weight.max(1) as u64,
            mask_unmask: us_to_ns(c.mask_unmask_us),
            migration: us_to_ns(c.migration_penalty_us),
            remote: us_to_ns(c.remote_node_penalty_us),
            cold_n: c.migration_cold_interrupts,
            cold_extra: (c.indirect_us.max(0.0) * (c.migration_cold_factor - 1.0).max(0.0) * 1000.0)
                as u64,
            remote_packet_factor: if c.remote_node_packet_factor.is_finite() {
                c.remote_node_packet_factor.max(0.0)
            } else {
                1.0
            },
            smt_slowdown: if c.smt_slowdown.is_finite() {
                c.smt_slowdown.max(0.0)
            } else {
                1.0
            },
            wakeup_ipi: us_to_ns(c.wakeup_ipi_us),
            remote_cache: us_to_ns(c.remote_cache_us),
            remote_node_app: us_to_ns(c.remote_node_app_us),
            rx_driver: c.rx_driver_ns.max(0.0).min(c.rx_packet_ns.max(0.0)),
        }
    }
}

/// Events. Eight bytes and `Copy` so the heap stays cheap (checked by a test).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Ev {
    /// A bulk flow's chunk reaches the NIC.
    Chunk { wl: u16, flow: u32 },
    /// A bulk-transmit application sends a TSO segment on queue `q`.
    TxSegment { wl: u16, q: u32 },
    /// A tracked request (RPC client `client`, or Poisson id) reaches the NIC; its send time is
    /// in the workload's `sent` table.
    Request { wl: u16, client: u32 },
    /// An RPC client sends its next request.
    ClientSend { wl: u16, client: u32 },
    /// An RPS IPI reaches `cpu`: its backlog's NAPI is scheduled.
    RpsIpi { cpu: u32 },
    /// Next open-loop Poisson arrival.
    PoissonArrive { wl: u16 },
    /// The device's moderation may let vector `src` fire (checked against its `timer_at`).
    Fire { src: u32 },
    /// The hardirq of `src` finished (on `Source::hard_cpu`).
    HardDone { src: u32 },
    /// The softirq job on `cpu` may have finished (checked against its `end`).
    SoftDone { cpu: u32 },
    /// The application job on `cpu` may have finished.
    AppDone { cpu: u32 },
    /// The GSIM holdoff timer of `cpu` expires.
    GsimTimer { cpu: u32 },
    /// Time-series sample.
    Sample,
    /// End of warm-up: metrics start counting.
    WarmupEnd,
    /// The `job`-th fio jobs of NVMe queue `q` may submit a read their rate held back.
    FioSubmit { q: u32, job: u16 },
}

/// Work running on a CPU below hardirq level.
///
/// Preemption only ever moves `end` later, so a job keeps exactly one event in the queue: when
/// it pops early it is pushed again at the new `end` (no stale events pile up in the heap).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Job {
    pub end: SimTime,
    /// Own cost (excluding time stolen by higher priorities), accounted at completion.
    pub cost: u64,
    pub what: JobKind,
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum JobKind {
    /// NAPI poll of NIC queue `q`, taking `rx` packets and `tx` completions.
    Poll { q: u32, rx: u64, tx: u64 },
    /// The CPU's RPS backlog (`process_backlog`): the stack of its first `n` requests.
    Backlog { n: u32 },
    /// Application work.
    App(AppWork),
}

/// Application work items.
#[derive(Clone, Copy, Debug)]
pub(crate) enum AppWork {
    /// Serve one request that arrived on NIC queue `q`.
    Serve {
        wl: u16,
        q: u32,
        client: u32,
        sent: u64,
    },
    /// Reap `n` completed I/Os on NVMe queue `q` and submit `n` new ones.
    Resubmit { q: u32, n: u32, wl: u16 },
}

/// Application work waiting for its CPU: it may not start before `ready` (a cross-CPU
/// wake-up), and costs `extra_ns` on top of its own work (cache lines pulled across, the stack
/// under RFS).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Queued {
    pub ready: SimTime,
    pub extra_ns: u64,
    pub work: AppWork,
}

/// One logical CPU.
#[derive(Clone, Debug, Default)]
pub(crate) struct Cpu {
    pub hard_until: SimTime,
    pub last_irq: SimTime,
    pub soft: Option<Job>,
    pub poll_list: VecDeque<u32>,
    pub app: Option<Job>,
    pub app_queue: VecDeque<Queued>,
    /// Requests RPS put in this CPU's backlog, for its softirq to run their stack.
    pub backlog: VecDeque<AppWork>,
    /// The backlog's NAPI is scheduled (an IPI on its way, on the poll list, or polling).
    pub backlog_scheduled: bool,
    /// Time in hardirq, softirq and application work (ns).
    pub hard_ns: u64,
    pub soft_ns: u64,
    pub app_ns: u64,
    /// Softirq handler invocations (for `/proc/softirqs` NET_RX).
    pub net_rx_softirqs: u64,
    pub interrupts: u64,
}

/// What a vector belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dev {
    Nic(u32),
    Nvme(u32),
}

/// Moderation logic run by the simulated driver.
#[derive(Clone, Debug)]
pub(crate) enum Driver {
    /// Hardware program only (none or static).
    Fixed,
    /// Linux net DIM on RX (and on TX completions when `tx` is set).
    Dim {
        rx: dim::Dim,
        tx: Option<dim::Dim>,
        cqe: bool,
    },
    /// e1000/igb AIM.
    Aim { aim: aim::Aim, counts: aim::Counts },
}

/// One MSI-X vector and the device-side state behind it.
#[derive(Clone, Debug)]
pub(crate) struct Source {
    pub irq: u32,
    pub name: String,
    pub cpu: u32,
    pub node: u32,
    pub dev: Dev,
    /// Moderation of the RX ring (or the NVMe CQ).
    pub moder: HwMod,
    /// Moderation of the TX completion ring.
    pub moder_tx: HwMod,
    pub driver: Driver,
    pub armed: bool,
    pub arm_time: SimTime,
    /// First entry of each completion ring counted for the next interrupt.
    pub from: [u64; 2],
    pub last_irq: SimTime,
    /// When the device's moderation wants to fire next.
    pub timer_at: Option<SimTime>,
    /// Time of this vector's one live `Fire` event, if any.
    pub queued: Option<SimTime>,
    /// Cost of the hardirq in progress (accounted at its end).
    pub hard_cost: u64,
    /// NVMe entries the running handler reaps.
    pub reap: u64,
    /// CPU of the running hardirq (the affinity may change while it runs).
    pub hard_cpu: u32,
    pub irqs: u64,
    /// The next interrupt pays the migration penalty (affinity just changed).
    pub migrated: bool,
    /// Interrupts still to run cache-cold after the last move.
    pub cold_left: u32,
    /// Requested affinity (`smp_affinity_list`); the effective CPU is `cpu`.
    pub requested: irqpilot_core::CpuSet,
    /// Kernel software moderation applies to this vector (`/proc/irq/N/soft_moderation`).
    pub gsim_on: bool,
    /// Masked by GSIM until its CPU's holdoff timer expires (the device latches meanwhile).
    pub gsim_masked: bool,
}

impl Source {
    /// A vector as it boots: armed, idle, no moderation (callers set theirs with `..`).
    pub fn boot(
        irq: u32,
        name: String,
        cpu: u32,
        node: u32,
        dev: Dev,
        requested: irqpilot_core::CpuSet,
        gsim_on: bool,
    ) -> Source {
        Source {
            irq,
            name,
            cpu,
            node,
            dev,
            moder: HwMod::Immediate,
            moder_tx: HwMod::Immediate,
            driver: Driver::Fixed,
            armed: true,
            arm_time: SimTime::ZERO,
            from: [0, 0],
            last_irq: SimTime::ZERO,
            timer_at: None,
            queued: None,
            hard_cost: 0,
            reap: 0,
            hard_cpu: 0,
            irqs: 0,
            migrated: false,
            cold_left: 0,
            requested,
            gsim_on,
            gsim_masked: false,
        }
    }
}

/// A NIC.
#[derive(Clone, Debug)]
pub(crate) struct Nic {
    pub name: String,
    pub link_bps: f64,
    pub mtu: u32,
    pub node: u32,
    pub first_q: u32,
    pub queues: u32,
    /// Queues in use (`ethtool -L combined`); RSS spreads over the first `channels`.
    pub channels: u32,
    pub vm_exit_ns: u64,
    pub wire_tx_free: SimTime,
    pub dropped: u64,
    /// (landing end in ns, queue) of every train still landing.
    pub active: std::collections::BinaryHeap<std::cmp::Reverse<(u64, u32)>>,
    /// Trains still landing on this NIC.
    pub busy_queues: u32,
}

/// One RX/TX queue pair of a NIC, with its vector.
#[derive(Clone, Debug)]
pub(crate) struct NicQueue {
    pub nic: u32,
    pub index: u32,
    pub src: u32,
    pub rx: Cq,
    pub tx: Cq,
    /// When this queue's share of the link has delivered everything sent to it so far.
    pub link_free: SimTime,
    /// Trains for this queue still landing.
    pub trains: u32,
    pub napi_scheduled: bool,
    /// Some workload on this NIC steers its packets with RFS or RPS (the IRQ CPU keeps only
    /// the driver's part of theirs).
    pub steered: bool,
    pub rx_pkts: u64,
    pub rx_bytes: u64,
    pub tx_pkts: u64,
    pub tx_bytes: u64,
}

/// An NVMe drive.
#[derive(Clone, Debug)]
pub(crate) struct Drive {
    pub name: String,
    pub node: u32,
    pub latency_ns: u64,
    /// DMA time of one block at full efficiency.
    pub block_ns: f64,
    pub block_bytes: u32,
    pub dma_free: SimTime,
    /// Media latency jitter.
    pub rng: crate::rng::Stream,
    /// Reads completed (`/proc/diskstats` field 1).
    pub ios: u64,
    /// Their submission-to-reap time together, ns (fields 4 and 11 count it in ms).
    pub io_ns: u64,
    /// Reads submitted and not yet reaped (field 9).
    pub in_flight: u64,
}

/// One NVMe I/O queue with its vector.
#[derive(Clone, Debug)]
pub(crate) struct NvmeQueue {
    pub drive: u32,
    pub index: u32,
    pub src: u32,
    pub cq: Cq,
    pub completed: u64,
    /// The fio workloads issuing on this queue.
    pub jobs: Vec<FioJobs>,
}

/// One fio workload's jobs on one NVMe queue.
#[derive(Clone, Debug)]
pub(crate) struct FioJobs {
    /// The workload.
    pub wl: u16,
    /// Least gap between two submissions (the jobs' `rate_iops`), ns; 0 = none.
    pub gap_ns: u64,
    /// When the next submission may go out under that rate.
    pub next_submit: SimTime,
    /// When the jobs stop issuing, ns.
    pub stop_ns: u64,
    /// I/Os completed.
    pub completed: u64,
}

/// A bulk flow.
#[derive(Clone, Debug)]
pub(crate) struct Flow {
    pub q: u32,
    /// Bytes sent and not yet consumed by the receiver.
    pub inflight: u64,
    /// Earliest time the sender's pacing allows the next chunk.
    pub next_send: SimTime,
    /// Bytes the receiver consumed so far (fairness between flows).
    pub delivered: u64,
}

/// A bulk workload's parameters, resolved once.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BulkParams {
    pub nic: usize,
    /// Per-flow pacing rate, bits/s.
    pub pace_bps: f64,
    /// Window and chunk in bytes (whole MTU packets).
    pub window: u64,
    pub chunk: u64,
    pub rtt_ns: u64,
    /// Mean extra network delay per chunk, ns.
    pub jitter_ns: f64,
    /// When the senders stop, ns.
    pub stop_ns: u64,
}

/// Per-workload state.
#[derive(Clone, Debug)]
pub(crate) struct WlState {
    /// Resolved parameters of a bulk workload.
    pub bulk: Option<BulkParams>,
    pub rng: crate::rng::Stream,
    /// Next request id (Poisson).
    pub next_id: u32,
    /// Bulk flows.
    pub flows: Vec<Flow>,
    /// Send time (ns) of each client's or request id's outstanding request.
    pub sent: Vec<u64>,
    /// Requests completed per RPC client (fairness between clients).
    pub done: Vec<u64>,
    /// CPUs of the application's threads (empty: requests are served where received).
    pub app_cpus: Vec<u32>,
    /// How received packets reach the threads.
    pub steering: crate::config::Steering,
    /// The CPUs RPS hashes flows over (`steering = "rps"`).
    pub rps_cpus: Vec<u32>,
    /// Threads scheduled over `app_cpus` (empty: pinned, one per CPU).
    pub threads: Vec<AppThread>,
}

/// A thread of a scheduled application (`app_schedule = "scheduled"`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct AppThread {
    /// The CPU it runs on or last ran on.
    pub cpu: u32,
    /// Requests queued for it or running (0: asleep).
    pub pending: u32,
}

/// Set in the id of a latency-probe request (ids of real requests stay below it), so the
/// stack answers it instead of crediting it to a bulk flow.
pub(crate) const PROBE_BIT: u32 = 1 << 23;

/// Scenario-derived handle so `sim.rs` can look up workload parameters quickly.
pub(crate) fn nic_index(sc: &Scenario, name: &str) -> Option<usize> {
    sc.nic.iter().position(|n| n.name == name)
}

#[cfg(test)]
mod tests {
    #[test]
    fn events_stay_small() {
        // The heap moves these around constantly; keep them at eight bytes.
        assert!(std::mem::size_of::<super::Ev>() <= 8);
    }
}
