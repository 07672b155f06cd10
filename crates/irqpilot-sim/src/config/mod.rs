//! Scenario files: the documented TOML schema of a simulated machine and its workload.
//!
//! Units are in key names (`_us`, `_ns`, `_gbps`, `_per_sec`, `_bytes`). Unknown keys are errors.
//! Defaults come from `shared/research/costmodel.md` section 3 (simulator defaults), each noted
//! where it is defined. `--set key=value` edits a scenario before it is checked: a few short
//! aliases (`moderation`, `aim_mode`, `platform`, `seed`, `placement`) and any dotted path
//! (`costs.hardirq_us=0.5`, `nic.0.queues=16`, `workload.0.load=0.5`).
//!
//! Layout (each file uses only those above it): `error` (why a scenario was refused),
//! `choices` (the enums keys take), `defaults` (every default value), `schema` (the tables and
//! keys), `isolation` (the machine's isolation from its command line), `ranges` (the range of
//! every number), `validate` (rules across fields), `explain` (serde's errors on a file as
//! `key = value: what it must be`, at the key's line and column), `load` (text or value ->
//! checked scenario, errors placed at line and column), `set` (the `--set` language).

mod choices;
mod defaults;
mod error;
mod explain;
mod isolation;
mod load;
mod ranges;
mod schema;
mod set;
mod validate;

pub use choices::{
    AppSchedule, ItrRegister, NicModeration, NvmeModeration, PlacementPolicy, PlatformKind,
    Steering,
};
pub use error::{CmdlineError, ConfigError, Inconsistency, Rule};
pub use isolation::isolation_of;
pub use schema::{
    Costs, MachineCfg, MetricsCfg, NicCfg, NvmeCfg, PlacementCfg, PlatformCfg, Scenario,
    WorkloadCfg,
};
pub use set::MODERATION_VALUES;
pub(crate) use validate::positive;

#[cfg(test)]
mod tests;
