//! `irqpilot`: see, place, moderate and isolate a Linux server's interrupts.

use clap::Parser;
use irqpilot::cli::Cli;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = Cli::parse();
    irqpilot::logging::init(
        irqpilot::logging::Role::of(&cli.command),
        cli.global.verbose,
    );
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
