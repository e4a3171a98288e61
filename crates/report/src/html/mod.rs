//! The self-contained HTML page: text and tables rendered (escaped) here, charts drawn in the browser by
//! the inlined uPlot from a JSON block. The page loads nothing: no URL appears in it, and a
//! Content-Security-Policy forbids any fetch, so a stray reference fails loudly instead of leaking.
use std::fmt::Write;

use serde::Serialize;

use crate::document::chart::Chart;
use crate::document::flame::{FlameGraph, SiteTable};
use crate::document::ticks::Scale;
use crate::document::{Block, Document, Table};
use crate::format::format_value;
mod escape;
mod intervals;

const UPLOT_JS: &str = include_str!("../../assets/uPlot.iife.min.js");
const UPLOT_CSS: &str = include_str!("../../assets/uPlot.min.css");
const PAGE_JS: &str = include_str!("page.js");
const SORT_JS: &str = include_str!("sort.js");
const FLAME_JS: &str = include_str!("flame.js");
const WATCH_JS: &str = include_str!("watch.js");
const PAGE_CSS: &str = include_str!("page.css");
const UPLOT_LICENSE: &str = include_str!("../../assets/uPlot.LICENSE");

const CSP: &str = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
                   img-src data:; connect-src 'none'; base-uri 'none'; form-action 'none'";

#[derive(Serialize)]
struct PageData<'a> {
    charts: Vec<ChartData<'a>>,
    flames: Vec<&'a FlameGraph>,
}

/// A chart as the page draws it: its data and the axes' extent and round ticks (`document::ticks`),
/// so the page, the figures and the tests see the same ticks.
#[derive(Serialize)]
struct ChartData<'a> {
    #[serde(flatten)]
    chart: &'a Chart,
    x_scale: Scale,
    y_scale: Scale,
}

/// Renders the document as one HTML page.
pub fn render(doc: &Document) -> Result<String, serde_json::Error> {
    let data = escape::json_for_script(&PageData {
        charts: doc
            .charts()
            .map(|chart| ChartData {
                chart,
                x_scale: chart.x_scale(),
                y_scale: chart.y_scale(),
            })
            .collect(),
        flames: doc.flames().collect(),
    })?;
    let mut out = String::with_capacity(UPLOT_JS.len() + data.len() + 64 * 1024);
    let title = escape::html(&doc.title);
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{title}</title>\n<script>\n{WATCH_JS}</script>\n\
         <style>\n{UPLOT_CSS}\n{PAGE_CSS}\n</style>\n</head>\n<body>\n\
         <header><h1>{title}</h1><nav>"
    );
    for s in &doc.sections {
        let _ = write!(
            out,
            "<a href=\"#{}\">{}</a> ",
            escape::html(&s.id),
            escape::html(&s.title)
        );
    }
    out.push_str("</nav></header>\n<main>\n");
    for s in &doc.sections {
        let _ = writeln!(
            out,
            "<section id=\"{}\">\n<h2>{}</h2>",
            escape::html(&s.id),
            escape::html(&s.title)
        );
        for b in &s.blocks {
            block(&mut out, b);
        }
        out.push_str("</section>\n");
    }
    out.push_str(
        "</main>\n<footer>Made by alloclens. Charts: uPlot (MIT licence, below); drag to zoom, \
         double-click to reset, click a legend entry to hide or show its line.</footer>\n\
         <pre id=\"render-status\" hidden></pre>\n",
    );
    let _ = write!(
        out,
        "<script type=\"application/json\" id=\"report-data\">{data}</script>\n<script>\n/* uPlot v1.6.32\n{}*/\n",
        UPLOT_LICENSE.replace("*/", "* /")
    );
    // The library's banner names its home page; the page must reference no URL at all.
    out.push_str(strip_banner(UPLOT_JS));
    out.push_str("\n</script>\n<script>\n");
    // One block with the page's script: flame graphs first, so the render status it writes counts them.
    out.push_str(FLAME_JS);
    out.push_str(SORT_JS);
    out.push('\n');
    out.push_str(PAGE_JS);
    out.push_str("\n</script>\n</body>\n</html>\n");
    Ok(out)
}

fn strip_banner(js: &str) -> &str {
    if js.starts_with("/*!") {
        if let Some(end) = js.find("*/") {
            return &js[end + 2..];
        }
    }
    js
}

