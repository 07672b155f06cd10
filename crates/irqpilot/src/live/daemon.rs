//! [`DaemonView`]: what an irqpilot daemon left on disk for a root, for `top`'s status line:
//! whether one runs for this root (an `irqpilot ... daemon` process whose `--root` is this
//! root), and its journal (`<root>/var/lib/irqpilot/journal.json` unless `--journal` says
//! otherwise): how many knobs it changed, when it last wrote, and the latest knob with its old
//! and current value. The journal is parsed again only when its modification time changes.

use irqpilot_core::IrqNum;
use irqpilot_linux::Root;
use irqpilot_linux::inventory::irq_affinity;
use irqpilot_linux::journal::{Entry, Journal, Knob};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// See the module documentation.
#[derive(Debug)]
pub struct DaemonView {
    root: PathBuf,
    journal: PathBuf,
    mtime: Option<SystemTime>,
    entries: Vec<Entry>,
    error: Option<String>,
    pid: Option<u32>,
    latest_now: Option<String>,
}

/// A knob in words.
pub fn knob_text(k: &Knob) -> String {
    match k {
        Knob::Affinity { irq } => format!("IRQ {irq} affinity"),
        Knob::DefaultAffinity => "default_smp_affinity".into(),
        Knob::Channels { device } => format!("{device} channels"),
        Knob::Coalesce {
            device,
            queue: Some(q),
        } => format!("{device} queue {q} coalescing"),
        Knob::Coalesce {
            device,
            queue: None,
        } => format!("{device} coalescing"),
        Knob::NvmeCoalescing { controller } => format!("{controller} interrupt coalescing"),
        Knob::NvmeVector { controller, vector } => {
            format!("{controller} vector {vector} coalescing")
        }
        Knob::SoftModeration { param } => format!("soft moderation {param}"),
        Knob::IrqSoftModeration { irq } => format!("IRQ {irq} soft moderation"),
        Knob::Other { what } => what.clone(),
    }
}

/// The pid of an `irqpilot daemon` serving `root`, from `/proc/*/cmdline`.
pub fn daemon_pid(root: &Path) -> Option<u32> {
    let want = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let mut pids: Vec<u32> = std::fs::read_dir("/proc")
        .ok()?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    pids.sort_unstable();
    pids.into_iter().find(|pid| {
        let Ok(raw) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            return false;
        };
        let args: Vec<&[u8]> = raw.split(|b| *b == 0).collect();
        let is_irqpilot = args
            .first()
            .is_some_and(|a| a.ends_with(b"irqpilot") || a.ends_with(b"/irqpilot"));
        if !is_irqpilot || !args.iter().any(|a| *a == b"daemon") {
            return false;
        }
        let mut its_root = PathBuf::from("/");
        for (i, a) in args.iter().enumerate() {
            let a = String::from_utf8_lossy(a);
            if let Some(v) = a.strip_prefix("--root=") {
                its_root = PathBuf::from(v);
            } else if a == "--root" {
                if let Some(v) = args.get(i + 1) {
                    its_root = PathBuf::from(String::from_utf8_lossy(v).as_ref());
                }
            }
        }
        // A relative --root is relative to the daemon's own working directory.
        if its_root.is_relative() {
            if let Ok(cwd) = std::fs::read_link(format!("/proc/{pid}/cwd")) {
                its_root = cwd.join(its_root);
            }
        }
        std::fs::canonicalize(&its_root).unwrap_or(its_root) == want
    })
}

impl DaemonView {
    /// A view of the daemon serving `root`, whose journal is `journal`.
    pub fn new(root: &Path, journal: PathBuf) -> DaemonView {
        DaemonView {
            root: root.to_path_buf(),
            journal,
            mtime: None,
            entries: Vec::new(),
            error: None,
            pid: None,
            latest_now: None,
        }
    }

    /// Looks again (the caller paces it: a few seconds apart).
    pub fn refresh(&mut self) {
        self.pid = daemon_pid(&self.root);
        let mtime = std::fs::metadata(&self.journal)
            .and_then(|m| m.modified())
            .ok();
        if mtime != self.mtime {
            self.mtime = mtime;
            self.entries.clear();
            self.error = None;
            if mtime.is_some() {
                match Journal::open(&self.journal) {
                    Ok(j) => self.entries = j.entries().to_vec(),
                    Err(e) => self.error = Some(e.to_string()),
                }
            }
        }
        // The latest knob's current value (affinities only: one small read).
        self.latest_now = match self.entries.last().map(|e| &e.knob) {
            Some(Knob::Affinity { irq }) => {
                let (req, _) = irq_affinity(&Root::new(&self.root), IrqNum(irq.0));
                req.map(|s| s.to_string())
            }
            _ => None,
        };
    }

    /// Whether a daemon runs for this root.
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// One line: the daemon and its journal.
    pub fn line(&self) -> String {
        let who = match self.pid {
            Some(pid) => format!("daemon running (pid {pid})"),
            None => "no daemon running".to_string(),
        };
        if let Some(e) = &self.error {
            return format!("{who}; journal unreadable: {e}");
        }
        let Some(mtime) = self.mtime else {
            return format!("{who}; no journal: irqpilot has changed nothing here");
        };
        let when = humantime::format_rfc3339_seconds(mtime).to_string();
        let when = when.get(11..19).unwrap_or(&when).to_string();
        let latest = self.entries.last().map_or(String::new(), |e| {
            let now = self
                .latest_now
                .as_ref()
                .map_or(String::new(), |n| format!(", now {n}"));
            format!("; latest: {} (was {}{now})", knob_text(&e.knob), e.old)
        });
        format!(
            "{who}; journal: {} knob{} changed, last written {when} UTC{latest}",
            self.entries.len(),
            if self.entries.len() == 1 { "" } else { "s" }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use irqpilot_linux::journal::DEFAULT_JOURNAL;

    #[test]
    fn the_journal_says_what_was_changed() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let root = dir.path();
        let path = root.join(DEFAULT_JOURNAL);
        let mut v = DaemonView::new(root, path.clone());
        v.refresh();
        assert!(v.line().contains("no journal"), "{}", v.line());
        // A journal with two knobs; the latest IRQ's affinity file says where it is now.
        let mut j = Journal::open(&path).unwrap_or_else(|e| panic!("{e}"));
        let entry = |knob, old: &str| irqpilot_linux::journal::Entry {
            knob,
            old: old.to_string(),
        };
        j.add(vec![
            entry(Knob::DefaultAffinity, "ff"),
            entry(Knob::Affinity { irq: IrqNum(24) }, "0-3"),
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(root.join("proc/irq/24")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(root.join("proc/irq/24/smp_affinity_list"), "5\n")
            .unwrap_or_else(|e| panic!("{e}"));
        v.refresh();
        let line = v.line();
        assert!(
            line.starts_with("no daemon running; journal: 2 knobs changed"),
            "{line}"
        );
        assert!(
            line.contains("latest: IRQ 24 affinity (was 0-3, now 5)"),
            "{line}"
        );
        // A damaged journal is said to be so.
        std::fs::write(&path, "{").unwrap_or_else(|e| panic!("{e}"));
        // The modification time may not have moved within the same second: force a re-read.
        v.mtime = None;
        v.refresh();
        assert!(v.line().contains("journal unreadable"), "{}", v.line());
    }
}
