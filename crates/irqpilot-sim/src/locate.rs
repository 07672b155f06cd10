//! Where a key sits in a scenario's TOML text, so that an error names its line and column as
//! well as its key.

use serde::Serialize;
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

/// The position of the key at `path` (dotted as `--set` spells it: `costs.hardirq_us`,
/// `workload.1.think_us`), or of the deepest part of it the text holds (a key left at its
/// default is reported where its table starts). `None` when the text does not parse.
pub fn locate(text: &str, path: &str) -> Option<Position> {
    let root = DeTable::parse(text).ok()?;
    let mut table: &DeTable<'_> = root.get_ref();
    let mut found: Option<usize> = None;
    let mut parts = path.split('.').peekable();
    while let Some(part) = parts.next() {
        let Some((key, value)) = table.get_key_value(part) else {
            break;
        };
        found = Some(key.span().start);
        let mut value = value;
        // Arrays of tables are indexed by the next part.
        while let DeValue::Array(items) = value.get_ref() {
            let Some(item) = parts
                .peek()
                .and_then(|p| p.parse::<usize>().ok())
                .and_then(|i| items.get(i))
            else {
                return found.map(|at| position(text, at));
            };
            parts.next();
            found = Some(item.span().start);
            value = item;
        }
        match value.get_ref() {
            DeValue::Table(t) => table = t,
            _ => break,
        }
    }
    found.map(|at| position(text, at))
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
