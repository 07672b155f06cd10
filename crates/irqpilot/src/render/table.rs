//! Aligned text tables: columns padded to their widest cell, two spaces apart, numbers
//! right-aligned, the last column never padded (no trailing spaces).

/// How a column is aligned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    /// Text.
    Left,
    /// Numbers.
    Right,
}

/// A table under construction.
#[derive(Debug, Default)]
pub struct Table {
    header: Vec<String>,
    align: Vec<Align>,
    rows: Vec<Vec<String>>,
    indent: usize,
}

impl Table {
    /// A table with these column titles and alignments.
    pub fn new(columns: &[(&str, Align)]) -> Table {
        Table {
            header: columns.iter().map(|(t, _)| t.to_string()).collect(),
            align: columns.iter().map(|(_, a)| *a).collect(),
            rows: Vec::new(),
            indent: 0,
        }
    }

    /// Indents every line by `n` spaces.
    pub fn indent(mut self, n: usize) -> Table {
        self.indent = n;
        self
    }

    /// Adds a row (missing cells are empty, extra cells ignored).
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Whether no row was added.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The table as text, one line per row after the header, each ending in `\n`.
    pub fn render(&self) -> String {
        let n = self.header.len();
        let cell = |r: &Vec<String>, i: usize| r.get(i).map_or("", String::as_str).to_string();
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (i, w) in widths.iter_mut().enumerate() {
                *w = (*w).max(cell(r, i).chars().count());
            }
        }
        let mut out = String::new();
        for r in std::iter::once(&self.header).chain(&self.rows) {
            let mut line = " ".repeat(self.indent);
            for (i, width) in widths.iter().enumerate() {
                let text = cell(r, i);
                let pad = width.saturating_sub(text.chars().count());
                let last = i + 1 == n;
                match self.align[i] {
                    Align::Right => {
                        line.push_str(&" ".repeat(pad));
                        line.push_str(&text);
                    }
                    Align::Left => {
                        line.push_str(&text);
                        if !last {
                            line.push_str(&" ".repeat(pad));
                        }
                    }
                }
                if !last {
                    line.push_str("  ");
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned() {
        let mut t = Table::new(&[
            ("IRQ", Align::Left),
            ("TOTAL", Align::Right),
            ("NAME", Align::Left),
        ])
        .indent(2);
        t.row(vec!["24".into(), "1".into(), "ACPI:Ged".into()]);
        t.row(vec!["LOC".into(), "156k".into(), String::new()]);
        assert_eq!(
            t.render(),
            "  IRQ  TOTAL  NAME\n  24       1  ACPI:Ged\n  LOC   156k\n"
        );
    }
}
