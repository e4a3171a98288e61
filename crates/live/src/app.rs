//! The view's state: what was received from the engine and the table reader, and what the keys
//! changed. No drawing and no I/O here (`view` draws it, `run` feeds it).
use std::path::PathBuf;

use watch::{Verdict, WatchResults, WatchSample};

use crate::sites::SiteRow;

/// The order of the call sites' table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    /// Largest in-use bytes first.
    InUse,
    /// Fastest growth over the last minute first.
    Growth,
    /// By the site's name.
    Site,
}

impl SortKey {
    pub fn name(self) -> &'static str {
        match self {
            SortKey::InUse => "in use",
            SortKey::Growth => "growth",
            SortKey::Site => "site",
        }
    }

    fn next(self) -> SortKey {
        match self {
            SortKey::InUse => SortKey::Growth,
            SortKey::Growth => SortKey::Site,
            SortKey::Site => SortKey::InUse,
        }
    }
}

/// How the watch ended, as the view says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// Still watching.
    Running,
    /// The user quit the view of a collector: keep it collecting, or stop it? (one key)
    Asking,
    /// The user quit: the view is ending the watch (and the program when it started it).
    Quitting,
    /// The watch is over and its results are written; the view stays until a key.
    Over(String),
}

/// What a key asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    None,
    Redraw,
    /// Leave the view (ending the watch this process runs, if it still runs).
    Quit,
    /// Leave the view, the collector collecting on.
    Detach,
    /// Stop the collector, then leave once its results are written.
    StopCollector,
}

/// What quitting the view of a collector does (`--on-quit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnQuit {
    /// Ask, one key; Enter (or `q` again) stops it: nothing is left running unasked.
    Ask,
    /// Leave it collecting in the background.
    Keep,
    /// Stop it: the watch ends as `watch --pid` ends.
    Stop,
}

/// Everything the screen shows.
pub struct App {
    pub title: String,
    /// The program was started by `live`: quitting ends it.
    pub started_here: bool,
    /// A collector in the background takes the samples (`live --pid`): its pid, and what
    /// quitting does to it.
    pub collector: Option<(u32, OnQuit)>,
    pub root_pid: Option<u32>,
    /// Samples of earlier viewers of the session (re-attach), then this one's.
    pub samples: Vec<WatchSample>,
    pub verdict: Option<Verdict>,
    /// Why there is no site table (no profile table yet, none possible), when there is none.
    pub sites_note: String,
    pub sites: Vec<SiteRow>,
    /// The growth window the sites' growth covers so far, s (up to 60).
    pub growth_window_s: f64,
    pub sort: SortKey,
    pub paused: bool,
    pub output_pane: bool,
    pub output_path: Option<PathBuf>,
    /// The last lines of the program's output (when the pane is shown).
    pub output_tail: Vec<String>,
    pub notes: Vec<String>,
    pub ending: Ending,
    pub results_dir: PathBuf,
}

impl App {
    pub fn on_sample(&mut self, sample: WatchSample) {
        self.samples.push(sample);
        if self.samples.len() >= watch::DEFAULT_CAPACITY {
            thin_older_half(&mut self.samples);
        }
    }

    /// The verdict over the samples so far, as watch would make it at this moment (the final one
    /// replaces it at the end).
    pub fn update_verdict(&mut self, base: &WatchResults) {
        if matches!(self.ending, Ending::Over(_)) {
            return;
        }
        let input = watch::results::verdict_input(base, &self.samples, &[]);
        self.verdict = Some(watch::verdict::classify(&input));
    }

    pub fn on_sites(&mut self, rows: Vec<SiteRow>, window_s: f64, note: String) {
        self.sites = rows;
        self.growth_window_s = window_s;
        self.sites_note = note;
        self.sort_sites();
    }

    /// The end: the results as written (their verdict is watch.json's).
    pub fn on_results(&mut self, results: &WatchResults, what: String) {
        self.verdict = results.verdict.clone();
        if let Some(last) = &results.last {
            if self.samples.last().is_none_or(|s| s.t_s < last.t_s) {
                self.samples.push(last.clone());
            }
        }
        self.ending = Ending::Over(what);
    }

    pub fn sort_sites(&mut self) {
        match self.sort {
            SortKey::InUse => self
                .sites
                .sort_by(|a, b| b.inuse.total_cmp(&a.inuse).then(a.site.cmp(&b.site))),
            SortKey::Growth => self
                .sites
                .sort_by(|a, b| b.growth.total_cmp(&a.growth).then(a.site.cmp(&b.site))),
            SortKey::Site => self.sites.sort_by(|a, b| a.site.cmp(&b.site)),
        }
    }

