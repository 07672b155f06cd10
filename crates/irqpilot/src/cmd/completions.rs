//! `irqpilot completions SHELL`: the shell completion script (clap_complete), the same one the
//! .deb installs (`build.rs` writes those from the same definitions).

use crate::cli::{Cli, CompletionsArgs};
use anyhow::Result;
use clap::CommandFactory;
use std::io::Write;
use std::process::ExitCode;

/// Prints the completion script for `args.shell` on stdout.
pub fn run(args: &CompletionsArgs) -> Result<ExitCode> {
    let mut cmd = Cli::command();
    let mut out = std::io::stdout().lock();
    clap_complete::generate(args.shell, &mut cmd, "irqpilot", &mut out);
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
