//! `irqpilot revert`: restores every value the journal holds (newest first), then archives
//! the journal (`journal.json.reverted`). Entries that could not be restored stay for the next
//! revert; exit 3 says so.

use super::apply::{ApplyOutput, output, print};
use super::placement_common::{EXIT_PARTIAL, journal_path, platform};
use crate::Settings;
use crate::cli::RevertArgs;
use anyhow::Result;
use irqpilot_linux::Root;
use irqpilot_linux::journal::{Journal, revert};
use std::process::ExitCode;

/// Runs `irqpilot revert`.
pub fn run(args: &RevertArgs, settings: &Settings) -> Result<ExitCode> {
    let path = journal_path(settings, args.journal.journal.as_deref());
    let mut journal = Journal::open(&path)?;
    let shown = path.display().to_string();
    if journal.is_empty() {
        let out = ApplyOutput {
            journal: shown,
            outcomes: Vec::new(),
            written: 0,
            unchanged: 0,
            failed: 0,
            notes: vec!["journal is empty: nothing to revert".into()],
        };
        return print(settings, &out);
    }
    let rep = revert(&mut platform(settings)?, &mut journal)?;
    let mut notes: Vec<String> = rep
        .unrestorable
        .iter()
        .map(|(e, why)| format!("{:?}: {why}", e.knob))
        .collect();
    match &rep.archived {
        Some(to) => notes.push(format!("journal archived as {}", to.display())),
        None if rep.partial() => notes.push(format!("{} entries kept in {shown}", rep.kept)),
        None => {}
    }
    let out = output(&Root::new(&settings.root), &shown, &rep.applied, notes);
    let code = print(settings, &out)?;
    Ok(if rep.partial() {
        ExitCode::from(EXIT_PARTIAL)
    } else {
        code
    })
}
