//! # irqpilot-sim: the digital twin
//!
//! A fast, deterministic discrete-event simulator of a server's interrupt path, running the same
//! policy code (`irqpilot-core`) as the Linux backend. It sits beside `irqpilot-linux` in the data
//! flow: a policy sees a `Snapshot` and returns a `Plan` without knowing which one it talks to.
//!
//! * [`config::Scenario`]: the TOML schema of a machine and its workload (units in key names);
//!   built-in scenarios live in `scenarios/` at the repository root and are embedded.
//! * [`Sim`]: events in nanoseconds ([`time::SimTime`]) from a heap keyed by `(time, seq)`;
//!   every random draw comes from a named ChaCha8 stream of the scenario's seed. Same scenario +
//!   seed gives byte-identical reports.
//! * [`report::Report`]: throughput, IOPS, transactions, latency percentiles, per-CPU and
//!   per-vector rates, time series.
//! * Errors: [`ConfigError`] (a scenario or `--set` refused, with line and column or the key),
//!   [`BuildError`] (its machine cannot be built), [`SimError`] (a run, table or sweep failed).
//!
//! The machine model (CPUs with hardirq > softirq > application priority, NIC and NVMe queues
//! with device-side moderation, NAPI, DIM and AIM in the simulated drivers, a platform MSI knee)
//! and its sources are documented in `docs/simulator.md`.

#![warn(missing_docs)]

mod apps;
mod channels;
pub mod config;
mod contention;
mod cq;
pub mod engine;
pub mod error;
pub mod export;
mod gsim;
pub mod heldout;
pub mod keys;
pub mod locate;
mod managed;
mod metrics;
mod model;
pub mod placement;
mod platform;
pub mod report;
pub mod rng;
mod runner;
pub mod scenarios;
mod sim;
mod sim_platform;
pub mod sweep;
pub mod tables;
pub mod targets;
pub mod time;
mod vectors;
mod workload;

pub use apps::AppProcess;
pub use config::{ConfigError, Scenario};
pub use error::{BuildError, SimError};
pub use metrics::{MAX_SERIES_POINTS, SeriesPoint};
pub use report::Report;
pub use runner::{
    Sampling, run_scenario, run_scenario_exported, run_scenario_observed, run_scenario_sampled,
};
pub use sim::Sim;
pub use sim_platform::SimPlatform;
