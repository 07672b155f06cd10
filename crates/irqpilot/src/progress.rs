//! Progress bars (indicatif) for the commands that can run for more than a few seconds:
//! `sim --table`, `sim --compare`, `bench notify`, `report`, replays. A bar draws on stderr only
//! when stderr is a terminal, so scripts, pipes and JSON consumers see nothing of it; output
//! printed while it shows goes through [`Progress::suspend`] so the two do not mix.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::Duration;

/// A progress bar, or nothing when stderr is not a terminal.
#[derive(Debug, Clone)]
pub struct Progress {
    bar: ProgressBar,
}

/// Whether progress should be drawn at all.
pub fn wanted() -> bool {
    std::io::stderr().is_terminal()
}

fn bar(len: Option<u64>, template: &str) -> ProgressBar {
    let bar = match len {
        Some(n) => ProgressBar::with_draw_target(Some(n), ProgressDrawTarget::hidden()),
        None => ProgressBar::hidden(),
    };
    if wanted() {
        bar.set_draw_target(ProgressDrawTarget::stderr());
    }
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

impl Progress {
    /// A bar of `len` steps, labelled `msg`, with the position shown as a count.
    pub fn counted(len: u64, msg: &str) -> Progress {
        let b = bar(
            Some(len),
            "{msg} [{bar:30}] {pos}/{len} {elapsed_precise} (eta {eta})",
        );
        b.set_message(msg.to_string());
        Progress { bar: b }
    }

    /// A bar over a span of time (`len` ms), position shown as recorded time.
    pub fn timed(len_ms: u64, msg: &str) -> Progress {
        let b = bar(
            Some(len_ms),
            "{msg} [{bar:30}] {percent}% {elapsed_precise} (eta {eta})",
        );
        b.set_message(msg.to_string());
        Progress { bar: b }
    }

    /// A spinner for work of unknown length: `msg` and the time spent.
    pub fn spinner(msg: &str) -> Progress {
        let b = bar(None, "{spinner} {msg} {elapsed_precise}");
        b.set_message(msg.to_string());
        if !b.is_hidden() {
            b.enable_steady_tick(Duration::from_millis(200));
        }
        Progress { bar: b }
    }

    /// Moves to `pos`.
    pub fn set(&self, pos: u64) {
        self.bar.set_position(pos);
    }

    /// Changes the number of steps.
    pub fn set_length(&self, len: u64) {
        self.bar.set_length(len);
    }

    /// One step done.
    pub fn inc(&self) {
        self.bar.inc(1);
    }

    /// Changes the label.
    pub fn message(&self, msg: String) {
        self.bar.set_message(msg);
    }

    /// Runs `f` (which prints) with the bar cleared, then draws it again.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        self.bar.suspend(f)
    }

    /// Removes the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
