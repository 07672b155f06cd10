//! Recording and replaying for the commands: [`Follower`] follows a live root after each
//! sample (writes the sample to a recording, notices affinity changes, re-reads the inventory
//! when IRQs come or go); [`open_replay`] opens a recording as a [`ReplayPlatform`] and says
//! what is wrong with a damaged one.

use super::affinity::{AffinityWatch, Change};
use super::sampler::Sampler;
use anyhow::{Context, Result};
use irqpilot_core::{Machine, Platform, RowStatus};
use irqpilot_linux::Root;
use irqpilot_record::{Affinity, Meta, Recording, ReplayPlatform, Speed, Writer, WriterStats};
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Least time between two re-reads of the inventory when IRQs come and go (a read takes a
/// tenth of a second on a 256-CPU server).
const INVENTORY_EVERY_NS: u64 = 10_000_000_000;

/// Metadata for a recording of `root` starting now (`mono_ns`: the platform's clock now).
pub fn meta_now(source: &str, root: &Path, interval: Duration, mono_ns: u64) -> Meta {
    let mut meta = Meta::new(
        source,
        &root.display().to_string(),
        u64::try_from(interval.as_nanos()).unwrap_or(u64::MAX),
    );
    meta.created_unix_ns = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    meta.start_mono_ns = mono_ns;
    meta.hostname = Root::new(root)
        .read_optional("proc/sys/kernel/hostname")
        .ok()
        .flatten()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty());
    meta
}

/// Creates a recording file for samples of `machine`.
pub fn create_writer(
    path: &Path,
    meta: &Meta,
    machine: &Machine,
) -> Result<Writer<BufWriter<File>>> {
    let f = File::create(path).with_context(|| format!("creating {}", path.display()))?;
    Ok(Writer::new(BufWriter::new(f), path, meta, machine)?)
}

/// What changed on the machine after a sample.
#[derive(Debug, Default)]
pub struct Events {
    /// A new inventory, when IRQs came or went.
    pub machine: Option<Machine>,
    /// Affinity changes.
    pub changes: Vec<Change>,
}

/// Follows a live root (see the module documentation).
#[derive(Debug)]
pub struct Follower {
    affinity: AffinityWatch,
    writer: Option<(PathBuf, Writer<BufWriter<File>>)>,
    inventory_at: u64,
    inventory_due: bool,
}

impl Follower {
    /// Follows `root`, whose inventory is `machine`; records to `record` when given.
    pub fn new(root: &Path, machine: &Machine, record: Option<(&Path, Meta)>) -> Result<Follower> {
        let writer = match record {
            Some((path, meta)) => Some((path.to_path_buf(), create_writer(path, &meta, machine)?)),
            None => None,
        };
        Ok(Follower {
            affinity: AffinityWatch::new(root, machine),
            writer,
            inventory_at: 0,
            inventory_due: false,
        })
    }

    /// After each sample (`ready`: whether it produced rates): records it, then looks for
    /// affinity changes and IRQs that came or went.
    pub fn after_sample<P: Platform + ?Sized>(
        &mut self,
        platform: &mut P,
        sampler: &mut Sampler,
        ready: bool,
    ) -> Result<Events> {
        let now = sampler.snapshot().taken_at.0;
        if let Some((_, w)) = self.writer.as_mut() {
            w.push(sampler.snapshot())?;
        }
        let mut events = Events::default();
        if !ready {
            return Ok(events);
        }
        let rates = sampler.rates();
        if !rates.vanished.is_empty() || rates.rows.iter().any(|r| r.status == RowStatus::New) {
            self.inventory_due = true;
        }
        if self.inventory_due && now.saturating_sub(self.inventory_at) >= INVENTORY_EVERY_NS {
            self.inventory_due = false;
            self.inventory_at = now;
            let m = platform.machine()?;
            sampler.set_machine(&m);
            self.affinity.set_machine(&m);
            if let Some((_, w)) = self.writer.as_mut() {
                w.machine(&m)?;
            }
            events.machine = Some(m);
            return Ok(events);
        }
        events.changes = self.affinity.check(sampler, now).to_vec();
        if let Some((_, w)) = self.writer.as_mut() {
            for c in &events.changes {
                w.affinity(
                    c.irq,
                    c.after.requested.as_ref(),
                    c.after.effective.as_ref(),
                )?;
            }
        }
        Ok(events)
    }

    /// The recording being written, and what it holds.
    pub fn recording(&self) -> Option<(&Path, WriterStats)> {
        self.writer.as_ref().map(|(p, w)| (p.as_path(), w.stats()))
    }

    /// Finishes the recording, if any: what was written.
    pub fn finish(self) -> Result<Option<(PathBuf, WriterStats)>> {
        match self.writer {
            Some((path, w)) => {
                let stats = w.stats();
                w.finish()?;
                Ok(Some((path, stats)))
            }
            None => Ok(None),
        }
    }
}

/// Opens a recording for replay at `speed`, `seek` into it; a damaged end is reported on
/// stderr and the rest replayed.
pub fn open_replay(
    path: &Path,
    speed: Speed,
    seek: Option<Duration>,
) -> Result<(Recording, ReplayPlatform)> {
    let rec = Recording::open(path)?;
    if let Some(d) = rec.damage() {
        eprintln!("irqpilot: warning: {}: {d}", path.display());
    }
    if rec.samples() == 0 {
        anyhow::bail!("{}: the recording holds no samples", path.display());
    }
    let mut p = ReplayPlatform::new(&rec, speed)?;
    if let (Some(d), Some((first, last))) = (seek, rec.span_ns()) {
        let t = first.saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        if t > last {
            anyhow::bail!(
                "--seek {}: the recording is only {} long",
                humantime::format_duration(d),
                humantime::format_duration(Duration::from_secs(
                    (last.saturating_sub(first)) / 1_000_000_000
                ))
            );
        }
        p.seek(t)?;
    }
    Ok((rec, p))
}

/// The affinity changes a replay read with its last snapshot, told against `m` (the
/// inventory before them).
pub fn replayed_changes(replay: &ReplayPlatform, m: &Machine) -> Vec<Change> {
    replay
        .changes()
        .iter()
        .map(|c| {
            let i = m.irqs.get(&c.irq);
            Change {
                at_ns: c.at_ns,
                irq: c.irq,
                before: Affinity {
                    requested: i.and_then(|i| i.requested.clone()),
                    effective: i.and_then(|i| i.effective.clone()),
                },
                after: c.affinity.clone(),
            }
        })
        .collect()
}
