//! Signals through signal-hook, turned into [`Event`]s on a channel.
//!
//! A thread blocks in signal-hook's iterator and forwards SIGHUP, SIGTERM and SIGINT; other
//! parts of the service (the metrics listener) send on the same channel. The service's loop
//! waits with [`Events::wait_until`], a `recv_timeout` up to its next deadline: a signal wakes it
//! at once and nothing polls in between.
//!
//! A second SIGTERM or SIGINT while the first is being handled (a revert on exit that hangs, say)
//! ends the process at once with exit status 1, the usual behaviour of daemons.

use anyhow::{Context, Result};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::{Handle, Signals};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::Instant;

/// Something the service's loop must react to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// SIGHUP: re-read the configuration.
    Reload,
    /// SIGTERM or SIGINT (the signal's number): finish and exit.
    Terminate(i32),
    /// The metrics listener stopped (why); the service goes on without it.
    MetricsDown(String),
    /// The metrics side saw IRQs the inventory does not know: re-read it.
    RefreshInventory,
}

/// The service's event channel, fed by the signal thread and by [`Events::sender`] clones.
#[derive(Debug)]
pub struct Events {
    tx: Sender<Event>,
    rx: Receiver<Event>,
    handle: Handle,
}

impl Events {
    /// Installs the signal handlers and starts the thread that forwards them.
    pub fn install() -> Result<Events> {
        let terminating = Arc::new(AtomicBool::new(false));
        for sig in [SIGTERM, SIGINT] {
            // Order matters: the conditional shutdown sees the flag the first signal set.
            signal_hook::flag::register_conditional_shutdown(sig, 1, Arc::clone(&terminating))
                .context("installing signal handlers")?;
            signal_hook::flag::register(sig, Arc::clone(&terminating))
                .context("installing signal handlers")?;
        }
        let mut signals =
            Signals::new([SIGHUP, SIGTERM, SIGINT]).context("installing signal handlers")?;
        let handle = signals.handle();
        let (tx, rx) = channel();
        let forward = tx.clone();
        std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || {
                for sig in signals.forever() {
                    let event = if sig == SIGHUP {
                        Event::Reload
                    } else {
                        Event::Terminate(sig)
                    };
                    if forward.send(event).is_err() {
                        break;
                    }
                }
            })
            .context("starting the signal thread")?;
        Ok(Events { tx, rx, handle })
    }

    /// A sender for other parts of the service.
    pub fn sender(&self) -> Sender<Event> {
        self.tx.clone()
    }

    /// The next event, waiting until `deadline` at most (`None`: the deadline came first).
    pub fn wait_until(&self, deadline: Instant) -> Option<Event> {
        let timeout = deadline.saturating_duration_since(Instant::now());
        self.rx.recv_timeout(timeout).ok()
    }

    /// An event already waiting, without blocking.
    pub fn try_next(&self) -> Option<Event> {
        self.rx.try_recv().ok()
    }
}

impl Drop for Events {
    fn drop(&mut self) {
        self.handle.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_deadline_without_events_returns_none_and_senders_wake_the_wait() {
        let events = Events::install().unwrap();
        let start = Instant::now();
        assert_eq!(events.wait_until(start + Duration::from_millis(30)), None);
        assert!(start.elapsed() >= Duration::from_millis(30));
        let tx = events.sender();
        std::thread::spawn(move || tx.send(Event::MetricsDown("gone".into())));
        assert_eq!(
            events.wait_until(Instant::now() + Duration::from_secs(10)),
            Some(Event::MetricsDown("gone".into()))
        );
        // SIGHUP to this process arrives as a reload (the test binary's own handler).
        signal_hook::low_level::raise(SIGHUP).unwrap();
        assert_eq!(
            events.wait_until(Instant::now() + Duration::from_secs(10)),
            Some(Event::Reload)
        );
    }
}
