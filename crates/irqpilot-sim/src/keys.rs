//! The reference of every scenario key, one table generated from the schema: the keys and
//! their defaults come from the scenario types themselves (serialized), which keys must be given
//! from what deserialization refuses without them, and the meanings from [`KEYS`]. A test fails
//! when the schema has a key [`KEYS`] lacks (or the other way round), and when
//! docs/simulator.md does not hold the table as generated (`irqpilot sim --keys` prints it).

use crate::config::{ConfigError, Scenario};
use serde_json::Value;
use std::collections::BTreeMap;

/// Why the key reference could not be generated (a built-in scenario that sets every key no
/// longer fits the schema).
#[derive(Debug, thiserror::Error)]
pub enum KeysError {
    /// The scenario setting every key is not TOML.
    #[error("the scenario setting every key: {0}")]
    Parse(#[from] toml::de::Error),
    /// A trial scenario could not be written back as TOML.
    #[error("the scenario setting every key: {0}")]
    Write(#[from] toml::ser::Error),
    /// The scenario setting every key was refused.
    #[error(transparent)]
    Scenario(#[from] ConfigError),
    /// A scenario could not be serialized to list its keys.
    #[error("the scenario as JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// Every scenario key, dotted as `--set` spells it (`N` for a position in a list), with what it
/// means. Sorted by key.
pub const KEYS: &[(&str, &str)] = &[
    (
        "costs.hardirq_us",
        "Hardirq entry + handler + EOI + exit (\"realistic\" 1.0 us, costmodel 1.1).",
    ),
    (
        "costs.indirect_full_gap_us",
        "Gap at which pollution is full; it scales linearly below (100 us, costmodel 2.1).",
    ),
    (
        "costs.indirect_us",
        "Cache pollution charged to the interrupted work after a long gap (1.0 us, costmodel 2.1).",
    ),
    (
        "costs.mask_unmask_us",
        "MSI-X vector mask + unmask with PCIe read-back (1.8 us, costmodel 1.1 [MASK]).",
    ),
    (
        "costs.migration_cold_factor",
        "During those interrupts the indirect (cache) cost `indirect_us` is multiplied by this factor; the extra `(factor - 1) x indirect_us` is hardirq time (U, costmodel 2.7).",
    ),
    (
        "costs.migration_cold_interrupts",
        "After a move, this many of the IRQ's next interrupts run cache-cold (costmodel 2.7: \"a per-interrupt indirect cost multiplier for the next ~N (U, 100) interrupts\").",
    ),
    (
        "costs.migration_penalty_us",
        "One-time cost after an IRQ moves to another CPU (cold ring/NAPI state; 10 us, costmodel 1.8).",
    ),
    (
        "costs.napi_poll_us",
        "Fixed cost of one NAPI poll (0.5 us, costmodel 1.2).",
    ),
    (
        "costs.napi_weight",
        "NAPI weight: packets per poll (64, `NAPI_POLL_WEIGHT`).",
    ),
    (
        "costs.netdev_budget",
        "Packets per softirq round (`netdev_budget`, 300).",
    ),
    (
        "costs.netdev_budget_us",
        "Time per softirq round before deferring to ksoftirqd (`netdev_budget_usecs`, 2000 us).",
    ),
    (
        "costs.nvme_cqe_us",
        "Per NVMe completion entry reaped in the hardirq handler (0.2 us, costmodel 2.1).",
    ),
    (
        "costs.nvme_io_app_us",
        "Application cost per I/O submitted and reaped (libaio; 1 us).",
    ),
    (
        "costs.remote_cache_us",
        "Application time per request served on another last-level cache than the softirq that received it: the packet's and the socket's cache lines cross over (ours, U; costmodel 2.7: \"other core, same LLC: adds remote wakeup (IPI) and LLC transfers\").",
    ),
    (
        "costs.remote_node_app_us",
        "On top of `remote_cache_us` when the two CPUs are on different NUMA nodes (ours, U; costmodel 2.7: \"other socket: ESnet reports up to 2x throughput loss\").",
    ),
    (
        "costs.remote_node_packet_factor",
        "Per-packet softirq work (`rx_packet_ns`, `tx_completion_ns`) is multiplied by this when the queue is polled on another NUMA node than its device (its rings and buffers are in the device node's memory). 1 = no effect.",
    ),
    (
        "costs.remote_node_penalty_us",
        "Extra delivery cost when the IRQ is served on another NUMA node than its device.",
    ),
    (
        "costs.rx_copy_ns_per_byte",
        "Per received byte copied to the application (0.15 ns/B, costmodel 1.2).",
    ),
    (
        "costs.rx_driver_ns",
        "The driver's part of `rx_packet_ns` (XDP-level, 42 ns, costmodel 3): what the IRQ CPU still spends per packet when RFS moves the stack to the application's CPU.",
    ),
    (
        "costs.rx_packet_ns",
        "Per received packet in softirq: driver + GRO + stack (210 ns skb+stack, costmodel 3).",
    ),
    (
        "costs.smt_slowdown",
        "Work started on a CPU while an SMT sibling of it is busy takes this much longer (the two threads share one core's execution units). 1 = no effect. See docs/placement-twin.md.",
    ),
    (
        "costs.tx_completion_ns",
        "Per transmit completion cleaned in the NAPI poll.",
    ),
    (
        "costs.wakeup_ipi_us",
        "Latency of waking an application thread on another CPU that is idle (wake-up IPI and schedule; 1.5 us, costmodel 1.1 / 3 \"IPI latency\", U). With RFS, the IPI that hands the packets to the thread's CPU.",
    ),
    ("description", "What it reproduces, with its source."),
    ("duration_ms", "Simulated time to run."),
    (
        "gsim.delay_us",
        "Maximum (or fixed) delay; 0 disables moderation. Suggested 100.",
    ),
    (
        "gsim.enabled",
        "Enable GSIM on every device vector (the kernel enables it per IRQ).",
    ),
    (
        "gsim.hardirq_percent",
        "Per-CPU hardirq share above which moderation engages (0 = not used). Suggested 70.",
    ),
    (
        "gsim.scale_cpus",
        "Over-estimation of active CPUs, percent: 150 in v4, 200 in v3.",
    ),
    (
        "gsim.target_intr_rate",
        "Global rate above which moderation engages (0 = not used). Suggested 1,000,000.",
    ),
    ("gsim.update_ms", "Epoch length."),
    (
        "machine.cmdline",
        "Kernel command line (`/proc/cmdline`): `isolcpus=`, `nohz_full=` and `irqaffinity=` set the machine's isolation as on Linux (`Machine.isolation`, `/sys/devices/system/cpu/isolated`).",
    ),
    ("machine.cores_per_package", "Cores per package."),
    ("machine.numa_nodes", "NUMA nodes."),
    ("machine.packages", "Packages (sockets)."),
    ("machine.threads_per_core", "SMT threads per core."),
    (
        "machine.vectors_per_cpu",
        "Device vectors each CPU can take: x86's vector matrix has about 200 per CPU (balancing.md 5.6, \"at max. 204\"). An affinity write that finds no CPU of its mask with a free vector fails with ENOSPC and changes nothing.",
    ),
    (
        "metrics.series_ms",
        "Resolution of the time series in the report (0 = no series).",
    ),
    (
        "moderator.delay_us",
        "Largest delay the moderator may impose on any source, microseconds (GSIM: 100).",
    ),
    (
        "moderator.exclude",
        "Devices the moderators never touch, by interface, NVMe controller or PCI address (globs with `*` and `?`): e.g. the management interface, or a NIC whose driver resets its queues when coalescing changes. Their interrupts still count against the target.",
    ),
    (
        "moderator.hardirq_percent",
        "Per-CPU hardirq share to stay under, percent (GSIM's suggestion: 70).",
    ),
    (
        "moderator.hysteresis",
        "Relative band under the target where delays are held rather than relaxed (0.1 = act at 100%, relax below 90%): keeps the loop from oscillating around the target.",
    ),
    (
        "moderator.idle",
        "The setting of a queue with nothing to moderate: `none` (the lowest-latency setting) or `driver-default` (what the driver had).",
    ),
    (
        "moderator.idle_tx",
        "TX completions of a queue with nothing to moderate: `none` (an interrupt per completion), `driver-default` (what the driver had; a delay then never puts them under it: one interrupt a request/response transaction instead of two, the completions' work joining the RX polls) or `measured` (an interrupt per completion, unless a load above `target_intr_rate` that nothing holds back was measured to complete more with the driver's own setting: the knee search asks once per load).",
    ),
    (
        "moderator.kernel_soft",
        "Whether to configure the kernel's own software moderation (GSIM) where the kernel has it. Off: GSIM's parameters and per-IRQ switches are left as they are.",
    ),
    (
        "moderator.knee_search",
        "Whether to find the platform's knee by probing (the target then moves away from `target_intr_rate`, which is where it starts); off: the target stays fixed, as GSIM's.",
    ),
    (
        "moderator.min_delay_us",
        "Smallest delay worth programming; below it the source's original setting is restored.",
    ),
    (
        "moderator.min_intr_rate",
        "The lowest target the knee search may settle on, interrupts/s (`target_intr_rate` where that is lower).",
    ),
    (
        "moderator.period_ms",
        "Control period, milliseconds (the daemon's and the twin's sampling interval).",
    ),
    (
        "moderator.relax",
        "Fraction by which delays shrink per period when under target (GSIM shrinks by 1/16 per 5 ms epoch; 1/8 per 10 ms period is similar).",
    ),
    (
        "moderator.rx_frames",
        "Least `rx-frames` paired with a programmed `rx-usecs` (a delay `d` is paired with the packets the queue receives in `1.25 d`, at least this many): a queue whose timer restarts at every packet (mlx5 CQE mode) is held by its frame count while its packets come closer together than `d`.",
    ),
    (
        "moderator.smoothing",
        "Weight of the newest period in the smoothed per-source rates (1 = no smoothing). Rates measured over one short period are noisy; acting on noise makes a loop oscillate.",
    ),
    (
        "moderator.target_intr_rate",
        "Platform-wide device interrupt rate to stay under (GSIM's suggestion: 1,000,000; the affected platforms' knee is 1-3 M/s, moderation.md 1.2).",
    ),
    ("name", "Name (built-ins: the file stem)."),
    ("nic", "NICs, one `[[nic]]` table each."),
    (
        "nic.N.adaptive_tx",
        "Whether DIM also adapts TX completion moderation (`adaptive-tx`), with `moderation = \"dim\"`.",
    ),
    (
        "nic.N.aim_mode",
        "`enable_aim` for AIM moderation (0, 1, 2).",
    ),
    (
        "nic.N.cpus",
        "CPUs the driver spreads the queues' IRQs over itself, as a cpulist (queue i on the i-th CPU, wrapping). Default: none of its own: each vector goes where the kernel's vector matrix puts it, the CPU of the default affinity (`irqaffinity=`, else all) with the fewest vectors, so a second NIC's queues follow the first's.",
    ),
    (
        "nic.N.cqe_mode",
        "RX timer restarts at every completion (mlx5 CQE mode) rather than at the first.",
    ),
    ("nic.N.itr_register", "Throttle register of an AIM NIC."),
    ("nic.N.link_gbps", "Line rate."),
    ("nic.N.moderation", "Per-queue moderation."),
    ("nic.N.mtu_bytes", "Bytes per packet on the wire."),
    ("nic.N.name", "Interface name."),
    ("nic.N.node", "NUMA node of the device."),
    ("nic.N.queues", "RX/TX queue pairs (one MSI-X vector each)."),
    ("nic.N.ring_size", "RX ring descriptors per queue."),
    (
        "nic.N.rx_frames",
        "`rx-frames` for static moderation (32: mlx5's default; 0 = no frame limit).",
    ),
    (
        "nic.N.rx_usecs",
        "`rx-usecs` for static moderation (3 us: mlx5's static CQE-mode default, costmodel 1.5).",
    ),
    (
        "nic.N.tx_frames",
        "`tx-frames` for static TX completion moderation (mlx5 default 32).",
    ),
    (
        "nic.N.tx_usecs",
        "`tx-usecs` for static TX completion moderation (mlx5 default 16 us, EQE mode).",
    ),
    (
        "nic.N.vm_exit_us",
        "Hypervisor cost per device interrupt in a VM (2 exits x 0.5 us, costmodel 1.4).",
    ),
    (
        "nic.N.vms",
        "Virtual machines sharing the NIC (SR-IOV VFs): queues are split evenly between them and each VM's interrupts pay `vm_exit_us` on top of the hardirq cost.",
    ),
    ("nvme", "NVMe drive groups, one `[[nvme]]` table each."),
    (
        "nvme.N.coalesce_threshold",
        "Feature 08h aggregation threshold (entries).",
    ),
    (
        "nvme.N.coalesce_time_100us",
        "Feature 08h aggregation time, 100 us units.",
    ),
    (
        "nvme.N.cpus",
        "CPUs the queues spread over (cpulist; the kernel spreads over all CPUs). Default: all.",
    ),
    ("nvme.N.drives", "Number of drives."),
    (
        "nvme.N.latency_us",
        "Media latency of one read (78 us p50 at QD1 in GSIM v4's table).",
    ),
    (
        "nvme.N.max_iops",
        "Device maximum 4 KiB random-read IOPS (its DMA bandwidth / 4 KiB).",
    ),
    ("nvme.N.moderation", "Coalescing."),
    (
        "nvme.N.name",
        "Name prefix: drives are `<prefix>0`, `<prefix>1`, ...",
    ),
    ("nvme.N.node", "NUMA node."),
    (
        "nvme.N.queues_per_drive",
        "I/O queues (kernel-managed vectors) per drive, at most one per CPU of `cpus`: each drive's queues get masks spread over `cpus` as the kernel spreads them, and each vector fires on the CPU the kernel's vector matrix picks in its mask (`managed.rs`).",
    ),
    (
        "placement.irqpilot.applications",
        "Where the applications that consume a device's traffic run. The device's queue IRQs then prefer the other CPUs that share a last-level cache with those (the cost of leaving that set is `numa_penalty`) rather than the device's NUMA-local CPUs: a softirq on another cache than the thread it wakes adds a wake-up IPI and cache-line transfers, on another socket up to 2x throughput loss; on the application's own CPUs it preempts the application (costmodel.md 2.7). An application whose CPUs fill their caches leaves its device's IRQs near the device.",
    ),
    (
        "placement.irqpilot.applications.N.cpus",
        "The application's CPUs, a CPU list. Give this or `process`.",
    ),
    (
        "placement.irqpilot.applications.N.device",
        "The device whose traffic the application consumes: PCI address, network interface (`eth0`) or NVMe controller (`nvme0`).",
    ),
    (
        "placement.irqpilot.applications.N.process",
        "The process name, as `/proc/PID/comm` shows it (`nginx`): the daemon takes its threads' CPUs (`Cpus_allowed_list`). Give this or `cpus`; the twin's own placement run uses `cpus` only.",
    ),
    (
        "placement.irqpilot.ban_cpus",
        "CPUs never to place an IRQ on (IRQs there are moved off), on top of isolation.",
    ),
    (
        "placement.irqpilot.ban_irqs",
        "IRQs never to touch (they still count for load and vectors).",
    ),
    (
        "placement.irqpilot.ban_names",
        "IRQ name globs (`*`, `?`) never to touch, matched against each action name and the joined name as `/proc/interrupts` prints it.",
    ),
    (
        "placement.irqpilot.heavy_min_load",
        "An IRQ whose load is below this is light: never moved for balance, only to satisfy isolation, bans and pins (kirqd ignored light sources too, balancing.md 3.2).",
    ),
    (
        "placement.irqpilot.interrupt_cost_us",
        "Cost of one interrupt when the kernel does not account IRQ time (no `/proc/stat` irq and softirq columns, or no `IRQ_TIME_ACCOUNTING`): 1 us hardirq + 1 us indirect (costmodel.md 1.1).",
    ),
    (
        "placement.irqpilot.llc_weight",
        "Weight of the load the CPUs of one last-level cache share.",
    ),
    (
        "placement.irqpilot.load_shift",
        "Relative change of per-IRQ loads between two periods that counts as a load shift and shortens the period.",
    ),
    (
        "placement.irqpilot.manage_default_affinity",
        "Write `/proc/irq/default_smp_affinity` when it includes CPUs IRQs may not use, so IRQs registered later start on housekeeping CPUs (balancing.md 8.3).",
    ),
    (
        "placement.irqpilot.max_interrupt_cost_us",
        "Upper bound on the time charged to one interrupt when a CPU's irq+softirq time is shared among its interrupts: one `net_rx_action` round may run 2 jiffies (2000 us at HZ=1000, costmodel.md 1.2). Stops a CPU's unrelated softirq work from making a rare IRQ heavy.",
    ),
    (
        "placement.irqpilot.max_interval_ms",
        "Longest control period (steady load), ms. irqbalance polls every 10 s (balancing.md 1.2).",
    ),
    (
        "placement.irqpilot.min_interval_ms",
        "Shortest control period the policy asks for (after moves or load shifts), ms.",
    ),
    (
        "placement.irqpilot.numa_penalty",
        "What placing an IRQ off its device's NUMA-local CPUs costs, in CPU shares: it goes remote only when the local CPUs are busier than this (ESnet: up to 2x slower TCP across sockets, costmodel.md 1.8).",
    ),
    (
        "placement.irqpilot.package_weight",
        "Weight of the load the CPUs of one package share (Kamble: balance packages first, balancing.md 3.1).",
    ),
    (
        "placement.irqpilot.pin",
        "Pins: IRQs (by number, device or name glob) restricted to a CPU set.",
    ),
    (
        "placement.irqpilot.pin.N.cpus",
        "The CPUs the matching IRQs are restricted to, a CPU list (intersected with the housekeeping CPUs: a pin never puts a device IRQ on an isolated CPU).",
    ),
    (
        "placement.irqpilot.pin.N.device",
        "A device, every IRQ of it: PCI address (`0000:3b:00.0`), network interface (`eth0`) or NVMe controller (`nvme0`).",
    ),
    (
        "placement.irqpilot.pin.N.irq",
        "One IRQ number. A pin gives exactly one of `irq`, `device` and `name`.",
    ),
    (
        "placement.irqpilot.pin.N.name",
        "An IRQ name glob (`mlx5_comp*`).",
    ),
    (
        "placement.irqpilot.queue_spread_weight",
        "Weight of the load one device's queues put on one core: spreads a device's queues one per core (vendor scripts and RSS do the same, balancing.md 5.8, 6.5).",
    ),
    (
        "placement.irqpilot.smt_weight",
        "Weight of the load two SMT siblings share (their core's load, squared, in the objective). Siblings share execution units: \"HT has shown no benefit\" for interrupt handling (scaling.rst, balancing.md 5.8).",
    ),
    (
        "placement.irqpilot.tolerance",
        "Smallest gain (CPU shares, see docs/placement.md) a balancing move must bring. Undoing a move needs the loads to change by about twice this, which is what keeps the policy from oscillating.",
    ),
    (
        "placement.irqpilot.tolerance_relative",
        "The gain must also reach this fraction of the source CPU's load (kirqd's max/8, balancing.md 3.2 and A4).",
    ),
    (
        "placement.irqpilot.vector_capacity",
        "Device vectors per CPU (x86: \"at max. 204\", about 200 allocatable, balancing.md 5.6).",
    ),
    ("placement.policy", "Who places IRQs."),
    (
        "placement.rotate_interval_ms",
        "Period of `rotate` (HZ/50 = 20 ms in 2.5.52, Kamble).",
    ),
    (
        "platform.gamma",
        "Above the knee, device DMA efficiency is `(knee / rate)^gamma`.",
    ),
    (
        "platform.healthy_knee_per_sec",
        "Knee of a healthy platform (25 M/s, costmodel 1.4).",
    ),
    ("platform.kind", "Which knee applies."),
    (
        "platform.limited_knee_per_sec",
        "Knee of an affected platform (2 M/s, costmodel 1.4).",
    ),
    ("platform.min_efficiency", "Lowest DMA efficiency."),
    (
        "platform.msi_latency_us",
        "MSI write to handler start on an idle platform.",
    ),
    (
        "platform.rate_window_us",
        "Time constant of the platform's MSI rate estimate.",
    ),
    ("seed", "Seed of every random stream."),
    (
        "warmup_ms",
        "Time at the start excluded from throughput and latency metrics.",
    ),
    (
        "workload",
        "Traffic and I/O, one `[[workload]]` table each; its `kind` says which keys it takes.",
    ),
    (
        "workload.N.app_cpus",
        "CPUs the server's threads run on (a CPU list): pinned one per CPU (`taskset -c`), each client's connection belonging to one of them (client number modulo their count), or scheduled over the set (`app_schedule`). Absent: a request is served on the CPU whose softirq ran its stack.",
    ),
    (
        "workload.N.app_schedule",
        "Where the threads run on `app_cpus`: `pinned` (one per CPU), `scheduled` (a thread per client connection for `rpc`, one per CPU for `poisson`, each allowed the whole set; a sleeping thread wakes on the CPU it last ran on if that is idle, else on an idle CPU of the set, its last-level cache first, else on the least busy; docs/simulator.md).",
    ),
    ("workload.N.block_kb", "Block size."),
    ("workload.N.chunk_kb", "Bytes per send burst."),
    ("workload.N.clients", "Concurrent clients (flows)."),
    (
        "workload.N.exponential_service",
        "Service times exponentially distributed (an M/M/1 server) instead of fixed.",
    ),
    (
        "workload.N.flows",
        "Concurrent flows (default: 4 per queue).",
    ),
    (
        "workload.N.hot_fraction",
        "Fraction of the flows that RSS puts on the NIC's first queue (elephant flows hashing together); the rest spread evenly. 0 = even spread.",
    ),
    (
        "workload.N.iodepth",
        "Outstanding I/Os per queue (jobs on that queue's CPU x iodepth).",
    ),
    (
        "workload.N.jitter_us",
        "Extra network delay of each chunk, exponential with this mean (switch queueing); it keeps flows sharing a queue from marching in lockstep.",
    ),
    (
        "workload.N.jobs",
        "fio jobs per queue (threads on that queue's CPU): a queue has `jobs x iodepth` reads outstanding.",
    ),
    (
        "workload.N.kind",
        "What the workload is: `bulk` (closed-loop TCP flows received), `bulk-tx` (transmit with TSO), `poisson` (open-loop requests), `rpc` (closed-loop request/response), `fio` (NVMe random reads).",
    ),
    (
        "workload.N.load",
        "Sender pacing: fraction of line rate offered in total.",
    ),
    ("workload.N.nic", "NIC name."),
    ("workload.N.nvme", "NVMe group name."),
    (
        "workload.N.probe_per_sec",
        "A latency probe beside the bulk traffic: this many 128-byte requests per second (Poisson, spread by RSS, answered at once), whose round trips are this workload's latency. 0 = none.",
    ),
    (
        "workload.N.queue",
        "Steer every client to this queue of the NIC (an n-tuple flow-steering rule, `ethtool -N ... action Q`) instead of spreading them by RSS.",
    ),
    (
        "workload.N.rate_iops",
        "fio's `rate_iops` as its linear rate process has it: I/O k of a job is due k / rate after the job began, and a job behind that (its reads held up) issues as fast as completions allow until it has caught up (0 = no limit).",
    ),
    ("workload.N.rate_per_sec", "Requests per second."),
    ("workload.N.request_bytes", "Request size on the wire."),
    ("workload.N.response_bytes", "Response size."),
    (
        "workload.N.service_us",
        "Application work per request (mean, when exponential).",
    ),
    (
        "workload.N.start_ms",
        "Simulated time at which the workload starts (a load step).",
    ),
    (
        "workload.N.rps_cpus",
        "The queues' `rps_cpus` for `steering = \"rps\"` (a CPU list; only with it). Default: `app_cpus` when given, else the online CPUs of the NIC's NUMA node.",
    ),
    (
        "workload.N.steering",
        "How a request reaches its thread: `none` (the IRQ CPU's softirq runs the stack and wakes the thread), `rfs` (receive flow steering: the stack runs on the thread's CPU), `rps` (receive packet steering: the flow hash picks a CPU of `rps_cpus`, an IPI schedules its backlog, which runs the stack and wakes the thread).",
    ),
    (
        "workload.N.stop_ms",
        "Simulated time at which the senders (clients, flows, jobs) stop, after what they have in flight: a burst, then idle; 0 = never.",
    ),
    (
        "workload.N.think_us",
        "Client think time between a response and the next request (exponential mean).",
    ),
    ("workload.N.tso_kb", "TSO segment size."),
    ("workload.N.window_kb", "Bytes a flow may have in flight."),
    (
        "workload.N.wire_rtt_us",
        "Network round trip outside the simulated receiver.",
    ),
];

/// A scenario that gives every key a value, optional ones included, every list at least one
/// element (each kind of element: one workload of each kind, a pin of each selector, an
/// application by CPUs and one by process): its keys are the schema's ([`unset_keys`] checks).
const FULL: &str = r#"
name = "full"
[machine]
cores_per_package = 4
[moderator]
exclude = ["mgmt0"]
[[nic]]
name = "eth0"
link_gbps = 10
queues = 2
cpus = "0-1"
[[nvme]]
name = "nvme"
drives = 1
queues_per_drive = 1
max_iops = 1000
cpus = "0"
[[workload]]
kind = "bulk"
nic = "eth0"
load = 1
[[workload]]
kind = "bulk-tx"
nic = "eth0"
load = 1
[[workload]]
kind = "poisson"
nic = "eth0"
rate_per_sec = 1
app_cpus = "0"
app_schedule = "scheduled"
steering = "rps"
rps_cpus = "0-1"
[[workload]]
kind = "rpc"
nic = "eth0"
clients = 1
queue = 0
app_cpus = "0"
app_schedule = "scheduled"
steering = "rps"
rps_cpus = "0-1"
[[workload]]
kind = "fio"
nvme = "nvme"
iodepth = 1
[placement.irqpilot]
ban_irqs = [5]
ban_names = ["timer*"]
[[placement.irqpilot.pin]]
irq = 5
cpus = "0"
[[placement.irqpilot.pin]]
device = "eth0"
cpus = "1"
[[placement.irqpilot.pin]]
name = "nvme*"
cpus = "2"
[[placement.irqpilot.applications]]
device = "eth0"
cpus = "0-1"
[[placement.irqpilot.applications]]
device = "nvme0"
process = "fio"
"#;

/// What one key looks like in the schema.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KeyInfo {
    /// Workload kinds that have it (workload keys only).
    pub kinds: Vec<String>,
    /// Its default as JSON text (`None` when it must be given or is absent by default).
    pub default: Option<String>,
    /// Whether a scenario must give it.
    pub required: bool,
}

/// Leaves of `v`, dotted; list positions become `N`, list elements that are objects are walked
/// (and the list itself is a key too: `placement.irqpilot.pin`).
fn leaves(prefix: &str, v: &Value, out: &mut Vec<(String, Value)>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                leaves(&join(prefix, k), x, out);
            }
        }
        Value::Array(a) if a.iter().any(Value::is_object) => {
            out.push((prefix.to_string(), v.clone()));
            for x in a {
                leaves(&format!("{prefix}.N"), x, out);
            }
        }
        _ => out.push((prefix.to_string(), v.clone())),
    }
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

/// [`FULL`], checked.
fn full() -> Result<Scenario, KeysError> {
    Ok(Scenario::from_toml(FULL, "the scenario setting every key")?)
}

/// The keys of the schema with their kinds, defaults and whether they are required: each key
/// is taken out of `FULL` in turn; serde then refuses the scenario (the key is required) or
/// fills in its default.
pub fn schema() -> Result<BTreeMap<String, KeyInfo>, KeysError> {
    let full_json = serde_json::to_value(full()?)?;
    let text: toml::Value = toml::from_str(FULL)?;
    let mut out = Vec::new();
    leaves("", &full_json, &mut out);
    let kinds: Vec<String> = full_json["workload"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|w| w["kind"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default();
    let mut map: BTreeMap<String, KeyInfo> = BTreeMap::new();
    for (key, _) in &out {
        if map.contains_key(key) {
            continue;
        }
        let mut info = KeyInfo::default();
        let mut trial = text.clone();
        let without = if remove(&mut trial, key) {
            match trial.try_into::<Scenario>() {
                Ok(sc) => Some(serde_json::to_value(sc)?),
                Err(e) => {
                    info.required = e.message().starts_with("missing field");
                    None
                }
            }
        } else {
            Some(full_json.clone())
        };
        if let Some(without) = without {
            let mut values = Vec::new();
            leaves("", &without, &mut values);
            let mut vals: Vec<String> = values
                .iter()
                .filter(|(k, v)| k == key && !v.is_null())
                .map(|(_, v)| v.to_string())
                .collect();
            vals.dedup();
            info.default = (!vals.is_empty()).then(|| vals.join(" / "));
        }
        if key.starts_with("workload.") {
            info.kinds = workload_kinds(&full_json, key, &kinds);
        }
        map.insert(key.clone(), info);
    }
    Ok(map)
}

/// The key [`unset_keys`] adds to each table to make it list the keys it takes.
const PROBE: &str = "zz_not_a_key";

/// What `FULL` leaves unseen, which the reference would then lack: a key that a table takes
/// and that no table of its kind in `FULL` sets (`placement.irqpilot.pin.N.irq`), a list
/// without an element (its elements' keys go unseen), a table that takes any key (its keys
/// cannot be listed). The keys a table takes are those serde lists when it refuses an unknown
/// one, so a key added to the schema is found without a list here. A test checks that there
/// is none.
pub fn unset_keys() -> Result<Vec<String>, KeysError> {
    let sc = full()?;
    let json = serde_json::to_value(&sc)?;
    let written = toml::Value::try_from(&sc)?;
    let mut tables = Vec::new();
    let mut unset = Vec::new();
    walk_tables("", &json, &mut tables, &mut unset);
    // Tables of one kind (`pin.N`; workloads of one kind) share the keys they take.
    let mut kinds: BTreeMap<(String, Vec<String>), Vec<String>> = BTreeMap::new();
    for (path, set) in tables {
        let pattern = pattern(&path);
        let mut trial = written.clone();
        let Some(table) = table_at(&mut trial, &path) else {
            unset.push(format!("{pattern} (not written as a table)"));
            continue;
        };
        table.insert(PROBE.into(), toml::Value::Integer(0));
        let taken = match trial.try_into::<Scenario>() {
            Ok(_) => {
                unset.push(format!("{pattern} (takes any key)"));
                continue;
            }
            Err(e) => match listed(e.message()) {
                Some(taken) => taken,
                None => {
                    unset.push(format!("{pattern} ({})", e.message().trim_end()));
                    continue;
                }
            },
        };
        kinds.entry((pattern, taken)).or_default().extend(set);
    }
    for ((pattern, taken), set) in kinds {
        unset.extend(
            taken
                .iter()
                .filter(|k| !set.contains(k))
                .map(|k| join(&pattern, k)),
        );
    }
    unset.sort();
    unset.dedup();
    Ok(unset)
}

/// The tables of `v` (dotted paths, list positions as numbers) with the keys each sets (a
/// `null`, an option left out, sets nothing); empty lists go to `unset`.
fn walk_tables(
    path: &str,
    v: &Value,
    tables: &mut Vec<(String, Vec<String>)>,
    unset: &mut Vec<String>,
) {
    match v {
        Value::Object(m) => {
            let set = m
                .iter()
                .filter(|(_, x)| !x.is_null())
                .map(|(k, _)| k.clone())
                .collect();
            tables.push((path.to_string(), set));
            for (k, x) in m {
                walk_tables(&join(path, k), x, tables, unset);
            }
        }
        Value::Array(a) if a.is_empty() => unset.push(format!("{} (an empty list)", pattern(path))),
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                walk_tables(&join(path, &i.to_string()), x, tables, unset);
            }
        }
        _ => {}
    }
}

/// A dotted path with list positions as `N`.
fn pattern(path: &str) -> String {
    path.split('.')
        .map(|p| if p.parse::<usize>().is_ok() { "N" } else { p })
        .collect::<Vec<_>>()
        .join(".")
}

/// The table at the dotted `path` (list positions as numbers); the root for "".
fn table_at<'v>(v: &'v mut toml::Value, path: &str) -> Option<&'v mut toml::Table> {
    let mut v = v;
    for part in path.split('.').filter(|p| !p.is_empty()) {
        v = match (part.parse::<usize>(), v) {
            (Ok(i), toml::Value::Array(a)) => a.get_mut(i)?,
            (_, toml::Value::Table(t)) => t.get_mut(part)?,
            _ => return None,
        };
    }
    v.as_table_mut()
}

