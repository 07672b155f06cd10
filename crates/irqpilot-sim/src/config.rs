//! Scenario files: the documented TOML schema of a simulated machine and its workload.
//!
//! Units are in key names (`_us`, `_ns`, `_gbps`, `_per_sec`, `_bytes`). Unknown keys are errors.
//! Defaults come from `shared/research/costmodel.md` section 3 (simulator defaults), each noted
//! where it is defined. `--set key=value` edits a scenario before it is checked: a few short
//! aliases (`moderation`, `aim_mode`, `platform`, `seed`, `placement`) and any dotted path
//! (`costs.hardirq_us=0.5`, `nic.0.queues=16`, `workload.0.load=0.5`).

use serde::{Deserialize, Serialize};

/// Why a scenario could not be loaded.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// The TOML did not parse, did not match the schema, or holds a value out of range.
    #[error("scenario {origin}{}: {message}", position.map(|p| format!(":{p}")).unwrap_or_default())]
    Invalid {
        /// File or built-in name.
        origin: String,
        /// Where in the file, when the error is about a place in it.
        position: Option<crate::locate::Position>,
        /// What is wrong.
        message: String,
    },
    /// A `--set` value that makes no sense for this scenario's machine (DIM, a NIC driver's
    /// moderation, on a machine without NICs): `--compare` skips it with a note.
    #[error("--set {key}={value} does not apply to {scenario}: {why}")]
    NotApplicable {
        /// The key.
        key: String,
        /// The value.
        value: String,
        /// The scenario.
        scenario: String,
        /// Why not.
        why: String,
    },
    /// A `--set` key or value was rejected.
    #[error("--set {key}: {message}")]
    BadSet {
        /// The key as given.
        key: String,
        /// Why.
        message: String,
    },
}

/// `v > 0`, with NaN counting as not positive.
pub(crate) fn positive(v: f64) -> bool {
    v > 0.0
}

fn d_duration() -> u64 {
    1000
}
fn d_one_u32() -> u32 {
    1
}
fn d_true() -> bool {
    true
}

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
    #[serde(default = "d_duration")]
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
    pub placement: crate::placement::PlacementCfg,
}

/// The simulated CPUs (`irqpilot_core::Topology::synthetic` numbering: first threads of all
/// cores, then second threads).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineCfg {
    /// NUMA nodes.
    #[serde(default = "d_one_u32")]
    pub numa_nodes: u32,
    /// Packages (sockets).
    #[serde(default = "d_one_u32")]
    pub packages: u32,
    /// Cores per package.
    pub cores_per_package: u32,
    /// SMT threads per core.
    #[serde(default = "d_one_u32")]
    pub threads_per_core: u32,
    /// Kernel command line (`/proc/cmdline`): `isolcpus=`, `nohz_full=` and `irqaffinity=` set
    /// the machine's isolation as on Linux (`Machine.isolation`, `/sys/devices/system/cpu/isolated`).
    #[serde(default)]
    pub cmdline: String,
    /// Device vectors each CPU can take: x86's vector matrix has about 200 per CPU
    /// (balancing.md 5.6, "at max. 204"). An affinity write that finds no CPU of its mask with a
    /// free vector fails with ENOSPC and changes nothing.
    #[serde(default = "d_vectors")]
    pub vectors_per_cpu: u32,
}

fn d_vectors() -> u32 {
    200
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
            hardirq_us: 1.0,
            indirect_us: 1.0,
            indirect_full_gap_us: 100.0,
            napi_poll_us: 0.5,
            rx_packet_ns: 210.0,
            rx_copy_ns_per_byte: 0.15,
            tx_completion_ns: 50.0,
            nvme_cqe_us: 0.2,
            nvme_io_app_us: 1.0,
            napi_weight: 64,
            netdev_budget: 300,
            netdev_budget_us: 2000.0,
            mask_unmask_us: 1.8,
            migration_penalty_us: 10.0,
            remote_node_penalty_us: 0.5,
            migration_cold_interrupts: 100,
            migration_cold_factor: 2.0,
            remote_node_packet_factor: 1.0,
            smt_slowdown: 1.0,
            wakeup_ipi_us: 1.5,
            remote_cache_us: 0.3,
            remote_node_app_us: 1.0,
            rx_driver_ns: 42.0,
        }
    }
}

