//! Built-in scenarios, embedded from `scenarios/*.toml` at the repository root.

use crate::config::{ConfigError, Scenario};

macro_rules! builtin {
    ($($name:literal),* $(,)?) => {
        /// `(name, TOML text)` of every built-in scenario, sorted by name.
        pub const BUILTIN: &[(&str, &str)] = &[
            $(($name, include_str!(concat!("../../../scenarios/", $name, ".toml"))),)*
        ];
    };
}

builtin!(
    "aim-e1000-bulk",
    "aim-e1000-bulk-lowload",
    "aim-e1000-idle",
    "aim-e1000-idle-lowload",
    "aim-e1000-pingpong",
    "aim-e1000-pingpong-lowload",
    "app-pinned-2node",
    "app-pinned-2node-lowload",
    "balance-p4-4nic-netperf",
    "balance-p4-4nic-netperf-lowload",
    "isolation-rt-24cpu",
    "isolation-rt-24cpu-lowload",
    "nic-100g-32q",
    "nic-100g-32q-lowload",
    "nic-200g-160q-10vm",
    "nic-200g-160q-10vm-lowload",
    "numa-remote-2node",
    "numa-remote-2node-lowload",
    "nvme-12ssd-96q",
    "nvme-12ssd-96q-lowload",
    "nvme-8ssd-64q",
    "nvme-8ssd-64q-lowload",
    "placement-churn-8q",
    "placement-churn-8q-lowload",
);

/// The built-in scenario called `name`.
pub fn builtin(name: &str) -> Option<Result<Scenario, ConfigError>> {
    BUILTIN
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(n, text)| Scenario::from_toml(text, n))
}

/// Names and one-line descriptions of the built-ins.
pub fn list() -> Vec<(&'static str, String)> {
    BUILTIN
        .iter()
        .map(|(n, text)| {
            let desc = Scenario::from_toml(text, n)
                .map(|s| {
                    s.description
                        .split_whitespace()
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_else(|e| format!("(invalid: {e})"));
            (*n, desc)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_parses_and_matches_its_name() {
        for (name, text) in BUILTIN {
            let s = Scenario::from_toml(text, name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(&s.name, name);
            assert!(!s.description.is_empty(), "{name} needs a description");
        }
    }

    #[test]
    fn every_file_is_registered_and_every_scenario_has_a_lowload_twin() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios");
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter_map(|n| n.strip_suffix(".toml").map(str::to_string))
            .collect();
        files.sort();
        let names: Vec<String> = BUILTIN.iter().map(|(n, _)| n.to_string()).collect();
        assert_eq!(files, names, "scenarios/ and BUILTIN differ");
        for (name, _) in BUILTIN {
            if name.ends_with("-lowload") {
                continue;
            }
            let twin = format!("{name}-lowload");
            assert!(names.contains(&twin), "{name} has no {twin}");
        }
    }
}
