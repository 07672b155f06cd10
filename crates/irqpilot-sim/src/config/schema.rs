//! The scenario schema: every table and key, with units in the key names and each default's
//! value and source in its doc (the values themselves are in `defaults.rs`).

use super::choices::{
    AppSchedule, ItrRegister, NicModeration, NvmeModeration, PlacementPolicy, PlatformKind,
    Steering,
};
use super::defaults;
use serde::{Deserialize, Serialize};

/// A whole scenario.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Name (built-ins: the file stem).
    pub name: String,
    /// What it reproduces, with its source.
    #[serde(default)]
    pub description: String,
    /// Simulated time to run.
    #[serde(default = "defaults::d_duration")]
    pub duration_ms: u64,
    /// Time at the start excluded from throughput and latency metrics.
    #[serde(default)]
    pub warmup_ms: u64,
    /// Seed of every random stream.
    #[serde(default)]
    pub seed: u64,
    /// CPUs.
    pub machine: MachineCfg,
    /// Per-event CPU costs.
    #[serde(default)]
    pub costs: Costs,
    /// Platform MSI delivery.
    #[serde(default)]
    pub platform: PlatformCfg,
    /// NICs.
    #[serde(default)]
    pub nic: Vec<NicCfg>,
    /// NVMe drive groups.
    #[serde(default)]
    pub nvme: Vec<NvmeCfg>,
    /// Traffic and I/O.
    #[serde(default)]
    pub workload: Vec<WorkloadCfg>,
    /// Metrics options.
    #[serde(default)]
    pub metrics: MetricsCfg,
    /// The kernel's software interrupt moderation (GSIM patch), off unless enabled.
    #[serde(default)]
    pub gsim: crate::gsim::GsimCfg,
    /// irqpilot's user-space global moderator, run in the loop through `SimPlatform` when
    /// present (`--set moderation=irqpilot`).
    #[serde(default)]
    pub moderator: Option<irqpilot_core::moderation::global::GlobalModerationConfig>,
    /// Who places IRQs during the run (`--set placement=rotate|static|irqpilot`); by default
    /// nobody: the layout the devices start with stays.
    #[serde(default)]
    pub placement: PlacementCfg,
}

/// The simulated CPUs (`irqpilot_core::Topology::synthetic` numbering: first threads of all
/// cores, then second threads).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineCfg {
    /// NUMA nodes.
    #[serde(default = "defaults::d_one_u32")]
    pub numa_nodes: u32,
    /// Packages (sockets).
    #[serde(default = "defaults::d_one_u32")]
    pub packages: u32,
    /// Cores per package.
    pub cores_per_package: u32,
    /// SMT threads per core.
    #[serde(default = "defaults::d_one_u32")]
    pub threads_per_core: u32,
    /// Kernel command line (`/proc/cmdline`): `isolcpus=`, `nohz_full=` and `irqaffinity=` set
    /// the machine's isolation as on Linux (`Machine.isolation`, `/sys/devices/system/cpu/isolated`).
    #[serde(default)]
    pub cmdline: String,
    /// Device vectors each CPU can take: x86's vector matrix has about 200 per CPU
    /// (balancing.md 5.6, "at max. 204"). An affinity write that finds no CPU of its mask with a
    /// free vector fails with ENOSPC and changes nothing.
    #[serde(default = "defaults::d_vectors")]
    pub vectors_per_cpu: u32,
}

