//! serde's errors on a scenario's text, given as the other checks give theirs: the key as `--set`
//! spells it, at its line and column, with its value and what it must be
//! (`f.toml:12:1: workload.0.start_ms = -4: must be a whole number >= 0`).

use super::ranges::whole_says;
use super::schema::WorkloadCfg;
use crate::locate::{Placed, Position, place_of, places, position};

/// Where in `text` serde's error `e` is, and what to say.
pub(super) fn explain(text: &str, e: &toml::de::Error) -> (Option<Position>, String) {
    let message = e.message().trim_end();
    let Some(span) = e.span() else {
        return (None, message.to_string());
    };
    let at_span = (Some(position(text, span.start)), message.to_string());
    let Some(places) = places(text) else {
        return at_span;
    };
    let Some(mut place) = place_of(&places, span) else {
        return at_span;
    };
    if message.starts_with("missing field") {
        // About a key that is not there: the table's place says where it belongs.
        return at_span;
    }
    if let Some(inner) = in_workload(text, &places, place, message) {
        place = inner;
    }
    let at = Some(position(text, place.key.start));
    if !place.scalar {
        return (at, format!("{}: {message}", place.path));
    }
    let value = text.get(place.value.clone()).unwrap_or_default();
    (
        at,
        format!("{} = {value}: {}", place.path, what(&place.path, message)),
    )
}

/// The key of a workload an error is about. serde reads a workload whole before it knows its
/// kind (`kind` is an internal tag), so an error inside one is placed at the list of workloads
/// (the first `[[workload]]` header, or the whole inline list): this finds the key that its
/// workload's kind refuses on its own with the same complaint (else any it refuses), in the
/// order of the text.
fn in_workload<'p>(
    text: &str,
    places: &'p [Placed],
    place: &Placed,
    message: &str,
) -> Option<&'p Placed> {
    if place.path.split('.').next() != Some("workload") || place.path.split('.').count() > 2 {
        return None;
    }
    let doc: toml::Table = toml::from_str(text).ok()?;
    let items = doc.get("workload")?.as_array()?;
    let mut refused = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let Some(item) = item.as_table() else {
            continue;
        };
        let Some(kind) = item.get("kind") else {
            continue;
        };
        let prefix = format!("workload.{i}.");
        for p in places.iter().filter(|p| {
            p.path
                .strip_prefix(&prefix)
                .is_some_and(|k| k != "kind" && !k.contains('.'))
        }) {
            let key = &p.path[prefix.len()..];
            let Some(value) = item.get(key) else {
                continue;
            };
            let mut alone = toml::Table::new();
            alone.insert("kind".into(), kind.clone());
            alone.insert(key.into(), value.clone());
            if let Err(e) = toml::Value::Table(alone).try_into::<WorkloadCfg>() {
                if !e.message().starts_with("missing field") {
                    refused.push((e.message().trim_end() == message, p));
                }
            }
        }
    }
    refused
        .iter()
        .find(|(same, _)| *same)
        .or(refused.first())
        .map(|(_, p)| *p)
}

/// What the value at `path` must be, from serde's complaint about it (`invalid value: integer
/// `-1`, expected u64`); the complaint itself where it says more than a range would.
pub(super) fn what(path: &str, message: &str) -> String {
    if let Some(rest) = message.strip_prefix("unknown field `") {
        return match rest.split_once("`, ") {
            Some((_, expected)) => format!("unknown key, {expected}"),
            None => "unknown key".to_string(),
        };
    }
    let expected = message.rsplit_once(", expected ").map(|(_, e)| e);
    let pattern: Vec<&str> = path
        .split('.')
        .map(|p| if p.parse::<usize>().is_ok() { "N" } else { p })
        .collect();
    match expected {
        Some("u8") => whole_says(&pattern.join("."), u8::MAX.into()),
        Some("u16") => whole_says(&pattern.join("."), u16::MAX.into()),
        Some("u32") => whole_says(&pattern.join("."), u32::MAX.into()),
        Some("u64" | "usize") => whole_says(&pattern.join("."), u64::MAX),
        Some("f64" | "f32") => "must be a number".to_string(),
        Some("a boolean") => "must be true or false".to_string(),
        Some("a string") => "must be a string".to_string(),
        _ => message.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::what;

    #[test]
    fn serde_s_complaints_become_ranges() {
        assert_eq!(
            what("duration_ms", "invalid value: integer `-1`, expected u64"),
            "must be a whole number >= 1"
        );
        assert_eq!(
            what(
                "workload.3.start_ms",
                "invalid value: integer `-1`, expected u64"
            ),
            "must be a whole number >= 0"
        );
        assert_eq!(
            what(
                "nic.0.aim_mode",
                "invalid value: integer `300`, expected u8"
            ),
            "must be a whole number in 0-2"
        );
        assert_eq!(
            what("nic.0.node", "invalid type: string \"x\", expected u32"),
            "must be a whole number in 0-4294967295"
        );
        assert_eq!(
            what("costs.x", "unknown field `x`, expected `a` or `b`"),
            "unknown key, expected `a` or `b`"
        );
        assert_eq!(
            what(
                "gsim.enabled",
                "invalid type: integer `1`, expected a boolean"
            ),
            "must be true or false"
        );
        assert_eq!(what("k", "something else"), "something else");
    }
}
