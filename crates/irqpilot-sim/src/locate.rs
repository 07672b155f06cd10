//! Where a key sits in a scenario's TOML text, so that an error names its line and column as
//! well as its key.

use serde::Serialize;
use std::ops::Range;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// A place in a scenario file, 1-based.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Position {
    /// Line.
    pub line: usize,
    /// Column, in characters.
    pub column: usize,
}

impl std::fmt::Display for Position {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// Line and column of byte offset `at` in `text`.
pub fn position(text: &str, at: usize) -> Position {
    let at = at.min(text.len());
    let before = text.get(..at).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = text.get(line_start..at).map_or(0, |s| s.chars().count()) + 1;
    Position { line, column }
}

/// A key of a scenario's text, or an element of a list, and where it and its value are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placed {
    /// Dotted as `--set` spells it, list elements by position (`workload.1.think_us`).
    pub path: String,
    /// Bytes of the key; of a list element, the element (an inline table, or the `[[...]]`
    /// header of its table).
    pub key: Range<usize>,
    /// Bytes of the value; of a table under a header, the header.
    pub value: Range<usize>,
    /// Whether the value is one value (a number, a string, a list of those), not a table or a
    /// list of tables.
    pub scalar: bool,
}

/// Every key and list element of `text` with its place, in the order of the text. `None` when
/// the text does not parse.
pub fn places(text: &str) -> Option<Vec<Placed>> {
    let root = DeTable::parse(text).ok()?;
    let mut out = Vec::new();
    walk_table(root.get_ref(), "", &mut out);
    out.sort_by_key(|p| (p.key.start, p.path.len()));
    Some(out)
}

fn join(prefix: &str, part: &str) -> String {
    if prefix.is_empty() {
        part.to_string()
    } else {
        format!("{prefix}.{part}")
    }
}

fn walk_table(table: &DeTable<'_>, prefix: &str, out: &mut Vec<Placed>) {
    for (key, value) in table.iter() {
        let path = join(prefix, key.get_ref());
        walk_value(value, path, key.span(), out);
    }
}

fn walk_value(
    value: &Spanned<DeValue<'_>>,
    path: String,
    key: Range<usize>,
    out: &mut Vec<Placed>,
) {
    let scalar = match value.get_ref() {
        DeValue::Table(_) => false,
        DeValue::Array(items) => !items
            .iter()
            .any(|i| matches!(i.get_ref(), DeValue::Table(_))),
        _ => true,
    };
    out.push(Placed {
        path: path.clone(),
        key,
        value: value.span(),
        scalar,
    });
    match value.get_ref() {
        DeValue::Table(t) => walk_table(t, &path, out),
        DeValue::Array(items) if !scalar => {
            for (i, item) in items.iter().enumerate() {
                walk_value(item, format!("{path}.{i}"), item.span(), out);
            }
        }
        DeValue::Array(items) => {
            // A list of values: each is placed too (`placement.irqpilot.ban_names.1`).
            for (i, item) in items.iter().enumerate() {
                out.push(Placed {
                    path: format!("{path}.{i}"),
                    key: item.span(),
                    value: item.span(),
                    scalar: true,
                });
            }
        }
        _ => {}
    }
}

/// The place an error spanning `span` is about: the deepest key or list element whose key or
/// value holds the span (a key left at its default holds none). `None` for an empty span.
pub fn place_of(places: &[Placed], span: Range<usize>) -> Option<&Placed> {
    if span.is_empty() {
        return None;
    }
    let holds = |r: &Range<usize>| r.start <= span.start && span.end <= r.end;
    places
        .iter()
        .filter(|p| holds(&p.key) || holds(&p.value))
        .max_by_key(|p| (p.path.split('.').count(), std::cmp::Reverse(p.value.len())))
}

/// The position of the key at `path` (dotted as `--set` spells it: `costs.hardirq_us`,
/// `workload.1.think_us`), or of the deepest part of it the text holds (a key left at its
/// default is reported where its table starts). `None` when the text does not parse.
pub fn locate(text: &str, path: &str) -> Option<Position> {
    let places = places(text)?;
    let mut prefix = path;
    loop {
        if let Some(p) = places.iter().find(|p| p.path == prefix) {
            return Some(position(text, p.key.start));
        }
        prefix = prefix.rsplit_once('.')?.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "name = \"t\"\n[costs]\nhardirq_us = -1\n\n[[workload]]\nkind = \"rpc\"\n\n[[workload]]\nkind = \"rpc\"\n  think_us = 5\n";

    #[test]
    fn keys_tables_and_array_items() {
        assert_eq!(
            locate(TEXT, "costs.hardirq_us"),
            Some(Position { line: 3, column: 1 })
        );
        assert_eq!(
            locate(TEXT, "workload.1.think_us"),
            Some(Position {
                line: 10,
                column: 3
            })
        );
        // A key the text leaves at its default: where its table is.
        assert_eq!(locate(TEXT, "costs.indirect_us").map(|p| p.line), Some(2));
        assert_eq!(locate(TEXT, "nothing.here"), None);
        assert_eq!(position("ab\ncd", 4), Position { line: 2, column: 2 });
    }
}
