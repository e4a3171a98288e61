//! The view's loop: the watch engine and the table reader on threads of their own, their news
//! through one channel, keys read here, the screen redrawn when something changed.
use std::io::{IsTerminal, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use watch::{WatchError, WatchEvent, WatchOptions, WatchOutcome, WatchResults, WatchSample};

use crate::app::{Action, App, Ending, OnQuit, SortKey};
use crate::collector::Collector;
use crate::follow::SamplesTail;
use crate::sites::{Reading, SiteReader};

/// Where the program's output is, and whether the pane shows it at the start.
#[derive(Debug, Clone)]
pub enum OutputShown {
    /// Not ours to show (an attached process writes where it wrote before).
    NotOurs,
    /// Kept in this file; the pane shows its last lines when `pane` (key `o` toggles).
    File { path: PathBuf, pane: bool },
}

/// Who takes the samples.
pub enum Source {
    /// The watch engine, run here (`live -- CMD`; with `--profile` on, so the tables exist).
    Engine(Box<WatchOptions>),
    /// A collector in the background (`live --pid`): the view reads its directory.
    Collector {
        collector: Collector,
        on_quit: OnQuit,
    },
}

/// How the view was left.
pub enum Left {
    /// The watch is over: its results, as written.
    Results(Box<WatchResults>),
    /// The collector (this pid) collects on, with no viewer.
    Collecting(u32),
}

pub struct LiveOptions {
    pub source: Source,
    /// watch.json as known at the start: the verdict so far is made with it.
    pub base: WatchResults,
    /// The command or the process, for the header.
    pub title: String,
    /// Where the profile tables are (DIR/agent), when the heap is profiled.
    pub tables: Option<PathBuf>,
    pub output: OutputShown,
    /// The program was started by `live`: quitting ends it (SIGTERM, then the watch's grace).
    pub started_here: bool,
    pub results_dir: PathBuf,
    /// Said at the start (the collector's warnings), shown with the engine's notes.
    pub notes: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error("alloclens live draws on a terminal and its standard output is not one: run it in a terminal, or use `alloclens watch` for a log")]
    NotATerminal,
    #[error("cannot use the terminal: {0}")]
    Terminal(#[from] std::io::Error),
    #[error(transparent)]
    Watch(#[from] WatchError),
    #[error("{0}")]
    Collector(String),
}

/// News for the drawing thread.
enum News {
    Started(u32),
    Sample(WatchSample),
    Note(String),
    Sites(Reading),
    Ended(Result<WatchOutcome, WatchError>),
    /// The collector ended: its results, or why there are none.
    Over(Result<Box<WatchResults>, String>),
}

/// How often the screen is redrawn at most, the tables read and the verdict made.
const REFRESH: Duration = Duration::from_secs(1);

/// Runs the view until the user leaves it. `stop` ends the watch run here (the CLI's
/// Ctrl-C/SIGTERM/SIGHUP flag; the `q` key sets it too), or only the view of a collector (which
/// collects on); `finish` turns the watch's outcome into the results it writes (watch.json),
/// which the view then shows. When the terminal goes away (a hang-up), a watch run here still
/// ends with its results written, and the terminal's error is returned.
pub fn run(
    options: LiveOptions,
    stop: &AtomicBool,
    finish: &mut dyn FnMut(WatchOutcome) -> WatchResults,
) -> Result<Left, LiveError> {
    check_terminal()?;
    let mut terminal = ratatui::try_init()?;
    let result = run_on(&mut terminal, options, stop, finish);
    if let Err(LiveError::Terminal(_)) = &result {
        // The terminal is gone: nothing to give back, and ratatui's drop would write to it (and
        // its message to a stderr that is gone too, which aborts).
        std::mem::forget(terminal);
        return result;
    }
    drop(terminal);
    let restored = ratatui::try_restore();
    let results = result?;
    restored?;
    Ok(results)
}

/// The view needs a terminal on stdout: checked before anything is started or written.
pub fn check_terminal() -> Result<(), LiveError> {
    if std::io::stdout().is_terminal() {
        Ok(())
    } else {
        Err(LiveError::NotATerminal)
    }
}

fn run_on(
    terminal: &mut ratatui::DefaultTerminal,
    options: LiveOptions,
    stop: &AtomicBool,
    finish: &mut dyn FnMut(WatchOutcome) -> WatchResults,
) -> Result<Left, LiveError> {
    let LiveOptions {
        source,
        base,
        title,
        tables,
        output,
        started_here,
        results_dir,
        notes,
    } = options;
    let (tx, rx) = mpsc::channel::<News>();
    let reader_stop = AtomicBool::new(false);
    let collector = match &source {
        Source::Collector { collector, on_quit } => Some((collector.pid, *on_quit)),
        Source::Engine(_) => None,
    };
    let mut app = App {
        title,
        started_here,
        collector,
        root_pid: collector.and(base.pid),
        samples: Vec::new(),
        verdict: None,
        sites_note: match tables {
            Some(_) => "reading the heap profile table...".into(),
            None => "no heap profile of this process (see the notes of the watch)".into(),
        },
        sites: Vec::new(),
        growth_window_s: 0.0,
        sort: SortKey::InUse,
        paused: false,
        output_pane: matches!(output, OutputShown::File { pane: true, .. }),
        output_path: match &output {
            OutputShown::File { path, .. } => Some(path.clone()),
            OutputShown::NotOurs => None,
        },
        output_tail: Vec::new(),
        notes,
        ending: Ending::Running,
        results_dir,
    };
    std::thread::scope(|scope| {
        let source_tx = tx.clone();
        let reader_stop = &reader_stop;
        match source {
            Source::Engine(watch_options) => {
                scope.spawn(move || {
                    let ended = watch::watch(&watch_options, stop, &mut |event| {
                        let news = match event {
                            WatchEvent::Started { root_pid } => News::Started(root_pid),
                            WatchEvent::Sample(s) => News::Sample(s.clone()),
                            WatchEvent::Note(n) => News::Note(n),
                        };
                        let _ = source_tx.send(news);
                    });
                    let _ = source_tx.send(News::Ended(ended));
                });
            }
            Source::Collector { collector, .. } => {
                scope.spawn(move || follow_collector(collector, reader_stop, &source_tx));
            }
        }
        if let Some(tables) = tables {
            let reader_tx = tx.clone();
            scope.spawn(move || read_sites(tables, reader_stop, &reader_tx));
        }
        drop(tx);
        let result = Loop {
            app: &mut app,
            base: &base,
            stop,
            reader_stop,
            finish,
            pending: Vec::new(),
            leaving: false,
        }
        .run(terminal, &rx);
        reader_stop.store(true, Ordering::Relaxed);
        // Ending the watch on an error too, so the engine's thread returns and the scope closes.
        stop.store(true, Ordering::Relaxed);
        result
    })
}

/// The follower of a collector's session: the samples it writes, every 200 ms, until it ends
/// (then its results) or the view is left.
fn follow_collector(mut collector: Collector, stop: &AtomicBool, tx: &mpsc::Sender<News>) {
    let mut samples = SamplesTail::new(collector.dir.join(watch::SAMPLES_CSV));
    loop {
        // Checked before the rows are read: the last rows of a collector that ended are read.
        let running = collector.is_running();
        for sample in samples.read_new() {
            if tx.send(News::Sample(sample)).is_err() {
                return;
            }
        }
        if !running {
            let over = crate::follow::final_results(&collector.dir).map(Box::new).ok_or_else(|| {
                format!(
                    "the background collector (pid {}) ended without writing its results: {} says why: {}",
                    collector.pid,
                    collector.dir.join(crate::collector::LOG_FILE).display(),
                    collector.last_words()
                )
            });
            let _ = tx.send(News::Over(over));
            return;
        }
        let next = Instant::now() + Duration::from_millis(200);
        while Instant::now() < next {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The table reader's thread: a reading every REFRESH until told to stop, and one more then: a
/// program that ended between two readings (or before the first) leaves its table, which the
/// still view shows.
fn read_sites(tables: PathBuf, stop: &AtomicBool, tx: &mpsc::Sender<News>) {
    let mut reader = SiteReader::new(tables);
    let start = Instant::now();
    loop {
        let stopping = stop.load(Ordering::Relaxed);
        let reading = reader.read(start.elapsed().as_secs_f64());
        if tx.send(News::Sites(reading)).is_err() || stopping {
            return;
        }
        let next = Instant::now() + REFRESH;
        while Instant::now() < next && !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

struct Loop<'a> {
    app: &'a mut App,
    base: &'a WatchResults,
    stop: &'a AtomicBool,
    /// Ends the table reader: once the watch is over, the view is still (no reading, no redraw
    /// but for a key or a resize).
    reader_stop: &'a AtomicBool,
    finish: &'a mut dyn FnMut(WatchOutcome) -> WatchResults,
    /// Samples and readings received while paused, applied on resume.
    pending: Vec<News>,
    /// The collector was asked to stop (or its watch is over and `q` was pressed): the view is
    /// left once its results are in.
    leaving: bool,
}

impl Loop<'_> {
    /// Runs the view; when the terminal goes away (a hang-up, an ssh session that dropped), the
    /// watch is ended and its results written all the same, then the error is returned.
    fn run(
        mut self,
        terminal: &mut ratatui::DefaultTerminal,
        rx: &mpsc::Receiver<News>,
    ) -> Result<Left, LiveError> {
        let mut results = None;
        match self.show(terminal, rx, &mut results) {
            Ok(left) => Ok(left),
            // A collector collects on: nothing to wait for.
            Err(LiveError::Terminal(e)) if self.app.collector.is_some() => {
                Err(LiveError::Terminal(e))
            }
            Err(LiveError::Terminal(e)) => {
                self.stop.store(true, Ordering::Relaxed);
                while results.is_none() {
                    match rx.recv() {
                        Ok(News::Ended(ended)) => results = Some((self.finish)(ended?)),
                        Ok(_) => {}
                        Err(_) => break,
                    }
                }
                Err(LiveError::Terminal(e))
            }
            Err(e) => Err(e),
        }
    }

    fn show(
        &mut self,
        terminal: &mut ratatui::DefaultTerminal,
        rx: &mpsc::Receiver<News>,
        results: &mut Option<WatchResults>,
    ) -> Result<Left, LiveError> {
        let mut dirty = true;
        let mut last_refresh: Option<Instant> = None;
        loop {
            while let Ok(news) = rx.try_recv() {
                match news {
                    News::Ended(_) | News::Over(_) => {
                        let r = match news {
                            News::Ended(ended) => {
                                let outcome = ended?;
                                self.reader_stop.store(true, Ordering::Relaxed);
                                self.apply_pending();
                                (self.finish)(outcome)
                            }
                            News::Over(over) => {
                                let r = *over.map_err(LiveError::Collector)?;
                                self.reader_stop.store(true, Ordering::Relaxed);
                                self.apply_pending();
                                r
                            }
                            _ => unreachable!("matched above"),
                        };
                        let what = ending_words(&r);
                        self.app.on_results(&r, what);
                        *results = Some(r);
                        // The program's last words, in the pane.
                        if let Some(path) = self
                            .app
                            .output_path
                            .as_ref()
                            .filter(|_| self.app.output_pane)
                        {
                            self.app.output_tail = tail(path, 5);
                        }
                        dirty = true;
                    }
                    news => dirty |= self.on_news(news),
                }
            }
            if let Some(left) = self.left(results) {
                return Ok(left);
            }
            let over = results.is_some();
            let due = !over && last_refresh.is_none_or(|t| t.elapsed() >= REFRESH);
            if due && !self.app.paused {
                last_refresh = Some(Instant::now());
                self.app.update_verdict(self.base);
                if self.app.output_pane {
                    if let Some(path) = &self.app.output_path {
                        self.app.output_tail = tail(path, 5);
                    }
                }
                dirty = true;
            }
            if dirty {
                terminal.draw(|frame| crate::view::draw(frame, self.app))?;
                dirty = false;
            }
            // crossterm loops for ever reading a terminal that hung up (EOF or EIO, never
            // WouldBlock): it is asked only once poll(2) says the terminal is there and has input.
            if terminal_input(Duration::from_millis(100))? && event::poll(Duration::ZERO)? {
                match event::read()? {
                    Event::Key(k) if k.kind == KeyEventKind::Press => {
                        let c = match k.code {
                            KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => {
                                'q'
                            }
                            KeyCode::Char(c) => c.to_ascii_lowercase(),
                            KeyCode::Esc => '\x1b',
                            KeyCode::Enter => '\n',
                            _ => continue,
                        };
                        match self.app.on_key(c) {
                            Action::Quit => self.quit(results.is_some()),
                            Action::Detach => {
                                let pid = self.app.collector.map_or(0, |(pid, _)| pid);
                                return Ok(Left::Collecting(pid));
                            }
                            Action::StopCollector => self.stop_collector(),
                            Action::Redraw => {
                                if !self.app.paused {
                                    self.apply_pending();
                                }
                                // The pane's lines are read now, not at the next refresh.
                                last_refresh = None;
                            }
                            Action::None => {}
                        }
                        dirty = true;
                    }
                    Event::Resize(..) => dirty = true,
                    _ => {}
                }
            }
        }
    }

    /// Whether to leave the view now, and how. A watch run here: once the user quit (or a signal
    /// ended it) and its results are written. A collector's view: on a signal at once (the
    /// collector collects on), or once its results are in after the user stopped it.
    fn left(&self, results: &Option<WatchResults>) -> Option<Left> {
        let signalled = self.stop.load(Ordering::Relaxed);
        match (self.app.collector, results) {
            (None, Some(r)) if signalled => Some(Left::Results(Box::new(r.clone()))),
            (None, _) => None,
            (Some(_), Some(r)) if signalled || self.leaving => {
                Some(Left::Results(Box::new(r.clone())))
            }
            (Some((pid, _)), None) if signalled => Some(Left::Collecting(pid)),
            (Some(_), _) => None,
        }
    }

    /// The collector is asked to end its watch; the view stays until its results are in.
    fn stop_collector(&mut self) {
        if let Some((pid, _)) = self.app.collector {
            self.app.ending = Ending::Quitting;
            self.leaving = true;
            let dir = self.app.results_dir.clone();
            // Still this session's collector (it may have ended meanwhile: its results follow).
            if let Some(collector) = Collector::find(&dir).filter(|c| c.pid == pid) {
                if let Err(e) = collector.stop() {
                    self.app
                        .notes
                        .push(format!("cannot stop the collector: {e}"));
                }
            }
        }
    }

    /// News of the engine or the reader; true when the screen changes.
    fn on_news(&mut self, news: News) -> bool {
        match news {
            News::Started(pid) => self.app.root_pid = Some(pid),
            News::Note(n) => self.app.notes.push(n),
            news if self.app.paused => {
                self.pending.push(news);
                return false;
            }
            News::Sample(s) => self.app.on_sample(s),
            News::Sites(r) => self.app.on_sites(r.rows, r.window_s, r.note),
            News::Ended(_) | News::Over(_) => unreachable!("handled by the loop"),
        }
        true
    }

    fn apply_pending(&mut self) {
        let was_paused = std::mem::replace(&mut self.app.paused, false);
        for news in std::mem::take(&mut self.pending) {
            self.on_news(news);
        }
        self.app.paused = was_paused;
    }

    /// `q`: the watch ends; a program `live` started gets SIGTERM (its exit status is kept if it
    /// exits within the watch's grace), an attached one runs on. After a collector's end: leave.
    fn quit(&mut self, over: bool) {
        if self.app.collector.is_some() {
            self.leaving = true;
            return;
        }
        if !over {
            self.app.ending = Ending::Quitting;
            if let (true, Some(pid)) = (self.app.started_here, self.app.root_pid) {
                // SAFETY: kill(2) on the program this watch started (our child, not yet reaped:
                // the pid cannot have been reused).
                unsafe { libc::kill(pid as i32, libc::SIGTERM) };
            }
        }
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Whether the terminal (stdin) has input within `timeout`; an error once it hung up (the ssh
/// session dropped, the terminal closed).
fn terminal_input(timeout: Duration) -> std::io::Result<bool> {
    let mut fd = libc::pollfd {
        fd: libc::STDIN_FILENO,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: poll(2) on one pollfd that lives across the call.
    let ready = unsafe { libc::poll(&mut fd, 1, timeout.as_millis() as libc::c_int) };
    if ready < 0 {
        let e = std::io::Error::last_os_error();
        return match e.kind() {
            std::io::ErrorKind::Interrupted => Ok(false),
            _ => Err(e),
        };
    }
    if fd.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::BrokenPipe,
            "the terminal hung up",
        ));
    }
    Ok(fd.revents & libc::POLLIN != 0)
}

/// How the watch ended, for the header.
fn ending_words(r: &WatchResults) -> String {
    let exit = r.exit.map(|e| match (e.code, e.signal) {
        (Some(c), _) => format!("exited with status {c}"),
        (_, Some(s)) => format!("killed by signal {s}"),
        _ => "exited".to_string(),
    });
    match (exit, r.still_running) {
        (Some(e), _) => format!("program {e}"),
        (None, true) => "watch ended, the program runs on".into(),
        (None, false) => "program ended".into(),
    }
}

/// The last `n` lines of the file (its last 16 KiB read).
fn tail(path: &Path, n: usize) -> Vec<String> {
    let Ok(mut file) = std::fs::File::open(path) else {
        return Vec::new();
    };
    let len = file.metadata().map_or(0, |m| m.len());
    let _ = file.seek(SeekFrom::Start(len.saturating_sub(16 * 1024)));
    let mut buf = Vec::new();
    let _ = file.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|l| l.to_string())
        .collect()
}
