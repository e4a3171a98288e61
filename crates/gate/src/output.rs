//! The verdict for people and for CI systems: text lines, Markdown for a job summary, JUnit XML,
//! GitHub workflow annotations.
use std::fmt::Write as _;

use crate::check::Outcome;
use crate::metric::format_value;

/// "leak_step 17.6 KiB, parse_row 2.0 KiB" (the sites' own figure, named by `top_sites_label`).
fn top_sites_text(outcome: &Outcome) -> String {
    outcome
        .top_sites
        .iter()
        .map(|(name, v)| format!("{name} {}", format_value(outcome.top_figure.unit(), *v)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn top_sites_label(outcome: &Outcome) -> String {
    format!("top sites by {}", outcome.top_figure.name())
}

/// One line per limit (failures first), then a summary line.
pub fn text(outcomes: &[Outcome], status: i32) -> String {
    let mut out = String::new();
    let mut sorted: Vec<&Outcome> = outcomes.iter().collect();
    sorted.sort_by_key(|o| o.passed());
    for o in sorted {
        if o.passed() {
            let _ = writeln!(out, "pass  {}  {} {}", o.key, o.value_text(), o.bound_text);
        } else {
            let _ = write!(out, "FAIL  {}  {}", o.key, o.explained());
            if !o.top_sites.is_empty() {
                let _ = write!(out, "; {}: {}", top_sites_label(o), top_sites_text(o));
            }
            out.push('\n');
        }
    }
    let _ = writeln!(out, "{}", summary(outcomes, status));
    out
}

pub fn summary(outcomes: &[Outcome], status: i32) -> String {
    let failed: Vec<&Outcome> = outcomes.iter().filter(|o| !o.passed()).collect();
    if failed.is_empty() {
        return format!("alloclens gate: all {} limits met", outcomes.len());
    }
    let mut classes: Vec<&str> = failed.iter().map(|o| o.class.name()).collect();
    classes.sort_unstable();
    classes.dedup();
    format!(
        "alloclens gate: {} of {} limits failed ({}): exit status {status}",
        failed.len(),
        outcomes.len(),
        classes.join(", ")
    )
}

/// A Markdown section for a job summary (GitHub's `$GITHUB_STEP_SUMMARY`, GitLab's notes).
pub fn markdown(outcomes: &[Outcome], status: i32) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "### {}\n", summary(outcomes, status));
    out.push_str("| | limit | measured | bound | top sites |\n| --- | --- | --- | --- | --- |\n");
    for o in outcomes {
        let mark = if o.passed() { "✅" } else { "❌" };
        let _ = writeln!(
            out,
            "| {mark} | `{}` | {} | {} | {} |",
            o.key,
            md_cell(&o.value_text()),
            md_cell(&o.bound_text),
            md_cell(&top_sites_text(o))
        );
    }
    out
}

fn md_cell(s: &str) -> String {
    s.replace('|', "\\|")
}

/// GitHub Actions workflow commands: one `::error` per failed limit.
pub fn github(outcomes: &[Outcome]) -> String {
    let mut out = String::new();
    for o in outcomes.iter().filter(|o| !o.passed()) {
        let mut message = o.explained();
        if !o.top_sites.is_empty() {
            let _ = write!(message, "; {}: {}", top_sites_label(o), top_sites_text(o));
        }
        let _ = writeln!(
            out,
            "::error title={}::{}",
            gh_property(&format!("alloclens gate: {}", o.key)),
            gh_data(&message)
        );
    }
    out
}

/// The escapes of a workflow command's message (GitHub's toolkit `escapeData`).
fn gh_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// And of a property value (`escapeProperty`).
fn gh_property(s: &str) -> String {
    gh_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// JUnit XML as the Ant task writes it (testsuites > testsuite > testcase > failure), which
/// Jenkins, GitLab, GitHub test reporters and Azure read: one test case per limit.
pub fn junit(outcomes: &[Outcome], timestamp: &str, hostname: &str) -> String {
    let failures = outcomes.iter().filter(|o| !o.passed()).count();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"alloclens gate\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" time=\"0\">",
        outcomes.len()
    );
    let _ = writeln!(
        out,
        "  <testsuite name=\"alloclens gate\" package=\"alloclens\" id=\"0\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" skipped=\"0\" time=\"0\" timestamp=\"{}\" hostname=\"{}\">",
        outcomes.len(),
        xml(timestamp),
        xml(hostname)
    );
    out.push_str("    <properties/>\n");
    for o in outcomes {
        let _ = write!(
            out,
            "    <testcase name=\"{}\" classname=\"alloclens.gate.{}\" time=\"0\"",
            xml(&o.key),
            o.class.name()
        );
        if o.passed() {
            out.push_str("/>\n");
            continue;
        }
        let mut detail = format!(
            "{}\nlimit: {}\nmeasured: {}",
            o.reason(),
            o.bound_text,
            o.value_text()
        );
        if !o.top_sites.is_empty() {
            let _ = write!(detail, "\n{}: {}", top_sites_label(o), top_sites_text(o));
        }
        let _ = write!(
            out,
            ">\n      <failure message=\"{}\" type=\"{}\">{}</failure>\n    </testcase>\n",
            xml(&o.reason()),
            o.class.name(),
            xml(&detail)
        );
    }
    out.push_str("    <system-out/>\n    <system-err/>\n  </testsuite>\n</testsuites>\n");
    out
}

fn xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // XML 1.0 forbids most control characters, even escaped.
            c if (c as u32) < 0x20 && !matches!(c, '\n' | '\t' | '\r') => out.push('?'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes() {
        assert_eq!(xml("a<b & \"c\"\u{1}"), "a&lt;b &amp; &quot;c&quot;?");
        assert_eq!(gh_data("50% a\nb"), "50%25 a%0Ab");
        assert_eq!(gh_property("x: a, b"), "x%3A a%2C b");
    }
}