/// CPU costs. Defaults: costmodel.md section 3.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Costs {
    /// Hardirq entry + handler + EOI + exit ("realistic" 1.0 us, costmodel 1.1).
    pub hardirq_us: f64,
    /// Cache pollution charged to the interrupted work after a long gap (1.0 us, costmodel 2.1).
    pub indirect_us: f64,
    /// Gap at which pollution is full; it scales linearly below (100 us, costmodel 2.1).
    pub indirect_full_gap_us: f64,
    /// Fixed cost of one NAPI poll (0.5 us, costmodel 1.2).
    pub napi_poll_us: f64,
    /// Per received packet in softirq: driver + GRO + stack (210 ns skb+stack, costmodel 3).
    pub rx_packet_ns: f64,
    /// Per received byte copied to the application (0.15 ns/B, costmodel 1.2).
    pub rx_copy_ns_per_byte: f64,
    /// Per transmit completion cleaned in the NAPI poll.
    pub tx_completion_ns: f64,
    /// Per NVMe completion entry reaped in the hardirq handler (0.2 us, costmodel 2.1).
    pub nvme_cqe_us: f64,
    /// Application cost per I/O submitted and reaped (libaio; 1 us).
    pub nvme_io_app_us: f64,
    /// NAPI weight: packets per poll (64, `NAPI_POLL_WEIGHT`).
    pub napi_weight: u32,
    /// Packets per softirq round (`netdev_budget`, 300).
    pub netdev_budget: u32,
    /// Time per softirq round before deferring to ksoftirqd (`netdev_budget_usecs`, 2000 us).
    pub netdev_budget_us: f64,
    /// MSI-X vector mask + unmask with PCIe read-back (1.8 us, costmodel 1.1 \[MASK\]).
    pub mask_unmask_us: f64,
    /// One-time cost after an IRQ moves to another CPU (cold ring/NAPI state; 10 us, costmodel 1.8).
    pub migration_penalty_us: f64,
    /// Extra delivery cost when the IRQ is served on another NUMA node than its device.
    pub remote_node_penalty_us: f64,
    /// After a move, this many of the IRQ's next interrupts run cache-cold (costmodel 2.7: "a
    /// per-interrupt indirect cost multiplier for the next ~N (U, 100) interrupts").
    pub migration_cold_interrupts: u32,
    /// During those interrupts the indirect (cache) cost `indirect_us` is multiplied by this
    /// factor; the extra `(factor - 1) x indirect_us` is hardirq time (U, costmodel 2.7).
    pub migration_cold_factor: f64,
    /// Per-packet softirq work (`rx_packet_ns`, `tx_completion_ns`) is multiplied by this when
    /// the queue is polled on another NUMA node than its device (its rings and buffers are in
    /// the device node's memory). 1 = no effect.
    pub remote_node_packet_factor: f64,
    /// Work started on a CPU while an SMT sibling of it is busy takes this much longer (the two
    /// threads share one core's execution units). 1 = no effect. See docs/placement-twin.md.
    pub smt_slowdown: f64,
    /// Latency of waking an application thread on another CPU that is idle (wake-up IPI and
    /// schedule; 1.5 us, costmodel 1.1 / 3 "IPI latency", U). With RFS, the IPI that hands the
    /// packets to the thread's CPU.
    pub wakeup_ipi_us: f64,
    /// Application time per request served on another last-level cache than the softirq that
    /// received it: the packet's and the socket's cache lines cross over (ours, U; costmodel
    /// 2.7: "other core, same LLC: adds remote wakeup (IPI) and LLC transfers").
    pub remote_cache_us: f64,
    /// On top of `remote_cache_us` when the two CPUs are on different NUMA nodes (ours, U;
    /// costmodel 2.7: "other socket: ESnet reports up to 2x throughput loss").
    pub remote_node_app_us: f64,
    /// The driver's part of `rx_packet_ns` (XDP-level, 42 ns, costmodel 3): what the IRQ CPU
    /// still spends per packet when RFS moves the stack to the application's CPU.
    pub rx_driver_ns: f64,
}

impl Default for Costs {
    fn default() -> Self {
        Costs {
            hardirq_us: defaults::costs::HARDIRQ_US,
            indirect_us: defaults::costs::INDIRECT_US,
            indirect_full_gap_us: defaults::costs::INDIRECT_FULL_GAP_US,
            napi_poll_us: defaults::costs::NAPI_POLL_US,
            rx_packet_ns: defaults::costs::RX_PACKET_NS,
            rx_copy_ns_per_byte: defaults::costs::RX_COPY_NS_PER_BYTE,
            tx_completion_ns: defaults::costs::TX_COMPLETION_NS,
            nvme_cqe_us: defaults::costs::NVME_CQE_US,
            nvme_io_app_us: defaults::costs::NVME_IO_APP_US,
            napi_weight: defaults::costs::NAPI_WEIGHT,
            netdev_budget: defaults::costs::NETDEV_BUDGET,
            netdev_budget_us: defaults::costs::NETDEV_BUDGET_US,
            mask_unmask_us: defaults::costs::MASK_UNMASK_US,
            migration_penalty_us: defaults::costs::MIGRATION_PENALTY_US,
            remote_node_penalty_us: defaults::costs::REMOTE_NODE_PENALTY_US,
            migration_cold_interrupts: defaults::costs::MIGRATION_COLD_INTERRUPTS,
            migration_cold_factor: defaults::costs::MIGRATION_COLD_FACTOR,
            remote_node_packet_factor: defaults::costs::REMOTE_NODE_PACKET_FACTOR,
            smt_slowdown: defaults::costs::SMT_SLOWDOWN,
            wakeup_ipi_us: defaults::costs::WAKEUP_IPI_US,
            remote_cache_us: defaults::costs::REMOTE_CACHE_US,
            remote_node_app_us: defaults::costs::REMOTE_NODE_APP_US,
            rx_driver_ns: defaults::costs::RX_DRIVER_NS,
        }
    }
}

