//! The apply journal: every value irqpilot replaces, recorded *before* it is written, so
//! `irqpilot revert` can put the machine back exactly as it was (balancing.md 8.9: journal the
//! original masks and restore them).
//!
//! * One writer per root ([`crate::owner::RootLock`], taken by the commands that write): the
//!   journal is read, extended and saved under that lock, and the file on disk is the only copy:
//!   every change re-reads it first ([`Journal::add`]), so no in-memory copy ever overwrites
//!   what another run recorded.
//! * [`JournaledPlatform`] wraps any [`Platform`]: for each action of a plan it reads the
//!   current value (`smp_affinity_list`, `default_smp_affinity`, ethtool channels, the
//!   moderation knobs through [`crate::moderation::apply::read_current`]) and records it,
//!   saves the journal atomically (temp file, fsync, rename, fsync of the directory), and only
//!   then lets the platform write. After the write it records the `Outcome.old` the platform
//!   reports for anything it could not read beforehand.
//! * A knob whose current value could not be put back once changed (an affinity that is not a
//!   CPU list: letters, empty, CPUs beyond any machine) is left alone and reported, never
//!   written: what `revert` cannot restore, `apply` does not touch.
//! * The first recorded old value of a knob wins across applies: the journal always holds the
//!   state from before irqpilot's first change.
//! * Before a NIC's channel count changes, the masks of all its IRQs are recorded too: the
//!   driver sets the kept queues' affinity itself (virtio_net does), and recorded before the
//!   channels, they are restored after them.
//! * A crash between saving the journal and writing leaves entries whose old value is still
//!   the current one: reverting them writes nothing. So the machine is revertable at every
//!   instant.
//! * [`revert`] restores every entry (newest first), drops the entries it restored or whose
//!   IRQ is gone, keeps the ones that failed, and archives the journal once it is empty, under
//!   a name no later archive reuses ([`archives`]); [`restore_archived`] puts an archive's
//!   values back again.

use crate::channels::EthtoolChannels;
use crate::format::procirq;
use crate::root::Root;
use irqpilot_core::{
    Action, ApplyError, ApplyReport, IrqNum, Machine, MonoNs, Outcome, Plan, Platform,
    PlatformError, Snapshot,
};
use serde::{Deserialize, Serialize};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Default journal location relative to the root (`/var/lib/irqpilot/journal.json` on a live
/// machine, under the fixture for `--root` runs).
pub const DEFAULT_JOURNAL: &str = "var/lib/irqpilot/journal.json";

/// Format version written to the file.
pub const JOURNAL_VERSION: u32 = 1;

/// The knob an entry restores.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Knob {
    /// `/proc/irq/N/smp_affinity_list`.
    Affinity {
        /// The IRQ.
        irq: IrqNum,
    },
    /// `/proc/irq/default_smp_affinity`.
    DefaultAffinity,
    /// Ethtool channel counts of an interface.
    Channels {
        /// The interface.
        device: String,
    },
    /// NIC interrupt coalescing of an interface: one queue's, or (`None`) the device-wide one.
    Coalesce {
        /// The interface.
        device: String,
        /// The queue.
        queue: Option<u32>,
    },
    /// NVMe Interrupt Coalescing (feature 08h) of a controller.
    NvmeCoalescing {
        /// The controller (`nvme0`).
        controller: String,
    },
    /// NVMe Interrupt Vector Configuration (feature 09h) of one vector.
    NvmeVector {
        /// The controller.
        controller: String,
        /// The vector.
        vector: u16,
    },
    /// A global parameter of the kernel's software interrupt moderation.
    SoftModeration {
        /// The parameter (`delay_us`, ...).
        param: String,
    },
    /// The kernel's software interrupt moderation on one IRQ.
    IrqSoftModeration {
        /// The IRQ.
        irq: IrqNum,
    },
    /// Any other action: recorded so nothing is silently lost, restored by no one yet.
    Other {
        /// The action's description.
        what: String,
    },
}

