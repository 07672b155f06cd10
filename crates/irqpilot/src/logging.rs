//! Where log events go, and how many.
//!
//! * Under systemd with stderr connected to the journal (`JOURNAL_STREAM` names stderr's device
//!   and inode, `systemd.exec(5)`), events go to journald natively (tracing-journald), with
//!   their priority (error 3, warning 4, info 5, debug 6) and fields (`F_IRQ=`, `F_ACTION=`, ...).
//! * Otherwise to stderr as text, coloured only when stderr is a terminal, with timestamps for
//!   the long-running commands.
//!
//! Levels: one-shot commands show warnings by default (`-v` info, `-vv` debug). The services
//! (`daemon`, `exporter`) show info by default: their info events are what an operator wants in
//! the journal (start-up summary, every change made, one summary line a minute, reloads, IRQs
//! coming or going, errors); per-period detail is debug (`-v`), and `-vv` is trace. `RUST_LOG`
//! overrides both.

use std::io::IsTerminal;
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// Who is logging.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A one-shot command.
    Command,
    /// A long-running service (`daemon`, `exporter`).
    Service,
}

impl Role {
    /// The role of a subcommand.
    pub fn of(command: &crate::cli::Command) -> Role {
        use crate::cli::Command;
        match command {
            Command::Daemon(_) | Command::Exporter(_) => Role::Service,
            _ => Role::Command,
        }
    }
}

/// The default filter for `role` at `-v` count `verbose`.
pub fn default_level(role: Role, verbose: u8) -> &'static str {
    match (role, verbose) {
        (Role::Command, 0) => "warn",
        (Role::Command, 1) | (Role::Service, 0) => "info",
        (Role::Command, _) | (Role::Service, 1) => "debug",
        (Role::Service, _) => "trace",
    }
}

/// Whether stderr is the journal stream systemd set up for this process.
pub fn stderr_is_journal() -> bool {
    let Some(stream) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    let Some((dev, ino)) = stream.to_str().and_then(|s| s.split_once(':')) else {
        return false;
    };
    let (Ok(dev), Ok(ino)) = (dev.parse::<u64>(), ino.parse::<u64>()) else {
        return false;
    };
    let Ok(fd) = std::io::stderr().as_fd().try_clone_to_owned() else {
        return false;
    };
    std::fs::File::from(fd)
        .metadata()
        .is_ok_and(|m| m.dev() == dev && m.ino() == ino)
}

/// Installs the subscriber. Call once, before anything logs.
pub fn init(role: Role, verbose: u8) {
    let filter = || {
        EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| EnvFilter::new(default_level(role, verbose)))
    };
    if stderr_is_journal() {
        match tracing_journald::layer() {
            Ok(journal) => {
                tracing_subscriber::registry()
                    .with(filter())
                    .with(journal.with_syslog_identifier("irqpilot".into()))
                    .init();
                return;
            }
            // No journald socket (a container, say): text on stderr, which systemd still
            // forwards line by line.
            Err(e) => eprintln!("irqpilot: journald unreachable ({e}); logging to stderr"),
        }
    }
    let ansi = std::io::stderr().is_terminal();
    let fmt = tracing_subscriber::fmt()
        .with_env_filter(filter())
        .with_writer(std::io::stderr)
        .with_ansi(ansi);
    match role {
        Role::Command => fmt.without_time().init(),
        Role::Service => fmt.init(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn services_tell_more_by_default_and_per_period_detail_needs_v() {
        assert_eq!(default_level(Role::Command, 0), "warn");
        assert_eq!(default_level(Role::Service, 0), "info");
        assert_eq!(default_level(Role::Service, 1), "debug");
        assert_eq!(default_level(Role::Command, 2), "debug");
        assert_eq!(default_level(Role::Service, 5), "trace");
    }
}
