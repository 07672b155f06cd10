//! Command-line arguments (clap derive). Global flags apply to every subcommand.
//!
//! `build.rs` compiles this file too, to write the man pages and shell completions the .deb
//! installs: it may use only `std`, `clap`, `clap_complete`, `humantime` and `irqpilot_core`.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::time::Duration;

/// Interrupt management for Linux servers: see, place, moderate, isolate, notify.
#[derive(Debug, Parser)]
#[command(name = "irqpilot", version, about, max_term_width = 100)]
pub struct Cli {
    /// Flags shared by every subcommand.
    #[command(flatten)]
    pub global: GlobalArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Flags shared by every subcommand.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// Directory standing for `/`: a live machine (default `/`), a captured fixture, or a
    /// simulator's exported tree.
    #[arg(long, global = true, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Configuration file (TOML). Default: /etc/irqpilot/irqpilot.toml if it exists.
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Output format.
    #[arg(long, global = true, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// More log output on stderr (-v, -vv).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Aligned text for people.
    Table,
    /// Stable JSON for programs.
    Json,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Explain this machine: topology, isolation, devices and their queues, findings.
    Status(StatusArgs),
    /// Print one snapshot of /proc/interrupts (JSON: `cpus`, `interrupts`).
    Snapshot(SnapshotArgs),
    /// Sample interrupt rates per IRQ and per CPU, with an imbalance index.
    Watch(WatchArgs),
    /// Full-screen live view: per-CPU load, the busiest IRQs, imbalance over the last minute,
    /// findings, what the daemon changed (a terminal program; `watch` prints lines).
    Top(TopArgs),
    /// Turn a recording (watch/top --record) into one self-contained HTML page with plots.
    Report(ReportArgs),
    /// Copy every file irqpilot reads into a fixture tree with a MANIFEST.
    Capture(CaptureArgs),
    /// Write synthetic machines as fixture trees (for tests and benchmarks).
    #[command(subcommand)]
    Fixture(FixtureCommand),
    /// Dry run of the placement policy: the moves, per-CPU load before and after, imbalance.
    Plan(PlanArgs),
    /// Place IRQs once: journal every old value, then write (exit 3: some refused).
    Apply(ApplyArgs),
    /// Restore everything the journal recorded (exit 3: some could not be restored).
    Revert(RevertArgs),
    /// Plan (and with --apply carry out) keeping CPUs free of device interrupts.
    Isolate(IsolateArgs),
    /// Run the placement loop: sample, decide, apply, at the policy's adaptive interval.
    Daemon(DaemonArgs),
    /// Global interrupt moderation: what would change now and why (--plan), or change it
    /// (--apply).
    Moderate(ModerateArgs),
    /// Run the digital twin: a simulated server's interrupt path (scenarios, comparisons,
    /// the README's result tables).
    Sim(SimArgs),
    /// Benchmarks that measure this machine.
    Bench(BenchArgs),
    /// Serve Prometheus / OpenMetrics metrics of this machine's interrupts over HTTP (read-only;
    /// no root needed).
    Exporter(ExporterArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(CompletionsArgs),
}

/// `irqpilot completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// The metrics endpoint's options shared by `exporter` and `daemon --metrics`.
#[derive(Debug, Args, Clone, Default)]
pub struct MetricsOptions {
    /// Allow a metrics address that is not loopback (the endpoint has no authentication: put
    /// it on a management network or behind a firewall).
    #[arg(long)]
    pub metrics_allow_remote: bool,
    /// Also export one series per IRQ per CPU that took it (`irqpilot_irq_cpu_interrupts_total`;
    /// tens of thousands of series on a large server, docs/metrics.md).
    #[arg(long)]
    pub per_cpu_irqs: bool,
}

/// `irqpilot exporter`.
#[derive(Debug, Args)]
pub struct ExporterArgs {
    /// Address to serve `/metrics` on (default: `[metrics] listen` in the configuration, else
    /// 127.0.0.1:9877).
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: Option<String>,
    /// Re-read the inventory (IRQ names, devices, affinities, coalescing) this often; IRQs that
    /// come or go trigger a re-read at once.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub inventory_interval: Duration,
    /// Endpoint options.
    #[command(flatten)]
    pub options: MetricsOptions,
}

/// `irqpilot moderate`.
#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("mode").required(true).args(["plan", "apply"]))]
pub struct ModerateArgs {
    /// Show what the moderators would set now, with the measured rates behind each action.
    #[arg(long)]
    pub plan: bool,
    /// Apply that plan (needs root), journaling every old value for `irqpilot revert`.
    #[arg(long)]
    pub apply: bool,
    /// Measure rates over this interval first (0: decide from the inventory alone).
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub sample: Duration,
    /// Journal location (with --apply).
    #[command(flatten)]
    pub journal: JournalArg,
}

/// `irqpilot sim`.
#[derive(Debug, Args)]
pub struct SimArgs {
    /// A built-in scenario (see --list) or a scenario file (TOML).
    pub scenario: Option<String>,
    /// List the built-in scenarios.
    #[arg(long, conflicts_with_all = ["scenario", "table"])]
    pub list: bool,
    /// Print the reference of every scenario key (Markdown: key, default, meaning), generated
    /// from the schema.
    #[arg(long, conflicts_with_all = ["scenario", "table", "list"])]
    pub keys: bool,
    /// Generate N held-out machines (scenarios no policy was tuned on; --seed picks the set,
    /// default 2) and list them, or write them as TOML files with --out.
    #[arg(long, value_name = "N", conflicts_with_all = ["scenario", "table", "list", "sweep"])]
    pub generate: Option<usize>,
    /// With --generate: the directory to write the scenario files into.
    #[arg(long, value_name = "DIR", requires = "generate")]
    pub out: Option<PathBuf>,
    /// Measure issue 10's moderation targets on N generated machines (--seed picks the set,
    /// default 2) and print each machine's values and their distribution. Long: about 20 s
    /// per machine here.
    #[arg(long, value_name = "N", conflicts_with_all = ["scenario", "table", "list"])]
    pub sweep: Option<usize>,
    /// With --table moderation: how many generated machines its held-out summary covers
    /// (default 50; 0 leaves the summary out).
    #[arg(long, value_name = "N", requires = "table")]
    pub machines: Option<usize>,
    /// Seed of every random stream (same seed, same bytes).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Simulated time to run (e.g. 1s, 300ms); the warm-up is shortened to fit if needed.
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Change a scenario key: moderation=none|static|dim|aim|gsim|gsim+device|irqpilot
    /// (gsim: the kernel's GSIM with device moderation off, as its cover letter runs it;
    /// gsim+device: GSIM over the devices' own moderation), aim_mode=0|1|2,
    /// platform=limited|healthy, seed=N, gsim_<param>=N, or any dotted path
    /// (costs.hardirq_us=0.5, nic.0.queues=16, workload.0.iodepth=8). Repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Run once per value and print the runs side by side, e.g. moderation=static,dim,gsim.
    #[arg(long, value_name = "KEY=V1,V2,...")]
    pub compare: Option<String>,
    /// Print a table of twin results against published ones (Markdown): published, moderation, placement.
    #[arg(long, value_name = "NAME", conflicts_with = "scenario")]
    pub table: Option<String>,
    /// Measure the simulator: simulated seconds per wall second, events/s, packets/s.
    #[arg(long)]
    pub bench: bool,
    /// With --compare, --table or --sweep: runs at a time (default: one per CPU); the output
    /// is the same for any value.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub jobs: Option<u16>,
    /// Keep a live /proc + /sys tree of the simulated machine under DIR while it runs, for
    /// tools that read a real machine (irqbalance, irqpilot --root DIR); affinities written to
    /// it are taken as the kernel would take them (docs/placement-twin.md).
    #[arg(long, value_name = "DIR", conflicts_with_all = ["compare", "table", "bench"])]
    pub export_root: Option<PathBuf>,
    /// With --export-root: pace simulated time to wall time, SCALE simulated seconds per wall
    /// second (1 when given alone; the built-in placement scenarios compress time 5x: 0.2).
    #[arg(long, value_name = "SCALE", num_args = 0..=1, default_missing_value = "1",
          requires = "export_root")]
    pub realtime: Option<f64>,
    /// With --export-root: write the tree, then wait for FILE to exist before the simulated
    /// clock starts (a peer reads the machine first).
    #[arg(long, value_name = "FILE", requires = "export_root")]
    pub hold_until: Option<PathBuf>,
    /// Write an HTML page of the run (with --compare: the runs overlaid): per-CPU heat map,
    /// interrupt rates per device, imbalance, throughput and latency.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["table", "bench", "export_root"])]
    pub report: Option<PathBuf>,
    /// Record the simulated machine as `watch --record` would see it (a sample every 10 ms of
    /// simulated time), for `--replay` and `irqpilot report`.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["table", "bench", "compare", "export_root"])]
    pub record: Option<PathBuf>,
}

