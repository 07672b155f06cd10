//! [`ReplayPlatform`]: a recording behind the [`Platform`] trait, so the commands that sample
//! a live machine (`watch`, `top`, reports) read a recording through the same code.
//!
//! Its clock is the recording's: `now` is a point in recorded time, `sleep(ns)` moves it on by
//! `ns` and waits `ns / speed` of wall time (not at all at full speed). `snapshot_into` gives
//! the last recorded sample at or before the clock, and never the same sample twice: when the
//! clock has not reached a new one, it gives the next one and moves the clock to it. Applying a
//! plan refuses every action: a recording cannot be changed.

use crate::AffinityChange;
use crate::error::RecordError;
use crate::reader::{Player, Recording};
use irqpilot_core::{ApplyReport, Machine, MonoNs, Plan, Platform, PlatformError, Snapshot};
use std::time::Duration;

/// How fast a replay runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Speed {
    /// Recorded seconds per wall second.
    Times(f64),
    /// No waiting at all.
    Max,
}

impl Speed {
    /// A speed from a factor: recorded seconds per wall second, infinite (or not a positive
    /// number) for [`Speed::Max`].
    pub fn from_factor(x: f64) -> Speed {
        if x.is_finite() && x > 0.0 {
            Speed::Times(x)
        } else {
            Speed::Max
        }
    }
}

/// A recording replayed as a machine (see the module documentation).
#[derive(Debug)]
pub struct ReplayPlatform {
    player: Player,
    clock_ns: u64,
    delivered: Option<u64>,
    speed: Speed,
    span: Option<(u64, u64)>,
    changes: Vec<AffinityChange>,
}

fn platform_error(e: RecordError) -> PlatformError {
    PlatformError::Other(e.to_string())
}

impl ReplayPlatform {
    /// A replay of `rec` from its first sample.
    pub fn new(rec: &Recording, speed: Speed) -> Result<ReplayPlatform, RecordError> {
        let mut player = rec.player()?;
        // The inventory comes before the first sample.
        let start = rec.span_ns().map_or(0, |(a, _)| a);
        player.seek(start)?;
        let mut p = ReplayPlatform {
            player,
            clock_ns: start,
            delivered: None,
            speed,
            span: rec.span_ns(),
            changes: Vec::new(),
        };
        // `seek` decoded the first sample; deliver it first.
        p.clock_ns = p.player.time_ns().unwrap_or(start);
        Ok(p)
    }

    /// Moves to recorded time `t_ns` (clamped to the recording): the next snapshot is the last
    /// sample at or before it.
    pub fn seek(&mut self, t_ns: u64) -> Result<(), RecordError> {
        let t = match self.span {
            Some((a, b)) => t_ns.clamp(a, b),
            None => t_ns,
        };
        self.player.seek(t)?;
        self.clock_ns = self.player.time_ns().unwrap_or(t);
        self.delivered = None;
        Ok(())
    }

    /// The replay speed.
    pub fn speed(&self) -> Speed {
        self.speed
    }

    /// Changes the replay speed.
    pub fn set_speed(&mut self, speed: Speed) {
        self.speed = speed;
    }

    /// First and last recorded sample times, ns.
    pub fn span_ns(&self) -> Option<(u64, u64)> {
        self.span
    }

    /// Where the replay's clock is, ns of recorded time.
    pub fn clock_ns(&self) -> u64 {
        self.clock_ns
    }

    /// Whether every sample has been delivered.
    pub fn finished(&self) -> Result<bool, RecordError> {
        Ok(self.delivered.is_some() && self.player.peek_time()?.is_none())
    }

    /// The player, for what only a recording has (the inventory, samples read).
    pub fn player(&self) -> &Player {
        &self.player
    }

    /// Affinity changes recorded between the previous snapshot given out and the last one
    /// (all of them, when the clock skipped samples).
    pub fn changes(&self) -> &[AffinityChange] {
        &self.changes
    }

    fn next(&mut self) -> Result<bool, RecordError> {
        let more = self.player.next_sample()?;
        self.changes.extend_from_slice(self.player.changes());
        Ok(more)
    }

    fn advance(&mut self) -> Result<bool, RecordError> {
        self.changes.clear();
        let mut moved = self.delivered.is_none() && self.player.time_ns().is_some();
        while self.player.peek_time()?.is_some_and(|t| t <= self.clock_ns) {
            self.next()?;
            moved = true;
        }
        if !moved || self.player.time_ns() == self.delivered {
            if !self.next()? {
                return Ok(false);
            }
            if let Some(t) = self.player.time_ns() {
                self.clock_ns = self.clock_ns.max(t);
            }
        }
        Ok(true)
    }
}

impl Platform for ReplayPlatform {
    fn machine(&mut self) -> Result<Machine, PlatformError> {
        Ok(self.player.machine().clone())
    }

    fn snapshot_into(&mut self, snap: &mut Snapshot) -> Result<(), PlatformError> {
        if !self.advance().map_err(platform_error)? {
            return Err(PlatformError::Other("end of the recording".into()));
        }
        let cur = self.player.snapshot();
        snap.taken_at = cur.taken_at;
        snap.interrupts.clone_from(&cur.interrupts);
        snap.stat.clone_from(&cur.stat);
        snap.softirqs.clone_from(&cur.softirqs);
        self.delivered = self.player.time_ns();
        Ok(())
    }

    fn apply(&mut self, plan: &Plan) -> ApplyReport {
        ApplyReport::refuse_all(plan, "a recording cannot be changed")
    }

    fn now(&mut self) -> MonoNs {
        MonoNs(self.clock_ns)
    }

    fn sleep(&mut self, ns: u64) {
        self.clock_ns = self.clock_ns.saturating_add(ns);
        if let Speed::Times(x) = self.speed {
            if x.is_finite() && x > 0.0 {
                std::thread::sleep(Duration::from_secs_f64(ns as f64 / 1e9 / x));
            }
        }
    }
}
