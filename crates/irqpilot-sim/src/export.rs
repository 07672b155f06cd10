//! The simulated machine as a live `/proc` + `/sys` tree, for tools that read a real machine:
//! Debian's irqbalance in a private mount namespace (`scripts/vs-irqbalance.sh`), or irqpilot's
//! own `LinuxPlatform` with `--root`.
//!
//! [`TreeExport::create`] writes the whole tree once (`irqpilot_linux::tree::write_tree_with`,
//! plus the files irqbalance reads and irqpilot does not, see `export/extras.rs`). Then, at
//! every step of simulated time:
//!
//! 1. [`TreeExport::pick_up`] reads `proc/irq/N/smp_affinity_list`, `proc/irq/N/smp_affinity`
//!    and `proc/irq/default_smp_affinity`. A file whose text differs from what the twin wrote
//!    last was written by an outside tool: it is parsed with `irqpilot_linux::format::procirq`
//!    and applied to the simulated machine as the kernel would take the write (the vector
//!    matrix, ENOSPC, kernel-managed IRQs: `vectors.rs`). A writer's truncate and its write
//!    are two steps for a plain file, where a kernel takes one request: an empty file, or text
//!    that does not parse, is judged only a whole step after it was first seen, and the twin
//!    writes nothing over such a file meanwhile. Still empty then: no write happened (the old
//!    text goes back, nothing is logged); still unparsable: refused like the kernel's EINVAL.
//!    Every outside write is logged with its outcome.
//! 2. The simulation runs to the next step.
//! 3. [`TreeExport::refresh`] rewrites what changed: `proc/interrupts`, `proc/stat`,
//!    `proc/softirqs`, `proc/net/dev`, `proc/diskstats`, `sys/kernel/irq/N/per_cpu_count`, and
//!    the affinity files of IRQs whose requested or effective CPUs changed (a refused write gets
//!    the old text back); last, the step counter [`STEP_FILE`], so a writer can wait until its
//!    writes were taken and then read them back. Each file is written under a temporary name and
//!    renamed over the old one, so a reader sees the whole old file or the whole new one, never
//!    half of either. A file outside tools may write is put in place only while it still holds
//!    what the twin saw at this step's pick-up (swapped in with `renameat2(RENAME_EXCHANGE)`,
//!    the file it replaced checked and put back if a writer got there first): a write that
//!    lands between the pick-up and the refresh is taken at the next step, as a kernel takes
//!    every write, never undone.
//!
//! With a time scale ([`ExportOptions::scale`]) the export sleeps so that simulated time follows
//! wall time at `scale` simulated seconds per wall second: a peer that samples every few seconds
//! of wall time, as irqbalance does, sees the machine move at a steady pace.

mod extras;

use crate::sim_platform::SimPlatform;
use irqpilot_core::{Action, ApplyError, CpuSet, IrqNum, Outcome, Plan, Platform, Snapshot};
use irqpilot_linux::format::diskstats::render_diskstats;
use irqpilot_linux::format::interrupts::render_interrupts_into;
use irqpilot_linux::format::netdev::render_netdev;
use irqpilot_linux::format::softirqs::render_softirqs;
use irqpilot_linux::format::stat::render_stat;
use irqpilot_linux::format::{procirq, sysirq};
use irqpilot_linux::root::Backing;
use irqpilot_linux::tree::{Destination, TreeOptions, write_tree_with};
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Why the tree could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// A file of the tree could not be written, read, renamed or removed.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The initial tree could not be written.
    #[error(transparent)]
    Tree(#[from] irqpilot_linux::tree::TreeError),
    /// The directory holds files that are not an earlier export: never written over.
    #[error(
        "{0}: not an empty directory nor an earlier export of the twin (it would be written over)"
    )]
    Occupied(PathBuf),
    /// The directory is this machine's `/` (or resolves to it).
    #[error("{0} is this machine's root: the twin's tree goes in a directory of its own")]
    Live(PathBuf),
    /// A twin runs there now.
    #[error("{path}: the twin with pid {pid} exports there now")]
    InUse {
        /// The directory.
        path: PathBuf,
        /// The running twin.
        pid: u32,
    },
    /// The file to wait for did not appear in time.
    #[error("{0}: did not appear within {HOLD_TIMEOUT_S} s")]
    HoldTimeout(PathBuf),
}

