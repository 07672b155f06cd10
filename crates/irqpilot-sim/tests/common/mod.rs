//! Helpers the twin's test files share: `--set` pairs and built-in scenarios with them.
#![allow(dead_code, clippy::unwrap_used)]

use irqpilot_sim::Scenario;
use irqpilot_sim::scenarios::builtin;

/// `--set KEY=VALUE` pairs as the scenario API takes them.
pub fn sets(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The built-in scenario `name` with `pairs` set.
pub fn builtin_with(name: &str, pairs: &[(&str, &str)]) -> Scenario {
    builtin(name)
        .unwrap()
        .unwrap()
        .with_sets(&sets(pairs))
        .unwrap()
}