/// How received packets reach an application thread on another CPU (kernel
/// Documentation/networking/scaling.rst).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Steering {
    /// The IRQ CPU's softirq runs the stack and wakes the thread.
    #[default]
    None,
    /// RFS: the stack runs on the CPU of the thread that reads the flow.
    Rfs,
}

/// Which platform MSI limit applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PlatformKind {
    /// An affected SoC: I/O degrades above the knee (1-3 M int/s).
    Limited,
    /// An unaffected SoC (20-30 M int/s).
    Healthy,
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
            kind: PlatformKind::Limited,
            limited_knee_per_sec: 2_000_000.0,
            healthy_knee_per_sec: 25_000_000.0,
            gamma: 1.0,
            min_efficiency: 0.1,
            msi_latency_us: 1.0,
            rate_window_us: 100.0,
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

/// Per-queue moderation of a NIC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NicModeration {
    /// An interrupt per completion burst (no hardware moderation).
    None,
    /// Static `rx-usecs` / `rx-frames`.
    Static,
    /// Linux net DIM in the driver.
    Dim,
    /// e1000/igb AIM in the driver (ITR holdoff).
    Aim,
}

/// Register flavour of an AIM NIC.
pub use irqpilot_core::moderation::aim::ItrRegister;

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
    #[serde(default = "d_ring")]
    pub ring_size: u32,
    /// Bytes per packet on the wire.
    #[serde(default = "d_mtu")]
    pub mtu_bytes: u32,
    /// Per-queue moderation.
    #[serde(default = "d_nic_mod")]
    pub moderation: NicModeration,
    /// `rx-usecs` for static moderation (3 us: mlx5's static CQE-mode default, costmodel 1.5).
    #[serde(default = "d_rx_usecs")]
    pub rx_usecs: u32,
    /// `rx-frames` for static moderation (32: mlx5's default; 0 = no frame limit).
    #[serde(default = "d_rx_frames")]
    pub rx_frames: u32,
    /// RX timer restarts at every completion (mlx5 CQE mode) rather than at the first.
    #[serde(default = "d_true")]
    pub cqe_mode: bool,
    /// `tx-usecs` for static TX completion moderation (mlx5 default 16 us, EQE mode).
    #[serde(default = "d_tx_usecs")]
    pub tx_usecs: u32,
    /// `tx-frames` for static TX completion moderation (mlx5 default 32).
    #[serde(default = "d_tx_frames")]
    pub tx_frames: u32,
    /// Whether DIM also adapts TX completion moderation (`adaptive-tx`), with `moderation = "dim"`.
    #[serde(default = "d_true")]
    pub adaptive_tx: bool,
    /// `enable_aim` for AIM moderation (0, 1, 2).
    #[serde(default = "d_aim")]
    pub aim_mode: u8,
    /// Throttle register of an AIM NIC.
    #[serde(default = "d_itr")]
    pub itr_register: ItrRegister,
    /// Virtual machines sharing the NIC (SR-IOV VFs): queues are split evenly between them and
    /// each VM's interrupts pay `vm_exit_us` on top of the hardirq cost.
    #[serde(default = "d_one_u32")]
    pub vms: u32,
    /// Hypervisor cost per device interrupt in a VM (2 exits x 0.5 us, costmodel 1.4).
    #[serde(default)]
    pub vm_exit_us: f64,
}

fn d_ring() -> u32 {
    1024
}
fn d_mtu() -> u32 {
    1500
}
fn d_nic_mod() -> NicModeration {
    NicModeration::Dim
}
fn d_rx_usecs() -> u32 {
    3
}
fn d_rx_frames() -> u32 {
    32
}
fn d_aim() -> u8 {
    1
}
fn d_tx_usecs() -> u32 {
    16
}
fn d_tx_frames() -> u32 {
    32
}
fn d_itr() -> ItrRegister {
    ItrRegister::Em
}

