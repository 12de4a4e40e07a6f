//! `--html FILE` of `tailcut report` and `tailcut replay`: one self-contained HTML file
//! (no script, no external asset) with what the command prints (its notes and tables,
//! as HTML tables) and its plot inlined as SVG, for sharing a policy decision.
//!
//! A command writes its output through a [`Tee`]: each heading, note and table is
//! printed as before and, with `--html`, also kept for the file, so the two never
//! disagree.

use crate::table::Table;
use anyhow::Context;
use std::path::Path;
use tailcut_gateway::escape_html as escape;

/// Prints a command's output and, for `--html`, keeps it as HTML.
#[derive(Debug)]
pub struct Tee {
    /// Whether to print (false when the command prints JSON or CSV instead).
    print: bool,
    /// The HTML body so far, when an HTML file is wanted.
    html: Option<String>,
}

impl Tee {
    /// Prints when `print`; keeps HTML when `html`.
    pub fn new(print: bool, html: bool) -> Tee {
        Tee { print, html: html.then(String::new) }
    }

    /// A section title (printed as given, blank lines included).
    pub fn heading(&mut self, s: &str) {
        if self.print {
            println!("{s}");
        }
        if let Some(h) = &mut self.html {
            h.push_str(&format!("<h2>{}</h2>\n", escape(s.trim())));
        }
    }

    /// A line of explanation.
    pub fn note(&mut self, s: &str) {
        if self.print {
            println!("{s}");
        }
        if let Some(h) = &mut self.html {
            h.push_str(&format!("<p>{}</p>\n", escape(s.trim())));
        }
    }

    /// A table.
    pub fn table(&mut self, t: &Table) {
        if self.print {
            print!("{}", t.render());
        }
        if let Some(h) = &mut self.html {
            h.push_str(&t.to_html());
        }
    }

    /// A figure under a heading (HTML only: the command prints neither): the SVG
    /// document inlined, its XML declaration dropped.
    pub fn figure(&mut self, heading: &str, svg: &str) {
        if let Some(h) = &mut self.html {
            let start = svg.find("<svg").unwrap_or(0);
            h.push_str(&format!("<h2>{}</h2>\n<figure>", escape(heading)));
            h.push_str(&svg[start..]);
            h.push_str("</figure>\n");
        }
    }

    /// Writes the HTML file (nothing without `--html`).
    pub fn write(self, title: &str, subtitle: &str, path: &Path) -> anyhow::Result<()> {
        let Some(body) = self.html else { return Ok(()) };
        let page = format!(
            "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title>\
             <meta name=\"generator\" content=\"tailcut {v}\"><style>{STYLE}</style></head>\n<body>\
             <h1>{t}</h1><p class=\"muted\">{s}</p>\n{body}</body></html>\n",
            t = escape(title),
            s = escape(subtitle),
            v = env!("CARGO_PKG_VERSION"),
        );
        std::fs::write(path, page).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("tailcut: wrote {}", path.display());
        Ok(())
    }
}

const STYLE: &str = "body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1400px;padding:0 1em;color:#1d232a}\
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:1.8em}\
table{border-collapse:collapse;margin:.4em 0 1em}\
th,td{border:1px solid #d8dee4;padding:3px 8px;text-align:left}\
th{background:#eef1f4}td.n{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}\
tbody tr:nth-child(even){background:#f6f8fa}.muted{color:#687480}\
figure{margin:1em 0}figure svg{max-width:100%;height:auto}";

/// Renders a plot with `draw` (which writes an SVG file) and returns the SVG text: from
/// `keep` when the command also writes the plot there (`--plot`), otherwise from a
/// temporary file next to `html`, removed afterwards.
pub fn svg_via_file(html: &Path, keep: Option<&Path>, draw: impl FnOnce(&Path) -> anyhow::Result<()>) -> anyhow::Result<String> {
    if let Some(k) = keep {
        return std::fs::read_to_string(k).with_context(|| format!("reading {}", k.display()));
    }
    let tmp = html.with_extension(format!("{}.svg", std::process::id()));
    let drawn = draw(&tmp);
    let text = drawn.and_then(|()| std::fs::read_to_string(&tmp).with_context(|| format!("reading {}", tmp.display())));
    let _ = std::fs::remove_file(&tmp);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tee_keeps_escaped_tables_notes_and_an_inline_svg() {
        let dir = std::env::temp_dir().join(format!("tailcut-html-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut tee = Tee::new(false, true);
        tee.heading("\nArms <all>");
        let mut t = Table::new(&["arm", "p95 s"]);
        t.row(vec!["hedge:a->b".into(), "12.5".into()]);
        tee.table(&t);
        tee.note("a & b");
        tee.figure("Plot", "<?xml version=\"1.0\"?>\n<svg width=\"10\" height=\"10\"><circle r=\"1\"/></svg>");
        let path = dir.join("r.html");
        tee.write("Report", "from x.jsonl", &path).unwrap();
        let page = std::fs::read_to_string(&path).unwrap();
        assert!(page.contains("<h2>Arms &lt;all&gt;</h2>"), "{page}");
        assert!(page.contains("<td>hedge:a-&gt;b</td><td class=\"n\">12.5</td>"), "{page}");
        assert!(page.contains("<p>a &amp; b</p>"), "{page}");
        assert!(page.contains("<h2>Plot</h2>\n<figure><svg width=\"10\"") && !page.contains("<?xml"), "{page}");
        assert!(!page.contains("<script") && !page.contains("http://") && !page.contains("https://"), "self-contained: {page}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
