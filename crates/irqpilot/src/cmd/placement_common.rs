//! What `plan`, `apply`, `revert`, `isolate` and `daemon` share: sampling rates, the journal
//! location, the root's lock (one writer at a time), the platform stack (Linux, optional fault
//! injection for tests, journal), and the exit code for partial success.

use crate::Settings;
use anyhow::Result;
use irqpilot_core::{Machine, Platform, Rates};
use irqpilot_linux::fault::FaultInjection;
use irqpilot_linux::journal::{DEFAULT_JOURNAL, Journal, JournaledPlatform};
use irqpilot_linux::owner::{DAEMON, Holder, LockError, RootLock};
use irqpilot_linux::{LinuxPlatform, Root};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Exit code when some actions were refused and the rest applied (or some journal entries
/// could not be restored): documented in the README.
pub const EXIT_PARTIAL: u8 = 3;

/// Environment variable naming kernel refusals to simulate, `IRQ=ERRNO,...` (e.g.
/// `36=ENOSPC,38=EIO`). Honoured only under a `--root` other than `/`: a test seam, never a
/// way to fake results on a live machine.
pub const FAULT_ENV: &str = "IRQPILOT_FAULT_INJECT";

/// The machine and, unless `sample` is zero, rates over `sample`.
pub fn sample<P: Platform>(platform: &mut P, sample: Duration) -> Result<(Machine, Option<Rates>)> {
    let machine = platform.machine()?;
    if sample.is_zero() {
        return Ok((machine, None));
    }
    let first = platform.snapshot()?;
    platform.sleep(u64::try_from(sample.as_nanos()).unwrap_or(u64::MAX));
    let second = platform.snapshot()?;
    Ok((machine, Some(Rates::between(&first, &second)?)))
}

/// The placement configuration with every `[[placement.applications]]` entry that names a
/// process resolved to its threads' CPUs under the root; an entry whose process does not run
/// (or cannot be read) is left out with a warning, so its device's IRQs stay near the device.
pub fn placement_config(settings: &Settings) -> irqpilot_core::PlacementConfig {
    let (cfg, unresolved) = resolve_applications(
        &Root::new(&settings.root),
        settings.config.placement.clone(),
    );
    for u in &unresolved {
        u.warn();
    }
    cfg
}

/// An application the configuration names by process whose CPUs could not be found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unresolved {
    /// The process name.
    pub process: String,
    /// The device whose IRQs it would have drawn.
    pub device: String,
    /// Why: not running, or the error reading /proc.
    pub why: Option<String>,
}

impl Unresolved {
    /// Logs it at warn.
    pub fn warn(&self) {
        match &self.why {
            None => {
                tracing::warn!(process = %self.process, device = %self.device, "application not running; its IRQs are placed near the device")
            }
            Some(e) => {
                tracing::warn!(process = %self.process, device = %self.device, error = %e, "application CPUs unreadable; its IRQs are placed near the device")
            }
        }
    }
}

/// `cfg` with each application that names a process given its threads' CPUs under `root`,
/// and the entries left out because their process does not run or cannot be read.
pub fn resolve_applications(
    root: &Root,
    mut cfg: irqpilot_core::PlacementConfig,
) -> (irqpilot_core::PlacementConfig, Vec<Unresolved>) {
    let mut unresolved = Vec::new();
    cfg.applications.retain_mut(|a| {
        let Some(name) = a.process.clone() else {
            return true;
        };
        let why = match irqpilot_linux::apps::process_cpus(root, &name) {
            Ok(Some(cpus)) if !cpus.is_empty() => {
                a.cpus = cpus;
                a.process = None;
                return true;
            }
            Ok(_) => None,
            Err(e) => Some(e.to_string()),
        };
        unresolved.push(Unresolved {
            process: name,
            device: a.device.clone(),
            why,
        });
        false
    });
    (cfg, unresolved)
}

/// The journal file: `--journal`, else `<root>/var/lib/irqpilot/journal.json` (so `--root`
/// runs never write outside their tree).
pub fn journal_path(settings: &Settings, explicit: Option<&Path>) -> PathBuf {
    match explicit {
        Some(p) => p.to_path_buf(),
        None => Root::new(&settings.root).join(DEFAULT_JOURNAL),
    }
}