/// `irqpilot bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// What to measure.
    #[command(subcommand)]
    pub what: BenchWhat,
}

/// Benchmarks.
#[derive(Debug, Subcommand)]
pub enum BenchWhat {
    /// Round-trip latency and CPU cost of user-space notification mechanisms (spin, futex,
    /// eventfd, pipe, socketpair, signals, io_uring MSG_RING, hybrid, user interrupts) for every
    /// placement this machine's topology offers.
    Notify(NotifyArgs),
}

/// `irqpilot bench notify`. Defaults finish in under a minute.
#[derive(Debug, Args)]
pub struct NotifyArgs {
    /// Round trips per back-to-back measurement.
    #[arg(long)]
    pub iterations: Option<u64>,
    /// Round trips discarded before measuring.
    #[arg(long)]
    pub warmup: Option<u64>,
    /// Idle gaps between pings, e.g. 100us,1ms (or none).
    #[arg(long, value_delimiter = ',')]
    pub gaps: Option<Vec<String>>,
    /// Round trips per gap measurement.
    #[arg(long)]
    pub gap_iterations: Option<u64>,
    /// Time budget for the measurements, seconds (or none).
    #[arg(long)]
    pub duration: Option<String>,
    /// Scale every count (2 = twice as long).
    #[arg(long)]
    pub scale: Option<f64>,
    /// Interleaved rounds per measurement.
    #[arg(long)]
    pub rounds: Option<u32>,
    /// Both sides in separate processes instead of threads.
    #[arg(long)]
    pub processes: bool,
    /// Only these mechanisms (comma-separated names).
    #[arg(long, value_delimiter = ',')]
    pub mechanisms: Vec<String>,
    /// Only these placements (same-cpu, smt-sibling, same-cache, other-core, other-package).
    #[arg(long, value_delimiter = ',')]
    pub placements: Vec<String>,
    /// Longest spin of the hybrid strategy, ns.
    #[arg(long)]
    pub max_spin_ns: Option<u32>,
    /// Print Markdown tables (for docs) instead of aligned text.
    #[arg(long)]
    pub markdown: bool,
    /// Also save the JSON report to this file.
    #[arg(long, value_name = "FILE")]
    pub save_json: Option<PathBuf>,
}

