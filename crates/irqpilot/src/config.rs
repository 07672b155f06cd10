//! The configuration file (TOML, `/etc/irqpilot/irqpilot.toml` by default).
//!
//! Unknown keys are errors (`deny_unknown_fields`): a typo in a policy knob must be loud, not a
//! silent default. A missing file at the default path means defaults; a missing file named with
//! `--config` is an error.

use anyhow::{Context, Result};
use irqpilot_core::FindingsConfig;
use irqpilot_core::moderation::global::GlobalModerationConfig;
use irqpilot_core::placement::PlacementConfig;
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
    /// The placement policy (`plan`, `apply`, `isolate`, `daemon`; docs/placement.md).
    pub placement: PlacementConfig,
    /// The daemon.
    pub daemon: DaemonConfig,
    /// `[moderation]`: the global moderator's targets (also written into the kernel's own soft
    /// moderation where the kernel has it).
    pub moderation: GlobalModerationConfig,
    /// `[metrics]`: the Prometheus endpoint of `exporter` and `daemon`.
    pub metrics: MetricsConfig,
}

/// `[metrics]`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// Address to serve metrics on, e.g. `127.0.0.1:9877` (`--listen` and `--metrics` override
    /// it). Without it the daemon serves none and the exporter uses 127.0.0.1:9877.
    pub listen: Option<String>,
    /// Allow a `listen` address that is not loopback (as `--metrics-allow-remote`).
    pub allow_remote: bool,
    /// One series per IRQ per CPU that took it (as `--per-cpu-irqs`).
    pub per_cpu_irqs: bool,
}

/// `[daemon]`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct DaemonConfig {
    /// Run even while irqbalance runs (as `--force`).
    pub allow_irqbalance: bool,
    /// Restore the journal on SIGTERM/SIGINT (as `--restore-on-exit`).
    pub restore_on_exit: bool,
    /// Journal location (as `--journal`).
    pub journal: Option<std::path::PathBuf>,
}

impl Config {
    /// Parses configuration text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Config> {
        let c: Config = toml::from_str(text).with_context(|| format!("config {origin}"))?;
        c.findings
            .validate()
            .with_context(|| format!("config {origin}"))?;
        if c.daemon
            .journal
            .as_ref()
            .is_some_and(|j| j.as_os_str().is_empty())
        {
            anyhow::bail!("config {origin}: daemon.journal is empty: name a file or leave it out");
        }
        c.placement
            .validate()
            .with_context(|| format!("config {origin}"))?;
        c.moderation
            .validate()
            .with_context(|| format!("config {origin}"))?;
        if let Some(listen) = &c.metrics.listen {
            crate::metrics::listen_address(listen, c.metrics.allow_remote, "metrics.listen")
                .with_context(|| format!("config {origin}"))?;
        }
        Ok(c)
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
    fn placement_section_parses_and_is_checked() {
        let c = Config::parse(
            "[placement]\ntolerance = 0.1\nban_cpus = \"0-1\"\nban_names = [\"*timer*\"]\n\n[[placement.pin]]\ndevice = \"eth0\"\ncpus = \"2-3\"\n\n[daemon]\nallow_irqbalance = true\n",
            "t",
        )
        .unwrap();
        assert_eq!(c.placement.tolerance, 0.1);
        assert_eq!(c.placement.ban_cpus.to_list_string(), "0-1");
        assert_eq!(c.placement.pin[0].device.as_deref(), Some("eth0"));
        assert!(c.daemon.allow_irqbalance);
        let e = Config::parse("[placement]\ntolerence = 0.1\n", "p.toml").unwrap_err();
        assert!(format!("{e:#}").contains("tolerence"), "{e:#}");
        let e = Config::parse("[placement]\ntolerance = 0.0\n", "p.toml").unwrap_err();
        assert!(format!("{e:#}").contains("placement.tolerance"), "{e:#}");
        let e = Config::parse("[[placement.pin]]\ncpus = \"1\"\n", "p.toml").unwrap_err();
        assert!(format!("{e:#}").contains("pin[0]"), "{e:#}");
        assert!(Config::parse("[daemon]\nforce = true\n", "t").is_err());
    }