impl std::fmt::Display for Knob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Knob::Affinity { irq } => write!(f, "IRQ {irq} affinity"),
            Knob::DefaultAffinity => f.write_str("default affinity"),
            Knob::Channels { device } => write!(f, "{device} channels"),
            Knob::Coalesce {
                device,
                queue: Some(q),
            } => write!(f, "{device} queue {q} coalescing"),
            Knob::Coalesce {
                device,
                queue: None,
            } => write!(f, "{device} coalescing"),
            Knob::NvmeCoalescing { controller } => write!(f, "{controller} interrupt coalescing"),
            Knob::NvmeVector { controller, vector } => {
                write!(f, "{controller} vector {vector} coalescing")
            }
            Knob::SoftModeration { param } => write!(f, "soft moderation {param}"),
            Knob::IrqSoftModeration { irq } => write!(f, "IRQ {irq} soft moderation"),
            Knob::Other { what } => f.write_str(what),
        }
    }
}

impl Knob {
    /// The knob an action changes.
    pub fn of(action: &Action) -> Knob {
        match action {
            Action::SetAffinity { irq, .. } => Knob::Affinity { irq: *irq },
            Action::SetDefaultAffinity { .. } => Knob::DefaultAffinity,
            Action::SetChannels { device, .. } => Knob::Channels {
                device: device.clone(),
            },
            Action::SetCoalesce { device, queue, .. } => Knob::Coalesce {
                device: device.clone(),
                queue: *queue,
            },
            Action::SetNvmeCoalescing { controller, .. } => Knob::NvmeCoalescing {
                controller: controller.clone(),
            },
            Action::SetNvmeVectorCoalescing {
                controller, vector, ..
            } => Knob::NvmeVector {
                controller: controller.clone(),
                vector: *vector,
            },
            Action::SetSoftModeration { param, .. } => Knob::SoftModeration {
                param: param.clone(),
            },
            Action::SetIrqSoftModeration { irq, .. } => Knob::IrqSoftModeration { irq: *irq },
        }
    }

    /// An action on this knob (its new value irrelevant), for the moderation knobs: what
    /// [`crate::moderation::restore::restore_for`] needs to know which knob to set back.
    fn moderation_action(&self) -> Option<Action> {
        Some(match self {
            Knob::Coalesce { device, queue } => Action::SetCoalesce {
                device: device.clone(),
                queue: *queue,
                params: Default::default(),
            },
            Knob::NvmeCoalescing { controller } => Action::SetNvmeCoalescing {
                controller: controller.clone(),
                time_100us: 0,
                threshold: 1,
            },
            Knob::NvmeVector { controller, vector } => Action::SetNvmeVectorCoalescing {
                controller: controller.clone(),
                vector: *vector,
                disable: false,
            },
            Knob::SoftModeration { param } => Action::SetSoftModeration {
                param: param.clone(),
                value: 0,
            },
            Knob::IrqSoftModeration { irq } => Action::SetIrqSoftModeration {
                irq: *irq,
                enabled: false,
            },
            _ => return None,
        })
    }
}

/// One recorded value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// What it restores.
    pub knob: Knob,
    /// The value before irqpilot's first change, verbatim as read (no trailing newline).
    pub old: String,
}

/// The journal file's content.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalFile {
    /// [`JOURNAL_VERSION`].
    pub version: u32,
    /// Entries in the order first recorded.
    pub entries: Vec<Entry>,
}

/// Why the journal could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// I/O on the journal file.
    #[error("journal {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The file is not a journal this version understands.
    #[error("journal {path}: {message}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// A journal file and its entries.
#[derive(Debug, Clone)]
pub struct Journal {
    path: PathBuf,
    file: JournalFile,
}

/// `<dir>/<name><suffix>`: a file beside `path` whose name extends the journal's.
fn beside(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    path.with_file_name(name)
}