    /// A key pressed (its character; Ctrl-C arrives as 'q', Esc as '\x1b', Enter as '\n').
    pub fn on_key(&mut self, key: char) -> Action {
        if self.ending == Ending::Asking {
            return match key {
                'k' => Action::Detach,
                's' | 'q' | '\n' => Action::StopCollector,
                '\x1b' => {
                    self.ending = Ending::Running;
                    Action::Redraw
                }
                _ => Action::None,
            };
        }
        match key {
            'q' | '\x1b' => self.quit(),
            's' => {
                self.sort = self.sort.next();
                self.sort_sites();
                Action::Redraw
            }
            'p' | ' ' => {
                self.paused = !self.paused;
                Action::Redraw
            }
            'o' if self.output_path.is_some() => {
                self.output_pane = !self.output_pane;
                Action::Redraw
            }
            _ => Action::None,
        }
    }

    /// `q`: what it does depends on who collects.
    fn quit(&mut self) -> Action {
        let Some((_, on_quit)) = self.collector else {
            return Action::Quit;
        };
        if self.ending != Ending::Running {
            return Action::Quit;
        }
        match on_quit {
            OnQuit::Ask => {
                self.ending = Ending::Asking;
                Action::Redraw
            }
            OnQuit::Keep => Action::Detach,
            OnQuit::Stop => Action::StopCollector,
        }
    }
}

/// Bounded as the watch's own history is (docs/watch.md, "Downsampling"): every other sample of
/// the older half goes, the one with the higher RSS of each pair staying, so a view left open for
/// weeks keeps its memory and its redraws bounded and its peaks.
fn thin_older_half(samples: &mut Vec<WatchSample>) {
    let half = (samples.len() / 2) & !1;
    let mut kept: Vec<WatchSample> = samples[..half]
        .chunks(2)
        .map(|pair| {
            pair.iter()
                .max_by_key(|s| s.rss)
                .cloned()
                .unwrap_or_default()
        })
        .collect();
    kept.extend_from_slice(&samples[half..]);
    *samples = kept;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(site: &str, inuse: f64, growth: f64) -> SiteRow {
        SiteRow {
            site: site.into(),
            pid: 1,
            inuse,
            stderr: 0.0,
            objects: 1.0,
            growth,
        }
    }

    fn app() -> App {
        App {
            title: String::new(),
            started_here: true,
            collector: None,
            root_pid: None,
            samples: Vec::new(),
            verdict: None,
            sites_note: String::new(),
            sites: Vec::new(),
            growth_window_s: 0.0,
            sort: SortKey::InUse,
            paused: false,
            output_pane: false,
            output_path: None,
            output_tail: Vec::new(),
            notes: Vec::new(),
            ending: Ending::Running,
            results_dir: PathBuf::new(),
        }
    }

    #[test]
    fn the_samples_shown_stay_bounded_and_keep_the_peaks() {
        let mut app = app();
        let n = watch::DEFAULT_CAPACITY as u64 * 3;
        for i in 0..n {
            app.on_sample(WatchSample {
                t_s: i as f64,
                // One peak early on.
                rss: if i == 11 { 1 << 30 } else { i },
                ..Default::default()
            });
        }
        assert!(app.samples.len() < watch::DEFAULT_CAPACITY);
        assert!(app.samples.iter().any(|s| s.rss == 1 << 30));
        assert_eq!(app.samples.last().unwrap().t_s, (n - 1) as f64);
        assert!(app.samples.windows(2).all(|w| w[0].t_s < w[1].t_s));
    }

    #[test]
    fn the_sort_key_cycles_through_in_use_growth_and_site() {
        let mut app = app();
        app.on_sites(
            vec![
                row("b", 10.0, 5.0),
                row("a", 30.0, 1.0),
                row("c", 20.0, 9.0),
            ],
            60.0,
            String::new(),
        );
        let order = |app: &App| app.sites.iter().map(|r| r.site.clone()).collect::<String>();
        assert_eq!(order(&app), "acb");
        assert_eq!(app.on_key('s'), Action::Redraw);
        assert_eq!(order(&app), "cba");
        app.on_key('s');
        assert_eq!(order(&app), "abc");
        app.on_key('s');
        assert_eq!(app.sort, SortKey::InUse);
        // Without an output file there is no pane to show.
        assert_eq!(app.on_key('o'), Action::None);
        assert_eq!(app.on_key('q'), Action::Quit);
    }

    #[test]
    fn quitting_the_view_of_a_collector_asks_and_defaults_to_stop() {
        let mut app = app();
        app.collector = Some((7, OnQuit::Ask));
        assert_eq!(app.on_key('q'), Action::Redraw);
        assert_eq!(app.ending, Ending::Asking);
        // Esc goes back to the view; 's' here is the answer, not the sort.
        assert_eq!(app.on_key('\x1b'), Action::Redraw);
        assert_eq!(app.ending, Ending::Running);
        app.on_key('q');
        assert_eq!(app.on_key('k'), Action::Detach);
        app.on_key('q');
        assert_eq!(app.on_key('\n'), Action::StopCollector);
        app.on_key('q');
        assert_eq!(app.on_key('q'), Action::StopCollector);
        app.ending = Ending::Running;
        app.collector = Some((7, OnQuit::Keep));
        assert_eq!(app.on_key('q'), Action::Detach);
        app.collector = Some((7, OnQuit::Stop));
        assert_eq!(app.on_key('q'), Action::StopCollector);
    }
}
