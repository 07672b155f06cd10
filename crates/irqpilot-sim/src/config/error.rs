//! Why a scenario could not be loaded or edited.

/// Why a scenario could not be loaded.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// The TOML did not parse, did not match the schema, or holds a value out of range.
    #[error("scenario {origin}{}: {message}", position.map(|p| format!(":{p}")).unwrap_or_default())]
    Invalid {
        /// File or built-in name.
        origin: String,
        /// Where in the file, when the error is about a place in it.
        position: Option<crate::locate::Position>,
        /// What is wrong.
        message: String,
    },
    /// A `--set` value that makes no sense for this scenario's machine (DIM, a NIC driver's
    /// moderation, on a machine without NICs): `--compare` skips it with a note.
    #[error("--set {key}={value} does not apply to {scenario}: {why}")]
    NotApplicable {
        /// The key.
        key: String,
        /// The value.
        value: String,
        /// The scenario.
        scenario: String,
        /// Why not.
        why: String,
    },
    /// A `--set` key or value was rejected.
    #[error("--set {key}: {message}")]
    BadSet {
        /// The key as given.
        key: String,
        /// Why.
        message: String,
    },
}
