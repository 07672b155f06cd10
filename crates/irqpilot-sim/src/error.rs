//! Why the twin could not build or run a scenario. Scenario files and `--set` edits are
//! refused earlier, with [`ConfigError`] (line and column, key names).

use crate::config::{CmdlineError, ConfigError};
use crate::export::ExportError;
use irqpilot_core::PlatformError;
use std::sync::Arc;

/// A scenario that passed its checks but whose machine cannot be built as it describes.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BuildError {
    /// A CPU list that does not parse (`key` names where it is: `nic eth0: cpus`,
    /// `workload.0.app_cpus`).
    #[error("{key} {list:?}: {message}")]
    BadCpuList {
        /// Where the list is.
        key: String,
        /// The list as written.
        list: String,
        /// Why it does not parse.
        message: String,
    },
    /// A CPU list naming no CPU of the machine.
    #[error("{key} {list:?} names no CPU of the machine")]
    NoCpuOfMachine {
        /// Where the list is.
        key: String,
        /// The list as written.
        list: String,
    },
    /// More I/O queues per drive than CPUs to spread them over.
    #[error(
        "nvme {group}: {queues} queues per drive on {cpus} CPUs: NVMe makes at most one I/O \
         queue per CPU"
    )]
    NvmeQueuesAboveCpus {
        /// The drive group.
        group: String,
        /// `queues_per_drive`.
        queues: u32,
        /// CPUs the queues may use.
        cpus: usize,
    },
    /// The kernel command line (`machine.cmdline`).
    #[error(transparent)]
    Cmdline(#[from] CmdlineError),
    /// The devices' initial layout needs more vectors on a CPU than it has.
    #[error(
        "the initial layout puts {vectors} vectors on CPU {cpu}, above machine.vectors_per_cpu \
         = {cap}"
    )]
    VectorCapacity {
        /// The CPU.
        cpu: usize,
        /// Vectors the layout puts there.
        vectors: u32,
        /// `machine.vectors_per_cpu`.
        cap: u32,
    },
    /// irqpilot's placement configuration in the scenario (`[placement.irqpilot]`).
    #[error("placement.irqpilot: {0}")]
    Placement(#[from] irqpilot_core::placement::PlacementConfigError),
}

/// Why a scenario could not be run (or a table or sweep of runs made).
#[derive(Debug, Clone, thiserror::Error)]
pub enum SimError {
    /// The scenario was refused.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Its machine could not be built.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// A built-in scenario name that does not exist.
    #[error("no built-in scenario {0}")]
    NoScenario(String),
    /// A result table name that does not exist.
    #[error("unknown table {name:?}; tables: {known}")]
    NoTable {
        /// The name asked for.
        name: String,
        /// The tables there are, comma-separated.
        known: String,
    },
    /// irqbalance is a real program: it runs against the exported tree, never inside the twin.
    #[error(
        "placement=irqbalance: irqbalance runs outside the twin, against its exported tree \
         (scripts/vs-irqbalance.sh)"
    )]
    IrqbalanceOutside,
    /// Writing or reading the exported tree.
    #[error(transparent)]
    Export(Arc<ExportError>),
    /// The production control loop on the twin's platform.
    #[error(transparent)]
    Platform(Arc<PlatformError>),
    /// What a [`crate::Sampling`] look reported.
    #[error("{0}")]
    Sampling(String),
    /// A generated machine's run failed (`heldout`, `targets`).
    #[error("{machine}: {source}")]
    Machine {
        /// The generated scenario's name.
        machine: String,
        /// What failed.
        source: Box<SimError>,
    },
}

impl From<ExportError> for SimError {
    fn from(e: ExportError) -> Self {
        SimError::Export(Arc::new(e))
    }
}

impl From<PlatformError> for SimError {
    fn from(e: PlatformError) -> Self {
        SimError::Platform(Arc::new(e))
    }
}
