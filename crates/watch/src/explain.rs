//! The verdict's explanation: the sentences that give the class [`crate::verdict::classify`]
//! decided and its figures (headline first), and the remedy to try with its commands.

use allocators::{GLIBC, JEMALLOC, MIMALLOC};
use trace::{human_bytes, human_count};

use crate::slope::theil_sen;
use crate::verdict::{Class, Findings, Trend, Unknown, Verdict, VerdictInput, MIN_SAMPLES};

/// "+410.0 MiB" / "-3.0 MiB" / "+0 B".
pub fn signed_bytes(v: f64) -> String {
    let sign = if v < 0.0 { "-" } else { "+" };
    format!("{sign}{}", human_bytes(v.abs().round() as u64))
}

/// "2 h", "5.0 min", "42 s".
pub fn human_duration(s: f64) -> String {
    if s >= 7200.0 {
        format!("{:.0} h", s / 3600.0)
    } else if s >= 3600.0 {
        format!("{:.1} h", s / 3600.0)
    } else if s >= 120.0 {
        format!("{:.1} min", s / 60.0)
    } else if s >= 10.0 || (s * 10.0).round() % 10.0 == 0.0 {
        format!("{s:.0} s")
    } else {
        // A watch of a short program: "0.4 s", not "0 s".
        format!("{s:.1} s")
    }
}

/// Why no class: too few samples in all, or after the warm-up.
pub(crate) fn too_few_samples(sampled: usize, after_warmup: usize) -> String {
    if sampled < MIN_SAMPLES {
        format!(
            "{sampled} sample(s): too few to tell a start-up fill from growth \
             ({MIN_SAMPLES} needed); watch longer or give a shorter --interval"
        )
    } else {
        format!("{after_warmup} sample(s) after the warm-up: too few for a trend; watch longer")
    }
}

/// Fills `v`'s evidence (headline, the allocator's free memory, the trim, the verdict's sentence)
/// and its remedy.
pub(crate) fn explain(input: &VerdictInput, v: &mut Verdict, found: &Findings) {
    let live_name = if input.live_name.is_empty() {
        "live bytes"
    } else {
        &input.live_name
    };
    let headline = headline(v, found, live_name);
    v.evidence.push(format!("{headline}."));
    held_sentence(input, v);
    trim_sentence(input, v);
    verdict_sentence(
        input,
        v,
        found.rss,
        live_name,
        found.heap_grows,
        found.unknown.as_ref(),
    );
    remedy(input, v, found.unknown.is_some());
    residency_sentence(input, v);
}

/// The share of the heap's resident pages that hold no live block, where the watch knows it:
/// "fragmentation: 61 % of the heap's resident pages hold no live block (...)".
fn residency_sentence(input: &VerdictInput, v: &mut Verdict) {
    let prefix = match v.class {
        Class::Fragmentation => "Fragmentation: ",
        Class::Retention => "Retention: ",
        Class::Undetermined | Class::Stable => "Heap residency: ",
        _ => return,
    };
    let Some(q) = &input.residency else { return };
    let cmd = if input.command.is_empty() {
        "CMD".to_string()
    } else {
        shell_line(&input.command)
    };
    let sites = format!(
        "the sites whose frees left them are in a trace with block addresses: alloclens record --addresses -o heap.alt -- {cmd}, then alloclens analyze --residency heap.alt"
    );
    let sentence = match (&q.split, q.free_percent()) {
        (Some(split), Some(pct)) => {
            let at = match (q.pid, q.t_s) {
                (Some(pid), Some(t)) => format!(", process {pid} at {}", human_duration(t)),
                _ => String::new(),
            };
            format!(
                "{prefix}{pct:.0} % of the heap's resident pages hold no live block ({} of {} in glibc's arenas{at}; tcache and fastbin chunks count as live); MADV_DONTNEED of them would return {}; {sites}.",
                human_bytes(split.free_only),
                human_bytes(split.arena_resident),
                human_bytes(split.reclaimable)
            )
        }
        (None, Some(pct)) => format!(
            "{prefix}at least {pct:.0} % of the heap's resident pages hold no live block ({} of free whole pages {} reports, of {} resident in the heap; pages partly used are not counted); {sites}.",
            human_bytes(q.free_pages.unwrap_or(0)),
            q.allocator,
            human_bytes(q.heap_resident.unwrap_or(0))
        ),
        (None, None) if q.not_read > 0 => format!(
            "{prefix}the heap's resident pages were not read at this sample ({}): which hold no live block is not known.",
            q.problem.as_deref().unwrap_or("the heap changed under the walk")
        ),
        _ => format!(
            "{prefix}which of the heap's resident pages hold no live block is not known for {}.",
            q.allocator
        ),
    };
    v.evidence.push(sentence);
}

