//! The first section: the command as typed, the machine, the options and the variants.
use crate::document::{Block, Section, Table};
use crate::format;
use crate::run_data::RunData;

/// A replay's: the command, the machine, the repeats, the baseline and the variants; none of a
/// run's sampling, marker or throughput settings (a replay has none); its warnings are with its
/// answer.
pub(in crate::sections) fn reproduce_replay(data: &RunData) -> Section {
    let r = &data.results;
    let mut s = Section::new("setup", "Command, machine and allocators");
    s.push(Block::Code(shell_words(&r.command)));
    let opt = |o: &Option<String>| o.clone().unwrap_or_else(|| "—".into());
    let mut facts = common_facts(data);
    facts.push(("repeats".into(), r.repeats.to_string()));
    facts.push(("baseline".into(), opt(&r.baseline)));
    s.push(Block::Facts(facts));
    s.push(Block::Table(variants_table(r)));
    s
}

/// Where the results are, when and by what they were made, on which machine.
fn common_facts(data: &RunData) -> Vec<(String, String)> {
    let r = &data.results;
    vec![
        ("results".into(), data.dir.display().to_string()),
        (
            "made".into(),
            format!("{} by {} {}", r.created, r.tool, r.tool_version),
        ),
        (
            "machine".into(),
            format!(
                "{} — {}, {} CPUs, {} memory, Linux {}",
                r.host.hostname,
                r.host.cpu_model,
                r.host.cpus,
                format::bytes(r.host.memory_bytes as f64),
                r.host.kernel
            ),
        ),
    ]
}

pub(super) fn reproduce(data: &RunData) -> Section {
    let r = &data.results;
    let mut s = Section::new("setup", "Command, machine and allocators");
    s.push(Block::Code(shell_words(&r.command)));
    if !data.compared.is_empty() {
        s.push(Block::Paragraph(
            "Two results compared; the machine and options shown are the first's:".into(),
        ));
        for c in &data.compared {
            s.push(Block::Code(c.clone()));
        }
    }
    let mut facts = common_facts(data);
    facts.extend([
        ("repeats".into(), r.repeats.to_string()),
        ("sampling interval".into(), format::seconds(r.interval_s)),
    ]);
    for p in &r.params {
        facts.push((format!("parameter {}", p.name), p.values.join(", ")));
    }
    let opt = |o: &Option<String>| o.clone().unwrap_or_else(|| "—".into());
    facts.push(("marker regex".into(), opt(&r.marker)));
    facts.push(("throughput regex".into(), opt(&r.throughput)));
    facts.push(("baseline".into(), opt(&r.baseline)));
    s.push(Block::Facts(facts));
    s.push(Block::Table(variants_table(r)));
    if r.interrupted {
        s.push(Block::Warning(
            "the session was interrupted (Ctrl-C): only the runs done are shown".into(),
        ));
    }
    for w in &r.warnings {
        s.push(Block::Warning(w.clone()));
    }
    // What a full disk kept out of the directory (results.json's `incomplete_files`): the page
    // is made from what is there, and says what is not.
    for f in &r.incomplete_files {
        s.push(Block::Warning(format!("not in this directory: {f}")));
    }
    s
}

/// The variants: allocator, version, library, settings, environment.
fn variants_table(r: &runner::RunResults) -> Table {
    let pairs = |v: &[(String, String)]| {
        v.iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    Table {
        caption: Some("Variants".into()),
        headers: [
            "variant",
            "allocator",
            "version",
            "library",
            "settings",
            "environment",
        ]
        .map(String::from)
        .to_vec(),
        rows: r
            .variants
            .iter()
            .map(|v| {
                vec![
                    v.label.clone(),
                    v.allocator.clone(),
                    v.version.clone().unwrap_or_default(),
                    v.library
                        .as_ref()
                        .map_or_else(|| "(system)".into(), |l| l.display().to_string()),
                    pairs(&v.settings),
                    pairs(&v.env),
                ]
            })
            .collect(),
    }
}

/// The command as a shell would need it typed: words with special characters single-quoted.
fn shell_words(words: &[String]) -> String {
    words
        .iter()
        .map(|w| {
            let plain = !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%{}".contains(c));
            if plain {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_words_quote_what_a_shell_would_interpret() {
        let words = ["prog", "--x={n}", "a b", "it's", "<script>"].map(String::from);
        assert_eq!(
            shell_words(&words),
            r#"prog --x={n} 'a b' 'it'\''s' '<script>'"#
        );
    }
}
