//! `irqpilot revert [--archived]`: restores every value the journal holds (newest first), then
//! archives the journal under a name no later revert reuses (`journal.json.reverted`,
//! `journal.json.reverted.1`, ...). It says what it did with each knob: restored (written and
//! read back), already at its original value, gone with its IRQ or device (dropped), or could
//! not be restored (kept for the next revert; exit 3).
//!
//! With an empty journal it looks at the newest archive and says which of its values the
//! machine no longer holds; `--archived` puts them back (the archive stays as it is).
//!
//! JSON: the fields of `irqpilot apply`, plus `restored`, `already`, `gone`, `kept`,
//! `unrestorable` [{`knob`, `old`, `why`}], `archived` (where the journal went), `archive`
//! (with an empty journal: {`path`, `entries`, `differ` [{`knob`, `old`}]}).

use super::apply::{ApplyOutput, output};
use super::placement_common::{EXIT_PARTIAL, journal_path, platform, take_root};
use crate::Settings;
use crate::cli::{Format, RevertArgs};
use anyhow::{Result, bail};
use irqpilot_linux::Root;
use irqpilot_linux::journal::{
    Journal, RevertReport, archives, differing, restore_archived, revert,
};
use serde::Serialize;
use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

/// A journal entry that could not be turned into a restoring action.
#[derive(Debug, Serialize)]
struct Unrestorable {
    knob: String,
    old: String,
    why: String,
}

/// A knob whose archived original differs from its value now.
#[derive(Debug, Serialize)]
struct Differs {
    knob: String,
    old: String,
}

/// The newest archive, with an empty journal.
#[derive(Debug, Serialize)]
struct ArchiveInfo {
    path: String,
    entries: usize,
    differ: Vec<Differs>,
}

#[derive(Debug, Serialize)]
struct RevertOutput {
    #[serde(flatten)]
    apply: ApplyOutput,
    restored: usize,
    already: usize,
    gone: usize,
    kept: usize,
    unrestorable: Vec<Unrestorable>,
    #[serde(skip_serializing_if = "Option::is_none")]
    archived: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    archive: Option<ArchiveInfo>,
}

/// Runs `irqpilot revert`.
pub fn run(args: &RevertArgs, settings: &Settings) -> Result<ExitCode> {
    let mut linux = platform(settings)?;
    let _owner = take_root(settings, "revert", args.journal.journal.as_deref())?;
    let path = journal_path(settings, args.journal.journal.as_deref());
    let mut journal = Journal::open(&path)?;
    let root = Root::new(&settings.root);
    let shown = path.display().to_string();
    let newest = archives(&path).pop();
    if args.archived {
        if !journal.is_empty() {
            bail!(
                "{shown} holds {} entries: run `irqpilot revert` first (--archived restores \
                 a finished revert's archive)",
                journal.entries().len()
            );
        }
        let Some(archive) = newest else {
            bail!("{shown} has no archive to restore (no revert has finished)");
        };
        let rep = restore_archived(&mut linux, &archive)?;
        let mut out = build(&root, &shown, &rep);
        out.apply
            .notes
            .push(format!("values from the archive {}", archive.display()));
        return print(settings, &out);
    }
    if journal.is_empty() {
        let mut out = build(&root, &shown, &RevertReport::default());
        out.apply
            .notes
            .push(format!("{shown} is empty: nothing to revert"));
        if let Some(archive) = newest {
            out.archive = Some(archive_info(&root, &archive)?);
        }
        return print(settings, &out);
    }
    let rep = revert(&mut linux, &mut journal)?;
    let out = build(&root, &shown, &rep);
    print(settings, &out)
}

fn archive_info(root: &Root, archive: &Path) -> Result<ArchiveInfo> {
    let a = Journal::open(archive)?;
    let differ = differing(root, a.entries())
        .into_iter()
        .map(|e| Differs {
            knob: e.knob.to_string(),
            old: e.old,
        })
        .collect();
    Ok(ArchiveInfo {
        path: archive.display().to_string(),
        entries: a.entries().len(),
        differ,
    })
}

fn build(root: &Root, journal: &str, rep: &RevertReport) -> RevertOutput {
    RevertOutput {
        apply: output(root, journal, &rep.applied, Vec::new()),
        restored: rep.restored(),
        already: rep.already(),
        gone: rep.gone(),
        kept: rep.kept,
        unrestorable: rep
            .unrestorable
            .iter()
            .map(|(e, why)| Unrestorable {
                knob: e.knob.to_string(),
                old: e.old.clone(),
                why: why.to_string(),
            })
            .collect(),
        archived: rep.archived.as_ref().map(|p| p.display().to_string()),
        archive: None,
    }
}

fn print(settings: &Settings, out: &RevertOutput) -> Result<ExitCode> {
    let mut w = std::io::stdout().lock();
    match settings.format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut w, out)?;
            w.write_all(b"\n")?;
        }
        Format::Table => w.write_all(render(out).as_bytes())?,
    }
    w.flush()?;
    Ok(if out.kept > 0 {
        ExitCode::from(EXIT_PARTIAL)
    } else {
        ExitCode::SUCCESS
    })
}

fn render(out: &RevertOutput) -> String {
    let mut s = super::apply::render_outcomes(&out.apply.outcomes, "");
    for u in &out.unrestorable {
        let _ = writeln!(s, "kept       {}: cannot be restored ({})", u.knob, u.why);
    }
    if !out.apply.outcomes.is_empty() || !out.unrestorable.is_empty() {
        let _ = writeln!(
            s,
            "{} restored, {} already at their original value, {} gone with their IRQ or \
             device, {} could not be restored",
            out.restored, out.already, out.gone, out.kept
        );
    }
    match &out.archived {
        Some(to) => {
            let _ = writeln!(s, "journal archived as {to}");
        }
        None if out.kept > 0 => {
            let _ = writeln!(
                s,
                "{} entries kept in {} for the next revert",
                out.kept, out.apply.journal
            );
        }
        None => {}
    }
    for n in &out.apply.notes {
        let _ = writeln!(s, "note: {n}");
    }
    if let Some(a) = &out.archive {
        if a.differ.is_empty() {
            let _ = writeln!(
                s,
                "the last revert's archive {} ({} values) matches the machine",
                a.path, a.entries
            );
        } else {
            let _ = writeln!(
                s,
                "{} of the {} values archived by the last revert in {} are no longer in force \
                 (`irqpilot revert --archived` puts them back):",
                a.differ.len(),
                a.entries,
                a.path
            );
            for d in &a.differ {
                let _ = writeln!(s, "  {} was {}", d.knob, d.old);
            }
        }
    }
    s
}
