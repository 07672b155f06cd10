//! One module per subcommand; each has `run(args, &Settings) -> anyhow::Result<ExitCode>`.

pub mod capture;
pub mod fixture;
pub mod snapshot;
pub mod status;
pub mod watch;