/// `--journal`, shared by the commands that write.
#[derive(Debug, Args)]
pub struct JournalArg {
    /// Journal of old values (default: `<root>/var/lib/irqpilot/journal.json`).
    #[arg(long, value_name = "FILE")]
    pub journal: Option<PathBuf>,
}

/// `irqpilot plan`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// Measure rates over this interval (0: no load, only isolation, bans and pins act).
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub sample: Duration,
}

/// `irqpilot apply`.
#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// Measure rates over this interval before deciding (0: no load).
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub sample: Duration,
    /// Journal location.
    #[command(flatten)]
    pub journal: JournalArg,
}

/// `irqpilot revert`.
#[derive(Debug, Args)]
pub struct RevertArgs {
    /// Put back the values of the newest archive (a finished revert's journal) that the
    /// machine no longer holds; the journal itself must be empty.
    #[arg(long)]
    pub archived: bool,
    /// Journal location.
    #[command(flatten)]
    pub journal: JournalArg,
}

/// `irqpilot isolate`.
#[derive(Debug, Args)]
pub struct IsolateArgs {
    /// CPUs to keep free of device interrupts (cpulist, e.g. 4-23).
    #[arg(long, value_parser = parse_cpulist, value_name = "CPULIST")]
    pub cpus: irqpilot_core::CpuSet,
    /// Carry the plan out (channels, affinities, default affinity), journaled.
    #[arg(long)]
    pub apply: bool,
    /// Measure rates first so the leaving IRQs are balanced by load (0: by vectors only).
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    pub sample: Duration,
    /// Journal location.
    #[command(flatten)]
    pub journal: JournalArg,
}