    #[test]
    fn moderation_section_parses_and_is_checked() {
        let c = Config::parse(
            "[moderation]\ntarget_intr_rate = 2e6\nexclude = [\"eth0\", \"0000:3b:*\"]\nkernel_soft = false\n",
            "t",
        )
        .unwrap();
        assert_eq!(c.moderation.target_intr_rate, 2e6);
        assert_eq!(c.moderation.exclude, ["eth0", "0000:3b:*"]);
        assert!(!c.moderation.kernel_soft);
        for (text, key) in [
            ("target_intr_rate = -1.0", "moderation.target_intr_rate"),
            ("hardirq_percent = 120.0", "moderation.hardirq_percent"),
            (
                "delay_us = 10\nmin_delay_us = 20",
                "moderation.min_delay_us",
            ),
            ("smoothing = 0.0", "moderation.smoothing"),
            ("hysteresis = 1.0", "moderation.hysteresis"),
            ("period_ms = 0", "moderation.period_ms"),
            ("exclude = [\"\"]", "moderation.exclude"),
            ("exclude = [\"[\"]", "moderation.exclude"),
            ("delay_us = 4294967295", "moderation.delay_us"),
            ("period_ms = 100000000", "moderation.period_ms"),
            ("rx_frames = 0", "moderation.rx_frames"),
            ("target_rate = 5.0", "target_rate"),
        ] {
            let e = Config::parse(&format!("[moderation]\n{text}\n"), "m.toml").unwrap_err();
            let msg = format!("{e:#}");
            assert!(msg.contains(key) && msg.contains("m.toml"), "{text}: {msg}");
        }
    }

    #[test]
    fn metrics_section_parses_and_refuses_a_remote_address_unless_allowed() {
        let c = Config::parse("[metrics]\nlisten = \"127.0.0.1:9900\"\n", "t").unwrap();
        assert_eq!(c.metrics.listen.as_deref(), Some("127.0.0.1:9900"));
        let e = Config::parse("[metrics]\nlisten = \"0.0.0.0:9900\"\n", "m.toml").unwrap_err();
        let msg = format!("{e:#}");
        assert!(
            msg.contains("metrics.listen") && msg.contains("m.toml"),
            "{msg}"
        );
        assert!(
            Config::parse(
                "[metrics]\nlisten = \"0.0.0.0:9900\"\nallow_remote = true\n",
                "t"
            )
            .is_ok()
        );
    }

    #[test]
    fn every_section_is_checked_and_names_the_key() {
        for (text, key) in [
            (
                "[findings]\nvector_capacity = 0",
                "findings.vector_capacity",
            ),
            (
                "[findings]\nheavy_min_share = -0.5",
                "findings.heavy_min_share",
            ),
            (
                "[findings]\nheavy_min_share = nan",
                "findings.heavy_min_share",
            ),
            (
                "[findings]\nheavy_min_per_sec = inf",
                "findings.heavy_min_per_sec",
            ),
            (
                "[findings]\nvector_warn_fraction = 0.0",
                "findings.vector_warn_fraction",
            ),
            (
                "[placement]\nheavy_min_load = 2",
                "placement.heavy_min_load",
            ),
            (
                "[placement]\ntolerance_relative = 2",
                "placement.tolerance_relative",
            ),
            ("[placement]\nload_shift = 0", "placement.load_shift"),
            (
                "[placement]\ninterrupt_cost_us = 0",
                "placement.interrupt_cost_us",
            ),
            (
                "[placement]\ninterrupt_cost_us = 10\nmax_interrupt_cost_us = 5",
                "placement.max_interrupt_cost_us",
            ),
            ("[placement]\nban_names = [\"[\"]", "placement.ban_names[0]"),
            ("[placement]\nban_names = [\"\"]", "placement.ban_names[0]"),
            ("[daemon]\njournal = \"\"", "daemon.journal"),
        ] {
            let e = Config::parse(&format!("{text}\n"), "c.toml").unwrap_err();
            let msg = format!("{e:#}");
            assert!(msg.contains(key) && msg.contains("c.toml"), "{text}: {msg}");
        }
    }

    #[test]
    fn explicit_missing_file_is_an_error() {
        assert!(Config::load(Some(Path::new("/nonexistent/irqpilot.toml"))).is_err());
    }
}
