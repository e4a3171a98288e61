//! An interval plot as inline SVG: the names on the left in the page's font, so that dozens of
//! rows stay readable (a bar chart on a category axis wrote 44 names over each other).
use std::fmt::Write;

use super::escape;
use crate::document::IntervalPlot;

const WIDTH: f64 = 1040.0;
const ROW: f64 = 20.0;
const TOP: f64 = 12.0;
const AXIS: f64 = 44.0;
/// Room for the names: at most 8 px a character at 13 px (wide letters and digits), between these
/// bounds; a longer name is shortened in its middle (its full text is the row's tooltip).
const CHAR: f64 = 8.0;
const NAMES_MIN: f64 = 120.0;
const NAMES_MAX: f64 = 500.0;
const NOTE: f64 = 130.0;

pub(super) fn render(out: &mut String, plot: &IntervalPlot) {
    let longest = plot.rows.iter().map(|r| r.name.chars().count()).max();
    let names = (longest.unwrap_or(10) as f64 * CHAR + 12.0).clamp(NAMES_MIN, NAMES_MAX);
    let fits = ((NAMES_MAX - 12.0) / CHAR) as usize;
    let (left, right) = (names, WIDTH - NOTE);
    let scale = plot.scale();
    let x = |v: f64| left + (v - scale.min) / (scale.max - scale.min) * (right - left);
    let height = TOP + ROW * plot.rows.len() as f64 + AXIS;
    let bottom = TOP + ROW * plot.rows.len() as f64;
    let _ = writeln!(
        out,
        "<figure class=\"intervals\" id=\"{id}\"><figcaption>{title}</figcaption>\n<svg viewBox=\"0 0 {WIDTH} {height}\" width=\"100%\" role=\"img\" font-size=\"13\" style=\"max-width:{WIDTH}px\">",
        id = escape::html(&plot.id),
        title = escape::html(&plot.title)
    );
    for (t, label) in scale.ticks.iter().zip(&scale.labels) {
        let tx = x(*t);
        let _ = writeln!(
            out,
            "<line x1=\"{tx:.1}\" y1=\"{TOP}\" x2=\"{tx:.1}\" y2=\"{bottom}\" stroke=\"#ddd\"/><text x=\"{tx:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#444\">{}</text>",
            bottom + 16.0,
            escape::html(label)
        );
    }
    let _ = writeln!(
        out,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#222\">{}</text>",
        (left + right) / 2.0,
        bottom + 36.0,
        escape::html(&plot.axis_label)
    );
    if let Some(r) = plot.reference {
        let rx = x(r);
        let _ = writeln!(
            out,
            "<line x1=\"{rx:.1}\" y1=\"{TOP}\" x2=\"{rx:.1}\" y2=\"{bottom}\" stroke=\"#555\" stroke-dasharray=\"4 3\"/>"
        );
    }
    for (i, row) in plot.rows.iter().enumerate() {
        let cy = TOP + ROW * (i as f64 + 0.5);
        let weight = if row.strong {
            " font-weight=\"bold\""
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "<g class=\"interval-row\"><title>{name}: {value:.3} ({low:.3}–{high:.3}) {note}</title><text x=\"{tx:.1}\" y=\"{ty:.1}\" text-anchor=\"end\"{weight}>{shown}</text>",
            name = escape::html(&row.name),
            shown = escape::html(&shortened(&row.name, fits)),
            value = row.value,
            low = row.low,
            high = row.high,
            note = escape::html(&row.note),
            tx = left - 8.0,
            ty = cy + 4.5,
        );
        if row.low.is_finite() && row.high.is_finite() {
            let (x0, x1) = (x(row.low), x(row.high));
            let _ = writeln!(
                out,
                "<line x1=\"{x0:.1}\" y1=\"{cy:.1}\" x2=\"{x1:.1}\" y2=\"{cy:.1}\" stroke=\"{c}\" stroke-width=\"2\"/><line x1=\"{x0:.1}\" y1=\"{a:.1}\" x2=\"{x0:.1}\" y2=\"{b:.1}\" stroke=\"{c}\"/><line x1=\"{x1:.1}\" y1=\"{a:.1}\" x2=\"{x1:.1}\" y2=\"{b:.1}\" stroke=\"{c}\"/>",
                c = escape::html(&row.color),
                a = cy - 4.0,
                b = cy + 4.0,
            );
        }
        let _ = writeln!(
            out,
            "<circle cx=\"{:.1}\" cy=\"{cy:.1}\" r=\"{}\" fill=\"{}\"/><text x=\"{:.1}\" y=\"{:.1}\" fill=\"#555\">{}</text></g>",
            x(row.value),
            if row.strong { 5.0 } else { 3.5 },
            escape::html(&row.color),
            right + 8.0,
            cy + 4.5,
            escape::html(&row.note)
        );
    }
    out.push_str("</svg></figure>\n");
}

/// `name` in at most `max` characters: its start and end kept, "…" between.
fn shortened(name: &str, max: usize) -> String {
    let n = name.chars().count();
    if n <= max {
        return name.to_string();
    }
    let head = (max - 1) / 2;
    let tail = max - 1 - head;
    let start: String = name.chars().take(head).collect();
    let end: String = name.chars().skip(n - tail).collect();
    format!("{start}…{end}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_name_keeps_its_ends() {
        assert_eq!(shortened("jemalloc", 10), "jemalloc");
        assert_eq!(shortened("abcdefghij", 5), "ab…ij");
        assert_eq!(shortened("abcdefghij", 5).chars().count(), 5);
    }
}
