//! The view's loop: the watch engine and the table reader on threads of their own, their news
//! through one channel, keys read here, the screen redrawn when something changed.
use std::io::{IsTerminal, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use watch::{WatchError, WatchEvent, WatchOptions, WatchOutcome, WatchResults, WatchSample};

use crate::app::{Action, App, Ending, SortKey};
use crate::sites::{Reading, SiteReader};

/// Where the program's output is, and whether the pane shows it at the start.
#[derive(Debug, Clone)]
pub enum OutputShown {
    /// Not ours to show (an attached process writes where it wrote before).
    NotOurs,
    /// Kept in this file; the pane shows its last lines when `pane` (key `o` toggles).
    File { path: PathBuf, pane: bool },
}

pub struct LiveOptions {
    /// The watch to run (with `--profile` on, so the tables exist).
    pub watch: WatchOptions,
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
    /// Samples of earlier viewers of the same session (re-attach), on this watch's clock.
    pub history: Vec<WatchSample>,
}

#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error("alloclens live draws on a terminal and its standard output is not one: run it in a terminal, or use `alloclens watch` for a log")]
    NotATerminal,
    #[error("cannot use the terminal: {0}")]
    Terminal(#[from] std::io::Error),
    #[error(transparent)]
    Watch(#[from] WatchError),
}

/// News for the drawing thread.
enum News {
    Started(u32),
    Sample(WatchSample),
    Note(String),
    Sites(Reading),
    Ended(Result<WatchOutcome, WatchError>),
}

/// How often the screen is redrawn at most, the tables read and the verdict made.
const REFRESH: Duration = Duration::from_secs(1);

/// Runs the view until the user leaves it. `stop` ends the watch (the CLI's Ctrl-C/SIGTERM flag;
/// the `q` key sets it too); `finish` turns the watch's outcome into the results it writes
/// (watch.json), which the view then shows. When the terminal goes away (a hang-up), the watch
/// still ends with its results written, and the terminal's error is returned.
pub fn run(
    options: LiveOptions,
    stop: &AtomicBool,
    finish: &mut dyn FnMut(WatchOutcome) -> WatchResults,
) -> Result<WatchResults, LiveError> {
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
) -> Result<WatchResults, LiveError> {
    let (tx, rx) = mpsc::channel::<News>();
    let reader_stop = AtomicBool::new(false);
    let mut app = App {
        title: options.title.clone(),
        started_here: options.started_here,
        root_pid: None,
        resumed_at: options.history.last().map(|s| s.t_s),
        samples: options.history.clone(),
        verdict: None,
        sites_note: match options.tables {
            Some(_) => "reading the heap profile table...".into(),
            None => "no heap profile of this process (see the notes of the watch)".into(),
        },
        sites: Vec::new(),
        growth_window_s: 0.0,
        sort: SortKey::InUse,
        paused: false,
        output_pane: matches!(options.output, OutputShown::File { pane: true, .. }),
        output_path: match &options.output {
            OutputShown::File { path, .. } => Some(path.clone()),
            OutputShown::NotOurs => None,
        },
        output_tail: Vec::new(),
        notes: Vec::new(),
        ending: Ending::Running,
        results_dir: options.results_dir.clone(),
    };
    std::thread::scope(|scope| {
        let engine_tx = tx.clone();
        let watch_options = &options.watch;
        scope.spawn(move || {
            let ended = watch::watch(watch_options, stop, &mut |event| {
                let news = match event {
                    WatchEvent::Started { root_pid } => News::Started(root_pid),
                    WatchEvent::Sample(s) => News::Sample(s.clone()),
                    WatchEvent::Note(n) => News::Note(n),
                };
                let _ = engine_tx.send(news);
            });
            let _ = engine_tx.send(News::Ended(ended));
        });
        if let Some(tables) = options.tables.clone() {
            let reader_tx = tx.clone();
            let reader_stop = &reader_stop;
            scope.spawn(move || read_sites(tables, reader_stop, &reader_tx));
        }
        drop(tx);
        let result = Loop {
            app: &mut app,
            base: &options.base,
            stop,
            reader_stop: &reader_stop,
            finish,
            pending: Vec::new(),
        }
        .run(terminal, &rx);
        reader_stop.store(true, Ordering::Relaxed);
        // Ending the watch on an error too, so the engine's thread returns and the scope closes.
        stop.store(true, Ordering::Relaxed);
        result
    })
}

/// The table reader's thread: a reading every REFRESH until told to stop.
fn read_sites(tables: PathBuf, stop: &AtomicBool, tx: &mpsc::Sender<News>) {
    let mut reader = SiteReader::new(tables);
    let start = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let reading = reader.read(start.elapsed().as_secs_f64());
        if tx.send(News::Sites(reading)).is_err() {
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
}

impl Loop<'_> {
    /// Runs the view; when the terminal goes away (a hang-up, an ssh session that dropped), the
    /// watch is ended and its results written all the same, then the error is returned.
    fn run(
        mut self,
        terminal: &mut ratatui::DefaultTerminal,
        rx: &mpsc::Receiver<News>,
    ) -> Result<WatchResults, LiveError> {
        let mut results = None;
        match self.show(terminal, rx, &mut results) {
            Ok(()) => Ok(results.expect("the view leaves with the results")),
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
    ) -> Result<(), LiveError> {
        let mut dirty = true;
        let mut last_refresh: Option<Instant> = None;
        loop {
            while let Ok(news) = rx.try_recv() {
                match news {
                    News::Ended(ended) => {
                        let outcome = ended?;
                        self.reader_stop.store(true, Ordering::Relaxed);
                        self.apply_pending();
                        let r = (self.finish)(outcome);
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
            // The user quit (or a signal ended the watch) and the results are written: leave.
            if results.is_some() && self.stop.load(Ordering::Relaxed) {
                break;
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
                            KeyCode::Esc => 'q',
                            _ => continue,
                        };
                        match self.app.on_key(c) {
                            Action::Quit => self.quit(results.is_some()),
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
        Ok(())
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
            News::Ended(_) => unreachable!("handled by the loop"),
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
    /// exits within the watch's grace), an attached one runs on.
    fn quit(&mut self, over: bool) {
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
