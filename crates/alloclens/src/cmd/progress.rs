//! Progress bars on stderr for long work (indicatif): drawn only when stderr is a terminal, so
//! logs and pipes get nothing. The libraries report through `trace::Progress` and
//! `recorder::RecordProgress`; drawing is the CLI's.
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Whether progress may be drawn: stderr is a terminal.
pub fn wanted() -> bool {
    std::io::stderr().is_terminal()
}

/// A style from `template`, where `{rate}` is the items per second as "1.2 M/s" (indicatif's own
/// `{per_sec}` prints four decimals).
fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template)
        .expect("static template")
        .with_key(
            "rate",
            |state: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "{}/s", trace::human_count(state.per_sec() as u64));
            },
        )
}

/// A bar of `length` steps drawn with `template` (indicatif's keys), hidden unless
/// [`wanted`] and `shown`: the set-up the results-directory commands share.
pub fn counted(length: u64, template: &str, shown: bool) -> ProgressBar {
    let bar = if shown && wanted() {
        ProgressBar::new(length)
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(style(template));
    bar
}

fn bar(length: Option<u64>) -> ProgressBar {
    let bar = match length {
        Some(n) => ProgressBar::new(n),
        None => ProgressBar::new_spinner(),
    };
    if !wanted() {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    bar
}

/// A pass over a trace's records, with its total, rate and ETA; cleared when dropped.
pub struct RecordsBar {
    bar: ProgressBar,
}

impl RecordsBar {
    /// `what` names the work: "analysing", "exporting".
    pub fn new(what: &str) -> RecordsBar {
        let bar = bar(Some(0));
        bar.set_style(style(
            "{msg} [{elapsed_precise}] {bar:20} {human_pos}/{human_len} records ({rate}, ETA {eta})",
        ));
        bar.set_message(what.to_string());
        RecordsBar { bar }
    }
}

impl trace::Progress for RecordsBar {
    fn start(&self, total: u64) {
        self.bar.set_length(total);
    }

    fn advance(&self, records: u64) {
        self.bar.inc(records);
    }
}

impl Drop for RecordsBar {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}

/// A recording's events and bytes so far, read from the recorder's counters twice a second
/// (the total is unknown: no ETA). Stopped and cleared when dropped.
pub struct RecordingBar {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl RecordingBar {
    pub fn start(counters: Arc<recorder::RecordProgress>) -> RecordingBar {
        let stop = Arc::new(AtomicBool::new(false));
        if !wanted() {
            return RecordingBar { stop, thread: None };
        }
        let bar = bar(None);
        bar.set_style(style(
            "{spinner} recording [{elapsed_precise}] {human_pos} events ({rate}), {msg}",
        ));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("alloclens-progress".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    bar.set_position(counters.events.load(Ordering::Relaxed));
                    bar.set_message(format!(
                        "{} written",
                        trace::human_bytes(counters.bytes.load(Ordering::Relaxed))
                    ));
                    std::thread::sleep(Duration::from_millis(500));
                }
                bar.finish_and_clear();
            })
            .ok();
        RecordingBar { stop, thread }
    }
}

impl Drop for RecordingBar {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
