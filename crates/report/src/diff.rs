//! `alloclens diff A B`: every headline figure of two results side by side with its change. Each kind
//! of result lists its headlines (`headlines`); the diff matches them by scope and metric, so a figure
//! present on one side only still shows.
use serde::Serialize;

use crate::document::chart::Unit;
use crate::format::format_value;
use crate::headlines::Headline;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DiffRow {
    pub scope: String,
    pub metric: String,
    pub unit: Unit,
    pub a: Option<f64>,
    pub b: Option<f64>,
    /// b - a.
    pub change: Option<f64>,
    /// (b - a) / a * 100; None when a is 0 or missing.
    pub change_percent: Option<f64>,
    /// One standard error of `a` and `b` when they are estimates (`diff --sites` of traces with
    /// sampled stacks); absent for exact figures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub a_se: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub b_se: Option<f64>,
}

impl DiffRow {
    /// The row's cells as the terminal and the HTML page show them: scope, metric, A and B (each
    /// with its standard error when it is an estimate of at least half a unit), the change with its
    /// sign, the change in percent; `value` formats a figure of the row's unit.
    pub fn cells(&self, value: impl Fn(Unit, f64) -> String) -> [String; 6] {
        let dash = || "—".to_string();
        let v = |x: Option<f64>, se: Option<f64>| {
            let pm = se
                .filter(|se| *se >= 0.5)
                .map(|se| format!(" ± {}", value(self.unit, se.round())))
                .unwrap_or_default();
            x.map_or_else(dash, |x| value(self.unit, x) + &pm)
        };
        let change = self.change.map_or_else(dash, |c| {
            let sign = if c > 0.0 {
                "+"
            } else if c < 0.0 {
                "-"
            } else {
                ""
            };
            format!("{sign}{}", value(self.unit, c.abs()))
        });
        [
            self.scope.clone(),
            self.metric.clone(),
            v(self.a, self.a_se),
            v(self.b, self.b_se),
            change,
            self.change_percent
                .map_or_else(dash, |p| format!("{p:+.1}%")),
        ]
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Diff {
    pub a: String,
    pub b: String,
    pub rows: Vec<DiffRow>,
    /// What could not be read of A or B (a damaged trace's figures stop short), one sentence each.
    pub warnings: Vec<String>,
    /// Said above the table: which figures are estimates (`diff --sites` of sampled stacks).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// Matches the headlines of A and B by (scope, metric), in A's order then B's extras.
pub fn diff(a_name: &str, a: &[Headline], b_name: &str, b: &[Headline]) -> Diff {
    let mut rows: Vec<DiffRow> = a
        .iter()
        .map(|h| {
            let other = b
                .iter()
                .find(|o| o.scope == h.scope && o.metric == h.metric);
            row(h, h.value, other.and_then(|o| o.value))
        })
        .collect();
    for h in b {
        if !a.iter().any(|o| o.scope == h.scope && o.metric == h.metric) {
            rows.push(row(h, None, h.value));
        }
    }
    Diff {
        a: a_name.to_string(),
        b: b_name.to_string(),
        rows,
        warnings: Vec::new(),
        notes: Vec::new(),
    }
}

fn row(h: &Headline, a: Option<f64>, b: Option<f64>) -> DiffRow {
    let change = a.zip(b).map(|(a, b)| b - a);
    let change_percent = a
        .zip(change)
        .filter(|(a, _)| *a != 0.0)
        .map(|(a, c)| c / a * 100.0);
    DiffRow {
        scope: h.scope.clone(),
        metric: h.metric.clone(),
        unit: h.unit,
        a,
        b,
        change,
        change_percent,
        a_se: None,
        b_se: None,
    }
}

impl Diff {
    /// A terminal table: scope, metric, A, B, change, change %.
    pub fn render_text(&self) -> String {
        let headers = [
            "scope".to_string(),
            "metric".to_string(),
            format!("A ({})", self.a),
            format!("B ({})", self.b),
            "change".to_string(),
            "change %".to_string(),
        ];
        let rows: Vec<[String; 6]> = self.rows.iter().map(|r| r.cells(format_value)).collect();
        let mut widths = headers.clone().map(|h| h.chars().count());
        for r in &rows {
            for (w, c) in widths.iter_mut().zip(r) {
                *w = (*w).max(c.chars().count());
            }
        }
        let line = |cells: &[String; 6]| {
            let mut s = String::new();
            for (i, (c, w)) in cells.iter().zip(widths).enumerate() {
                let pad = " ".repeat(w - c.chars().count());
                if i < 2 {
                    s.push_str(&format!("{c}{pad}  "));
                } else {
                    s.push_str(&format!("{pad}{c}  "));
                }
            }
            s.trim_end().to_string() + "\n"
        };
        let mut out: String = self.notes.iter().map(|n| format!("{n}\n")).collect();
        out.push_str(&line(&headers));
        let mut last_scope = String::new();
        for (r, cells) in self.rows.iter().zip(&rows) {
            if r.scope != last_scope && !last_scope.is_empty() {
                out.push('\n');
            }
            last_scope = r.scope.clone();
            out.push_str(&line(cells));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(scope: &str, metric: &str, value: Option<f64>) -> Headline {
        Headline {
            scope: scope.into(),
            metric: metric.into(),
            unit: Unit::Bytes,
            value,
        }
    }

    #[test]
    fn figures_are_matched_by_scope_and_metric() {
        let a = [
            h("glibc", "peak", Some(100.0)),
            h("glibc", "mean", Some(0.0)),
        ];
        let b = [
            h("glibc", "mean", Some(5.0)),
            h("glibc", "peak", Some(150.0)),
            h("tc", "peak", Some(1.0)),
        ];
        let d = diff("a", &a, "b", &b);
        assert_eq!(d.rows.len(), 3);
        assert_eq!(d.rows[0].change, Some(50.0));
        assert_eq!(d.rows[0].change_percent, Some(50.0));
        assert_eq!(d.rows[1].change_percent, None, "no percentage of zero");
        assert_eq!((d.rows[2].a, d.rows[2].b), (None, Some(1.0)));
        let text = d.render_text();
        assert!(text.contains("+50 B") && text.contains("+50.0%"), "{text}");
    }
}
