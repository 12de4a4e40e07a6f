//! Plain-text tables with aligned columns (numbers right-aligned), every cell printed
//! with control characters escaped.

/// A table being built.
#[derive(Debug, Default)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column titles.
    pub fn new(header: &[&str]) -> Table {
        Table { header: header.iter().map(|s| s.to_string()).collect(), rows: Vec::new() }
    }

    /// Adds a row. Cells hold names read from files (providers, policies, request ids),
    /// so control characters are written escaped ([`tailcut_core::text::escaped`]): a name
    /// cannot recolour the terminal, move the cursor or forge a line.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells.into_iter().map(|c| tailcut_core::text::escaped(&c).into_owned()).collect());
    }

    /// Renders with two spaces between columns; the first column is left-aligned.
    pub fn render(&self) -> String {
        let cols = self.header.len();
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate().take(cols) {
                widths[i] = widths[i].max(c.chars().count());
            }
        }
        let line = |cells: &[String]| {
            let mut out = String::new();
            for (i, c) in cells.iter().enumerate().take(cols) {
                let pad = widths[i] - c.chars().count();
                if i > 0 {
                    out.push_str("  ");
                }
                if i == 0 {
                    out.push_str(c);
                    out.push_str(&" ".repeat(pad));
                } else {
                    out.push_str(&" ".repeat(pad));
                    out.push_str(c);
                }
            }
            out.trim_end().to_string()
        };
        let mut s = line(&self.header);
        s.push('\n');
        s.push_str(&widths.iter().map(|w| "─".repeat(*w)).collect::<Vec<_>>().join("  "));
        s.push('\n');
        for r in &self.rows {
            s.push_str(&line(r));
            s.push('\n');
        }
        s
    }

    /// The same table as an HTML `<table>` (cells escaped; as in [`Table::render`], the
    /// first column left-aligned and the others right-aligned).
    pub fn to_html(&self) -> String {
        let esc = tailcut_gateway::escape_html;
        let mut s = String::from("<table><thead><tr>");
        for h in &self.header {
            s.push_str(&format!("<th>{}</th>", esc(h)));
        }
        s.push_str("</tr></thead><tbody>");
        for r in &self.rows {
            s.push_str("<tr>");
            for (i, c) in r.iter().enumerate().take(self.header.len()) {
                s.push_str(if i == 0 { "<td>" } else { "<td class=\"n\">" });
                s.push_str(&esc(c));
                s.push_str("</td>");
            }
            s.push_str("</tr>");
        }
        s.push_str("</tbody></table>\n");
        s
    }
}

/// Seconds with one decimal, or `-` for +∞.
pub fn secs(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.1}")
    } else {
        "-".into()
    }
}

/// `k/n (lo%–hi%)`.
pub fn miss_ci(k: u64, n: u64) -> String {
    let (lo, hi) = tailcut_stats::wilson(k, n);
    format!("{k}/{n} ({:.0}%–{:.0}%)", lo * 100.0, hi * 100.0)
}