/// Moderation of an NVMe drive group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NvmeModeration {
    /// No coalescing (Linux's default).
    None,
    /// Feature 08h with `coalesce_time_100us` and `coalesce_threshold`.
    Static,
}

/// A group of identical NVMe drives.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvmeCfg {
    /// Name prefix: drives are `<prefix>0`, `<prefix>1`, ...
    #[serde(default = "d_nvme")]
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
    #[serde(default = "d_nvme_lat")]
    pub latency_us: f64,
    /// Coalescing.
    #[serde(default = "d_nvme_mod")]
    pub moderation: NvmeModeration,
    /// Feature 08h aggregation time, 100 us units.
    #[serde(default)]
    pub coalesce_time_100us: u8,
    /// Feature 08h aggregation threshold (entries).
    #[serde(default = "d_one_u32")]
    pub coalesce_threshold: u32,
}

fn d_nvme() -> String {
    "nvme".into()
}
fn d_nvme_lat() -> f64 {
    75.0
}
fn d_nvme_mod() -> NvmeModeration {
    NvmeModeration::None
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
        #[serde(default = "d_window")]
        window_kb: f64,
        /// Bytes per send burst.
        #[serde(default = "d_chunk")]
        chunk_kb: f64,
        /// Network round trip outside the simulated receiver.
        #[serde(default = "d_wire")]
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
        #[serde(default = "d_train")]
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
        #[serde(default = "d_small")]
        request_bytes: u32,
        /// Application work per request (mean, when exponential).
        #[serde(default)]
        service_us: f64,
        /// Service times exponentially distributed (an M/M/1 server) instead of fixed.
        #[serde(default)]
        exponential_service: bool,
        /// CPUs the server's threads are pinned to (a CPU list, `taskset -c`); each client's
        /// connection belongs to one of them (client number modulo their count). Absent: a
        /// request is served on the CPU whose softirq received it.
        #[serde(default)]
        app_cpus: Option<String>,
        /// How a request reaches its thread when that runs on another CPU: `none` (the IRQ
        /// CPU's softirq runs the stack and wakes the thread), `rfs` (receive flow steering:
        /// the stack runs on the thread's CPU).
        #[serde(default)]
        steering: Steering,
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
        #[serde(default = "d_small")]
        request_bytes: u32,
        /// Response size.
        #[serde(default = "d_small")]
        response_bytes: u32,
        /// Server application work per request.
        #[serde(default = "d_service")]
        service_us: f64,
        /// Network and client-side time per round trip, outside the simulated server.
        #[serde(default = "d_wire")]
        wire_rtt_us: f64,
        /// Simulated time at which the clients stop (after their transaction in flight); 0 =
        /// never. With `start_ms`, a load that comes and goes.
        #[serde(default)]
        stop_ms: u64,
        /// Steer every client to this queue of the NIC (an n-tuple flow-steering rule,
        /// `ethtool -N ... action Q`) instead of spreading them by RSS.
        #[serde(default)]
        queue: Option<u32>,
        /// CPUs the server's threads are pinned to (a CPU list, `taskset -c`); each client's
        /// connection belongs to one of them (client number modulo their count). Absent: a
        /// request is served on the CPU whose softirq received it.
        #[serde(default)]
        app_cpus: Option<String>,
        /// How a request reaches its thread when that runs on another CPU: `none` (the IRQ
        /// CPU's softirq runs the stack and wakes the thread), `rfs` (receive flow steering:
        /// the stack runs on the thread's CPU).
        #[serde(default)]
        steering: Steering,
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
        #[serde(default = "d_one_u32")]
        jobs: u32,
        /// fio's `rate_iops`: the most I/Os per second each job issues (0 = as fast as
        /// completions allow).
        #[serde(default)]
        rate_iops: f64,
        /// Block size.
        #[serde(default = "d_block")]
        block_kb: u32,
        /// Simulated time at which the jobs stop issuing; 0 = never.
        #[serde(default)]
        stop_ms: u64,
    },
}

