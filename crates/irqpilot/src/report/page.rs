//! One self-contained HTML page: inline CSS, the plots as inline SVG, tables; no script, no
//! external resource, so it opens anywhere and pastes into a ticket as one file.

/// `s` with HTML's special characters escaped.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "
body { font-family: sans-serif; margin: 24px auto; max-width: 1040px; color: #222; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 18px; margin-top: 32px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
p.note { color: #555; font-size: 13px; margin: 4px 0 8px; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0; }
th, td { text-align: left; padding: 3px 10px 3px 0; vertical-align: top; }
th { border-bottom: 1px solid #bbb; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.warning td.sev { color: #b00020; font-weight: bold; }
tr.info td.sev { color: #1f5fa8; }
figure { margin: 8px 0 16px; }
figure svg { max-width: 100%; height: auto; }
figcaption { color: #555; font-size: 13px; }
details summary { cursor: pointer; font-weight: bold; margin: 8px 0; }
footer { color: #777; font-size: 12px; margin-top: 40px; }
";

/// A page being built.
#[derive(Debug, Default)]
pub struct Page {
    title: String,
    body: String,
}

impl Page {
    /// A page titled `title`.
    pub fn new(title: &str) -> Page {
        let mut p = Page {
            title: title.to_string(),
            body: String::new(),
        };
        p.body.push_str(&format!("<h1>{}</h1>\n", escape(title)));
        p
    }

    /// A paragraph of explanation.
    pub fn note(&mut self, text: &str) {
        self.body
            .push_str(&format!("<p class=\"note\">{}</p>\n", escape(text)));
    }

    /// A section heading.
    pub fn section(&mut self, id: &str, heading: &str) {
        self.body.push_str(&format!(
            "<h2 id=\"{}\">{}</h2>\n",
            escape(id),
            escape(heading)
        ));
    }

    /// A plot (SVG text from [`super::plots`]) with a caption.
    pub fn figure(&mut self, id: &str, svg: &str, caption: &str) {
        self.body.push_str(&format!(
            "<figure id=\"{}\" class=\"plot\">\n{svg}\n<figcaption>{}</figcaption>\n</figure>\n",
            escape(id),
            escape(caption)
        ));
    }

    /// A table; a cell that starts with a digit, `-` or `+` followed by a digit is aligned
    /// right. `row_class` gives each row a CSS class (e.g. its severity).
    pub fn table(&mut self, id: &str, header: &[&str], rows: &[(String, Vec<String>)]) {
        let mut t = format!("<table id=\"{}\">\n<tr>", escape(id));
        for h in header {
            t.push_str(&format!("<th>{}</th>", escape(h)));
        }
        t.push_str("</tr>\n");
        for (class, cells) in rows {
            t.push_str(&format!("<tr class=\"{}\">", escape(class)));
            for (i, c) in cells.iter().enumerate() {
                let numeric = c.chars().next().is_some_and(|x| x.is_ascii_digit())
                    || (c.starts_with(['-', '+'])
                        && c[1..].starts_with(|x: char| x.is_ascii_digit()));
                let class = if i == 0 && !class.is_empty() {
                    " class=\"sev\""
                } else if numeric {
                    " class=\"num\""
                } else {
                    ""
                };
                t.push_str(&format!("<td{class}>{}</td>", escape(c)));
            }
            t.push_str("</tr>\n");
        }
        t.push_str("</table>\n");
        self.body.push_str(&t);
    }

    /// Raw HTML (already escaped), e.g. `<details>` around a group.
    pub fn raw(&mut self, html: &str) {
        self.body.push_str(html);
    }

    /// The whole document.
    pub fn finish(self, footer: &str) -> String {
        format!(
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
             <meta name=\"generator\" content=\"irqpilot {}\">\n<title>{}</title>\n\
             <style>{STYLE}</style>\n</head>\n<body>\n{}<footer>{}</footer>\n</body>\n</html>\n",
            env!("CARGO_PKG_VERSION"),
            escape(&self.title),
            self.body,
            escape(footer)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped() {
        assert_eq!(
            escape("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        let mut p = Page::new("t<1>");
        p.table("x", &["a"], &[("warning".into(), vec!["<b>".into()])]);
        let html = p.finish("f");
        assert!(html.contains("<title>t&lt;1&gt;</title>"));
        assert!(html.contains("<td class=\"sev\">&lt;b&gt;</td>"));
        assert!(!html.contains("<script"));
    }
}