/// Platform-wide MSI-X delivery (costmodel 2.5, moderation.md 1.2).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PlatformCfg {
    /// Which knee applies.
    pub kind: PlatformKind,
    /// Knee of an affected platform (2 M/s, costmodel 1.4).
    pub limited_knee_per_sec: f64,
    /// Knee of a healthy platform (25 M/s, costmodel 1.4).
    pub healthy_knee_per_sec: f64,
    /// Above the knee, device DMA efficiency is `(knee / rate)^gamma`.
    pub gamma: f64,
    /// Lowest DMA efficiency.
    pub min_efficiency: f64,
    /// MSI write to handler start on an idle platform.
    pub msi_latency_us: f64,
    /// Time constant of the platform's MSI rate estimate.
    pub rate_window_us: f64,
}

impl Default for PlatformCfg {
    fn default() -> Self {
        PlatformCfg {
            kind: defaults::platform::KIND,
            limited_knee_per_sec: defaults::platform::LIMITED_KNEE_PER_SEC,
            healthy_knee_per_sec: defaults::platform::HEALTHY_KNEE_PER_SEC,
            gamma: defaults::platform::GAMMA,
            min_efficiency: defaults::platform::MIN_EFFICIENCY,
            msi_latency_us: defaults::platform::MSI_LATENCY_US,
            rate_window_us: defaults::platform::RATE_WINDOW_US,
        }
    }
}

impl PlatformCfg {
    /// The knee in force.
    pub fn knee_per_sec(&self) -> f64 {
        match self.kind {
            PlatformKind::Limited => self.limited_knee_per_sec,
            PlatformKind::Healthy => self.healthy_knee_per_sec,
        }
    }
}

/// A NIC.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NicCfg {
    /// Interface name.
    pub name: String,
    /// Line rate.
    pub link_gbps: f64,
    /// RX/TX queue pairs (one MSI-X vector each).
    pub queues: u32,
    /// CPUs the driver spreads the queues' IRQs over itself, as a cpulist (queue i on the i-th
    /// CPU, wrapping). Default: none of its own: each vector goes where the kernel's vector
    /// matrix puts it, the CPU of the default affinity (`irqaffinity=`, else all) with the
    /// fewest vectors, so a second NIC's queues follow the first's.
    #[serde(default)]
    pub cpus: Option<String>,
    /// NUMA node of the device.
    #[serde(default)]
    pub node: u32,
    /// RX ring descriptors per queue.
    #[serde(default = "defaults::d_ring")]
    pub ring_size: u32,
    /// Bytes per packet on the wire.
    #[serde(default = "defaults::d_mtu")]
    pub mtu_bytes: u32,
    /// Per-queue moderation.
    #[serde(default = "defaults::d_nic_mod")]
    pub moderation: NicModeration,
    /// `rx-usecs` for static moderation (3 us: mlx5's static CQE-mode default, costmodel 1.5).
    #[serde(default = "defaults::d_rx_usecs")]
    pub rx_usecs: u32,
    /// `rx-frames` for static moderation (32: mlx5's default; 0 = no frame limit).
    #[serde(default = "defaults::d_rx_frames")]
    pub rx_frames: u32,
    /// RX timer restarts at every completion (mlx5 CQE mode) rather than at the first.
    #[serde(default = "defaults::d_true")]
    pub cqe_mode: bool,
    /// `tx-usecs` for static TX completion moderation (mlx5 default 16 us, EQE mode).
    #[serde(default = "defaults::d_tx_usecs")]
    pub tx_usecs: u32,
    /// `tx-frames` for static TX completion moderation (mlx5 default 32).
    #[serde(default = "defaults::d_tx_frames")]
    pub tx_frames: u32,
    /// Whether DIM also adapts TX completion moderation (`adaptive-tx`), with `moderation = "dim"`.
    #[serde(default = "defaults::d_true")]
    pub adaptive_tx: bool,
    /// `enable_aim` for AIM moderation (0, 1, 2).
    #[serde(default = "defaults::d_aim")]
    pub aim_mode: u8,
    /// Throttle register of an AIM NIC.
    #[serde(default = "defaults::d_itr")]
    pub itr_register: ItrRegister,
    /// Virtual machines sharing the NIC (SR-IOV VFs): queues are split evenly between them and
    /// each VM's interrupts pay `vm_exit_us` on top of the hardirq cost.
    #[serde(default = "defaults::d_one_u32")]
    pub vms: u32,
    /// Hypervisor cost per device interrupt in a VM (2 exits x 0.5 us, costmodel 1.4).
    #[serde(default)]
    pub vm_exit_us: f64,
}