/// "RSS +410.0 MiB in 2 h while live bytes +3.0 MiB: not a leak" (without the full stop).
fn headline(v: &Verdict, found: &Findings, live_name: &str) -> String {
    let rss = found.rss;
    let mut span = human_duration(v.window_s);
    if v.warmup_s > 0.0 {
        span.push_str(&format!(
            " (after {} of warm-up)",
            human_duration(v.warmup_s)
        ));
    }
    if let Some(d) = found.kept {
        // The live bytes' trend over the window is a step's median slope, often 0 ("live bytes
        // +0 B" after a 195 MiB fall): the headline gives the fall from the peak instead.
        return format!(
            "RSS {} in {span} while {live_name} fell {} from their peak ({} -> {}): not a leak",
            signed_bytes(rss.change),
            human_bytes((d.peak - d.end).round() as u64),
            human_bytes(d.peak.round() as u64),
            human_bytes(d.end.max(0.0).round() as u64)
        );
    }
    let mut headline = format!("RSS {} in {span}", signed_bytes(rss.change));
    match (v.live, &found.unknown) {
        (Some(l), Some(Unknown::Partly { from, to })) => headline.push_str(&format!(
            " while {live_name} {} from {from:.1} s to {to:.1} s",
            signed_bytes(l.change)
        )),
        (Some(l), _) => {
            headline.push_str(&format!(" while {live_name} {}", signed_bytes(l.change)))
        }
        (None, _) => headline.push_str(&format!(" ({live_name} not measured)")),
    }
    // "not a leak" only where the live bytes, measured over the window, say so of growth in the
    // heap: not for growth outside the heap, nor when live bytes are missing.
    let outside_the_heap = v.heap.is_some() && !found.heap_grows;
    match v.class {
        Class::Leak => headline.push_str(": a leak"),
        Class::Fragmentation | Class::OutsideHeap | Class::Undetermined
            if found.unknown.is_none() && !outside_the_heap =>
        {
            headline.push_str(": not a leak")
        }
        _ => {}
    }
    headline
}

fn held_sentence(input: &VerdictInput, v: &mut Verdict) {
    let Some(h) = &input.held else { return };
    let mut s = format!("{} holds {} free", h.allocator, human_bytes(h.free));
    if let Some(c) = h.free_chunks {
        s.push_str(&format!(" in {} chunks", human_count(c)));
    }
    if let Some(out) = h.handed_out {
        let heap = out + h.free;
        if heap > 0 {
            s.push_str(&format!(
                " ({:.0} % of the heap)",
                100.0 * h.free as f64 / heap as f64
            ));
        }
    }
    if h.arenas > 0 {
        s.push_str(&format!(
            " across {} arena{}",
            h.arenas,
            if h.arenas == 1 { "" } else { "s" }
        ));
    }
    if let Some(f) = v.free {
        s.push_str(&format!(", {} over the window", signed_bytes(f.change)));
    }
    match v.class {
        Class::Fragmentation => s.push_str(": fragmentation"),
        Class::Retention => s.push_str(": retention"),
        _ => {}
    }
    v.evidence.push(format!("{s}."));
}

fn trim_sentence(input: &VerdictInput, v: &mut Verdict) {
    if let Some(t) = input.trim {
        v.evidence.push(format!(
            "{} returned {} when tried (RSS {} -> {}).",
            if t.call.is_empty() { "A trim" } else { t.call },
            human_bytes(t.returned()),
            human_bytes(t.rss_before),
            human_bytes(t.rss_after)
        ));
    }
}