/// Longest wait for [`ExportOptions::hold_until`].
const HOLD_TIMEOUT_S: u64 = 120;

/// How to export.
#[derive(Clone, Debug, PartialEq)]
pub struct ExportOptions {
    /// Simulated time between two refreshes of the tree.
    pub step_ns: u64,
    /// Simulated seconds per wall second; `None` runs as fast as the simulation goes.
    pub scale: Option<f64>,
    /// Once the tree is written, wait for this file to appear before simulated time moves
    /// (a peer reads the machine at its start before the clock runs; 120 s at most).
    pub hold_until: Option<PathBuf>,
}

impl Default for ExportOptions {
    fn default() -> Self {
        ExportOptions {
            step_ns: 10_000_000,
            scale: None,
            hold_until: None,
        }
    }
}

/// A write to the tree from outside the twin, and what the twin made of it.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct OutsideWrite {
    /// Simulated time at which it was taken, ns.
    pub at_ns: u64,
    /// The file, relative to the root.
    pub file: String,
    /// What was written (trimmed).
    pub text: String,
    /// `Ok(true)` applied, `Ok(false)` nothing changed, or the kernel's refusal.
    pub result: Result<bool, ApplyError>,
}

/// A parser of an affinity file.
type Parser = fn(&str) -> Result<CpuSet, irqpilot_linux::ParseError>;

/// File written by the twin last (besides the tree's `MANIFEST.toml`) once the tree is whole;
/// it holds the twin's pid (`irqpilot_linux::root::Backing::Twin`).
pub const READY_FILE: &str = irqpilot_linux::root::TWIN_READY_FILE;

/// File rewritten at the end of every [`TreeExport::refresh`] with the number of refreshes so
/// far: a writer knows its writes were taken (or refused, their old text back) once the number
/// has grown by two (`LinuxPlatform` waits for that before it reads its writes back).
pub const STEP_FILE: &str = irqpilot_linux::root::TWIN_STEP_FILE;

/// What the twin last wrote to one IRQ's files.
#[derive(Clone, Debug, Default, PartialEq)]
struct IrqFiles {
    requested: CpuSet,
    effective: CpuSet,
    total: u64,
}

/// Text found in a writable file that is neither the twin's nor a complete value.
#[derive(Clone, Debug, PartialEq)]
struct Unparsed {
    irq: Option<IrqNum>,
    text: String,
    /// [`TreeExport::steps`] when first seen.
    seen_at_step: u64,
}

/// A live tree of one simulated machine.
#[derive(Debug)]
pub struct TreeExport {
    root: PathBuf,
    opts: ExportOptions,
    nr_cpu_ids: u32,
    /// Text last written to files outside tools may write, by path relative to the root.
    written: BTreeMap<String, String>,
    /// Text last seen in (or put into) each of those files: the twin replaces one only while it
    /// still holds this, so a write that landed since is taken at the next step, never undone.
    on_disk: BTreeMap<String, String>,
    /// Text that did not parse (or an empty file: a writer between its truncate and its
    /// write), by path, with the step at which it was first seen: judged only at a later step.
    unparsed: BTreeMap<String, Unparsed>,
    /// IRQs whose affinity files must be written again (an outside write was taken or refused).
    dirty: BTreeSet<IrqNum>,
    dirty_default: bool,
    irqs: BTreeMap<IrqNum, IrqFiles>,
    default_affinity: CpuSet,
    snap: Snapshot,
    buf: String,
    /// Every outside write, in the order taken.
    pub writes: Vec<OutsideWrite>,
    clock: Option<(Instant, u64)>,
    /// Refreshes so far ([`STEP_FILE`]).
    steps: u64,
}

