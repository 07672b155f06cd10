//! `irqpilot`: see, place, moderate and isolate a Linux server's interrupts.

use clap::Parser;
use irqpilot::cli::Cli;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.global.verbose);
    match irqpilot::run(&cli) {
        Ok(code) => code,
        Err(e) if irqpilot::is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("irqpilot: {}", irqpilot::error_text(&e));
            if irqpilot::is_usage_error(&e) {
                ExitCode::from(irqpilot::EXIT_USAGE)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// Logs go to stderr: warnings by default, `-v` info, `-vv` debug; `RUST_LOG` overrides.
fn init_logging(verbose: u8) {
    use tracing_subscriber::EnvFilter;
    let level = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .without_time()
        .init();
}