fn verdict_sentence(
    input: &VerdictInput,
    v: &mut Verdict,
    rss: Trend,
    live_name: &str,
    heap_grows: bool,
    unknown: Option<&Unknown>,
) {
    let per_hour = |t: Trend| format!("{}/h", signed_bytes(t.per_hour));
    let line = match v.class {
        Class::Leak => {
            // What grows, on average: the live bytes' change over the live blocks' change.
            let blocks = theil_sen(&input.live_blocks).map(|b| b * v.window_s);
            let sizes = match (v.live, blocks) {
                (Some(l), Some(b)) if b >= 1.0 => format!(
                    " in {} more live blocks of {} on average",
                    human_count(b.round() as u64),
                    human_bytes((l.change / b).max(0.0).round() as u64)
                ),
                _ => String::new(),
            };
            format!(
                "Verdict: leak. {live_name} grow {} (RSS {}){sizes}: the program keeps what it allocates.",
                v.live.map(per_hour).unwrap_or_default(),
                per_hour(rss)
            )
        }
        Class::Fragmentation if v.free.is_some() => format!(
            "Verdict: fragmentation. RSS grows {} and the allocator's free memory with it, while {live_name} do not: memory the allocator can neither reuse nor return.",
            per_hour(rss)
        ),
        Class::Fragmentation => format!(
            "Verdict: fragmentation (likely). RSS grows {} in the heap, well beyond {live_name}; the allocator does not report its free memory, so memory mapped outside malloc is not ruled out.",
            per_hour(rss)
        ),
        Class::Retention => format!(
            "Verdict: retention. RSS holds while the program's {live_name} do not need it: the allocator keeps freed memory (returned by a trim or a decay setting)."
        ),
        Class::OutsideHeap if heap_grows => format!(
            "Verdict: growth outside malloc. RSS grows {} in private anonymous mappings while {live_name} ({}) and the allocator's free memory ({}) do not: memory mapped outside malloc (the program's or a library's own mmap, a language runtime's heap), not the allocator.",
            per_hour(rss),
            v.live.map(|l| signed_bytes(l.change)).unwrap_or_default(),
            v.free.map(|f| signed_bytes(f.change)).unwrap_or_default()
        ),
        Class::OutsideHeap => format!(
            "Verdict: growth outside the heap. RSS grows {} but the heap does not (heap {}): file mappings, stacks or shared memory, not the allocator.",
            per_hour(rss),
            v.heap.map(|h| signed_bytes(h.change)).unwrap_or_default()
        ),
        Class::Stable => format!(
            "Verdict: stable. RSS {} in {} (below the {} threshold){}.",
            signed_bytes(rss.change),
            human_duration(v.window_s),
            human_bytes(v.threshold as u64),
            if input.trim.is_some() { ", and a trim gives little back" } else { "" }
        ),
        Class::Undetermined => {
            let why = input
                .live_missing
                .as_ref()
                .filter(|m| !m.why.is_empty())
                .map(|m| format!(" ({})", m.why.join("; ")))
                .unwrap_or_default();
            let what = match unknown {
                Some(Unknown::Partly { from, to }) => format!(
                    "{live_name} were measured only from {from:.1} s to {to:.1} s of the {} window{why}",
                    human_duration(v.window_s)
                ),
                Some(Unknown::InUnmeasured { change }) => format!(
                    "{} of it is in processes whose {live_name} are not measured{why}",
                    signed_bytes(*change)
                ),
                _ => format!("{live_name} were not measured{why}"),
            };
            format!(
                "Verdict: undetermined. RSS grows {} in the heap, but {what}: from outside, a leak and fragmentation look alike.",
                per_hour(rss)
            )
        }
    };
    v.evidence.push(line);
}

