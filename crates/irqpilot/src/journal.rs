//! Recording applied changes so that `irqpilot revert` can undo them.
//!
//! [`ChangeJournal`] is the one thing commands that change a machine call after
//! `Platform::apply`; [`FileJournal`] is the interim implementation used by `moderate --apply`:
//! one JSON line per change (an [`irqpilot_core::Outcome`] that changed something and kept its
//! old value), appended to `var/lib/irqpilot/journal.jsonl` under the root, so a fixture's
//! changes are journaled inside the fixture and never in this machine's `/var/lib`.
//! [`revert_plan`] turns the entries back into the plan that restores them, newest first.
//! (Placement's journal and the `revert` command are another branch's work; when they land,
//! moderation records through them and this module's format is the one they read.)

use anyhow::{Context, Result};
use irqpilot_core::{ApplyError, ApplyReport, Outcome, Plan};
use irqpilot_linux::moderation::restore::restore_action;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The journal's path under a root.
pub const JOURNAL: &str = "var/lib/irqpilot/journal.jsonl";

/// Where applied changes go.
pub trait ChangeJournal {
    /// Records the changes of one apply made by `source` (a command or policy name); returns
    /// how many were recorded.
    fn record(&mut self, source: &str, report: &ApplyReport) -> Result<usize>;
}

/// One recorded change.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JournalEntry {
    /// Wall-clock time of the record, milliseconds since the Unix epoch.
    pub at_unix_ms: u64,
    /// Who made the change (`moderate`, `daemon`, ...).
    pub source: String,
    /// The action, the value it replaced and what happened.
    pub outcome: Outcome,
}

/// A JSON-lines journal file, opened (and created) before anything is applied, so that a
/// journal that cannot be written stops the command before it changes the machine.
#[derive(Debug)]
pub struct FileJournal {
    path: PathBuf,
    file: std::fs::File,
}

/// Whether an outcome changed the machine and can be undone.
fn is_change(o: &Outcome) -> bool {
    o.old.is_some() && matches!(o.result, Ok(true) | Err(ApplyError::NotTaken { .. }))
}

impl FileJournal {
    /// Opens (creating it and its directories) the journal under `root`.
    pub fn open_under(root: &Path) -> Result<FileJournal> {
        FileJournal::open(&root.join(JOURNAL))
    }

    /// Opens (creating it and its directories) the journal at `path`.
    pub fn open(path: &Path) -> Result<FileJournal> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("creating journal directory {}", dir.display()))?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("opening journal {}", path.display()))?;
        Ok(FileJournal {
            path: path.to_path_buf(),
            file,
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl ChangeJournal for FileJournal {
    fn record(&mut self, source: &str, report: &ApplyReport) -> Result<usize> {
        let at_unix_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let mut text = String::new();
        let mut n = 0;
        for o in report.outcomes.iter().filter(|o| is_change(o)) {
            let entry = JournalEntry {
                at_unix_ms,
                source: source.to_string(),
                outcome: o.clone(),
            };
            text.push_str(&serde_json::to_string(&entry)?);
            text.push('\n');
            n += 1;
        }
        // One write per apply: entries of one apply land together or not at all.
        self.file
            .write_all(text.as_bytes())
            .and_then(|()| self.file.flush())
            .with_context(|| format!("writing journal {}", self.path.display()))?;
        Ok(n)
    }
}

/// Reads every entry of a journal file (none when it does not exist); a malformed line is an
/// error naming its line.
pub fn read_journal(path: &Path) -> Result<Vec<JournalEntry>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("reading journal {}", path.display())),
    };
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).with_context(|| format!("journal {}:{}", path.display(), i + 1))
        })
        .collect()
}

/// The plan that undoes `entries` (newest first, so a knob changed twice ends at its value
/// before the first change). Entries this module cannot restore (not moderation) are listed in
/// the plan's notes.
pub fn revert_plan(entries: &[JournalEntry]) -> Result<Plan> {
    let mut plan = Plan::default();
    for e in entries.iter().rev() {
        match restore_action(&e.outcome)
            .with_context(|| format!("old value of {}", e.outcome.action.describe()))?
        {
            Some(a) => plan.actions.push(a),
            None => plan.notes.push(format!(
                "not restored here: {} (old {:?})",
                e.outcome.action.describe(),
                e.outcome.old
            )),
        }
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use irqpilot_core::{Action, IrqNum};

    fn outcome(enabled: bool, old: &str, result: Result<bool, ApplyError>) -> Outcome {
        Outcome {
            action: Action::SetIrqSoftModeration {
                irq: IrqNum(38),
                enabled,
            },
            old: Some(old.into()),
            result,
        }
    }

    #[test]
    fn records_changes_only_and_reverts_newest_first() {
        let d = tempfile::tempdir().unwrap();
        let mut j = FileJournal::open_under(d.path()).unwrap();
        let report = ApplyReport {
            outcomes: vec![
                outcome(true, "off", Ok(true)),
                outcome(true, "on", Ok(false)),
                outcome(true, "off", Err(ApplyError::Unsupported)),
            ],
        };
        assert_eq!(j.record("moderate", &report).unwrap(), 1);
        let second = ApplyReport {
            outcomes: vec![outcome(false, "on", Ok(true))],
        };
        assert_eq!(j.record("moderate", &second).unwrap(), 1);
        let entries = read_journal(&d.path().join(JOURNAL)).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].source, "moderate");
        let plan = revert_plan(&entries).unwrap();
        // Newest first: back to "on" (before the second change), then to "off".
        assert_eq!(
            plan.actions,
            vec![
                Action::SetIrqSoftModeration {
                    irq: IrqNum(38),
                    enabled: true
                },
                Action::SetIrqSoftModeration {
                    irq: IrqNum(38),
                    enabled: false
                },
            ]
        );
    }

    #[test]
    fn missing_and_malformed_journals() {
        let d = tempfile::tempdir().unwrap();
        assert!(
            read_journal(&d.path().join("none.jsonl"))
                .unwrap()
                .is_empty()
        );
        let p = d.path().join("bad.jsonl");
        std::fs::write(&p, "{}\n").unwrap();
        let e = format!("{:#}", read_journal(&p).unwrap_err());
        assert!(e.contains("bad.jsonl:1"), "{e}");
        // A journal whose directory cannot be created is an error before anything is applied.
        std::fs::write(d.path().join("var"), "a file").unwrap();
        assert!(FileJournal::open_under(d.path()).is_err());
    }
}
