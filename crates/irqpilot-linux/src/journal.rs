//! The apply journal: every value irqpilot replaces, recorded *before* it is written, so
//! `irqpilot revert` can put the machine back exactly as it was (balancing.md 8.9: journal the
//! original masks and restore them).
//!
//! * [`JournaledPlatform`] wraps any [`Platform`]: for each action of a plan it reads the
//!   current value (`smp_affinity_list`, `default_smp_affinity`, ethtool channels, the
//!   moderation knobs through [`crate::moderation::apply::read_current`]) and records
//!   it, saves the journal atomically (temp file, fsync, rename, fsync of the directory), and
//!   only then lets the platform write. After the write it records the `Outcome.old` the
//!   platform reports for anything it could not read beforehand.
//! * The first recorded old value of a knob wins across applies: the journal always holds the
//!   state from before irqpilot's first change.
//! * Before a NIC's channel count changes, the masks of all its IRQs are recorded too: the
//!   driver sets the kept queues' affinity itself (virtio_net does), and recorded before the
//!   channels, they are restored after them.
//! * A crash between saving the journal and writing leaves entries whose old value is still
//!   the current one: reverting them writes nothing. So the machine is revertable at every
//!   instant.
//! * [`revert`] restores every entry (newest first), drops the entries it restored or whose
//!   IRQ is gone, keeps the ones that failed, and archives the journal once it is empty.