/// A group of identical NVMe drives.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvmeCfg {
    /// Name prefix: drives are `<prefix>0`, `<prefix>1`, ...
    #[serde(default = "defaults::d_nvme")]
    pub name: String,
    /// Number of drives.
    pub drives: u32,
    /// I/O queues (kernel-managed vectors) per drive, at most one per CPU of `cpus`: each
    /// drive's queues get masks spread over `cpus` as the kernel spreads them, and each vector
    /// fires on the CPU the kernel's vector matrix picks in its mask (`managed.rs`).
    pub queues_per_drive: u32,
    /// CPUs the queues spread over (cpulist; the kernel spreads over all CPUs). Default: all.
    #[serde(default)]
    pub cpus: Option<String>,
    /// NUMA node.
    #[serde(default)]
    pub node: u32,
    /// Device maximum 4 KiB random-read IOPS (its DMA bandwidth / 4 KiB).
    pub max_iops: f64,
    /// Media latency of one read (78 us p50 at QD1 in GSIM v4's table).
    #[serde(default = "defaults::d_nvme_lat")]
    pub latency_us: f64,
    /// Coalescing.
    #[serde(default = "defaults::d_nvme_mod")]
    pub moderation: NvmeModeration,
    /// Feature 08h aggregation time, 100 us units.
    #[serde(default)]
    pub coalesce_time_100us: u8,
    /// Feature 08h aggregation threshold (entries).
    #[serde(default = "defaults::d_one_u32")]
    pub coalesce_threshold: u32,
}

