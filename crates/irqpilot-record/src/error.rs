//! Why a recording could not be written or read: each error names the file and, for a damaged
//! or foreign file, the byte offset of the block at fault.

use std::path::PathBuf;

/// A malformed payload, before the file and block it came from are known.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FormatError(String);

impl FormatError {
    /// An error saying `message`.
    pub fn new(message: impl Into<String>) -> FormatError {
        FormatError(message.into())
    }
}

/// Why a recording could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// I/O on the file.
    #[error("{path}: {source}")]
    Io {
        /// The recording.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Not a recording at all.
    #[error("{path}: not an irqpilot recording (no recording header)")]
    NotARecording {
        /// The file.
        path: PathBuf,
    },
    /// A recording of a format version this build does not read.
    #[error("{path}: recording format version {found}; this irqpilot reads version {supported}")]
    Version {
        /// The file.
        path: PathBuf,
        /// Its version.
        found: u32,
        /// The version this build reads.
        supported: u32,
    },
    /// A damaged block or header.
    #[error("{path}: byte {offset}: {message}")]
    Format {
        /// The file.
        path: PathBuf,
        /// Offset of the header or block at fault.
        offset: u64,
        /// What is wrong.
        message: String,
    },
    /// A sample whose counters do not fit the layout recorded before it (a writer given
    /// inconsistent snapshots).
    #[error("{0}")]
    Snapshot(String),
}