use crate::channels::EthtoolChannels;
use crate::format::procirq;
use crate::root::Root;
use irqpilot_core::{
    Action, ApplyError, ApplyReport, IrqNum, Machine, MonoNs, Plan, Platform, PlatformError,
    Snapshot,
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

impl Journal {
    /// Opens the journal at `path` (an absent file is an empty journal).
    pub fn open(path: impl Into<PathBuf>) -> Result<Journal, JournalError> {
        let path = path.into();
        let file = match std::fs::read_to_string(&path) {
            Ok(text) => {
                let f: JournalFile =
                    serde_json::from_str(&text).map_err(|e| JournalError::Format {
                        path: path.clone(),
                        message: e.to_string(),
                    })?;
                if f.version != JOURNAL_VERSION {
                    return Err(JournalError::Format {
                        path,
                        message: format!(
                            "version {} (this irqpilot writes {JOURNAL_VERSION})",
                            f.version
                        ),
                    });
                }
                f
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => JournalFile {
                version: JOURNAL_VERSION,
                entries: Vec::new(),
            },
            Err(source) => return Err(JournalError::Io { path, source }),
        };
        Ok(Journal { path, file })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The entries, in recording order.
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

    /// Records `old` for `knob` unless a value is recorded already (the first one wins).
    /// Returns whether it was new.
    pub fn record(&mut self, knob: Knob, old: String) -> bool {
        if self.has(&knob) {
            return false;
        }
        self.file.entries.push(Entry { knob, old });
        true
    }

    /// Writes the journal atomically: a temporary file beside it, flushed to disk, renamed
    /// over it, and the directory flushed, so a crash leaves the old or the new journal,
    /// never a torn one.
    pub fn save(&self) -> Result<(), JournalError> {
        let io = |source| JournalError::Io {
            path: self.path.clone(),
            source,
        };
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(io)?;
        let tmp = self.path.with_extension("json.tmp");
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

    /// Renames an emptied journal out of the way (`journal.json.reverted`), or removes the file
    /// when nothing was ever saved. Returns where it went.
    fn archive(&self) -> Result<Option<PathBuf>, JournalError> {
        let to = self.path.with_extension("json.reverted");
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

/// Reads the value an action is about to replace, as the platform will report it; `None`
/// where the journal cannot read it beforehand (no live interface, an unknown knob).
pub fn read_current(root: &Root, action: &Action) -> Option<String> {
    let rel = match action {
        Action::SetAffinity { irq, .. } => {
            format!("proc/irq/{irq}/{}", procirq::SMP_AFFINITY_LIST)
        }
        Action::SetDefaultAffinity { .. } => "proc/irq/default_smp_affinity".to_string(),
        Action::SetChannels { device, .. } if is_live(root) => {
            return crate::channels::get_channels(device)
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
        _ => return None,
    };
    let text = root.read_optional(&rel).ok().flatten()?;
    Some(text.trim_end_matches('\n').to_string())
}

/// Whether `root` is this machine's `/` (the only root with live interfaces).
pub fn is_live(root: &Root) -> bool {
    root.dir() == Path::new("/")
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

    /// Unwraps into the platform and the journal.
    pub fn into_parts(self) -> (P, Journal) {
        (self.inner, self.journal)
    }

    /// Records the mask of every IRQ of interface `device` before its channel count changes:
    /// the driver re-spreads the queues it keeps (virtio_net sets every kept queue's affinity
    /// on `ethtool -L`), so those masks change without irqpilot writing them, and a later
    /// journal entry would hold the driver's value, not the original. Recorded before the
    /// channels entry, they are restored after it (revert goes newest first), over whatever
    /// the driver sets when the count goes back. Returns whether anything was recorded.
    fn record_queue_masks(&mut self, device: &str) -> bool {
        let Ok(machine) = self.inner.machine() else {
            return false;
        };
        let mut changed = false;
        for irq in interface_irqs(&machine, device) {
            let knob = Knob::Affinity { irq };
            if self.journal.has(&knob) {
                continue;
            }
            let read = Action::SetAffinity {
                irq,
                cpus: Default::default(),
            };
            if let Some(old) = read_current(&self.root, &read) {
                changed |= self.journal.record(knob, old);
            }
        }
        changed
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
        let mut changed = false;
        for a in &plan.actions {
            if let Action::SetChannels { device, .. } = a {
                changed |= self.record_queue_masks(device);
            }
            let knob = Knob::of(a);
            if !self.journal.has(&knob) {
                if let Some(old) = read_current(&self.root, a) {
                    changed |= self.journal.record(knob, old);
                }
            }
        }
        if changed {
            if let Err(e) = self.journal.save() {
                // Never write what could not be journaled.
                tracing::error!(error = %e, "journal not saved: nothing applied");
                return refuse_all(plan, &e.to_string());
            }
        }
        let report = self.inner.apply(plan);
        let mut late = false;
        for o in &report.outcomes {
            if let (Ok(true), Some(old)) = (&o.result, &o.old) {
                late |= self.journal.record(Knob::of(&o.action), old.clone());
            }
        }
        if late {
            if let Err(e) = self.journal.save() {
                tracing::error!(error = %e, "journal not saved after apply");
            }
        }
        report
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

/// The action that puts a recorded value back, or why there is none.
pub fn restore_action(entry: &Entry) -> Result<Action, String> {
    match &entry.knob {
        Knob::Affinity { irq } => procirq::parse_affinity_list(&entry.old)
            .map(|cpus| Action::SetAffinity { irq: *irq, cpus })
            .map_err(|e| format!("recorded mask {:?}: {}", entry.old, e.message)),
        Knob::DefaultAffinity => procirq::parse_affinity_mask(&entry.old)
            .map(|cpus| Action::SetDefaultAffinity { cpus })
            .map_err(|e| format!("recorded mask {:?}: {}", entry.old, e.message)),
        Knob::Channels { device } => match EthtoolChannels::parse_counts(&entry.old) {
            Some((combined, rx, tx, _)) => Ok(Action::SetChannels {
                device: device.clone(),
                combined: Some(combined),
                rx: Some(rx),
                tx: Some(tx),
            }),
            None => Err(format!("recorded channels {:?} unreadable", entry.old)),
        },
        Knob::Other { what } => Err(format!("no way to restore {what}")),
        moderation => {
            let template = moderation
                .moderation_action()
                .ok_or_else(|| format!("no way to restore {moderation:?}"))?;
            match crate::moderation::restore::restore_for(&template, &entry.old) {
                Ok(Some(a)) => Ok(a),
                Ok(None) => Err(format!("no way to restore {moderation:?}")),
                Err(e) => Err(format!("recorded value {:?}: {}", entry.old, e.message)),
            }
        }
    }
}

/// What [`revert`] did.
#[derive(Debug, Default)]
pub struct RevertReport {
    /// What applying the restoring actions did.
    pub applied: ApplyReport,
    /// Entries that could not even be turned into an action, with why.
    pub unrestorable: Vec<(Entry, String)>,
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
}

/// Restores every journaled value through `platform` (newest first), keeps the entries that
/// failed, and archives the journal when it is empty.
pub fn revert<P: Platform + ?Sized>(
    platform: &mut P,
    journal: &mut Journal,
) -> Result<RevertReport, JournalError> {
    let mut rep = RevertReport::default();
    let mut plan = Plan::default();
    let mut planned: Vec<Entry> = Vec::new();
    let mut keep: Vec<Entry> = Vec::new();
    for e in journal.entries().iter().rev() {
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
    rep.applied = platform.apply(&plan);
    for (k, e) in planned.into_iter().enumerate() {
        match rep.applied.outcomes.get(k).map(|o| &o.result) {
            // Restored, already so, or the IRQ is gone: nothing left to restore.
            Some(Ok(_) | Err(ApplyError::Vanished)) => {}
            // Refused, or not answered at all: keep it for the next revert.
            _ => keep.push(e),
        }
    }
    keep.reverse();
    rep.kept = keep.len();
    journal.file.entries = keep;
    if journal.is_empty() {
        rep.archived = journal.archive()?;
    } else {
        journal.save()?;
    }
    Ok(rep)
}

#[cfg(test)]
mod tests;