/// A workload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum WorkloadCfg {
    /// Bulk receive: `flows` window-limited TCP-like flows spread over the queues by RSS. Each
    /// flow keeps at most `window_kb` in flight, sends in chunks of `chunk_kb` (a TSO burst) as
    /// the receiver consumes data (ACK clocking), paced at `load` x line rate / flows. Moderation
    /// delay lengthens every flow's round trip, which is what per-queue adaptive moderation sees.
    Bulk {
        /// Simulated time at which the workload starts (a load step).
        #[serde(default)]
        start_ms: u64,
        /// NIC name.
        nic: String,
        /// Sender pacing: fraction of line rate offered in total.
        load: f64,
        /// Concurrent flows (default: 4 per queue).
        #[serde(default)]
        flows: u32,
        /// Bytes a flow may have in flight.
        #[serde(default = "defaults::d_window")]
        window_kb: f64,
        /// Bytes per send burst.
        #[serde(default = "defaults::d_chunk")]
        chunk_kb: f64,
        /// Network round trip outside the simulated receiver.
        #[serde(default = "defaults::d_wire")]
        wire_rtt_us: f64,
        /// Extra network delay of each chunk, exponential with this mean (switch queueing);
        /// it keeps flows sharing a queue from marching in lockstep.
        #[serde(default)]
        jitter_us: f64,
        /// Fraction of the flows that RSS puts on the NIC's first queue (elephant flows hashing
        /// together); the rest spread evenly. 0 = even spread.
        #[serde(default)]
        hot_fraction: f64,
        /// Simulated time at which the senders stop (a burst, then idle); 0 = never.
        #[serde(default)]
        stop_ms: u64,
        /// A latency probe beside the bulk traffic: this many 128-byte requests per second
        /// (Poisson, spread by RSS, answered at once), whose round trips are this workload's
        /// latency. 0 = none.
        #[serde(default)]
        probe_per_sec: f64,
    },
    /// Bulk transmit (TSO segments) at a fraction of line rate; completions come back on the
    /// queues' shared TX/RX vectors.
    BulkTx {
        /// Simulated time at which the workload starts (a load step).
        #[serde(default)]
        start_ms: u64,
        /// NIC name.
        nic: String,
        /// Offered load, fraction of line rate.
        load: f64,
        /// TSO segment size.
        #[serde(default = "defaults::d_train")]
        tso_kb: u32,
        /// Simulated time at which the sender stops; 0 = never.
        #[serde(default)]
        stop_ms: u64,
        /// A latency probe, as for `bulk`.
        #[serde(default)]
        probe_per_sec: f64,
    },
    /// Open-loop Poisson arrivals of single-packet requests.
    Poisson {
        /// Simulated time at which the workload starts (a load step).
        #[serde(default)]
        start_ms: u64,
        /// NIC name.
        nic: String,
        /// Requests per second.
        rate_per_sec: f64,
        /// Request size on the wire.
        #[serde(default = "defaults::d_small")]
        request_bytes: u32,
        /// Application work per request (mean, when exponential).
        #[serde(default)]
        service_us: f64,
        /// Service times exponentially distributed (an M/M/1 server) instead of fixed.
        #[serde(default)]
        exponential_service: bool,
        /// CPUs the server's threads run on (a CPU list): pinned one per CPU (`taskset -c`),
        /// each client's connection belonging to one of them (client number modulo their
        /// count), or scheduled over the set (`app_schedule`). Absent: a request is served on
        /// the CPU whose softirq ran its stack.
        #[serde(default)]
        app_cpus: Option<String>,
        /// Where the threads run on `app_cpus`: `pinned` (one per CPU), `scheduled` (any CPU
        /// of the set; the model's scheduler places each wake-up).
        #[serde(default)]
        app_schedule: AppSchedule,
        /// How a request reaches its thread: `none` (the IRQ CPU's softirq runs the stack and
        /// wakes the thread), `rfs` (receive flow steering: the stack runs on the thread's
        /// CPU), `rps` (receive packet steering: the flow hash picks a CPU of `rps_cpus`
        /// whose backlog runs the stack and wakes the thread).
        #[serde(default)]
        steering: Steering,
        /// The queues' `rps_cpus` for `steering = "rps"` (a CPU list). Default: `app_cpus`
        /// when given, else the online CPUs of the NIC's NUMA node.
        #[serde(default)]
        rps_cpus: Option<String>,
    },
    /// Closed-loop request/response: `clients` outstanding requests, each reissued after the
    /// response plus `think_us`. Latency is measured at the client: request sent to response
    /// received (including `wire_rtt_us`).
    Rpc {
        /// Simulated time at which the workload starts (a load step).
        #[serde(default)]
        start_ms: u64,
        /// NIC name.
        nic: String,
        /// Concurrent clients (flows).
        clients: u32,
        /// Client think time between a response and the next request (exponential mean).
        #[serde(default)]
        think_us: f64,
        /// Request size.
        #[serde(default = "defaults::d_small")]
        request_bytes: u32,
        /// Response size.
        #[serde(default = "defaults::d_small")]
        response_bytes: u32,
        /// Server application work per request.
        #[serde(default = "defaults::d_service")]
        service_us: f64,
        /// Network and client-side time per round trip, outside the simulated server.
        #[serde(default = "defaults::d_wire")]
        wire_rtt_us: f64,
        /// Simulated time at which the clients stop (after their transaction in flight); 0 =
        /// never. With `start_ms`, a load that comes and goes.
        #[serde(default)]
        stop_ms: u64,
        /// Steer every client to this queue of the NIC (an n-tuple flow-steering rule,
        /// `ethtool -N ... action Q`) instead of spreading them by RSS.
        #[serde(default)]
        queue: Option<u32>,
        /// CPUs the server's threads run on (a CPU list): pinned one per CPU (`taskset -c`),
        /// each client's connection belonging to one of them (client number modulo their
        /// count), or scheduled over the set (`app_schedule`). Absent: a request is served on
        /// the CPU whose softirq ran its stack.
        #[serde(default)]
        app_cpus: Option<String>,
        /// Where the threads run on `app_cpus`: `pinned` (one per CPU), `scheduled` (any CPU
        /// of the set; the model's scheduler places each wake-up).
        #[serde(default)]
        app_schedule: AppSchedule,
        /// How a request reaches its thread: `none` (the IRQ CPU's softirq runs the stack and
        /// wakes the thread), `rfs` (receive flow steering: the stack runs on the thread's
        /// CPU), `rps` (receive packet steering: the flow hash picks a CPU of `rps_cpus`
        /// whose backlog runs the stack and wakes the thread).
        #[serde(default)]
        steering: Steering,
        /// The queues' `rps_cpus` for `steering = "rps"` (a CPU list). Default: `app_cpus`
        /// when given, else the online CPUs of the NIC's NUMA node.
        #[serde(default)]
        rps_cpus: Option<String>,
    },
    /// fio-like random reads on every drive of an NVMe group.
    Fio {
        /// Simulated time at which the workload starts (a load step).
        #[serde(default)]
        start_ms: u64,
        /// NVMe group name.
        nvme: String,
        /// Outstanding I/Os of each job.
        iodepth: u32,
        /// fio jobs per queue (threads on that queue's CPU): a queue has `jobs x iodepth` reads
        /// outstanding.
        #[serde(default = "defaults::d_one_u32")]
        jobs: u32,
        /// fio's `rate_iops` (its linear rate process: I/O k is due k / rate after the job
        /// began; a job behind that catches up as fast as completions allow; 0 = no limit).
        #[serde(default)]
        rate_iops: f64,
        /// Block size.
        #[serde(default = "defaults::d_block")]
        block_kb: u32,
        /// Simulated time at which the jobs stop issuing; 0 = never.
        #[serde(default)]
        stop_ms: u64,
    },
}

