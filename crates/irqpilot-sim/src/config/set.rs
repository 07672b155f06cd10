//! The `--set key=value` language: a few short aliases (`moderation`, `aim_mode`, `platform`,
//! `seed`, `placement`, `gsim_*`) and any dotted path (`costs.hardirq_us=0.5`, `nic.0.queues=16`,
//! `workload.0.load=0.5`), applied to the scenario as a TOML value and then re-checked.

use super::choices::PlacementPolicy;
use super::error::ConfigError;
use super::schema::Scenario;

impl Scenario {
    /// Applies `--set key=value` edits and re-checks the scenario.
    pub fn with_sets(&self, sets: &[(String, String)]) -> Result<Scenario, ConfigError> {
        let mut value = toml::Value::try_from(self).map_err(|e| ConfigError::Invalid {
            origin: self.name.clone(),
            position: None,
            message: e.to_string(),
        })?;
        for (key, raw) in sets {
            apply_set(&mut value, key, raw)?;
            // Types and unknown keys are checked after each edit so the error names its key;
            // rules across fields (window >= chunk) only once all edits are in.
            let mut typed: Result<Scenario, toml::de::Error> = value.clone().try_into();
            if typed.is_err() && !is_alias(key) && !parse_scalar(raw).is_str() {
                // Text that reads as a number (a CPU list of one CPU, `app_cpus=4`) for a key
                // that takes text.
                let mut text = value.clone();
                let path: Vec<&str> = key.split('.').collect();
                if insert_path(&mut text, &path, toml::Value::String(raw.clone())).is_ok() {
                    if let Ok(sc) = text.clone().try_into::<Scenario>() {
                        value = text;
                        typed = Ok(sc);
                    }
                }
            }
            typed.map_err(|e| ConfigError::BadSet {
                key: key.clone(),
                message: if is_alias(key) {
                    e.to_string()
                } else {
                    super::explain::what(key, e.message().trim_end())
                },
            })?;
        }
        Scenario::from_value(value, &self.name).map_err(|e| match sets {
            [(key, _)] => ConfigError::BadSet {
                key: key.clone(),
                message: e.to_string(),
            },
            _ => e,
        })
    }
}

/// The values `--set moderation=` takes (the binary's `--help` lists the same; a test checks).
pub const MODERATION_VALUES: &[&str] = &[
    "none",
    "static",
    "dim",
    "aim",
    "gsim",
    "gsim+device",
    "irqpilot",
];

/// Whether `key` is one of the short aliases, which set other keys than their own name.
fn is_alias(key: &str) -> bool {
    matches!(key, "platform" | "placement" | "moderation" | "aim_mode") || key.starts_with("gsim_")
}

/// Turns `--set` text into a TOML value: integer, float, boolean, else string.
fn parse_scalar(raw: &str) -> toml::Value {
    if let Ok(i) = raw.parse::<i64>() {
        return toml::Value::Integer(i);
    }
    if let Ok(f) = raw.parse::<f64>() {
        return toml::Value::Float(f);
    }
    match raw {
        "true" => toml::Value::Boolean(true),
        "false" => toml::Value::Boolean(false),
        _ => toml::Value::String(raw.to_string()),
    }
}

fn bad(key: &str, message: impl std::fmt::Display) -> ConfigError {
    ConfigError::BadSet {
        key: key.to_string(),
        message: message.to_string(),
    }
}

fn set_in_each(value: &mut toml::Value, table: &str, field: &str, v: toml::Value) -> usize {
    let Some(arr) = value.get_mut(table).and_then(|t| t.as_array_mut()) else {
        return 0;
    };
    for item in arr.iter_mut() {
        if let Some(t) = item.as_table_mut() {
            t.insert(field.to_string(), v.clone());
        }
    }
    arr.len()
}

