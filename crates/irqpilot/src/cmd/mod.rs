//! One module per subcommand; each has `run(args, &Settings) -> anyhow::Result<ExitCode>`.

pub mod apply;
pub mod bench;
pub mod capture;
pub mod completions;
pub mod daemon;
pub mod exporter;
pub mod fixture;
pub mod isolate;
pub mod moderate;
pub mod placement_common;
pub mod plan;
pub mod report;
pub mod revert;
pub mod sim;
pub mod snapshot;
pub mod status;
pub mod top;
pub mod watch;
