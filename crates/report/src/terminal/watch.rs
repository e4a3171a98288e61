//! The terminal summary of `alloclens watch`: the verdict first, then the figures behind it.

use std::fmt::Write as _;

use trace::human_bytes;
use watch::verdict::{human_duration, signed_bytes};
use watch::{WatchEnding, WatchResults};

use crate::tables::{self, Output};

/// The summary text (ends with a newline): the verdict and its figures, the last sample, the
/// allocator readings, and how the watch ended.
pub fn render_watch_summary(r: &WatchResults) -> String {
    let mut out = String::new();
    verdict(&mut out, r);
    last_sample(&mut out, r);
    readings(&mut out, r);
    ending(&mut out, r);
    out
}

/// The verdict, its evidence and remedy, and the trends behind it.
fn verdict(w: &mut String, r: &WatchResults) {
    if let Some(v) = &r.verdict {
        let _ = writeln!(w, "verdict: {}", v.class.name());
        for e in &v.evidence {
            let _ = writeln!(w, "  {e}");
        }
        if !v.remedy.is_empty() || !v.commands.is_empty() {
            let _ = writeln!(w);
            for line in &v.remedy {
                let _ = writeln!(w, "  {line}");
            }
            for c in &v.commands {
                let _ = writeln!(w, "    {c}");
            }
        }
        let _ = writeln!(w);
        let trend = |t: Option<watch::verdict::Trend>| {
            t.map_or("-".to_string(), |t| {
                format!(
                    "{} -> {}  trend {} ({}/h)",
                    human_bytes(t.first.max(0.0) as u64),
                    human_bytes(t.last.max(0.0) as u64),
                    signed_bytes(t.change),
                    signed_bytes(t.per_hour)
                )
            })
        };
        let _ = writeln!(w, "  window          {}", human_duration(v.window_s));
        let _ = writeln!(w, "  RSS             {}", trend(v.rss));
        let _ = writeln!(w, "  heap (smaps)    {}", trend(v.heap));
        let _ = writeln!(
            w,
            "  live bytes      {}{}",
            trend(v.live),
            match (v.live.is_some(), r.attach.is_some(), r.gdb.is_empty()) {
                (true, true, _) => "  (the allocator's in use, agent attached)",
                (true, false, false) => "  (glibc in use, gdb)",
                _ => "",
            }
        );
        let _ = writeln!(w, "  allocator free  {}", trend(v.free));
    }
}

/// The last sample's split and the peak RSS.
fn last_sample(w: &mut String, r: &WatchResults) {
    if let Some(last) = &r.last {
        let _ = writeln!(
            w,
            "  last sample     RSS {}  PSS {}  heap {}  file {}  stack {}  other {}  ({} process{})",
            human_bytes(last.rss),
            human_bytes(last.pss),
            human_bytes(last.heap),
            human_bytes(last.file),
            human_bytes(last.stack),
            human_bytes(last.other),
            last.processes,
            if last.processes == 1 { "" } else { "es" }
        );
    }
    let _ = writeln!(w, "  peak RSS        {}", human_bytes(r.peak_rss));
}

/// The rows of the allocator readings' tables (`tables::watch`), one line each.
fn readings(w: &mut String, r: &WatchResults) {
    if let Some(a) = r.attach.as_ref().filter(|a| a.error.is_none()) {
        let _ = writeln!(
            w,
            "  attached        the agent was loaded by the thread at {}, borrowed {:.1} ms (no debugger)",
            a.safe_point, a.borrowed_ms
        );
    }
    for row in tables::watch::gdb(r, Output::Terminal).rows {
        if tables::watch::gdb_failed(&row) {
            let _ = writeln!(w, "  gdb at {} s    not read: {}", row[0], row[1]);
        } else {
            let _ = writeln!(
                w,
                "  gdb at {} s    glibc in use {}, free {} in {} chunks, {} arena(s); process paused {} ms",
                row[0], row[1], row[2], row[3], row[4], row[5]
            );
        }
    }
    for row in tables::watch::trim(r).rows {
        let _ = writeln!(
            w,
            "  trim probe      pid {}: {} gave back {} (RSS {} -> {})",
            row[0], row[1], row[4], row[2], row[3]
        );
    }
}

/// How many samples, how often, how the watch ended and what it cost.
fn ending(w: &mut String, r: &WatchResults) {
    let samples = if r.samples_kept < r.samples_taken {
        format!(
            "{} samples ({} kept after downsampling)",
            r.samples_taken, r.samples_kept
        )
    } else {
        format!("{} samples", r.samples_taken)
    };
    let end = match (r.ending, r.exit) {
        (Some(WatchEnding::Exited), Some(e)) => match (e.code, e.signal) {
            (Some(c), _) => format!("the command exited with status {c}"),
            (_, Some(s)) => format!("the command was killed by signal {s}"),
            _ => "the command exited".into(),
        },
        (Some(WatchEnding::Exited), None) => "the process exited".into(),
        (Some(WatchEnding::Duration), _) => "the duration elapsed".into(),
        (Some(WatchEnding::Interrupted), _) => "interrupted".into(),
        (None, _) => "not finished (alloclens was killed)".into(),
    };
    let running = if r.still_running {
        format!(
            "; the program runs on (pid {})",
            r.root_pid.unwrap_or_default()
        )
    } else {
        String::new()
    };
    // The interval asked for, and what really happened when ticks were skipped.
    let every = match (&r.first, &r.last) {
        (Some(a), Some(b)) if r.ticks_skipped > 0 && r.samples_taken >= 2 => format!(
            "every {} s asked, {:.2} s apart on average ({} tick{} skipped: alloclens was stopped, or a sample took longer than the interval)",
            r.interval_s,
            (b.t_s - a.t_s) / (r.samples_taken - 1) as f64,
            r.ticks_skipped,
            if r.ticks_skipped == 1 { "" } else { "s" }
        ),
        _ => format!("every {} s", r.interval_s),
    };
    let _ = writeln!(
        w,
        "  {samples} {every}, {end}{running}; alloclens used {:.2} s of CPU",
        r.cpu_s
    );
}
