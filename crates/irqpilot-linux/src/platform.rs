//! `LinuxPlatform`: the [`Platform`] over a root directory (`/` on a live machine, a captured
//! fixture or a simulator's exported tree otherwise).
//!
//! * [`Platform::machine`] is [`inventory::read_machine`] plus what `/proc/interrupts` says about
//!   each numbered row (chip, hwirq, trigger, handler, actions), so a root holding nothing but
//!   `proc/interrupts` still lists every IRQ with its queue role. `/proc/interrupts` is the one
//!   file that must exist.
//! * [`Platform::snapshot_into`] reads `proc/interrupts` (required), `proc/stat`,
//!   `proc/softirqs`, `proc/net/dev` and `proc/diskstats` (optional: missing or unreadable
//!   means `None`; the last two are what devices completed) into buffers the platform
//!   keeps, and parses them into the snapshot's existing tables: once it has seen the files,
//!   sampling allocates nothing. The timestamp is `CLOCK_MONOTONIC` at the middle of the
//!   `/proc/interrupts` read.
//! * [`Platform::apply`] writes `smp_affinity_list` and `default_smp_affinity` only when they
//!   differ, keeps the old text for revert, and re-reads to verify (on the twin's tree after
//!   the twin has taken the writes: [`crate::readback`]). The kernel's refusals map to
//!   [`ApplyError`] variants (ENOENT vanished, EACCES not root, EIO/EPERM managed, ENOSPC no
//!   vector, EINVAL no online CPU, EOPNOTSUPP unsupported). Moderation actions (NIC coalescing,
//!   NVMe features, kernel soft moderation) go to [`crate::moderation::apply`]; channel counts to
//!   [`crate::channels`].
//! * [`Platform::machine`] also fills [`Machine::moderation`] ([`crate::moderation::read`]):
//!   the knob behind each IRQ, read through ethtool only when the root is this machine's `/`.

use crate::format::diskstats::parse_diskstats_into;
use crate::format::interrupts::parse_interrupts_into;
use crate::format::irq_desc::parse_descs;
use crate::format::netdev::parse_netdev_into;
use crate::format::softirqs::parse_softirqs_into;
use crate::format::stat::parse_stat_into;
use crate::format::{cpu, procirq};
use crate::inventory::{self, InterruptFacts};
use crate::moderation::{self, ModerationIo};
use crate::root::{Root, write_once};
use irqpilot_core::{
    Action, ApplyError, ApplyReport, CpuSet, InterruptTable, IrqNum, Machine, MonoNs, Outcome,
    Plan, Platform, PlatformError, Snapshot,
};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `/proc/interrupts`, relative to the root.
pub const PROC_INTERRUPTS: &str = "proc/interrupts";
/// `/proc/stat`, relative to the root.
pub const PROC_STAT: &str = "proc/stat";
/// `/proc/softirqs`, relative to the root.
pub const PROC_SOFTIRQS: &str = "proc/softirqs";
/// `/proc/net/dev`, relative to the root.
pub const PROC_NET_DEV: &str = "proc/net/dev";
/// `/proc/diskstats`, relative to the root.
pub const PROC_DISKSTATS: &str = "proc/diskstats";
/// `/proc/irq/default_smp_affinity`, relative to the root.
pub const DEFAULT_SMP_AFFINITY: &str = "proc/irq/default_smp_affinity";

/// One counter file: its path (built once) and the buffer it is read into.
#[derive(Debug)]
struct Source {
    path: PathBuf,
    buf: Vec<u8>,
}

impl Source {
    fn new(root: &Root, rel: &str) -> Source {
        Source {
            path: root.join(rel),
            buf: Vec::new(),
        }
    }

    /// Reads the whole file into the buffer (whose capacity is kept between reads).
    fn read(&mut self) -> io::Result<()> {
        self.buf.clear();
        std::fs::File::open(&self.path)?.read_to_end(&mut self.buf)?;
        Ok(())
    }

    /// The buffer as text; invalid UTF-8 (a binary file) is a parse error at its line.
    fn text(&self) -> Result<&str, PlatformError> {
        std::str::from_utf8(&self.buf).map_err(|e| {
            let at = e.valid_up_to();
            let line = self.buf[..at].iter().filter(|&&b| b == b'\n').count() + 1;
            let byte = self.buf.get(at).copied().unwrap_or(0);
            PlatformError::Parse {
                path: self.path.clone(),
                line,
                message: format!("not text: invalid UTF-8 byte 0x{byte:02x}"),
            }
        })
    }