/// Quotes a command line for a POSIX shell (words with only safe characters stay as they are).
pub fn shell_line(words: &[String]) -> String {
    words
        .iter()
        .map(|w| {
            let safe = !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
            if safe {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn remedy(input: &VerdictInput, v: &mut Verdict, live_unknown: bool) {
    let cmd = if input.command.is_empty() {
        "CMD".to_string()
    } else {
        shell_line(&input.command)
    };
    if v.class == Class::Undetermined {
        if !live_unknown {
            return;
        }
        match &input.live_missing {
            Some(m) if !m.remedy.is_empty() || !m.commands.is_empty() => {
                v.remedy.extend(m.remedy.iter().cloned());
                v.commands.extend(m.commands.iter().cloned());
            }
            _ => {
                v.remedy.push("Measure the live bytes: under the agent (watch -- CMD), attached to a running process (watch --pid), or with a trace:".into());
                v.commands
                    .push(format!("alloclens record -o watch.alt -- {cmd}"));
            }
        }
        return;
    }
    let has = |a: &str| input.installed.iter().any(|i| i == a);
    let allocator = input.allocator.as_deref().unwrap_or(GLIBC);
    let mut variants: Vec<&str> = Vec::new();
    match v.class {
        Class::Leak => {
            v.remedy.push(
                "Fix the program: find which allocations stay alive (by size, phase and process) with a trace:".into(),
            );
            v.commands
                .push(format!("alloclens record -o watch.alt -- {cmd}"));
            v.commands.push("alloclens analyze watch.alt".into());
            return;
        }
        Class::Fragmentation | Class::Retention if allocator == GLIBC => {
            v.remedy.push(if v.class == Class::Fragmentation {
                "Try an allocator that bounds fragmentation (jemalloc, mimalloc), or glibc with fewer arenas (MALLOC_ARENA_MAX):".into()
            } else {
                "Make the allocator give memory back: glibc with a lower M_TRIM_THRESHOLD and fewer arenas, or jemalloc with a decay time:".into()
            });
            variants.push(GLIBC);
            variants.push("glibc:arena_max=2");
            if v.class == Class::Retention {
                variants.push("glibc:trim_threshold=128k");
            }
            if has(JEMALLOC) {
                variants.push(JEMALLOC);
                variants.push("jemalloc:dirty_decay_ms=1000,muzzy_decay_ms=0");
            }
            if has(MIMALLOC) {
                variants.push(MIMALLOC);
            }
        }
        Class::Fragmentation | Class::Retention => {
            v.remedy.push(format!(
                "Compare {allocator} with its purging settings and other allocators (a quiet program keeps dirty pages unless a background thread or a short decay purges them):"
            ));
            variants.push(allocator);
            if allocator == JEMALLOC {
                variants
                    .push("jemalloc:dirty_decay_ms=1000,muzzy_decay_ms=0,background_thread=true");
            }
            variants.push(GLIBC);
            if has(MIMALLOC) && allocator != MIMALLOC {
                variants.push(MIMALLOC);
            }
        }
        _ => return,
    }
    v.commands.push(format!(
        "alloclens run -r 1 -a {} -- {cmd}",
        variants.join(",")
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::tests::{input, series};
    use crate::verdict::{classify, HeldFree, LiveMissing, TrimResult};

    #[test]
    fn rss_growing_with_free_while_live_flat_is_fragmentation() {
        // the issue's example: RSS +410 MiB in 2 h, live +3 MiB, free grows with RSS.
        let mut i = input(
            series(121, |i| 900.0 + 410.0 * i as f64 / 120.0),
            series(121, |i| 800.0 + 3.0 * i as f64 / 120.0),
            series(121, |i| 100.0 + 380.0 * i as f64 / 120.0),
        );
        i.held = Some(HeldFree {
            allocator: "glibc".into(),
            free: 380 << 20,
            handed_out: Some(846 << 20),
            free_chunks: Some(12_000),
            arenas: 8,
        });
        i.trim = Some(TrimResult {
            call: "malloc_trim(0)",
            rss_before: 1310 << 20,
            rss_after: 1020 << 20,
        });
        let v = classify(&i);
        assert_eq!(v.class, Class::Fragmentation);
        assert_eq!(
            v.evidence[0],
            "RSS +410.0 MiB in 2 h while live bytes +3.0 MiB: not a leak."
        );
        assert_eq!(
            v.evidence[1],
            "glibc holds 380.0 MiB free in 12.0 k chunks (31 % of the heap) across 8 arenas, +380.0 MiB over the window: fragmentation."
        );
        assert_eq!(
            v.evidence[2],
            "malloc_trim(0) returned 290.0 MiB when tried (RSS 1.3 GiB -> 1020.0 MiB)."
        );
        assert_eq!(
            v.commands,
            ["alloclens run -r 1 -a glibc,glibc:arena_max=2,jemalloc,jemalloc:dirty_decay_ms=1000,muzzy_decay_ms=0 -- ./server --port '80 80'"]
        );
    }

    #[test]
    fn jemalloc_retention_suggests_its_decay_settings() {
        let mut i = input(
            series(30, |_| 500.0),
            series(30, |i| if i < 10 { 400.0 } else { 100.0 }),
            series(30, |_| 1.0),
        );
        i.allocator = Some("jemalloc".into());
        let v = classify(&i);
        assert_eq!(v.class, Class::Retention);
        assert!(
            v.commands[0].contains("-a jemalloc,jemalloc:dirty_decay_ms=1000,muzzy_decay_ms=0,background_thread=true,glibc"),
            "{:?}",
            v.commands
        );
    }

    #[test]
    fn too_few_samples() {
        let i = input(series(2, |i| i as f64), Vec::new(), Vec::new());
        let v = classify(&i);
        assert_eq!(v.class, Class::Undetermined);
        assert_eq!(
            v.evidence,
            ["2 sample(s): too few to tell a start-up fill from growth (8 needed); watch longer \
              or give a shorter --interval"]
        );
    }

    #[test]
    fn without_live_bytes_heap_growth_is_undetermined_with_the_way_to_measure() {
        let mut i = input(
            series(60, |i| 100.0 + 2.0 * i as f64),
            Vec::new(),
            Vec::new(),
        );
        i.live_missing = Some(LiveMissing {
            why: vec!["process 7 (static-leak) is statically linked".into()],
            remedy: vec!["Link it dynamically.".into()],
            commands: Vec::new(),
        });
        let v = classify(&i);
        assert_eq!(v.class, Class::Undetermined, "{:?}", v.evidence);
        assert!(
            v.evidence[0].contains("(live bytes not measured)"),
            "{:?}",
            v.evidence
        );
        assert!(
            v.evidence[1].contains("live bytes were not measured (process 7 (static-leak) is statically linked): from outside, a leak and fragmentation look alike"),
            "{:?}",
            v.evidence
        );
        assert!(v
            .evidence
            .iter()
            .all(|e| !e.contains("fragmentation (likely)")));
        assert_eq!(v.remedy, ["Link it dynamically."]);
        assert!(v.commands.is_empty(), "no allocator swap: {:?}", v.commands);
    }

    #[test]
    fn heap_growth_with_flat_live_and_flat_allocator_free_is_outside_malloc() {
        // a program that mmaps 4 MiB every 200 ms: the private anonymous part grows, malloc's
        // live and free bytes do not.
        let mut i = input(
            series(60, |i| 100.0 + 4.0 * i as f64),
            series(60, |_| 1.0),
            series(60, |_| 0.1),
        );
        i.heap = series(60, |i| 90.0 + 4.0 * i as f64);
        let v = classify(&i);
        assert_eq!(v.class, Class::OutsideHeap, "{:?}", v.evidence);
        assert!(
            v.evidence[1].contains("in private anonymous mappings while live bytes (+0 B) and the allocator's free memory (+0 B) do not"),
            "{:?}",
            v.evidence
        );
        assert!(v.commands.is_empty());
    }

    #[test]
    fn heap_growth_beyond_live_bytes_without_free_figures_is_likely_fragmentation() {
        // tbbmalloc: live bytes measured, no free figures.
        let i = input(
            series(60, |i| 100.0 + 2.0 * i as f64),
            series(60, |_| 50.0),
            Vec::new(),
        );
        let v = classify(&i);
        assert_eq!(v.class, Class::Fragmentation, "{:?}", v.evidence);
        assert!(
            v.evidence[1].contains("fragmentation (likely)"),
            "{:?}",
            v.evidence
        );
    }

    #[test]
    fn growth_in_processes_without_live_bytes_is_undetermined() {
        // the shell's live bytes are flat; its static child grows.
        let mut i = input(
            series(60, |i| 100.0 + 2.0 * i as f64),
            series(60, |_| 1.0),
            series(60, |_| 0.5),
        );
        i.rss_unmeasured = series(60, |i| 98.0 + 2.0 * i as f64);
        let v = classify(&i);
        assert_eq!(v.class, Class::Undetermined, "{:?}", v.evidence);
        assert!(
            v.evidence[1]
                .contains("+118.0 MiB of it is in processes whose live bytes are not measured"),
            "{:?}",
            v.evidence
        );
    }

    #[test]
    fn shell_quoting() {
        let words: Vec<String> = ["sh", "-c", "echo it's"].map(String::from).into();
        assert_eq!(shell_line(&words), r#"sh -c 'echo it'\''s'"#);
    }
}