/// `irqpilot daemon`.
#[derive(Debug, Args)]
pub struct DaemonArgs {
    /// Run one period and exit.
    #[arg(long)]
    pub once: bool,
    /// Run this many periods and exit.
    #[arg(long, value_name = "N")]
    pub iterations: Option<u64>,
    /// Start even if irqbalance is running.
    #[arg(long)]
    pub force: bool,
    /// On SIGTERM/SIGINT (or the end of --iterations), restore the journal first.
    #[arg(long)]
    pub restore_on_exit: bool,
    /// Journal location.
    #[command(flatten)]
    pub journal: JournalArg,
    /// Serve Prometheus metrics on this address (as `irqpilot exporter`, plus what the daemon
    /// did); default: `[metrics] listen` in the configuration, else none.
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics: Option<String>,
    /// Metrics endpoint options.
    #[command(flatten)]
    pub metrics_options: MetricsOptions,
}

/// Parses a cpulist argument (`4-23`, `0,2-3`).
pub fn parse_cpulist(s: &str) -> Result<irqpilot_core::CpuSet, String> {
    irqpilot_core::CpuSet::parse_list(s.trim()).map_err(|e| format!("bad cpulist {s:?}: {e}"))
}

/// `irqpilot status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Measure rates over this interval for load-based findings (0 to skip and use the
    /// inventory only).
    #[arg(long, default_value = "500ms", value_parser = parse_duration)]
    pub sample: Duration,
}

/// `irqpilot snapshot`.
#[derive(Debug, Args)]
pub struct SnapshotArgs {}

/// Recording and replaying, shared by `watch` and `top`.
#[derive(Debug, Args)]
pub struct RecordingArgs {
    /// Also write every sample to FILE: a compressed recording (docs/recording.md) for
    /// `--replay` and `irqpilot report`.
    #[arg(long, value_name = "FILE", conflicts_with = "replay")]
    pub record: Option<PathBuf>,
    /// Read the samples from a recording instead of the machine.
    #[arg(long, value_name = "FILE")]
    pub replay: Option<PathBuf>,
    /// With --replay: recorded seconds per wall second (10, 0.5) or max.
    #[arg(long, default_value = "1", value_parser = parse_speed, requires = "replay")]
    pub speed: f64,
    /// With --replay: start this far into the recording (90s, 5m).
    #[arg(long, value_parser = parse_duration, requires = "replay")]
    pub seek: Option<Duration>,
}

/// `irqpilot top`.
#[derive(Debug, Args)]
pub struct TopArgs {
    /// Time between samples (default 1s; a replay's default is its recording's); +/- change it.
    #[arg(long, value_parser = parse_duration)]
    pub interval: Option<Duration>,
    /// Recording and replay.
    #[command(flatten)]
    pub recording: RecordingArgs,
    /// The daemon's journal, for what it last changed.
    #[command(flatten)]
    pub journal: JournalArg,
}

