//! The call sites holding the heap: the agents' profile tables read every second (the estimates
//! of `profiles::snapshot`, named by the symboliser kept across readings), summed by site, with
//! the growth of each over the last minute. Runs on a thread of its own: naming a new module's
//! stacks reads its DWARF, which must not hold up the keys.
use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;

use profiles::snapshot::{self, Target};

/// How far back the growth looks.
pub const GROWTH_WINDOW_S: f64 = 60.0;

/// One call site: the stacks whose first frame outside the allocator is the same function and
/// line, summed over the tree's processes.
#[derive(Debug, Clone, PartialEq)]
pub struct SiteRow {
    pub site: String,
    /// The process holding the most of it.
    pub pid: u32,
    /// In-use bytes (estimate) and its standard error.
    pub inuse: f64,
    pub stderr: f64,
    pub objects: f64,
    /// In-use bytes now less those at the start of the growth window.
    pub growth: f64,
}

/// Reads the tables of one directory again and again, remembering the last minute.
pub struct SiteReader {
    tables: PathBuf,
    symbolizer: symbols::Symbolizer,
    /// (seconds since the reader started, in-use bytes by site) of each reading in the window.
    past: VecDeque<(f64, HashMap<String, f64>)>,
    /// The last reading of a running program.
    last: Option<Reading>,
}

#[derive(Clone)]
/// One reading: the rows (unsorted), the growth window they cover, and a note when there are
/// none.
pub struct Reading {
    pub rows: Vec<SiteRow>,
    pub window_s: f64,
    pub note: String,
}

impl SiteReader {
    pub fn new(tables: PathBuf) -> SiteReader {
        SiteReader {
            tables,
            symbolizer: symbols::Symbolizer::new(vec!["/usr/lib/debug".into()]),
            past: VecDeque::new(),
            last: None,
        }
    }

    /// The sites now, `t_s` seconds after the reader started.
    pub fn read(&mut self, t_s: f64) -> Reading {
        let taken = snapshot::take_all(&Target::Path(self.tables.clone())).map(|mut taken| {
            // An earlier viewer's attach left its table (the figures of its detach): this
            // viewer's attach makes a new one.
            taken
                .snapshots
                .retain(|s| s.state != snapshot::ProcessState::Detached);
            taken
        });
        let mut snaps = match taken {
            Ok(taken) if !taken.snapshots.is_empty() => taken.snapshots,
            Ok(_) => return self.none(
                "no heap profile table yet (the agent makes it at the program's first allocation)",
            ),
            Err(e) => return self.none(&format!("no heap profile: {e}")),
        };
        // A program that ended freed its heap (or not) on its way out: the table of its last
        // moment says little of what held memory while it ran, so the last reading stays.
        if snaps
            .iter()
            .all(|s| s.state != snapshot::ProcessState::Running)
        {
            if let Some(last) = self.last.take() {
                let rows = last.rows.clone();
                self.last = Some(last);
                return Reading {
                    rows,
                    window_s: self.last.as_ref().map_or(0.0, |l| l.window_s),
                    note: "the program ended: its sites at the last reading before".into(),
                };
            }
        }
        // Names each stack's site (StackEstimate::site); the profile itself is not needed here.
        let _ = snapshot::to_pprof_with(&mut snaps, &mut self.symbolizer);
        let mut by_site: HashMap<String, SiteRow> = HashMap::new();
        let mut held_by: HashMap<(String, u32), f64> = HashMap::new();
        for snap in &snaps {
            for stack in &snap.stacks {
                if stack.inuse_space.value <= 0.0 {
                    continue;
                }
                let site = stack.site.clone().unwrap_or_else(|| "?".into());
                let row = by_site.entry(site.clone()).or_insert_with(|| SiteRow {
                    site: site.clone(),
                    pid: snap.pid,
                    inuse: 0.0,
                    stderr: 0.0,
                    objects: 0.0,
                    growth: 0.0,
                });
                row.inuse += stack.inuse_space.value;
                // Variances add (the samples are independent); the square root is taken below.
                row.stderr += stack.inuse_space.stderr.powi(2);
                row.objects += stack.inuse_objects.value;
                *held_by.entry((site, snap.pid)).or_default() += stack.inuse_space.value;
            }
        }
        let now: HashMap<String, f64> = by_site.iter().map(|(k, r)| (k.clone(), r.inuse)).collect();
        self.past.push_back((t_s, now));
        // Keep the newest reading at least GROWTH_WINDOW_S old as the base, drop older ones.
        while self.past.len() > 1 && t_s - self.past[1].0 >= GROWTH_WINDOW_S {
            self.past.pop_front();
        }
        let (base_t, base) = self.past.front().expect("pushed above");
        let window_s = t_s - base_t;
        let mut rows: Vec<SiteRow> = by_site.into_values().collect();
        for row in &mut rows {
            row.stderr = row.stderr.sqrt();
            row.growth = row.inuse - base.get(&row.site).copied().unwrap_or(0.0);
            row.pid = held_by
                .iter()
                .filter(|((site, _), _)| *site == row.site)
                .max_by(|a, b| a.1.total_cmp(b.1))
                .map_or(row.pid, |((_, pid), _)| *pid);
        }
        let note = if rows.is_empty() {
            "the profile table holds no live sampled block yet".into()
        } else {
            String::new()
        };
        let reading = Reading {
            rows,
            window_s,
            note,
        };
        self.last = Some(reading.clone());
        reading
    }

    fn none(&self, why: &str) -> Reading {
        Reading {
            rows: Vec::new(),
            window_s: 0.0,
            note: why.into(),
        }
    }
}