/// The keys serde says a table takes when it refuses [`PROBE`] (`unknown field `zz_not_a_key`,
/// expected one of `a`, `b``), sorted.
fn listed(message: &str) -> Option<Vec<String>> {
    let rest = message.strip_prefix(&format!("unknown field `{PROBE}`, "))?;
    let mut keys: Vec<String> = rest
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect();
    keys.sort();
    Some(keys)
}

/// Kinds of workload whose entry in `full` has `key` (`workload.N.field`).
fn workload_kinds(full: &Value, key: &str, kinds: &[String]) -> Vec<String> {
    let field = key.trim_start_matches("workload.N.");
    full["workload"]
        .as_array()
        .map(|a| {
            a.iter()
                .zip(kinds)
                .filter(|(w, _)| w.get(field).is_some())
                .map(|(_, k)| k.clone())
                .collect()
        })
        .unwrap_or_default()
}

/// Removes the dotted `key` (`N`: from every element) from `v`; whether anything was removed.
fn remove(v: &mut toml::Value, key: &str) -> bool {
    let Some((head, rest)) = key.split_once('.') else {
        return v.as_table_mut().is_some_and(|t| t.remove(key).is_some());
    };
    match (head, v) {
        ("N", toml::Value::Array(a)) => {
            let mut any = false;
            for x in a {
                any |= remove(x, rest);
            }
            any
        }
        (h, toml::Value::Table(t)) => t.get_mut(h).is_some_and(|x| remove(x, rest)),
        _ => false,
    }
}

/// The reference table (Markdown): key, workload kinds, default, meaning.
pub fn reference_table() -> Result<String, KeysError> {
    let schema = schema()?;
    let mut out = String::from("| key | default | meaning |\n|---|---|---|\n");
    for (key, meaning) in KEYS {
        let info = schema.get(*key).cloned().unwrap_or_default();
        let default = if info.required {
            "required".to_string()
        } else {
            info.default
                .map_or("absent".to_string(), |d| format!("`{d}`"))
        };
        let kinds = if info.kinds.is_empty() || info.kinds.len() == 5 {
            String::new()
        } else {
            format!(" ({})", info.kinds.join(", "))
        };
        out += &format!(
            "| `{key}`{kinds} | {default} | {} |\n",
            meaning.replace('|', "\\|")
        );
    }
    Ok(out)
}
