//! The configuration file (TOML, `/etc/irqpilot/irqpilot.toml` by default).
//!
//! Unknown keys are errors (`deny_unknown_fields`): a typo in a policy knob must be loud, not a
//! silent default. A missing file at the default path means defaults; a missing file named with
//! `--config` is an error.

use anyhow::{Context, Result};
use irqpilot_core::FindingsConfig;
use serde::Deserialize;
use std::path::Path;

/// Where the configuration is read from when `--config` is not given.
pub const DEFAULT_PATH: &str = "/etc/irqpilot/irqpilot.toml";

/// The whole configuration.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Thresholds of `irqpilot status` findings.
    pub findings: FindingsConfig,
}

impl Config {
    /// Parses configuration text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Config> {
        toml::from_str(text).with_context(|| format!("config {origin}"))
    }

    /// Loads the file named by `--config`, or the default file if it exists, or defaults.
    pub fn load(explicit: Option<&Path>) -> Result<Config> {
        match explicit {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("reading config {}", path.display()))?;
                Config::parse(&text, &path.display().to_string())
            }
            None => match std::fs::read_to_string(DEFAULT_PATH) {
                Ok(text) => Config::parse(&text, DEFAULT_PATH),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Config::default()),
                Err(e) => Err(e).with_context(|| format!("reading config {DEFAULT_PATH}")),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_is_default() {
        assert_eq!(Config::parse("", "t").unwrap(), Config::default());
    }

    #[test]
    fn known_keys_parse() {
        let c = Config::parse(
            "[findings]\nheavy_min_per_sec = 500.0\nvector_capacity = 180\n",
            "t",
        )
        .unwrap();
        assert_eq!(c.findings.heavy_min_per_sec, 500.0);
        assert_eq!(c.findings.vector_capacity, 180);
        assert_eq!(
            c.findings.heavy_min_share,
            FindingsConfig::default().heavy_min_share
        );
    }

    #[test]
    fn unknown_keys_are_errors_naming_the_key() {
        let e = Config::parse("[findings]\nheavy_min_per_second = 5.0\n", "my.toml").unwrap_err();
        let msg = format!("{e:#}");
        assert!(msg.contains("heavy_min_per_second"), "{msg}");
        assert!(msg.contains("my.toml"), "{msg}");
        assert!(Config::parse("[placement_typo]\n", "t").is_err());
    }

    #[test]
    fn explicit_missing_file_is_an_error() {
        assert!(Config::load(Some(Path::new("/nonexistent/irqpilot.toml"))).is_err());
    }
}
