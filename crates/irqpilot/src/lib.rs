//! # irqpilot (the binary)
//!
//! The command line on top of `irqpilot-core` (the model and policies) and `irqpilot-linux` (the
//! kernel's files): `status`, `snapshot`, `watch`, `capture`, `fixture generate` and `moderate`, each in
//! its own module under [`cmd`]. Text output is built by [`render`]; `--format json` prints
//! stable JSON documented on each command. Kept as a library so integration tests can drive a
//! command's loop in-process (e.g. counting the allocations of `watch`).

#![warn(missing_docs)]

pub mod cli;
pub mod cmd;
pub mod config;
pub mod live;
pub mod logging;
pub mod metrics;
pub mod progress;
pub mod render;
pub mod report;
pub mod service;
pub mod top;

use anyhow::Result;
use cli::{Cli, Command, Format};
use config::Config;
use std::path::PathBuf;
use std::process::ExitCode;

/// What every command gets: the root, the output format and the configuration.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Directory standing for `/`.
    pub root: PathBuf,
    /// Output format.
    pub format: Format,
    /// The configuration file's content (defaults when there is none).
    pub config: Config,
}

/// Runs the command `cli` names.
pub fn run(cli: &Cli) -> Result<ExitCode> {
    if let (Some(root), Some(why)) = (&cli.global.root, ignores_root(&cli.command)) {
        eprintln!("irqpilot: note: --root {}: {why}", root.display());
    }
    let settings = Settings {
        root: cli
            .global
            .root
            .clone()
            .unwrap_or_else(|| PathBuf::from("/")),
        format: cli.global.format,
        config: Config::load(cli.global.config.as_deref())?,
    };
    match &cli.command {
        Command::Status(a) => cmd::status::run(a, &settings),
        Command::Snapshot(a) => cmd::snapshot::run(a, &settings),
        Command::Watch(a) => cmd::watch::run(a, &settings),
        Command::Top(a) => cmd::top::run(a, &settings),
        Command::Report(a) => cmd::report::run(a, &settings),
        Command::Capture(a) => cmd::capture::run(a, &settings),
        Command::Fixture(c) => cmd::fixture::run(c, &settings),
        Command::Plan(a) => cmd::plan::run(a, &settings),
        Command::Apply(a) => cmd::apply::run(a, &settings),
        Command::Revert(a) => cmd::revert::run(a, &settings),
        Command::Isolate(a) => cmd::isolate::run(a, &settings),
        Command::Daemon(a) => cmd::daemon::run(a, &settings, cli.global.config.as_deref()),
        Command::Moderate(a) => cmd::moderate::run(a, &settings),
        Command::Sim(a) => cmd::sim::run(a, &settings),
        Command::Bench(a) => cmd::bench::run(a, &settings),
        Command::Exporter(a) => cmd::exporter::run(a, &settings, cli.global.config.as_deref()),
        Command::Completions(a) => cmd::completions::run(a),
    }
}

/// What `--root` means to a command that does not read a machine through it (said when it is
/// given, rather than silently ignored).
fn ignores_root(command: &Command) -> Option<&'static str> {
    match command {
        Command::Sim(_) => Some(
            "ignored: `sim` simulates its own machine (`--export-root DIR` writes it out as a tree)",
        ),
        Command::Fixture(_) => Some("ignored: `fixture generate` writes a machine of its own"),
        Command::Bench(_) => Some(
            "only picks the topology the placements are chosen from: the benchmark runs on \
             this machine's CPUs",
        ),
        _ => None,
    }
}

/// A command line that parsed but does not make sense (a value out of range, a missing
/// argument only the command can detect): exit 2 like clap's own usage errors.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// `Err(UsageError(text))`, for `return usage(...)` in argument checks.
pub fn usage<T>(text: impl Into<String>) -> anyhow::Result<T> {
    Err(UsageError(text.into()).into())
}

/// Exit status for command-line errors (clap's, and [`UsageError`]).
pub const EXIT_USAGE: u8 = 2;

/// Whether `e` is a [`UsageError`].
pub fn is_usage_error(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.downcast_ref::<UsageError>().is_some())
}

/// An error and its causes on one line, `a: b: c`, leaving out a cause whose text the message
/// already ends with (errors that print their source, such as `path: os error`, would
/// otherwise say it twice).
pub fn error_text(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let part = cause.to_string();
        if text.ends_with(&part) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&part);
    }
    text
}

/// Whether the error is a closed output pipe (`irqpilot snapshot | head`): not a failure.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            || c.downcast_ref::<serde_json::Error>()
                .and_then(|j| j.io_error_kind())
                .is_some_and(|k| k == std::io::ErrorKind::BrokenPipe)
    })
}