    fn io_error(&self, source: io::Error) -> PlatformError {
        PlatformError::Io {
            path: self.path.clone(),
            source,
        }
    }

    fn parse_error(&self, e: crate::ParseError) -> PlatformError {
        PlatformError::Parse {
            path: self.path.clone(),
            line: e.line,
            message: e.message,
        }
    }
}

/// The Linux platform over a root directory.
#[derive(Debug)]
pub struct LinuxPlatform {
    root: Root,
    interrupts: Source,
    stat: Source,
    softirqs: Source,
    net: Source,
    disks: Source,
    moderation: ModerationIo,
}

impl LinuxPlatform {
    /// A platform reading and writing under `root`.
    pub fn new(root: Root) -> LinuxPlatform {
        LinuxPlatform {
            interrupts: Source::new(&root, PROC_INTERRUPTS),
            stat: Source::new(&root, PROC_STAT),
            softirqs: Source::new(&root, PROC_SOFTIRQS),
            net: Source::new(&root, PROC_NET_DEV),
            disks: Source::new(&root, PROC_DISKSTATS),
            moderation: ModerationIo::for_root(&root),
            root,
        }
    }

    /// This platform with other moderation devices (emulated drivers in tests, or an ethtool
    /// socket in another network namespace).
    pub fn with_moderation_io(mut self, io: ModerationIo) -> LinuxPlatform {
        self.moderation = io;
        self
    }

    /// A platform over the directory `dir` (`/` for this machine).
    pub fn with_root(dir: impl Into<PathBuf>) -> LinuxPlatform {
        LinuxPlatform::new(Root::new(dir))
    }

    /// The root directory.
    pub fn root(&self) -> &Root {
        &self.root
    }

    /// Reads and parses `/proc/interrupts` into a new table (for the inventory, not sampling).
    pub fn read_interrupts(&mut self) -> Result<InterruptTable, PlatformError> {
        let mut table = InterruptTable::default();
        self.interrupts
            .read()
            .map_err(|e| self.interrupts.io_error(e))?;
        let text = self.interrupts.text()?;
        parse_interrupts_into(text, &mut table).map_err(|e| self.interrupts.parse_error(e))?;
        Ok(table)
    }

    /// Reads an optional counter file: `Ok(false)` when it is missing or unreadable (the
    /// snapshot's field is then `None`, as on kernels or containers without it).
    fn read_optional(source: &mut Source) -> Result<bool, PlatformError> {
        match source.read() {
            Ok(()) => Ok(true),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::PermissionDenied
                ) =>
            {
                Ok(false)
            }
            Err(e) => Err(source.io_error(e)),
        }
    }

    fn set_affinity(
        &self,
        irq: IrqNum,
        cpus: &CpuSet,
    ) -> (Option<String>, Result<bool, ApplyError>) {
        let path = self
            .root
            .join(&format!("proc/irq/{irq}/{}", procirq::SMP_AFFINITY_LIST));
        let old = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) => return (None, Err(apply_error(&e, &path))),
        };
        let old_text = old.trim_end_matches('\n').to_string();
        if procirq::parse_affinity_list(&old).ok().as_ref() == Some(cpus) {
            return (Some(old_text), Ok(false));
        }
        if cpus.is_empty() {
            // The kernel refuses an empty mask with EINVAL; do not even try.
            return (Some(old_text), Err(ApplyError::Invalid));
        }
        if let Err(e) = write_once(&path, &procirq::render_affinity_list(cpus)) {
            return (Some(old_text), Err(apply_error(&e, &path)));
        }
        let result = verify_settled(
            || std::fs::read_to_string(&path),
            &path,
            cpus,
            procirq::parse_affinity_list,
            &AFFINITY_REREADS,
        );
        if result.is_ok() {
            self.log_effective(irq, cpus);
        }
        (Some(old_text), result)
    }

    /// Reads back `effective_affinity_list` after a write. On x86 without interrupt remapping
    /// the move happens when the IRQ next fires, so an effective CPU outside the new mask is
    /// logged, not treated as a failure. A fixture's effective affinities never move, so
    /// there is nothing to say about them.
    fn log_effective(&self, irq: IrqNum, cpus: &CpuSet) {
        if self.root.backing() == crate::root::Backing::Fixture {
            tracing::debug!(
                irq = irq.0,
                "affinity written (fixture: effective affinity not simulated)"
            );
            return;
        }
        let rel = format!("proc/irq/{irq}/{}", procirq::EFFECTIVE_AFFINITY_LIST);
        let Ok(Some(text)) = self.root.read_optional(&rel) else {
            return;
        };
        match procirq::parse_affinity_list(&text) {
            Ok(eff) if !eff.is_empty() && !eff.is_subset(cpus) => tracing::info!(
                irq = irq.0,
                effective = %eff,
                requested = %cpus,
                "effective affinity not yet inside the new mask (moves when the IRQ next fires)"
            ),
            Ok(eff) => tracing::debug!(irq = irq.0, effective = %eff, "affinity written"),
            Err(e) => tracing::warn!(irq = irq.0, error = %e, path = rel, "unreadable"),
        }
    }

    fn set_default_affinity(&self, cpus: &CpuSet) -> (Option<String>, Result<bool, ApplyError>) {
        let path = self.root.join(DEFAULT_SMP_AFFINITY);
        let old = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) => return (None, Err(apply_error(&e, &path))),
        };
        let old_text = old.trim_end_matches('\n').to_string();
        if procirq::parse_affinity_mask(&old).ok().as_ref() == Some(cpus) {
            return (Some(old_text), Ok(false));
        }
        if cpus.is_empty() {
            return (Some(old_text), Err(ApplyError::Invalid));
        }
        let width = self.nr_cpu_ids(&old_text, cpus);
        if let Err(e) = write_once(&path, &procirq::render_affinity_mask(cpus, width)) {
            return (Some(old_text), Err(apply_error(&e, &path)));
        }
        (
            Some(old_text),
            verify(&path, cpus, procirq::parse_affinity_mask),
        )
    }

    /// Mask width (`nr_cpu_ids`): last possible CPU + 1; else as wide as the old mask text
    /// (the kernel prints `nr_cpu_ids` bits); never narrower than the new set needs.
    fn nr_cpu_ids(&self, old_mask: &str, cpus: &CpuSet) -> u32 {
        let possible = self
            .root
            .read_optional("sys/devices/system/cpu/possible")
            .ok()
            .flatten()
            .and_then(|t| cpu::parse_cpulist(&t).ok())
            .and_then(|s| s.last())
            .map(|c| c.0 + 1);
        let from_old = || {
            let digits = old_mask.bytes().filter(u8::is_ascii_hexdigit).count() as u32;
            (digits > 0).then_some(digits * 4)
        };
        let need = cpus.last().map_or(1, |c| c.0 + 1);
        possible.or_else(from_old).unwrap_or(need).max(need)
    }
}