/// Refuses `/`, a directory with files of its own, and one a running twin exports to.
fn check_destination(root: &Path) -> Result<(), ExportError> {
    let live = irqpilot_linux::Root::new(root);
    if live.is_live() {
        return Err(ExportError::Live(root.to_path_buf()));
    }
    match irqpilot_linux::tree::destination(root).map_err(io_err(root))? {
        Destination::Absent | Destination::Empty => Ok(()),
        Destination::Occupied => match live.backing() {
            Backing::Twin { pid } => Err(ExportError::InUse {
                path: root.to_path_buf(),
                pid,
            }),
            // An earlier twin's tree: written over, as it was written.
            Backing::Fixture if root.join(READY_FILE).is_file() => Ok(()),
            _ => Err(ExportError::Occupied(root.to_path_buf())),
        },
    }
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> ExportError + '_ {
    move |source| ExportError::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl TreeExport {
    /// Writes the tree of `platform`'s machine under `root` (created if needed). `root` must
    /// be absent, empty, or an earlier export no twin runs on now; never `/`.
    pub fn create(
        platform: &mut SimPlatform,
        root: &Path,
        opts: ExportOptions,
    ) -> Result<TreeExport, ExportError> {
        check_destination(root)?;
        let machine = platform.sim().machine();
        let mut snap = Snapshot::default();
        platform.sim().snapshot_into(&mut snap);
        let description = format!(
            "irqpilot twin: scenario {} (seed {}), live while the simulation runs",
            platform.sim().sc.name,
            platform.sim().sc.seed
        );
        write_tree_with(root, &machine, &snap, &TreeOptions { description })?;
        let nr_cpu_ids = machine.topology.nr_cpu_ids();
        extras::write(root, &machine, nr_cpu_ids)?;
        extras::write_processes(root, &platform.sim().app_processes(), nr_cpu_ids)?;
        let mut export = TreeExport {
            root: root.to_path_buf(),
            opts,
            nr_cpu_ids,
            written: BTreeMap::new(),
            on_disk: BTreeMap::new(),
            unparsed: BTreeMap::new(),
            dirty: BTreeSet::new(),
            dirty_default: false,
            irqs: BTreeMap::new(),
            default_affinity: machine.default_affinity.clone().unwrap_or_default(),
            snap,
            buf: String::new(),
            writes: Vec::new(),
            clock: None,
            steps: 0,
        };
        for irq in machine.irqs.values() {
            let files = IrqFiles {
                requested: irq.requested.clone().unwrap_or_default(),
                effective: irq.effective.clone().unwrap_or_default(),
                total: 0,
            };
            export.remember_affinity(irq.irq, &files.requested);
            export.irqs.insert(irq.irq, files);
        }
        let d = export.default_affinity.clone();
        export.remember_default(&d);
        export.on_disk = export.written.clone();
        export.refresh(platform)?;
        export.put(READY_FILE, &format!("{}\n", std::process::id()))?;
        if let Some(go) = &export.opts.hold_until {
            let start = Instant::now();
            while !go.exists() {
                if start.elapsed() > Duration::from_secs(HOLD_TIMEOUT_S) {
                    return Err(ExportError::HoldTimeout(go.clone()));
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        // The pace counts from here: a hold must not become a sprint to catch up with it.
        export.clock = None;
        Ok(export)
    }

    /// The root of the tree.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The options in force.
    pub fn options(&self) -> &ExportOptions {
        &self.opts
    }

    fn remember_affinity(&mut self, irq: IrqNum, req: &CpuSet) {
        let p = format!("proc/irq/{irq}");
        self.written.insert(
            format!("{p}/{}", procirq::SMP_AFFINITY),
            procirq::render_affinity_mask(req, self.nr_cpu_ids),
        );
        self.written.insert(
            format!("{p}/{}", procirq::SMP_AFFINITY_LIST),
            procirq::render_affinity_list(req),
        );
    }

    fn remember_default(&mut self, set: &CpuSet) {
        self.written.insert(
            "proc/irq/default_smp_affinity".into(),
            procirq::render_affinity_mask(set, self.nr_cpu_ids),
        );
    }

    /// Writes `text` to `rel` atomically (temporary file, then rename).
    fn put(&self, rel: &str, text: &str) -> Result<(), ExportError> {
        let path = self.root.join(rel);
        let tmp = Self::tmp_of(&path);
        std::fs::write(&tmp, text).map_err(io_err(&tmp))?;
        std::fs::rename(&tmp, &path).map_err(io_err(&path))
    }

    /// The twin's temporary name beside `path`.
    fn tmp_of(path: &Path) -> PathBuf {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        path.with_file_name(format!(".{name}.twin-tmp"))
    }

    /// Puts the twin's `text` into `rel`, a file outside tools may write, unless one wrote it
    /// since the twin last looked (at this step's [`TreeExport::pick_up`]): that write is then
    /// left in place for the next pick-up to take, as a kernel takes every write. The new file
    /// is swapped in ([`irqpilot_linux::root::exchange`]) and the one it replaced is checked:
    /// not what the twin last saw there means a writer replaced the file in between, and it
    /// goes back. Where the filesystem cannot swap, the file is checked just before the rename.
    /// Returns whether the twin's text went in.
    fn put_writable(&mut self, rel: &str, text: &str) -> Result<bool, ExportError> {
        let Some(seen) = self.on_disk.get(rel).cloned() else {
            // Removed by someone (or never seen): nothing to keep.
            self.put(rel, text)?;
            self.on_disk.insert(rel.to_string(), text.to_string());
            return Ok(true);
        };
        let path = self.root.join(rel);
        let tmp = Self::tmp_of(&path);
        std::fs::write(&tmp, text).map_err(io_err(&tmp))?;
        let put = match irqpilot_linux::root::exchange(&tmp, &path) {
            Ok(()) => {
                let displaced = std::fs::read_to_string(&tmp).map_err(io_err(&tmp))?;
                if displaced == seen {
                    true
                } else {
                    // A writer's file: back in place. Should yet another writer have replaced
                    // the twin's file meanwhile, that newest file is what goes back.
                    irqpilot_linux::root::exchange(&tmp, &path).map_err(io_err(&path))?;
                    let back = std::fs::read_to_string(&tmp).map_err(io_err(&tmp))?;
                    if back != text {
                        std::fs::rename(&tmp, &path).map_err(io_err(&path))?;
                    }
                    false
                }
            }
            // EINVAL, ENOSYS, EOPNOTSUPP: no exchange here.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::InvalidInput | io::ErrorKind::Unsupported
                ) =>
            {
                let still = self.read(rel).ok().as_deref() == Some(seen.as_str());
                if still {
                    std::fs::rename(&tmp, &path).map_err(io_err(&path))?;
                }
                still
            }
            Err(e) => return Err(io_err(&path)(e)),
        };
        if put {
            self.on_disk.insert(rel.to_string(), text.to_string());
        }
        // The file swapped out (or the twin's own, not put); gone already after a rename.
        let _ = std::fs::remove_file(&tmp);
        Ok(put)
    }

    /// Takes what outside tools wrote since the last step and applies it to the machine, as
    /// the kernel would take each write. Returns how many writes were taken.
    pub fn pick_up(&mut self, platform: &mut SimPlatform) -> Result<usize, ExportError> {
        let mut taken: Vec<(String, String, Action)> = Vec::new();
        let irqs: Vec<IrqNum> = self.irqs.keys().copied().collect();
        for irq in irqs {
            for (file, parse) in [
                (
                    procirq::SMP_AFFINITY_LIST,
                    procirq::parse_affinity_list as Parser,
                ),
                (procirq::SMP_AFFINITY, procirq::parse_affinity_mask),
            ] {
                let rel = format!("proc/irq/{irq}/{file}");
                if let Some((text, cpus)) = self.changed(&rel, Some(irq), parse)? {
                    taken.push((rel, text, Action::SetAffinity { irq, cpus }));
                }
            }
        }
        let rel = "proc/irq/default_smp_affinity".to_string();
        if let Some((text, cpus)) = self.changed(&rel, None, procirq::parse_affinity_mask)? {
            taken.push((rel, text, Action::SetDefaultAffinity { cpus }));
        }
        let at_ns = platform.sim().now().ns();
        let n = taken.len();
        for (file, text, action) in taken {
            self.mark_dirty(&action);
            let report = platform.apply(&Plan {
                actions: vec![action],
                notes: Vec::new(),
            });
            let result = report
                .outcomes
                .into_iter()
                .next()
                .map_or(Ok(false), |o: Outcome| o.result);
            self.writes.push(OutsideWrite {
                at_ns,
                file,
                text,
                result,
            });
        }
        // Text that did not parse and is still there a whole step after it was first seen is
        // judged now; what was first seen in this pick-up waits for the next one (a writer may
        // be between its truncate and its write). Still empty: nothing was written (a kernel
        // takes no request from an open with O_TRUNC alone), the old text silently goes back.
        // Anything else: refused as the kernel's EINVAL, the old text goes back.
        for (rel, u) in std::mem::take(&mut self.unparsed) {
            if u.seen_at_step >= self.steps {
                self.unparsed.insert(rel, u);
                continue;
            }
            if self.read(&rel).ok().as_deref() != Some(u.text.as_str()) {
                continue;
            }
            match u.irq {
                Some(irq) => {
                    self.dirty.insert(irq);
                }
                None => self.dirty_default = true,
            }
            if u.text.trim().is_empty() {
                continue;
            }
            self.writes.push(OutsideWrite {
                at_ns,
                file: rel,
                text: u.text.trim().to_string(),
                result: Err(ApplyError::Invalid),
            });
        }
        Ok(n)
    }

    fn mark_dirty(&mut self, action: &Action) {
        match action {
            Action::SetAffinity { irq, .. } => {
                self.dirty.insert(*irq);
            }
            _ => self.dirty_default = true,
        }
    }

    fn read(&self, rel: &str) -> Result<String, ExportError> {
        let path = self.root.join(rel);
        std::fs::read_to_string(&path).map_err(io_err(&path))
    }

    /// `Some((text, cpus))` when `rel` holds a parsable text other than the twin's own.
    fn changed(
        &mut self,
        rel: &str,
        irq: Option<IrqNum>,
        parse: Parser,
    ) -> Result<Option<(String, CpuSet)>, ExportError> {
        let text = match self.read(rel) {
            Ok(t) => t,
            // Removed by someone: written back at the next refresh.
            Err(ExportError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
                self.on_disk.remove(rel);
                match irq {
                    Some(irq) => {
                        self.dirty.insert(irq);
                    }
                    None => self.dirty_default = true,
                }
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        self.on_disk.insert(rel.to_string(), text.clone());
        if self.written.get(rel) == Some(&text) {
            return Ok(None);
        }
        // An empty file is a writer between its truncate and its write, never a value (an
        // empty list would parse as no CPU and be refused as the kernel's EINVAL).
        let parsed = if text.trim().is_empty() {
            None
        } else {
            parse(&text).ok()
        };
        match parsed {
            Some(cpus) => {
                self.unparsed.remove(rel);
                Ok(Some((text.trim().to_string(), cpus)))
            }
            None => {
                let steps = self.steps;
                let entry = self.unparsed.entry(rel.to_string()).or_insert(Unparsed {
                    irq,
                    text: text.clone(),
                    seen_at_step: steps,
                });
                if entry.text != text {
                    // Still changing: a writer is at work; judge it from now on.
                    entry.text = text;
                    entry.seen_at_step = steps;
                }
                Ok(None)
            }
        }
    }

    /// Rewrites the counter files and whatever affinity changed, then waits for wall time when
    /// a time scale is set.
    pub fn refresh(&mut self, platform: &SimPlatform) -> Result<(), ExportError> {
        let sim = platform.sim();
        sim.snapshot_into(&mut self.snap);
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        render_interrupts_into(&self.snap.interrupts, &mut buf);
        self.put("proc/interrupts", &buf)?;
        self.buf = buf;
        if let Some(stat) = &self.snap.stat {
            self.put("proc/stat", &render_stat(stat))?;
        }
        if let Some(soft) = &self.snap.softirqs {
            self.put("proc/softirqs", &render_softirqs(soft))?;
        }
        if let Some(net) = &self.snap.net {
            self.put("proc/net/dev", &render_netdev(net))?;
        }
        if let Some(disks) = &self.snap.disks {
            self.put("proc/diskstats", &render_diskstats(disks))?;
        }
        let ncpu = sim.cpus.len();
        let possible = self.nr_cpu_ids as usize;
        for (i, s) in sim.srcs.iter().enumerate() {
            if !sim.src_enabled(i) {
                continue;
            }
            let irq = IrqNum(s.irq);
            let Some(last) = self.irqs.get(&irq).cloned() else {
                continue;
            };
            let counts = &sim.irq_counts[i * ncpu..(i + 1) * ncpu];
            let total: u64 = counts.iter().sum();
            let effective = CpuSet::single(irqpilot_core::CpuId(s.cpu));
            let p = format!("proc/irq/{irq}");
            let writing = [procirq::SMP_AFFINITY, procirq::SMP_AFFINITY_LIST]
                .iter()
                .any(|f| self.unparsed.contains_key(&format!("{p}/{f}")));
            // A peer in the middle of writing one of the files: renaming over it now would lose
            // its write; the files are rewritten at a later step.
            if writing {
                if last.requested != s.requested {
                    self.dirty.insert(irq);
                }
            } else {
                // Taken out whatever the rest says: a flag left behind would rewrite the files
                // at the next step, over a write that landed after that step's pick-up.
                let dirty = self.dirty.remove(&irq);
                if last.requested != s.requested || dirty {
                    self.remember_affinity(irq, &s.requested);
                    for f in [procirq::SMP_AFFINITY, procirq::SMP_AFFINITY_LIST] {
                        let rel = format!("{p}/{f}");
                        let text = self.written.get(&rel).cloned().unwrap_or_default();
                        self.put_writable(&rel, &text)?;
                    }
                }
            }
            if last.effective != effective {
                self.put(
                    &format!("{p}/{}", procirq::EFFECTIVE_AFFINITY),
                    &procirq::render_affinity_mask(&effective, self.nr_cpu_ids),
                )?;
                self.put(
                    &format!("{p}/{}", procirq::EFFECTIVE_AFFINITY_LIST),
                    &procirq::render_affinity_list(&effective),
                )?;
            }
            if total != last.total {
                let mut per_cpu = vec![0u64; possible.max(ncpu)];
                per_cpu[..ncpu].copy_from_slice(counts);
                per_cpu.truncate(possible.max(1));
                self.put(
                    &format!("sys/kernel/irq/{irq}/{}", sysirq::PER_CPU_COUNT),
                    &sysirq::render_per_cpu_count(&per_cpu),
                )?;
            }
            self.irqs.insert(
                irq,
                IrqFiles {
                    requested: s.requested.clone(),
                    effective,
                    total,
                },
            );
        }
        let def = sim.default_affinity.clone();
        let def_rel = "proc/irq/default_smp_affinity";
        let dirty_default = std::mem::take(&mut self.dirty_default);
        if def != self.default_affinity || dirty_default {
            self.remember_default(&def);
            let text = self.written.get(def_rel).cloned().unwrap_or_default();
            self.put_writable(def_rel, &text)?;
            self.default_affinity = def;
        }
        self.steps += 1;
        self.put(STEP_FILE, &format!("{}\n", self.steps))?;
        self.pace(sim.now().ns());
        Ok(())
    }

    /// Sleeps until wall time catches up with simulated time at the configured scale.
    fn pace(&mut self, sim_ns: u64) {
        let Some(scale) = self.opts.scale.filter(|s| s.is_finite() && *s > 0.0) else {
            return;
        };
        let (start, sim0) = *self.clock.get_or_insert((Instant::now(), sim_ns));
        let due = Duration::from_secs_f64(sim_ns.saturating_sub(sim0) as f64 / 1e9 / scale);
        if let Some(wait) = due.checked_sub(start.elapsed()) {
            std::thread::sleep(wait);
        }
    }
}
