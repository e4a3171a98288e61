//! The allocator readings of a watch, defined once for the page and the terminal summary: how the
//! agent was loaded into a `--pid` process, what gdb read of glibc's statistics (watch.json of
//! versions that read `--pid` through gdb) and what the trim probe gave back (`--trim-probe`), one
//! row per reading. The page shows them as tables; the terminal as one line per row, from the
//! same cells (`terminal::watch`).
use trace::human_bytes;
use watch::{GdbReading, TrimProbe, WatchResults};

use super::{Output, Table};

/// The columns of [`gdb`]; a reading gdb could not make has its error in the second cell and the
/// others empty.
const GDB_HEADERS: [&str; 6] = [
    "time (s)",
    "in use",
    "free",
    "free chunks",
    "arenas",
    "pause (ms)",
];

/// glibc's `malloc_info` through gdb, one row per reading; the terminal leaves out a reading that
/// has neither figures nor an error, and shows the time in whole seconds.
pub(crate) fn gdb(r: &WatchResults, output: Output) -> Table {
    Table {
        caption: Some("glibc's malloc_info through gdb".into()),
        headers: GDB_HEADERS.map(String::from).into(),
        rows: r.gdb.iter().filter_map(|g| gdb_row(g, output)).collect(),
    }
}

fn gdb_row(g: &GdbReading, output: Output) -> Option<Vec<String>> {
    let time = match output {
        Output::Terminal => format!("{:.0}", g.t_s),
        _ => format!("{:.1}", g.t_s),
    };
    let failed = |error: String| {
        let mut row = vec![time.clone(), error];
        row.resize(GDB_HEADERS.len(), String::new());
        row
    };
    match (&g.stats, &g.error) {
        (Some(s), _) => Some(vec![
            time.clone(),
            s.handed_out.map_or("-".into(), human_bytes),
            s.free_resident.map_or("-".into(), human_bytes),
            s.free_chunks.map_or("-".into(), |c| c.to_string()),
            s.arenas.len().to_string(),
            format!("{:.0}", g.pause_ms),
        ]),
        (None, Some(e)) => Some(failed(e.clone())),
        (None, None) if output != Output::Terminal => Some(failed(String::new())),
        (None, None) => None,
    }
}

/// Whether a row of [`gdb`] is a reading gdb could not make (its error in the second cell).
pub(crate) fn gdb_failed(row: &[String]) -> bool {
    row[2..].iter().all(String::is_empty)
}

/// How the agent was loaded into a `--pid` process (attach.md), or why it was not.
pub(crate) fn attach(r: &WatchResults) -> Table {
    Table {
        caption: Some("The agent loaded into the running process (no debugger)".into()),
        headers: ["borrowed thread", "borrowed (ms)", "attach (ms)", "error"]
            .map(String::from)
            .into(),
        rows: r
            .attach
            .iter()
            .map(|a| {
                vec![
                    a.safe_point.clone(),
                    format!("{:.1}", a.borrowed_ms),
                    format!("{:.0}", a.total_ms),
                    a.error.clone().unwrap_or_default(),
                ]
            })
            .collect(),
    }
}

/// The trim probe: what each process gave back when asked to.
pub(crate) fn trim(r: &WatchResults) -> Table {
    Table {
        caption: Some("Trim probe".into()),
        headers: ["pid", "call", "RSS before", "RSS after", "given back"]
            .map(String::from)
            .into(),
        rows: r.trim.iter().map(trim_row).collect(),
    }
}

fn trim_row(t: &TrimProbe) -> Vec<String> {
    vec![
        t.pid.to_string(),
        t.call.clone(),
        human_bytes(t.rss_before),
        human_bytes(t.rss_after),
        human_bytes(t.rss_before.saturating_sub(t.rss_after)),
    ]
}