/// Re-reads a file after writing `want` and checks the kernel kept it.
pub(crate) fn verify(
    path: &Path,
    want: &CpuSet,
    parse: fn(&str) -> Result<CpuSet, crate::ParseError>,
) -> Result<bool, ApplyError> {
    verify_settled(|| std::fs::read_to_string(path), path, want, parse, &[])
}

/// Pauses before each re-read of an IRQ's `smp_affinity_list` that did not show the mask just
/// written (31 ms in all). Where the move waits for the IRQ to fire (x86 without interrupt
/// remapping), the interrupt path clears the "move pending" flag before it installs the new
/// mask, and sets it again when the vector's previous move is not cleaned up yet
/// (kernel/irq/migration.c, `irq_move_masked_irq`); the file is read without the
/// descriptor's lock, so a read in that window shows the mask from before the write. Under
/// load (a daemon restoring on SIGTERM while the devices still interrupt) a single read-back
/// can land there: the VM lab caught one such false "not held" restore.
const AFFINITY_REREADS: [Duration; 5] = [
    Duration::from_millis(1),
    Duration::from_millis(2),
    Duration::from_millis(4),
    Duration::from_millis(8),
    Duration::from_millis(16),
];

/// [`verify`] with the file read by `read`: a read-back that does not show `want` is read
/// again after each of `pauses` before the write counts as not held.
fn verify_settled(
    mut read: impl FnMut() -> io::Result<String>,
    path: &Path,
    want: &CpuSet,
    parse: fn(&str) -> Result<CpuSet, crate::ParseError>,
    pauses: &[Duration],
) -> Result<bool, ApplyError> {
    let mut pauses = pauses.iter();
    loop {
        let back = read().map_err(|e| apply_error(&e, path))?;
        if parse(&back).ok().as_ref() == Some(want) {
            return Ok(true);
        }
        match pauses.next() {
            Some(pause) => std::thread::sleep(*pause),
            None => {
                return Err(ApplyError::NotTaken {
                    readback: back.trim_end_matches('\n').to_string(),
                });
            }
        }
    }
}