fn read_file(path: &Path) -> Result<JournalFile, JournalError> {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let f: JournalFile = serde_json::from_str(&text).map_err(|e| JournalError::Format {
                path: path.to_path_buf(),
                message: e.to_string(),
            })?;
            if f.version != JOURNAL_VERSION {
                return Err(JournalError::Format {
                    path: path.to_path_buf(),
                    message: format!(
                        "version {} (this irqpilot writes {JOURNAL_VERSION})",
                        f.version
                    ),
                });
            }
            Ok(f)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(JournalFile {
            version: JOURNAL_VERSION,
            entries: Vec::new(),
        }),
        Err(source) => Err(JournalError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

impl Journal {
    /// Opens the journal at `path` (an absent file is an empty journal).
    pub fn open(path: impl Into<PathBuf>) -> Result<Journal, JournalError> {
        let path = path.into();
        let file = read_file(&path)?;
        Ok(Journal { path, file })
    }

    /// Re-reads the file: what is on disk is the journal, whatever this handle saw before.
    pub fn reload(&mut self) -> Result<(), JournalError> {
        self.file = read_file(&self.path)?;
        Ok(())
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The entries, in recording order, as last read or written.
    pub fn entries(&self) -> &[Entry] {
        &self.file.entries
    }

    /// Whether nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.file.entries.is_empty()
    }

    /// Whether `knob` has a recorded value.
    pub fn has(&self, knob: &Knob) -> bool {
        self.file.entries.iter().any(|e| &e.knob == knob)
    }

    /// Records `entries` whose knob has no value yet (the first one wins) and saves: re-reads
    /// the file first, so nothing recorded since this handle last read it is lost. Returns how
    /// many were new; nothing is written when none is.
    pub fn add(&mut self, entries: Vec<Entry>) -> Result<usize, JournalError> {
        self.reload()?;
        let mut added = 0;
        for e in entries {
            if !self.has(&e.knob) {
                self.file.entries.push(e);
                added += 1;
            }
        }
        if added > 0 {
            self.save()?;
        }
        Ok(added)
    }

    /// Writes the journal atomically: a temporary file beside it, flushed to disk, renamed
    /// over it, and the directory flushed, so a crash leaves the old or the new journal,
    /// never a torn one. Only the root's lock holder calls it (the temporary name is shared).
    fn save(&self) -> Result<(), JournalError> {
        let io = |source| JournalError::Io {
            path: self.path.clone(),
            source,
        };
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(io)?;
        let tmp = beside(&self.path, ".tmp");
        let text = serde_json::to_string_pretty(&self.file).map_err(|e| JournalError::Format {
            path: self.path.clone(),
            message: e.to_string(),
        })?;
        {
            let mut f = std::fs::File::create(&tmp).map_err(io)?;
            f.write_all(text.as_bytes()).map_err(io)?;
            f.write_all(b"\n").map_err(io)?;
            f.sync_all().map_err(io)?;
        }
        std::fs::rename(&tmp, &self.path).map_err(io)?;
        // The rename itself must reach the disk.
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io)?;
        Ok(())
    }

    /// Renames an emptied journal out of the way, to the first free archive name
    /// ([`archives`]: no archive is ever overwritten), or does nothing when nothing was ever
    /// saved. Returns where it went.
    fn archive(&self) -> Result<Option<PathBuf>, JournalError> {
        if !self.path.exists() {
            return Ok(None);
        }
        let to = next_archive(&self.path);
        match std::fs::rename(&self.path, &to) {
            Ok(()) => Ok(Some(to)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(JournalError::Io {
                path: self.path.clone(),
                source,
            }),
        }
    }
}

/// Archive `n` of a journal: `journal.json.reverted`, then `journal.json.reverted.1`, ...
fn archive_name(path: &Path, n: u32) -> PathBuf {
    if n == 0 {
        beside(path, ".reverted")
    } else {
        beside(path, &format!(".reverted.{n}"))
    }
}

fn next_archive(path: &Path) -> PathBuf {
    (0..)
        .map(|n| archive_name(path, n))
        .find(|p| !p.exists())
        .unwrap_or_else(|| beside(path, ".reverted.last"))
}

/// The archives of the journal at `path`, oldest first (`revert` never overwrites one).
pub fn archives(path: &Path) -> Vec<PathBuf> {
    (0..)
        .map(|n| archive_name(path, n))
        .take_while(|p| p.exists())
        .collect()
}

/// Reads the value an action is about to replace, as the platform will report it; `None`
/// where the journal cannot read it beforehand (no live interface, an unknown knob).
pub fn read_current(root: &Root, action: &Action) -> Option<String> {
    let rel = match action {
        Action::SetAffinity { irq, .. } => {
            format!("proc/irq/{irq}/{}", procirq::SMP_AFFINITY_LIST)
        }
        Action::SetDefaultAffinity { .. } => "proc/irq/default_smp_affinity".to_string(),
        Action::SetChannels { device, .. } => {
            let mut io = crate::moderation::ModerationIo::for_root(root);
            let ethtool = io.ethtool.as_deref_mut()?;
            return crate::channels::get_channels(ethtool, device)
                .ok()
                .map(|c| c.counts_text());
        }
        Action::SetCoalesce { .. }
        | Action::SetNvmeCoalescing { .. }
        | Action::SetNvmeVectorCoalescing { .. }
        | Action::SetSoftModeration { .. }
        | Action::SetIrqSoftModeration { .. } => {
            let mut io = crate::moderation::ModerationIo::for_root(root);
            return crate::moderation::apply::read_current(root, &mut io, action);
        }
    };
    let text = root.read_optional(&rel).ok().flatten()?;
    Some(text.trim_end_matches('\n').to_string())
}

/// A platform whose writes are journaled first.
#[derive(Debug)]
pub struct JournaledPlatform<P> {
    inner: P,
    root: Root,
    journal: Journal,
}

impl<P: Platform> JournaledPlatform<P> {
    /// Wraps `inner`; `root` is where old values are read.
    pub fn new(inner: P, root: Root, journal: Journal) -> Self {
        JournaledPlatform {
            inner,
            root,
            journal,
        }
    }

    /// The journal.
    pub fn journal(&self) -> &Journal {
        &self.journal
    }

    /// The wrapped platform.
    pub fn inner_mut(&mut self) -> &mut P {
        &mut self.inner
    }

    /// Restores every journaled value through the wrapped platform ([`revert`]): the daemon's
    /// `--restore-on-exit`.
    pub fn revert_all(&mut self) -> Result<RevertReport, JournalError> {
        revert(&mut self.inner, &mut self.journal)
    }

    /// Unwraps into the platform and the journal.
    pub fn into_parts(self) -> (P, Journal) {
        (self.inner, self.journal)
    }

    /// The masks of every IRQ of interface `device` not journaled yet (nor in `fresh`), to
    /// record before its channel count changes: the driver re-spreads the queues it keeps
    /// (virtio_net sets every kept queue's affinity on `ethtool -L`), so those masks change
    /// without irqpilot writing them, and a later entry would hold the driver's value, not the
    /// original. Recorded before the channels entry, they are restored after it (revert goes
    /// newest first), over whatever the driver sets when the count goes back.
    fn queue_masks(&mut self, device: &str, fresh: &[Entry]) -> Vec<Entry> {
        let Ok(machine) = self.inner.machine() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for irq in interface_irqs(&machine, device) {
            let knob = Knob::Affinity { irq };
            if self.journal.has(&knob) || fresh.iter().any(|e| e.knob == knob) {
                continue;
            }
            let read = Action::SetAffinity {
                irq,
                cpus: Default::default(),
            };
            if let Some(old) = read_current(&self.root, &read) {
                let entry = Entry { knob, old };
                // A mask revert could not write back is not worth recording.
                if restore_action(&entry).is_ok() {
                    out.push(entry);
                }
            }
        }
        out
    }
}

/// The IRQs of network interface `device`: those of the PCI function it belongs to, and any
/// whose queue names it.
fn interface_irqs(machine: &Machine, device: &str) -> Vec<IrqNum> {
    machine
        .irqs
        .values()
        .filter(|irq| {
            irq.device
                .as_ref()
                .and_then(|a| machine.devices.get(a))
                .is_some_and(|d| d.net.iter().any(|n| n == device))
                || irq.queue.as_ref().is_some_and(|q| q.owner == device)
        })
        .map(|irq| irq.irq)
        .collect()
}

impl<P: Platform> Platform for JournaledPlatform<P> {
    fn machine(&mut self) -> Result<Machine, PlatformError> {
        self.inner.machine()
    }

    fn snapshot_into(&mut self, snap: &mut Snapshot) -> Result<(), PlatformError> {
        self.inner.snapshot_into(snap)
    }

    fn apply(&mut self, plan: &Plan) -> ApplyReport {
        // The file is the journal: read it again (another run may have recorded since).
        if let Err(e) = self.journal.reload() {
            tracing::error!(error = %e, "journal unreadable: nothing applied");
            return refuse_all(plan, &e.to_string());
        }
        let mut fresh: Vec<Entry> = Vec::new();
        let mut left_alone: Vec<Option<Outcome>> = vec![None; plan.actions.len()];
        for (k, a) in plan.actions.iter().enumerate() {
            if let Action::SetChannels { device, .. } = a {
                let masks = self.queue_masks(device, &fresh);
                fresh.extend(masks);
            }
            let knob = Knob::of(a);
            if self.journal.has(&knob) || fresh.iter().any(|e| e.knob == knob) {
                continue;
            }
            let Some(old) = read_current(&self.root, a) else {
                continue;
            };
            let entry = Entry { knob, old };
            match restore_action(&entry) {
                Ok(_) => fresh.push(entry),
                // What revert could not put back is never changed.
                Err(why) => {
                    left_alone[k] = Some(Outcome {
                        action: a.clone(),
                        old: Some(entry.old.clone()),
                        result: Err(ApplyError::LeftAlone {
                            reason: format!(
                                "{} could not be restored once changed ({why})",
                                entry.knob
                            ),
                        }),
                    })
                }
            }
        }
        if let Err(e) = self.journal.add(fresh) {
            // Never write what could not be journaled.
            tracing::error!(error = %e, "journal not saved: nothing applied");
            return refuse_all(plan, &e.to_string());
        }
        let allowed = Plan {
            actions: plan
                .actions
                .iter()
                .zip(&left_alone)
                .filter(|(_, l)| l.is_none())
                .map(|(a, _)| a.clone())
                .collect(),
            notes: plan.notes.clone(),
        };
        let inner = self.inner.apply(&allowed);
        let mut late = Vec::new();
        for o in &inner.outcomes {
            if let (Ok(true), Some(old)) = (&o.result, &o.old) {
                let entry = Entry {
                    knob: Knob::of(&o.action),
                    old: old.clone(),
                };
                match restore_action(&entry) {
                    Ok(_) => late.push(entry),
                    Err(why) => tracing::error!(
                        knob = %entry.knob,
                        why = %why,
                        "written, but its old value cannot be restored"
                    ),
                }
            }
        }
        if let Err(e) = self.journal.add(late) {
            tracing::error!(error = %e, "journal not saved after apply");
        }
        if left_alone.iter().all(Option::is_none) {
            return inner;
        }
        // Back in plan order: a report's outcomes follow its plan's actions.
        let mut done = inner.outcomes.into_iter();
        ApplyReport {
            outcomes: left_alone
                .into_iter()
                .filter_map(|l| l.or_else(|| done.next()))
                .collect(),
        }
    }

    fn now(&mut self) -> MonoNs {
        self.inner.now()
    }

    fn sleep(&mut self, ns: u64) {
        self.inner.sleep(ns)
    }
}

fn refuse_all(plan: &Plan, why: &str) -> ApplyReport {
    ApplyReport {
        outcomes: plan
            .actions
            .iter()
            .map(|a| irqpilot_core::Outcome {
                action: a.clone(),
                old: None,
                result: Err(ApplyError::Other {
                    message: format!("not applied: {why}"),
                }),
            })
            .collect(),
    }
}

/// Why a recorded value cannot be put back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unrestorable {
    /// A mask or list naming no CPU.
    #[error("value {0:?} names no CPU")]
    NoCpu(String),
    /// A value that does not parse as the knob's kind.
    #[error("value {value:?}: {message}")]
    BadValue {
        /// The recorded text.
        value: String,
        /// Why it does not parse.
        message: String,
    },
    /// A channel record that is not one.
    #[error("value {0:?} is not a channel count")]
    NotChannelCount(String),
    /// A knob irqpilot has no writer for.
    #[error("no way to restore {0}")]
    NoWay(String),
}

/// The action that puts a recorded value back, or why there is none.
pub fn restore_action(entry: &Entry) -> Result<Action, Unrestorable> {
    let bad = |message: &str| Unrestorable::BadValue {
        value: entry.old.clone(),
        message: message.to_string(),
    };
    match &entry.knob {
        Knob::Affinity { irq } => match procirq::parse_affinity_list(&entry.old) {
            Ok(cpus) if !cpus.is_empty() => Ok(Action::SetAffinity { irq: *irq, cpus }),
            Ok(_) => Err(Unrestorable::NoCpu(entry.old.clone())),
            Err(e) => Err(bad(&e.message)),
        },
        Knob::DefaultAffinity => match procirq::parse_affinity_mask(&entry.old) {
            Ok(cpus) if !cpus.is_empty() => Ok(Action::SetDefaultAffinity { cpus }),
            Ok(_) => Err(Unrestorable::NoCpu(entry.old.clone())),
            Err(e) => Err(bad(&e.message)),
        },
        Knob::Channels { device } => match EthtoolChannels::parse_counts(&entry.old) {
            Some((combined, rx, tx, _)) => Ok(Action::SetChannels {
                device: device.clone(),
                combined: Some(combined),
                rx: Some(rx),
                tx: Some(tx),
            }),
            None => Err(Unrestorable::NotChannelCount(entry.old.clone())),
        },
        Knob::Other { what } => Err(Unrestorable::NoWay(what.clone())),
        moderation => {
            let template = moderation
                .moderation_action()
                .ok_or_else(|| Unrestorable::NoWay(moderation.to_string()))?;
            match crate::moderation::restore::restore_for(&template, &entry.old) {
                Ok(Some(a)) => Ok(a),
                Ok(None) => Err(Unrestorable::NoWay(moderation.to_string())),
                Err(e) => Err(bad(&e.message)),
            }
        }
    }
}

/// What [`revert`] did.
#[derive(Debug, Default)]
pub struct RevertReport {
    /// What applying the restoring actions did (newest entry first).
    pub applied: ApplyReport,
    /// Entries that could not even be turned into an action, with why.
    pub unrestorable: Vec<(Entry, Unrestorable)>,
    /// Entries kept for a later revert (refused restores, unrestorable ones).
    pub kept: usize,
    /// Where the emptied journal went.
    pub archived: Option<PathBuf>,
}

impl RevertReport {
    /// Whether anything could not be restored.
    pub fn partial(&self) -> bool {
        self.kept > 0
    }

    /// Values written back (each read back and found to hold).
    pub fn restored(&self) -> usize {
        self.applied.written()
    }

    /// Knobs already at their recorded value (nothing written).
    pub fn already(&self) -> usize {
        self.count(|r| *r == Ok(false))
    }

    /// Knobs whose IRQ or device is gone (dropped: nothing left to restore).
    pub fn gone(&self) -> usize {
        self.count(|r| *r == Err(ApplyError::Vanished))
    }

    /// Restores refused by the kernel or driver, or written and not held (kept).
    pub fn refused(&self) -> usize {
        self.count(|r| r.is_err() && *r != Err(ApplyError::Vanished))
    }

    fn count(&self, f: impl Fn(&Result<bool, ApplyError>) -> bool) -> usize {
        self.applied
            .outcomes
            .iter()
            .filter(|o| f(&o.result))
            .count()
    }
}

/// Applies the restoring action of every entry (newest first); returns the report and the
/// entries that still need restoring (refused, not answered, or unrestorable), oldest first.
fn restore_entries<P: Platform + ?Sized>(
    platform: &mut P,
    entries: &[Entry],
) -> (RevertReport, Vec<Entry>) {
    let mut rep = RevertReport::default();
    let mut plan = Plan::default();
    let mut planned: Vec<Entry> = Vec::new();
    let mut keep: Vec<Entry> = Vec::new();
    for e in entries.iter().rev() {
        match restore_action(e) {
            Ok(a) => {
                plan.actions.push(a);
                planned.push(e.clone());
            }
            Err(why) => {
                rep.unrestorable.push((e.clone(), why));
                keep.push(e.clone());
            }
        }
    }
    rep.applied = if plan.is_empty() {
        ApplyReport::default()
    } else {
        platform.apply(&plan)
    };
    for (k, e) in planned.into_iter().enumerate() {
        match rep.applied.outcomes.get(k).map(|o| &o.result) {
            // Restored, already so, or the IRQ is gone: nothing left to restore.
            Some(Ok(_) | Err(ApplyError::Vanished)) => {}
            // Refused, not held, or not answered at all: keep it for the next revert.
            _ => keep.push(e),
        }
    }
    keep.reverse();
    rep.kept = keep.len();
    (rep, keep)
}

/// Restores every journaled value through `platform` (newest first), keeps the entries that
/// failed, and archives the journal when it is empty. Reads the journal from disk first.
pub fn revert<P: Platform + ?Sized>(
    platform: &mut P,
    journal: &mut Journal,
) -> Result<RevertReport, JournalError> {
    journal.reload()?;
    let (mut rep, keep) = restore_entries(platform, journal.entries());
    journal.file.entries = keep;
    if journal.is_empty() {
        rep.archived = journal.archive()?;
    } else {
        journal.save()?;
    }
    Ok(rep)
}

/// Puts the values of an archived journal (a finished revert's, see [`archives`]) back again:
/// for when something changed the knobs after that revert. The archive stays as it is.
pub fn restore_archived<P: Platform + ?Sized>(
    platform: &mut P,
    archive: &Path,
) -> Result<RevertReport, JournalError> {
    let journal = Journal::open(archive)?;
    Ok(restore_entries(platform, journal.entries()).0)
}

/// The entries whose knob now holds another value than the recorded one (where the value can
/// be read under `root`): what [`restore_archived`] would change.
pub fn differing(root: &Root, entries: &[Entry]) -> Vec<Entry> {
    entries
        .iter()
        .filter(|e| {
            restore_action(e)
                .ok()
                .and_then(|a| read_current(root, &a))
                .is_some_and(|now| !same_value(&e.knob, &now, &e.old))
        })
        .cloned()
        .collect()
}

/// Whether two recorded texts of `knob` mean the same value (masks compare as CPU sets).
fn same_value(knob: &Knob, a: &str, b: &str) -> bool {
    let parse = match knob {
        Knob::Affinity { .. } => procirq::parse_affinity_list,
        Knob::DefaultAffinity => procirq::parse_affinity_mask,
        _ => return a.trim() == b.trim(),
    };
    match (parse(a), parse(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => a.trim() == b.trim(),
    }
}

#[cfg(test)]
mod tests;