/// Metrics options.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsCfg {
    /// Resolution of the time series in the report (0 = no series).
    pub series_ms: u64,
}

impl Default for MetricsCfg {
    fn default() -> Self {
        MetricsCfg {
            series_ms: defaults::SERIES_MS,
        }
    }
}

impl WorkloadCfg {
    /// When the workload stops, ns (`u64::MAX`: never).
    pub fn stop_ns(&self) -> u64 {
        let ms = match self {
            WorkloadCfg::Bulk { stop_ms, .. }
            | WorkloadCfg::BulkTx { stop_ms, .. }
            | WorkloadCfg::Rpc { stop_ms, .. }
            | WorkloadCfg::Fio { stop_ms, .. } => *stop_ms,
            WorkloadCfg::Poisson { .. } => 0,
        };
        if ms == 0 {
            u64::MAX
        } else {
            ms.saturating_mul(1_000_000)
        }
    }

    /// Requests per second of the workload's latency probe (bulk kinds), 0 without.
    pub fn probe_per_sec(&self) -> f64 {
        match self {
            WorkloadCfg::Bulk { probe_per_sec, .. } | WorkloadCfg::BulkTx { probe_per_sec, .. } => {
                *probe_per_sec
            }
            _ => 0.0,
        }
    }

    /// What the workload is (`bulk`, `bulk-tx`, `poisson`, `rpc`, `fio`) and the unit of work
    /// its fairness counts per unit of demand.
    pub fn kind_and_unit(&self) -> (&'static str, &'static str) {
        match self {
            WorkloadCfg::Bulk { .. } => ("bulk", "bytes delivered per flow"),
            WorkloadCfg::BulkTx { .. } => ("bulk-tx", "bytes transmitted per queue"),
            WorkloadCfg::Poisson { .. } => ("poisson", "requests answered (one unit)"),
            WorkloadCfg::Rpc { .. } => ("rpc", "transactions per client"),
            WorkloadCfg::Fio { .. } => ("fio", "I/Os completed per queue"),
        }
    }

    /// When the workload starts, ns.
    pub fn start_ns(&self) -> u64 {
        let ms = match self {
            WorkloadCfg::Bulk { start_ms, .. }
            | WorkloadCfg::BulkTx { start_ms, .. }
            | WorkloadCfg::Poisson { start_ms, .. }
            | WorkloadCfg::Rpc { start_ms, .. }
            | WorkloadCfg::Fio { start_ms, .. } => *start_ms,
        };
        ms.saturating_mul(1_000_000)
    }
}

/// The `[placement]` section of a scenario.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlacementCfg {
    /// Who places IRQs.
    #[serde(default)]
    pub policy: PlacementPolicy,
    /// Period of `rotate` (HZ/50 = 20 ms in 2.5.52, Kamble).
    #[serde(default = "defaults::d_rotate_ms")]
    pub rotate_interval_ms: u64,
    /// irqpilot's placement configuration (the `[placement]` section of `irqpilot.toml`) for
    /// `irqpilot`. Scenarios compress its periods with the rest of time (docs/placement-twin.md).
    #[serde(default)]
    pub irqpilot: irqpilot_core::PlacementConfig,
}

impl Default for PlacementCfg {
    fn default() -> Self {
        PlacementCfg {
            policy: PlacementPolicy::None,
            rotate_interval_ms: defaults::d_rotate_ms(),
            irqpilot: irqpilot_core::PlacementConfig::default(),
        }
    }
}