fn block(out: &mut String, b: &Block) {
    match b {
        Block::Paragraph(t) => {
            let _ = writeln!(out, "<p>{}</p>", escape::html(t));
        }
        Block::Code(t) => {
            let _ = writeln!(out, "<pre class=\"code\">{}</pre>", escape::html(t));
        }
        Block::Warning(t) => {
            let _ = writeln!(out, "<p class=\"warning\">⚠ {}</p>", escape::html(t));
        }
        Block::Facts(facts) => {
            out.push_str("<dl class=\"facts\">\n");
            for (k, v) in facts {
                let _ = writeln!(
                    out,
                    "<dt>{}</dt><dd>{}</dd>",
                    escape::html(k),
                    escape::html(v)
                );
            }
            out.push_str("</dl>\n");
        }
        Block::Table(t) => table(out, t),
        Block::Flame(f) => {
            let _ = writeln!(
                out,
                "<div class=\"flame\" id=\"{id}\" data-flame=\"{id}\"><h3>{}</h3></div>",
                escape::html(&f.title),
                id = escape::html(&f.id)
            );
        }
        Block::Sites(t) => site_table(out, t),
        Block::Intervals(plot) => intervals::render(out, plot),
        Block::Chart(c) => {
            let _ = writeln!(
                out,
                "<div class=\"chart\" data-chart=\"{}\"></div>",
                escape::html(&c.id)
            );
        }
    }
}

fn table(out: &mut String, t: &Table) {
    // Every table sorts by a click on its header (sort.js).
    out.push_str("<table class=\"sortable\">\n");
    if let Some(c) = &t.caption {
        let _ = writeln!(out, "<caption>{}</caption>", escape::html(c));
    }
    out.push_str("<thead><tr>");
    for h in &t.headers {
        let _ = write!(out, "<th>{}</th>", escape::html(h));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for row in &t.rows {
        out.push_str("<tr>");
        for cell in row {
            if is_figure(cell) {
                let _ = write!(out, "<td>{}</td>", escape::html(cell));
            } else {
                let _ = write!(out, "<td class=\"text\">{}</td>", escape::html(cell));
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table>\n");
}

/// Whether a cell reads as a figure ("1.5 MiB", "3/3", "—"): right-aligned on one line; other cells
/// (commands, names, paths) are text, left-aligned and wrapped so that tables fit the page.
fn is_figure(cell: &str) -> bool {
    cell.chars().count() <= 32
        && cell
            .chars()
            .next()
            .is_none_or(|c| c.is_ascii_digit() || "-+—.".contains(c))
}

/// The table's cells carry their numbers (`data-v`) for sorting in the page; a site's name is a button
/// that searches the linked flame graphs for it.
fn site_table(out: &mut String, t: &SiteTable) {
    let _ = writeln!(
        out,
        "<table class=\"sites\" id=\"{}\" data-flames=\"{}\">",
        escape::html(&t.id),
        escape::html(&t.flames.join(" "))
    );
    if let Some(c) = &t.caption {
        let _ = writeln!(out, "<caption>{}</caption>", escape::html(c));
    }
    let _ = write!(
        out,
        "<thead><tr><th>#</th><th>{}</th>",
        escape::html(&t.site_label)
    );
    for c in &t.columns {
        let _ = write!(
            out,
            "<th class=\"sortable\" title=\"click to sort\">{}</th>",
            escape::html(&c.label)
        );
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for (rank, row) in t.rows.iter().enumerate() {
        let _ = write!(
            out,
            "<tr><td data-v=\"{}\">{}</td><td class=\"site\"><button type=\"button\" data-find=\"{name}\" \
             title=\"find in the flame graphs\">{name}</button>",
            rank + 1,
            rank + 1,
            name = escape::html(&row.name)
        );
        if let Some(d) = &row.detail {
            let _ = write!(out, "<div class=\"detail\">{}</div>", escape::html(d));
        }
        out.push_str("</td>");
        for (c, v) in t.columns.iter().zip(&row.values) {
            let _ = write!(
                out,
                "<td data-v=\"{v}\">{}</td>",
                escape::html(&match c.decimals {
                    Some(d) => format!("{v:.d$}"),
                    None => format_value(c.unit, *v),
                })
            );
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table>\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::document::chart::{Axis, Emphasis, Line, Unit};
    use crate::document::Section;

    fn hostile_doc() -> Document {
        let mut s = Section::new("s", "<b>section</b>");
        s.push(Block::Code("prog '<script>alert(1)</script>'".into()));
        s.push_chart(Chart::from_lines(
            "c1",
            "x",
            Axis::new("t", Unit::Seconds),
            Axis::new("b", Unit::Bytes),
            vec![Line {
                label: "</script><script>alert(2)</script>".into(),
                points: vec![(0.0, 1.0), (1.0, 2.0)],
                color: "#000000".into(),
                emphasis: Emphasis::Bold,
            }],
        ));
        Document {
            title: "t<i>".into(),
            sections: vec![s],
        }
    }

    #[test]
    fn user_text_never_becomes_markup() {
        let html = render(&hostile_doc()).unwrap();
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(!html.contains("<script>alert"));
        assert!(html.contains("\\u003c/script\\u003e\\u003cscript\\u003ealert(2)"));
        assert_eq!(
            html.matches("</script>").count(),
            4,
            "only our own blocks close"
        );
    }

    #[test]
    fn the_page_references_no_url() {
        let html = render(&hostile_doc()).unwrap();
        assert!(!html.contains("http://") && !html.contains("https://"));
    }
}