fn d_train() -> u32 {
    64
}
fn d_window() -> f64 {
    6.0
}
fn d_chunk() -> f64 {
    3.0
}
fn d_small() -> u32 {
    128
}
fn d_service() -> f64 {
    2.0
}
fn d_wire() -> f64 {
    10.0
}
fn d_block() -> u32 {
    4
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
        MetricsCfg { series_ms: 10 }
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

impl Scenario {
    /// Parses a scenario from TOML text. Errors name the line and column of what is wrong.
    pub fn from_toml(text: &str, origin: &str) -> Result<Scenario, ConfigError> {
        let s: Scenario = toml::from_str(text).map_err(|e| ConfigError::Invalid {
            origin: origin.into(),
            position: e.span().map(|r| crate::locate::position(text, r.start)),
            message: e.message().trim_end().to_string(),
        })?;
        s.check(origin, Some(text))?;
        Ok(s)
    }

    fn from_value(value: toml::Value, origin: &str) -> Result<Scenario, ConfigError> {
        let s: Scenario = value
            .try_into()
            .map_err(|e: toml::de::Error| ConfigError::Invalid {
                origin: origin.into(),
                position: None,
                message: e.to_string(),
            })?;
        s.check(origin, None)?;
        Ok(s)
    }

    /// Every check beyond the schema: ranges (errors name the key, and with the file's text
    /// its position), then the rules across fields.
    fn check(&self, origin: &str, text: Option<&str>) -> Result<(), ConfigError> {
        if let Err((key, message)) = crate::ranges::check_ranges(self) {
            return Err(ConfigError::Invalid {
                origin: origin.into(),
                position: text.and_then(|t| crate::locate::locate(t, &key)),
                message,
            });
        }
        self.validate().map_err(|message| ConfigError::Invalid {
            origin: origin.into(),
            position: None,
            message,
        })
    }

    /// Applies `--set key=value` edits and re-checks the scenario.
    pub fn with_sets(&self, sets: &[(String, String)]) -> Result<Scenario, ConfigError> {
        let mut value = toml::Value::try_from(self).map_err(|e| ConfigError::Invalid {
            origin: self.name.clone(),
            position: None,
            message: e.to_string(),
        })?;
        for (key, raw) in sets {
            apply_set(&mut value, key, raw)?;
            // Types and unknown keys are checked after each edit so the error names its key;
            // rules across fields (window >= chunk) only once all edits are in.
            let typed: Result<Scenario, toml::de::Error> = value.clone().try_into();
            typed.map_err(|e| ConfigError::BadSet {
                key: key.clone(),
                message: e.to_string(),
            })?;
        }
        Scenario::from_value(value, &self.name).map_err(|e| match sets {
            [(key, _)] => ConfigError::BadSet {
                key: key.clone(),
                message: e.to_string(),
            },
            _ => e,
        })
    }

    /// Consistency checks serde cannot express.
    fn validate(&self) -> Result<(), String> {
        let m = &self.machine;
        if m.cores_per_package == 0 || m.packages == 0 || m.threads_per_core == 0 {
            return Err("machine needs at least one CPU".into());
        }
        if self.duration_ms == 0 {
            return Err("duration_ms must be positive".into());
        }
        if self.warmup_ms >= self.duration_ms {
            return Err("warmup_ms must be shorter than duration_ms".into());
        }
        if let Some(m) = &self.moderator {
            m.validate().map_err(|e| e.to_string())?;
        }
        crate::placement::validate(self)?;
        for n in &self.nic {
            if n.queues == 0 || !positive(n.link_gbps) || n.mtu_bytes < 64 || n.ring_size == 0 {
                return Err(format!(
                    "nic {}: queues, link_gbps, mtu_bytes and ring_size must be positive",
                    n.name
                ));
            }
            if n.aim_mode > 2 {
                return Err(format!("nic {}: aim_mode must be 0, 1 or 2", n.name));
            }
            if n.vms == 0 || n.queues % n.vms != 0 {
                return Err(format!("nic {}: queues must split evenly over vms", n.name));
            }
        }
        for d in &self.nvme {
            if d.drives == 0 || d.queues_per_drive == 0 || !positive(d.max_iops) {
                return Err(format!(
                    "nvme {}: drives, queues_per_drive and max_iops must be positive",
                    d.name
                ));
            }
            if d.coalesce_threshold == 0 || d.coalesce_threshold > 256 {
                return Err(format!("nvme {}: coalesce_threshold must be 1-256", d.name));
            }
        }
        for w in &self.workload {
            if !(w.probe_per_sec() >= 0.0 && w.probe_per_sec().is_finite()) {
                return Err("probe_per_sec must be a rate >= 0".into());
            }
            let nic = match w {
                WorkloadCfg::Bulk {
                    nic,
                    load,
                    window_kb,
                    chunk_kb,
                    ..
                } => {
                    if !positive(*load)
                        || !positive(*chunk_kb)
                        || window_kb < chunk_kb
                        || window_kb.is_nan()
                    {
                        return Err(format!(
                            "bulk workload on {nic}: load and chunk_kb must be > 0 and window_kb >= chunk_kb"
                        ));
                    }
                    Some(nic)
                }
                WorkloadCfg::BulkTx { nic, load, .. } => {
                    if !positive(*load) {
                        return Err(format!("workload on {nic}: load must be > 0"));
                    }
                    Some(nic)
                }
                WorkloadCfg::Rpc {
                    nic,
                    queue: Some(q),
                    ..
                } if self.nic.iter().any(|n| &n.name == nic && *q >= n.queues) => {
                    return Err(format!(
                        "rpc workload on {nic}: queue {q} is not a queue of it"
                    ));
                }
                WorkloadCfg::Poisson { nic, .. } | WorkloadCfg::Rpc { nic, .. } => Some(nic),
                WorkloadCfg::Fio {
                    nvme,
                    iodepth,
                    jobs,
                    rate_iops,
                    ..
                } => {
                    if !self.nvme.iter().any(|d| &d.name == nvme) {
                        return Err(format!("fio workload names unknown nvme group {nvme:?}"));
                    }
                    if *iodepth == 0 || *jobs == 0 {
                        return Err("fio iodepth and jobs must be positive".into());
                    }
                    if !(*rate_iops >= 0.0 && rate_iops.is_finite()) {
                        return Err("fio rate_iops must be >= 0 (0: unlimited)".into());
                    }
                    None
                }
            };
            if let Some(nic) = nic {
                if !self.nic.iter().any(|n| &n.name == nic) {
                    return Err(format!("workload names unknown nic {nic:?}"));
                }
            }
        }
        Ok(())
    }
}

/// The values `--set moderation=` takes (the binary's `--help` lists the same; a test checks).
pub const MODERATION_VALUES: &[&str] = &[
    "none",
    "static",
    "dim",
    "aim",
    "gsim",
    "gsim+device",
    "irqpilot",
];

/// Turns `--set` text into a TOML value: integer, float, boolean, else string.
fn parse_scalar(raw: &str) -> toml::Value {
    if let Ok(i) = raw.parse::<i64>() {
        return toml::Value::Integer(i);
    }
    if let Ok(f) = raw.parse::<f64>() {
        return toml::Value::Float(f);
    }
    match raw {
        "true" => toml::Value::Boolean(true),
        "false" => toml::Value::Boolean(false),
        _ => toml::Value::String(raw.to_string()),
    }
}

fn bad(key: &str, message: impl Into<String>) -> ConfigError {
    ConfigError::BadSet {
        key: key.to_string(),
        message: message.into(),
    }
}

fn set_in_each(value: &mut toml::Value, table: &str, field: &str, v: toml::Value) -> usize {
    let Some(arr) = value.get_mut(table).and_then(|t| t.as_array_mut()) else {
        return 0;
    };
    for item in arr.iter_mut() {
        if let Some(t) = item.as_table_mut() {
            t.insert(field.to_string(), v.clone());
        }
    }
    arr.len()
}

/// Applies one `--set`.
fn apply_set(value: &mut toml::Value, key: &str, raw: &str) -> Result<(), ConfigError> {
    let v = parse_scalar(raw);
    match key {
        "seed" => {
            let toml::Value::Integer(i) = v else {
                return Err(bad(key, "expects an integer"));
            };
            insert_path(value, &["seed"], toml::Value::Integer(i)).map_err(|m| bad(key, m))
        }
        "platform" => match raw {
            "limited" | "healthy" => {
                insert_path(value, &["platform", "kind"], v).map_err(|m| bad(key, m))
            }
            _ => Err(bad(key, format!("expects limited or healthy, not {raw:?}"))),
        },
        "placement" => crate::placement::apply_set(value, raw).map_err(|m| bad(key, m)),
        "moderation" if raw == "irqpilot" => {
            if value.get("moderator").is_none() {
                insert_path(
                    value,
                    &["moderator"],
                    toml::Value::Table(toml::map::Map::new()),
                )
                .map_err(|m| bad(key, m))?;
            }
            Ok(())
        }
        "moderation" if raw == "gsim" => {
            // As the GSIM cover letter runs it: the kernel's moderation, the devices' own off.
            set_in_each(
                value,
                "nic",
                "moderation",
                toml::Value::String("none".into()),
            );
            set_in_each(
                value,
                "nvme",
                "moderation",
                toml::Value::String("none".into()),
            );
            insert_path(value, &["gsim", "enabled"], toml::Value::Boolean(true))
                .map_err(|m| bad(key, m))
        }
        "moderation" if raw == "gsim+device" => {
            // Kernel moderation on top of whatever the devices do.
            insert_path(value, &["gsim", "enabled"], toml::Value::Boolean(true))
                .map_err(|m| bad(key, m))
        }
        "gsim_version" => {
            let scale = match raw {
                "3" => 200,
                "4" => 150,
                _ => return Err(bad(key, "expects 3 or 4")),
            };
            insert_path(value, &["gsim", "scale_cpus"], toml::Value::Integer(scale))
                .map_err(|m| bad(key, m))
        }
        k if k.starts_with("gsim_") => {
            let field = &k["gsim_".len()..];
            let toml::Value::Integer(i) = v else {
                return Err(bad(key, "expects an integer"));
            };
            insert_path(value, &["gsim", field], toml::Value::Integer(i)).map_err(|m| bad(key, m))
        }
        "moderation" if !MODERATION_VALUES.contains(&raw) => Err(bad(
            key,
            format!(
                "expects one of {}, not {raw:?}",
                MODERATION_VALUES.join(", ")
            ),
        )),
        "moderation" => {
            let n = set_in_each(value, "nic", "moderation", v.clone());
            let nvme_mode = match raw {
                "static" => Some("static"),
                "none" => Some("none"),
                _ => None,
            };
            let m = match nvme_mode {
                Some(mode) => set_in_each(
                    value,
                    "nvme",
                    "moderation",
                    toml::Value::String(mode.into()),
                ),
                None => value
                    .get("nvme")
                    .and_then(|t| t.as_array())
                    .map_or(0, |a| a.len()),
            };
            if n == 0 && m == 0 {
                return Err(bad(key, "the scenario has no device to moderate"));
            }
            if n == 0 && nvme_mode.is_none() && matches!(raw, "dim" | "aim") {
                return Err(ConfigError::NotApplicable {
                    key: key.into(),
                    value: raw.into(),
                    scenario: value
                        .get("name")
                        .and_then(|n| n.as_str())
                        .unwrap_or("this scenario")
                        .into(),
                    why: format!(
                        "{raw} is a NIC driver's moderation and the machine has no NIC (NVMe drives support none or static)"
                    ),
                });
            }
            if n == 0 && nvme_mode.is_none() {
                return Err(bad(
                    key,
                    format!("NVMe drives support none or static, not {raw:?}"),
                ));
            }
            Ok(())
        }
        "aim_mode" => {
            if set_in_each(value, "nic", "aim_mode", v) == 0 {
                return Err(bad(key, "the scenario has no NIC"));
            }
            Ok(())
        }
        _ => {
            let path: Vec<&str> = key.split('.').collect();
            if path.iter().any(|p| p.is_empty()) {
                return Err(bad(key, "empty path component"));
            }
            insert_path(value, &path, v).map_err(|m| bad(key, m))
        }
    }
}

/// Sets `path` (table keys, or array indices for arrays of tables) to `v`.
pub(crate) fn insert_path(
    value: &mut toml::Value,
    path: &[&str],
    v: toml::Value,
) -> Result<(), String> {
    let Some((last, parents)) = path.split_last() else {
        return Err("empty key".into());
    };
    let mut cur = value;
    for p in parents {
        cur = match cur {
            toml::Value::Table(t) => t
                .entry(p.to_string())
                .or_insert_with(|| toml::Value::Table(toml::map::Map::new())),
            toml::Value::Array(a) => {
                let i: usize = p.parse().map_err(|_| format!("{p:?} is not an index"))?;
                let len = a.len();
                a.get_mut(i)
                    .ok_or_else(|| format!("index {i} out of range (0..{len})"))?
            }
            _ => return Err(format!("{p:?} is not a table")),
        };
    }
    match cur {
        toml::Value::Table(t) => {
            t.insert(last.to_string(), v);
            Ok(())
        }
        toml::Value::Array(a) => {
            let i: usize = last
                .parse()
                .map_err(|_| format!("{last:?} is not an index"))?;
            let len = a.len();
            *a.get_mut(i)
                .ok_or_else(|| format!("index {i} out of range (0..{len})"))? = v;
            Ok(())
        }
        _ => Err("not a table".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: &str = r#"
name = "t"
[machine]
cores_per_package = 4
[[nic]]
name = "eth0"
link_gbps = 10
queues = 4
[[workload]]
kind = "bulk"
nic = "eth0"
load = 0.5
"#;

    #[test]
    fn minimal_scenario_gets_defaults() {
        let s = Scenario::from_toml(MIN, "t").unwrap();
        assert_eq!(s.duration_ms, 1000);
        assert_eq!(s.costs.hardirq_us, 1.0);
        assert_eq!(s.nic[0].moderation, NicModeration::Dim);
        assert_eq!(s.platform.knee_per_sec(), 2_000_000.0);
    }

    #[test]
    fn unknown_keys_rejected() {
        let e = Scenario::from_toml(&format!("{MIN}\n[costs]\nhardirq = 1.0\n"), "t").unwrap_err();
        assert!(e.to_string().contains("hardirq"), "{e}");
        let e = Scenario::from_toml(&MIN.replace("load = 0.5", "load = 0.5\nspeed = 3"), "t")
            .unwrap_err();
        assert!(e.to_string().contains("speed"), "{e}");
    }

    #[test]
    fn sets_apply_and_errors_name_the_key() {
        let s = Scenario::from_toml(MIN, "t").unwrap();
        let set = |k: &str, v: &str| s.with_sets(&[(k.to_string(), v.to_string())]);
        assert_eq!(
            set("moderation", "static").unwrap().nic[0].moderation,
            NicModeration::Static
        );
        assert_eq!(set("aim_mode", "2").unwrap().nic[0].aim_mode, 2);
        assert_eq!(
            set("platform", "healthy").unwrap().platform.kind,
            PlatformKind::Healthy
        );
        assert_eq!(set("seed", "42").unwrap().seed, 42);
        assert_eq!(set("nic.0.queues", "8").unwrap().nic[0].queues, 8);
        assert_eq!(
            set("costs.hardirq_us", "0.5").unwrap().costs.hardirq_us,
            0.5
        );
        for (k, v) in [
            ("moderation", "turbo"),
            ("aim_mode", "7"),
            ("platform", "fast"),
            ("seed", "x"),
            ("costs.hardirq", "1"),
            ("nic.3.queues", "1"),
            ("bogus", "1"),
        ] {
            let e = set(k, v).unwrap_err();
            assert!(
                matches!(&e, ConfigError::BadSet { key, .. } if key == k),
                "{k}: {e}"
            );
        }
    }

    #[test]
    fn validation() {
        assert!(
            Scenario::from_toml(
                &MIN.replace("nic = \"eth0\"\nload", "nic = \"eth9\"\nload"),
                "t"
            )
            .is_err()
        );
        assert!(Scenario::from_toml(&MIN.replace("queues = 4", "queues = 0"), "t").is_err());
    }
}