/// How long a writer waits for another one-shot command (`apply`, `revert`, ...) to finish with
/// the root before giving up. A daemon is never waited for.
pub const LOCK_WAIT: Duration = Duration::from_secs(30);

/// Takes the root for `command` (DESIGN.md rule 11: one writer per root), before anything is
/// read that the write depends on. Held until dropped; the daemon holds it for its life.
pub fn take_root(settings: &Settings, command: &str, journal: Option<&Path>) -> Result<RootLock> {
    let root = Root::new(&settings.root);
    let holder = Holder {
        pid: std::process::id(),
        command: command.to_string(),
        journal: journal_path(settings, journal).display().to_string(),
    };
    RootLock::acquire(&root, &holder, LOCK_WAIT).map_err(|e| match e {
        LockError::Held {
            holder: Some(h), ..
        } if h.command == DAEMON => anyhow::anyhow!(
            "the irqpilot daemon (pid {}) owns {} and its journal {}: stop it first \
             (it puts the journal back on exit with --restore-on-exit; otherwise run \
             `irqpilot revert` once it has stopped)",
            h.pid,
            settings.root.display(),
            h.journal
        ),
        LockError::Held {
            holder: Some(h), ..
        } => anyhow::anyhow!(
            "{} is busy: {h} still changes it after {} s; try again when it has finished",
            settings.root.display(),
            LOCK_WAIT.as_secs()
        ),
        other => anyhow::Error::new(other).context(format!(
            "cannot take {} for {command}",
            settings.root.display()
        )),
    })
}

/// The Linux platform over the root, with the test seam.
pub fn platform(settings: &Settings) -> Result<FaultInjection<LinuxPlatform>> {
    let root = Root::new(&settings.root);
    let spec = std::env::var(FAULT_ENV).unwrap_or_default();
    let faults = if spec.trim().is_empty() {
        Default::default()
    } else {
        if root.is_live() {
            anyhow::bail!("{FAULT_ENV} is only honoured under a --root other than /");
        }
        irqpilot_linux::fault::parse_faults(&spec)
            .map_err(|e| anyhow::anyhow!("{FAULT_ENV}={spec}: {e}"))?
    };
    Ok(FaultInjection::new(
        LinuxPlatform::new(root.clone()),
        root,
        faults,
    ))
}

/// The platform stack that journals before writing.
pub fn journaled(
    settings: &Settings,
    journal: Option<&Path>,
) -> Result<JournaledPlatform<FaultInjection<LinuxPlatform>>> {
    let path = journal_path(settings, journal);
    let journal = Journal::open(&path)?;
    Ok(JournaledPlatform::new(
        platform(settings)?,
        Root::new(&settings.root),
        journal,
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use irqpilot_core::CpuSet;
    use irqpilot_core::placement::Application;

    /// A process named in `[[placement.applications]]` is read from the root's /proc (its
    /// threads' allowed CPUs); one that does not run is left out; configured CPUs stay.
    #[test]
    fn application_processes_resolve_under_the_root() {
        let d = tempfile::tempdir().unwrap();
        for (rel, text) in [
            ("proc/77/comm", "memcached\n"),
            ("proc/77/task/77/status", "Cpus_allowed_list:\t2\n"),
            ("proc/77/task/78/status", "Cpus_allowed_list:\t3\n"),
        ] {
            let p = d.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        let app = |device: &str, cpus: &str, process: Option<&str>| Application {
            device: device.into(),
            cpus: CpuSet::parse_list(cpus).unwrap(),
            process: process.map(str::to_string),
        };
        let mut settings = Settings {
            root: d.path().to_path_buf(),
            format: crate::cli::Format::Table,
            config: crate::config::Config::default(),
        };
        settings.config.placement.applications = vec![
            app("eth0", "", Some("memcached")),
            app("eth1", "", Some("postgres")),
            app("nvme0", "5", None),
        ];
        let cfg = placement_config(&settings);
        assert_eq!(
            cfg.applications,
            vec![app("eth0", "2-3", None), app("nvme0", "5", None)]
        );
        assert!(cfg.validate().is_ok());
    }
}
