//! The `Platform` trait: the one boundary between pure policy code and a machine, real
//! (`LinuxPlatform` in `irqpilot-linux`) or simulated (`SimPlatform` in `irqpilot-sim`).

use crate::ids::MonoNs;
use crate::machine::Machine;
use crate::plan::{ApplyReport, Plan};
use crate::snapshot::Snapshot;
use std::path::PathBuf;

/// Why a platform could not produce a snapshot or an inventory.
#[derive(Debug, thiserror::Error)]
pub enum PlatformError {
    /// A file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A file was read but is not in a format this version understands.
    #[error("{path}:{line}: {message}")]
    Parse {
        /// The path.
        path: PathBuf,
        /// 1-based line number (0 when the whole file is at fault).
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// Anything else the backend wants to say.
    #[error("{0}")]
    Other(String),
}

/// A machine whose interrupts can be observed and changed.
pub trait Platform {
    /// Reads the static inventory (topology, isolation, IRQs, devices).
    fn machine(&mut self) -> Result<Machine, PlatformError>;

    /// Reads the counters into `snap`, reusing its allocations.
    fn snapshot_into(&mut self, snap: &mut Snapshot) -> Result<(), PlatformError>;

    /// Reads the counters.
    fn snapshot(&mut self) -> Result<Snapshot, PlatformError> {
        let mut s = Snapshot::default();
        self.snapshot_into(&mut s)?;
        Ok(s)
    }

    /// Carries out a plan; failures are reported per action, never half-hidden.
    fn apply(&mut self, plan: &Plan) -> ApplyReport;

    /// The platform's monotonic clock.
    fn now(&mut self) -> MonoNs;

    /// Waits `ns` nanoseconds of the platform's time (a simulated machine runs that long).
    fn sleep(&mut self, ns: u64);
}