/// Applies one `--set`.
fn apply_set(value: &mut toml::Value, key: &str, raw: &str) -> Result<(), ConfigError> {
    let v = parse_scalar(raw);
    match key {
        "seed" => {
            let toml::Value::Integer(i) = v else {
                return Err(bad(key, "expects an integer"));
            };
            insert_path(value, &["seed"], toml::Value::Integer(i)).map_err(|m| bad(key, m))
        }
        "platform" => match raw {
            "limited" | "healthy" => {
                insert_path(value, &["platform", "kind"], v).map_err(|m| bad(key, m))
            }
            _ => Err(bad(key, format!("expects limited or healthy, not {raw:?}"))),
        },
        "placement" => {
            let known: Vec<&str> = PlacementPolicy::ALL.iter().map(|p| p.name()).collect();
            if !known.contains(&raw) {
                return Err(bad(
                    key,
                    format!("expects one of {}, not {raw:?}", known.join(", ")),
                ));
            }
            insert_path(
                value,
                &["placement", "policy"],
                toml::Value::String(raw.into()),
            )
            .map_err(|m| bad(key, m))
        }
        "moderation" if raw == "irqpilot" => {
            if value.get("moderator").is_none() {
                insert_path(
                    value,
                    &["moderator"],
                    toml::Value::Table(toml::map::Map::new()),
                )
                .map_err(|m| bad(key, m))?;
            }
            Ok(())
        }
        "moderation" if raw == "gsim" => {
            // As the GSIM cover letter runs it: the kernel's moderation, the devices' own off.
            set_in_each(
                value,
                "nic",
                "moderation",
                toml::Value::String("none".into()),
            );
            set_in_each(
                value,
                "nvme",
                "moderation",
                toml::Value::String("none".into()),
            );
            insert_path(value, &["gsim", "enabled"], toml::Value::Boolean(true))
                .map_err(|m| bad(key, m))
        }
        "moderation" if raw == "gsim+device" => {
            // Kernel moderation on top of whatever the devices do.
            insert_path(value, &["gsim", "enabled"], toml::Value::Boolean(true))
                .map_err(|m| bad(key, m))
        }
        "gsim_version" => {
            let scale = match raw {
                "3" => 200,
                "4" => 150,
                _ => return Err(bad(key, "expects 3 or 4")),
            };
            insert_path(value, &["gsim", "scale_cpus"], toml::Value::Integer(scale))
                .map_err(|m| bad(key, m))
        }
        k if k.starts_with("gsim_") => {
            let field = &k["gsim_".len()..];
            let toml::Value::Integer(i) = v else {
                return Err(bad(key, "expects an integer"));
            };
            insert_path(value, &["gsim", field], toml::Value::Integer(i)).map_err(|m| bad(key, m))
        }
        "moderation" if !MODERATION_VALUES.contains(&raw) => Err(bad(
            key,
            format!(
                "expects one of {}, not {raw:?}",
                MODERATION_VALUES.join(", ")
            ),
        )),
        "moderation" => {
            let n = set_in_each(value, "nic", "moderation", v.clone());
            let nvme_mode = match raw {
                "static" => Some("static"),
                "none" => Some("none"),
                _ => None,
            };
            let m = match nvme_mode {
                Some(mode) => set_in_each(
                    value,
                    "nvme",
                    "moderation",
                    toml::Value::String(mode.into()),
                ),
                None => value
                    .get("nvme")
                    .and_then(|t| t.as_array())
                    .map_or(0, |a| a.len()),
            };
            if n == 0 && m == 0 {
                return Err(bad(key, "the scenario has no device to moderate"));
            }
            if n == 0 && nvme_mode.is_none() && matches!(raw, "dim" | "aim") {
                return Err(ConfigError::NotApplicable {
                    key: key.into(),
                    value: raw.into(),
                    scenario: value
                        .get("name")
                        .and_then(|n| n.as_str())
                        .unwrap_or("this scenario")
                        .into(),
                    why: format!(
                        "{raw} is a NIC driver's moderation and the machine has no NIC (NVMe drives support none or static)"
                    ),
                });
            }
            if n == 0 && nvme_mode.is_none() {
                return Err(bad(
                    key,
                    format!("NVMe drives support none or static, not {raw:?}"),
                ));
            }
            Ok(())
        }
        "aim_mode" => {
            if set_in_each(value, "nic", "aim_mode", v) == 0 {
                return Err(bad(key, "the scenario has no NIC"));
            }
            Ok(())
        }
        _ => {
            let path: Vec<&str> = key.split('.').collect();
            if path.iter().any(|p| p.is_empty()) {
                return Err(bad(key, "empty path component"));
            }
            insert_path(value, &path, v).map_err(|m| bad(key, m))
        }
    }
}

/// Why a dotted `--set` path does not lead to a value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
enum PathError {
    /// No key at all.
    #[error("empty key")]
    Empty,
    /// A list entry named by something that is not a number.
    #[error("{0:?} is not an index")]
    NotIndex(String),
    /// A list entry past the end of the list.
    #[error("index {index} out of range (0..{len})")]
    OutOfRange {
        /// The index given.
        index: usize,
        /// The list's length.
        len: usize,
    },
    /// A path going on below a plain value.
    #[error("{0:?} is not a table")]
    NotTable(String),
}

/// Sets `path` (table keys, or array indices for arrays of tables) to `v`.
fn insert_path(value: &mut toml::Value, path: &[&str], v: toml::Value) -> Result<(), PathError> {
    let Some((last, parents)) = path.split_last() else {
        return Err(PathError::Empty);
    };
    let index = |p: &str, len: usize| -> Result<usize, PathError> {
        let i: usize = p.parse().map_err(|_| PathError::NotIndex(p.into()))?;
        if i < len {
            Ok(i)
        } else {
            Err(PathError::OutOfRange { index: i, len })
        }
    };
    let mut cur = value;
    for p in parents {
        cur = match cur {
            toml::Value::Table(t) => t
                .entry(p.to_string())
                .or_insert_with(|| toml::Value::Table(toml::map::Map::new())),
            toml::Value::Array(a) => {
                let i = index(p, a.len())?;
                &mut a[i]
            }
            _ => return Err(PathError::NotTable(p.to_string())),
        };
    }
    match cur {
        toml::Value::Table(t) => {
            t.insert(last.to_string(), v);
            Ok(())
        }
        toml::Value::Array(a) => {
            let i = index(last, a.len())?;
            a[i] = v;
            Ok(())
        }
        _ => Err(PathError::NotTable(
            parents.last().map_or_else(String::new, |p| p.to_string()),
        )),
    }
}
