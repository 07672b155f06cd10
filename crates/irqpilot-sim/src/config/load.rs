//! Loading a scenario: TOML text or an edited value, through the schema and every check, with
//! errors placed at their line and column when there is text to place them in.

use super::error::ConfigError;
use super::schema::Scenario;

impl Scenario {
    /// Parses a scenario from TOML text. Errors name the line and column of what is wrong.
    pub fn from_toml(text: &str, origin: &str) -> Result<Scenario, ConfigError> {
        let s: Scenario = toml::from_str(text).map_err(|e| {
            let (position, message) = super::explain::explain(text, &e);
            ConfigError::Invalid {
                origin: origin.into(),
                position,
                message,
            }
        })?;
        s.check(origin, Some(text))?;
        Ok(s)
    }

    pub(super) fn from_value(value: toml::Value, origin: &str) -> Result<Scenario, ConfigError> {
        let s: Scenario = value
            .try_into()
            .map_err(|e: toml::de::Error| ConfigError::Invalid {
                origin: origin.into(),
                position: None,
                message: e.to_string(),
            })?;
        s.check(origin, None)?;
        Ok(s)
    }

    /// Every check beyond the schema: ranges (errors name the key, and with the file's text
    /// its position), then the rules across fields.
    fn check(&self, origin: &str, text: Option<&str>) -> Result<(), ConfigError> {
        if let Err((key, message)) = super::ranges::check_ranges(self) {
            return Err(ConfigError::Invalid {
                origin: origin.into(),
                position: text.and_then(|t| crate::locate::locate(t, &key)),
                message,
            });
        }
        self.validate().map_err(|rule| ConfigError::Inconsistent {
            origin: origin.into(),
            position: text.and_then(|t| crate::locate::locate(t, &rule.key)),
            rule: Box::new(rule),
        })
    }
}
