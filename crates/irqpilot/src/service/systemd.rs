//! The systemd notification protocol (`sd_notify(3)`) through the sd-notify crate: `READY=1`
//! once the service works, `RELOADING=1` / `READY=1` around a reload, `STOPPING=1`, a one-line
//! `STATUS=` for `systemctl status`, and `WATCHDOG=1` pings at half of `WatchdogSec=`. Outside
//! systemd (no `NOTIFY_SOCKET`) every call does nothing.

use std::time::{Duration, Instant};

/// The service's side of the protocol.
#[derive(Debug)]
pub struct Systemd {
    /// Interval between watchdog pings: half of what systemd allows.
    ping_every: Option<Duration>,
    next_ping: Option<Instant>,
    /// Whether a failed notification was reported already (reported once, then quiet).
    complained: bool,
}

impl Systemd {
    /// Reads `NOTIFY_SOCKET`, `WATCHDOG_USEC` and `WATCHDOG_PID` from the environment.
    pub fn from_env() -> Systemd {
        let ping_every = sd_notify::watchdog_enabled()
            .filter(|d| !d.is_zero())
            .map(|d| d / 2);
        Systemd {
            ping_every,
            next_ping: ping_every.map(|d| Instant::now() + d),
            complained: false,
        }
    }

    /// The watchdog interval systemd asked for, if any.
    pub fn watchdog(&self) -> Option<Duration> {
        self.ping_every.map(|d| d * 2)
    }

    fn send(&mut self, states: &[sd_notify::NotifyState<'_>]) {
        if let Err(e) = sd_notify::notify(states) {
            if !self.complained {
                self.complained = true;
                tracing::warn!(error = %e, "cannot notify systemd (NOTIFY_SOCKET)");
            }
        }
    }

    /// The service is up.
    pub fn ready(&mut self, status: &str) {
        self.send(&[
            sd_notify::NotifyState::Ready,
            sd_notify::NotifyState::Status(status),
        ]);
    }

    /// A reload begins (`READY=1` again ends it).
    pub fn reloading(&mut self) {
        // MONOTONIC_USEC lets systemd 253+ match the reload to this message.
        match sd_notify::NotifyState::monotonic_usec_now() {
            Ok(now) => self.send(&[sd_notify::NotifyState::Reloading, now]),
            Err(_) => self.send(&[sd_notify::NotifyState::Reloading]),
        }
    }

    /// The service is stopping.
    pub fn stopping(&mut self) {
        self.send(&[sd_notify::NotifyState::Stopping]);
    }

    /// A new one-line status.
    pub fn status(&mut self, status: &str) {
        self.send(&[sd_notify::NotifyState::Status(status)]);
    }

    /// When the next watchdog ping is due (`None`: no watchdog).
    pub fn next_ping(&self) -> Option<Instant> {
        self.next_ping
    }

    /// Pings the watchdog if a ping is due at `now`.
    pub fn ping_if_due(&mut self, now: Instant) {
        if let (Some(every), Some(due)) = (self.ping_every, self.next_ping) {
            if now >= due {
                self.send(&[sd_notify::NotifyState::Watchdog]);
                self.next_ping = Some(now + every);
            }
        }
    }
}