/// The kernel's refusal behind an I/O error, as the variant callers branch on.
pub fn apply_error(e: &io::Error, path: &Path) -> ApplyError {
    match e.raw_os_error() {
        Some(libc::ENOENT) => ApplyError::Vanished,
        Some(libc::EACCES) => ApplyError::PermissionDenied,
        // EIO before Linux 6.12, EPERM since: the kernel manages this IRQ's affinity.
        Some(libc::EIO | libc::EPERM) => ApplyError::Managed,
        Some(libc::ENOSPC) => ApplyError::NoVectorSpace,
        Some(libc::EINVAL) => ApplyError::Invalid,
        Some(libc::EOPNOTSUPP) => ApplyError::Unsupported,
        _ => ApplyError::Other {
            message: format!("{}: {e}", path.display()),
        },
    }
}

/// `CLOCK_MONOTONIC` now.
fn monotonic_now() -> MonoNs {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    if rc != 0 {
        // Cannot happen on Linux (CLOCK_MONOTONIC always exists); fall back to a process clock.
        return fallback_now();
    }
    MonoNs(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

fn fallback_now() -> MonoNs {
    static BASE: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let base = BASE.get_or_init(std::time::Instant::now);
    MonoNs(base.elapsed().as_nanos() as u64)
}

impl Platform for LinuxPlatform {
    fn machine(&mut self) -> Result<Machine, PlatformError> {
        // The one mandatory file is checked first, so a wrong --root says which file is missing.
        let table = self.read_interrupts()?;
        let mut machine = inventory::read_machine(&self.root)?;
        if machine.topology.online.is_empty() {
            // `cpu/online` unreadable or inconsistent (a gap says which): the kernel prints one
            // /proc/interrupts column per online CPU.
            let mut online: CpuSet = table.cpus.iter().copied().collect();
            if let Some(possible) = &machine.topology.possible {
                online = online.intersection(possible);
            }
            machine.topology.online = online;
        }
        for (row, desc) in table.rows().iter().zip(parse_descs(&table)) {
            let (Some(irq), Some(desc)) = (row.label.irq(), desc) else {
                continue;
            };
            let handler = desc.handler;
            inventory::merge_interrupts_desc(
                &mut machine,
                irq,
                InterruptFacts {
                    chip: desc.chip,
                    hwirq: desc.hwirq,
                    trigger: desc.trigger,
                    actions: desc.actions,
                },
            );
            if let Some(entry) = machine.irqs.get_mut(&irq) {
                if entry.handler.is_none() {
                    entry.handler = handler;
                }
            }
        }
        moderation::read::fill_moderation(&self.root, &mut machine, &mut self.moderation);
        Ok(machine)
    }

    fn snapshot_into(&mut self, snap: &mut Snapshot) -> Result<(), PlatformError> {
        let before = monotonic_now();
        self.interrupts
            .read()
            .map_err(|e| self.interrupts.io_error(e))?;
        let after = monotonic_now();
        // The kernel prints the file while it is read: the middle of the read is the best
        // single instant for its counts.
        snap.taken_at = MonoNs(before.0 + (after.0 - before.0) / 2);
        let text = self.interrupts.text()?;
        parse_interrupts_into(text, &mut snap.interrupts)
            .map_err(|e| self.interrupts.parse_error(e))?;

        if Self::read_optional(&mut self.stat)? {
            let stat = snap.stat.get_or_insert_with(Default::default);
            let text = self.stat.text()?;
            parse_stat_into(text, stat).map_err(|e| self.stat.parse_error(e))?;
        } else {
            snap.stat = None;
        }
        if Self::read_optional(&mut self.softirqs)? {
            let table = snap.softirqs.get_or_insert_with(Default::default);
            let text = self.softirqs.text()?;
            parse_softirqs_into(text, table).map_err(|e| self.softirqs.parse_error(e))?;
        } else {
            snap.softirqs = None;
        }
        if Self::read_optional(&mut self.net)? {
            let v = snap.net.get_or_insert_with(Default::default);
            let text = self.net.text()?;
            parse_netdev_into(text, v).map_err(|e| self.net.parse_error(e))?;
        } else {
            snap.net = None;
        }
        if Self::read_optional(&mut self.disks)? {
            let v = snap.disks.get_or_insert_with(Default::default);
            let text = self.disks.text()?;
            parse_diskstats_into(text, v).map_err(|e| self.disks.parse_error(e))?;
        } else {
            snap.disks = None;
        }
        Ok(())
    }

    fn apply(&mut self, plan: &Plan) -> ApplyReport {
        let mut report = ApplyReport::default();
        for action in &plan.actions {
            let (old, result) = match action {
                Action::SetAffinity { irq, cpus } => self.set_affinity(*irq, cpus),
                Action::SetDefaultAffinity { cpus } => self.set_default_affinity(cpus),
                Action::SetChannels {
                    device,
                    combined,
                    rx,
                    tx,
                } => crate::channels::apply_channels(
                    &self.root,
                    self.moderation.ethtool.as_deref_mut(),
                    device,
                    *combined,
                    *rx,
                    *tx,
                ),
                other => {
                    moderation::apply::apply_moderation(&self.root, &mut self.moderation, other)
                        .unwrap_or_else(|| {
                            tracing::warn!(
                                action = other.describe(),
                                "not implemented by the Linux platform yet"
                            );
                            (None, Err(ApplyError::Unsupported))
                        })
                }
            };
            match &result {
                Ok(true) => tracing::info!(
                    action = action.describe(),
                    old = old.as_deref().unwrap_or("unknown"),
                    "applied"
                ),
                Ok(false) => tracing::debug!(action = action.describe(), "already so"),
                Err(e) => tracing::warn!(action = action.describe(), error = %e, "refused"),
            }
            report.outcomes.push(Outcome {
                action: action.clone(),
                old,
                result,
            });
        }
        crate::readback::recheck_on_twin(&self.root, &mut report);
        report
    }

    fn now(&mut self) -> MonoNs {
        monotonic_now()
    }

    fn sleep(&mut self, ns: u64) {
        std::thread::sleep(Duration::from_nanos(ns));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_mapping() {
        let p = Path::new("/x");
        let e = |n| apply_error(&io::Error::from_raw_os_error(n), p);
        assert_eq!(e(libc::ENOENT), ApplyError::Vanished);
        assert_eq!(e(libc::EACCES), ApplyError::PermissionDenied);
        assert_eq!(e(libc::EIO), ApplyError::Managed);
        assert_eq!(e(libc::EPERM), ApplyError::Managed);
        assert_eq!(e(libc::ENOSPC), ApplyError::NoVectorSpace);
        assert_eq!(e(libc::EINVAL), ApplyError::Invalid);
        assert_eq!(e(libc::EOPNOTSUPP), ApplyError::Unsupported);
        match e(libc::EROFS) {
            ApplyError::Other { message } => assert!(message.starts_with("/x: "), "{message}"),
            other => panic!("{other:?}"),
        }
    }

    /// A read-back caught while the kernel installs a deferred move (the old mask for a moment)
    /// is read again: the write counts as held once the new mask shows.
    #[test]
    fn affinity_read_back_in_a_moves_window_is_read_again() {
        let want = procirq::parse_affinity_list("3").unwrap();
        let pauses = [Duration::ZERO; 3];
        let mut reads = ["0\n", "0\n", "3\n"].into_iter();
        let got = verify_settled(
            || Ok(reads.next().unwrap().to_string()),
            Path::new("/proc/irq/30/smp_affinity_list"),
            &want,
            procirq::parse_affinity_list,
            &pauses,
        );
        assert_eq!(got, Ok(true));
        assert_eq!(reads.next(), None, "stops reading once it holds");
    }

    /// A mask the kernel did not keep still counts as not held, with what it shows.
    #[test]
    fn affinity_not_kept_is_not_taken_after_the_rereads() {
        let want = procirq::parse_affinity_list("3").unwrap();
        let pauses = [Duration::ZERO; 3];
        let mut n = 0;
        let got = verify_settled(
            || {
                n += 1;
                Ok("0-1\n".to_string())
            },
            Path::new("/proc/irq/30/smp_affinity_list"),
            &want,
            procirq::parse_affinity_list,
            &pauses,
        );
        assert_eq!(
            got,
            Err(ApplyError::NotTaken {
                readback: "0-1".into()
            })
        );
        assert_eq!(n, 4, "one read and one per pause");
    }

    /// An IRQ gone between the write and the read-back is reported as vanished, not re-read.
    #[test]
    fn affinity_read_back_error_is_the_kernels() {
        let want = procirq::parse_affinity_list("3").unwrap();
        let got = verify_settled(
            || Err(io::Error::from_raw_os_error(libc::ENOENT)),
            Path::new("/proc/irq/30/smp_affinity_list"),
            &want,
            procirq::parse_affinity_list,
            &[Duration::ZERO],
        );
        assert_eq!(got, Err(ApplyError::Vanished));
    }

    #[test]
    fn monotonic_clock_advances() {
        let a = monotonic_now();
        std::thread::sleep(Duration::from_millis(2));
        let b = monotonic_now();
        assert!(b.since(a).is_some_and(|d| d >= 2_000_000), "{a:?} {b:?}");
    }
}