/// `irqpilot report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A recording (watch --record, top --record, sim --record).
    #[arg(value_name = "RECORDING")]
    pub file: PathBuf,
    /// The HTML page to write.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Only from this far into the recording (e.g. 10m).
    #[arg(long, value_parser = parse_duration)]
    pub from: Option<Duration>,
    /// Only up to this far into the recording.
    #[arg(long, value_parser = parse_duration)]
    pub to: Option<Duration>,
    /// The page's title (default: the recording's host and start).
    #[arg(long)]
    pub title: Option<String>,
}

/// `irqpilot watch`.
#[derive(Debug, Args)]
pub struct WatchArgs {
    /// Time between samples (1s like irqtop; 100ms shows an IRQ rotating between CPUs; a
    /// replay's default is its recording's).
    #[arg(long, value_parser = parse_duration)]
    pub interval: Option<Duration>,
    /// Stop after this many intervals (default: run until interrupted).
    #[arg(long)]
    pub count: Option<u64>,
    /// IRQ rows (and, in table mode, CPUs) shown per interval, busiest first; 0 for all.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Recording and replay.
    #[command(flatten)]
    pub recording: RecordingArgs,
}

/// `irqpilot capture`.
#[derive(Debug, Args)]
pub struct CaptureArgs {
    /// Directory to create the fixture tree in (must not exist, or be empty).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// What the machine is, for MANIFEST.toml (e.g. "2-socket Xeon, 4 x ice").
    #[arg(long, default_value = "")]
    pub description: String,
}

/// `irqpilot fixture ...`.
#[derive(Debug, Subcommand)]
pub enum FixtureCommand {
    /// Write a generated machine as a complete fixture tree.
    Generate(GenerateArgs),
}

/// Machines `irqpilot fixture generate` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Preset {
    /// 2 NUMA nodes, 2 packages, 64 cores x 2 threads (256 CPUs), 4 NICs x 64 queues, 8 NVMe
    /// x 64 queues, CPUs 120-127 and 248-255 isolated.
    LargeServer,
}

/// `irqpilot fixture generate`.
#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// Which machine.
    #[arg(long, value_enum, default_value_t = Preset::LargeServer)]
    pub preset: Preset,
    /// Directory to write the tree in (must not exist, or be empty).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Seed of the counts (the same seed writes the same bytes).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// Parses a replay speed: recorded seconds per wall second (`10`, `0.5`, `4x`), or `max`
/// (infinite: no waiting).
pub fn parse_speed(s: &str) -> Result<f64, String> {
    let t = s.trim();
    if t.eq_ignore_ascii_case("max") {
        return Ok(f64::INFINITY);
    }
    t.trim_end_matches(['x', 'X'])
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v > 0.0)
        .ok_or_else(|| {
            format!("bad speed {s:?}: a positive number (recorded seconds per second) or max")
        })
}

/// Parses `100ms`, `1s`, `2.5s`, `250us`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    if let Some(secs) = s
        .strip_suffix('s')
        .filter(|v| v.contains('.') && !v.ends_with(['m', 'u', 'n']))
    {
        return secs
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v >= 0.0)
            .map(Duration::from_secs_f64)
            .ok_or_else(|| format!("bad duration {s:?}"));
    }
    humantime::parse_duration(s).map_err(|e| format!("bad duration {s:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("100ms"), Ok(Duration::from_millis(100)));
        assert_eq!(parse_duration("2.5s"), Ok(Duration::from_millis(2500)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        assert!(parse_duration("fast").is_err());
    }

    #[test]
    fn speeds() {
        assert_eq!(parse_speed("max"), Ok(f64::INFINITY));
        assert_eq!(parse_speed("10"), Ok(10.0));
        assert_eq!(parse_speed("0.5x"), Ok(0.5));
        assert!(parse_speed("0").is_err());
        assert!(parse_speed("fast").is_err());
    }

    #[test]
    fn cli_is_well_formed() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
