//! Shared-memory mechanisms: the raw cache-line ping-pong (`spin-raw`) and the crate's own
//! [`Notifier`]/[`Waiter`] cells (`spin`, `hybrid`). All state lives in a `MAP_SHARED` mapping,
//! so the same endpoints work for threads and for forked processes.

use super::{Endpoint, Mode, Unavailable};
use crate::duplex::Duplex;
use crate::error::WireError;
use crate::notifier::{Notifier, NotifyCell, Strategy, Waiter};
use crate::shm::{ProcessShareable, SharedMapping};
use crossbeam_utils::CachePadded;
use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Two words on separate cache lines: `lines[0]` carries A→B, `lines[1]` B→A.
struct RawLines {
    lines: [CachePadded<AtomicU64>; 2],
}

// SAFETY: two atomics, no pointers.
unsafe impl ProcessShareable for RawLines {}

/// One side of the raw ping-pong: store the token into the peer's line, spin on its own line.
pub(crate) struct RawSpinEnd {
    shared: Arc<SharedMapping<RawLines>>,
    tx: usize,
    rx: usize,
    last: u64,
}

impl Endpoint for RawSpinEnd {
    #[inline]
    fn send(&mut self, token: u64) -> Result<(), WireError> {
        self.shared.lines[self.tx].store(token, Ordering::Release);
        Ok(())
    }

    #[inline]
    fn recv(&mut self) -> Result<u64, WireError> {
        let line = &self.shared.lines[self.rx];
        loop {
            let v = line.load(Ordering::Acquire);
            if v != self.last {
                self.last = v;
                return Ok(v);
            }
            std::hint::spin_loop();
        }
    }
}

/// The `spin-raw` pair.
pub(crate) fn raw_pair() -> Result<(RawSpinEnd, RawSpinEnd), Unavailable> {
    let shared = Arc::new(
        SharedMapping::new(RawLines {
            lines: [
                CachePadded::new(AtomicU64::new(0)),
                CachePadded::new(AtomicU64::new(0)),
            ],
        })
        .map_err(|e| Unavailable(e.to_string()))?,
    );
    Ok((
        RawSpinEnd {
            shared: Arc::clone(&shared),
            tx: 0,
            rx: 1,
            last: 0,
        },
        RawSpinEnd {
            shared,
            tx: 1,
            rx: 0,
            last: 0,
        },
    ))
}

/// One cell per direction, each on its own cache line (`NotifyCell` is 64-byte aligned).
struct CellPair {
    cells: [NotifyCell; 2],
}

// SAFETY: `NotifyCell` is `ProcessShareable`; an array of them is too.
unsafe impl ProcessShareable for CellPair {}

/// A handle to one cell of a shared pair.
#[derive(Clone)]
pub(crate) struct PairCell {
    pair: Arc<SharedMapping<CellPair>>,
    idx: usize,
}

impl Deref for PairCell {
    type Target = NotifyCell;
    fn deref(&self) -> &NotifyCell {
        &self.pair.cells[self.idx]
    }
}

/// One side built on the library API: a [`Duplex`] (notifier to the peer's cell, waiter on its
/// own). The token is the running count of notifications received, so a lost or extra wake-up
/// shows.
pub(crate) struct DoorbellEnd {
    end: Duplex<PairCell>,
    received: u64,
}

impl Endpoint for DoorbellEnd {
    #[inline]
    fn send(&mut self, _token: u64) -> Result<(), WireError> {
        self.end.notify();
        Ok(())
    }

    #[inline]
    fn recv(&mut self) -> Result<u64, WireError> {
        self.received += u64::from(self.end.wait());
        Ok(self.received)
    }
}

/// The `spin` / `hybrid` pair (or any strategy).
pub(crate) fn doorbell_pair(
    strategy: Strategy,
    mode: Mode,
) -> Result<(DoorbellEnd, DoorbellEnd), Unavailable> {
    let cell = || match mode {
        Mode::Threads => NotifyCell::new(),
        Mode::Processes => NotifyCell::new_process_shared(),
    };
    let pair = Arc::new(
        SharedMapping::new(CellPair {
            cells: [cell(), cell()],
        })
        .map_err(|e| Unavailable(e.to_string()))?,
    );
    let handle = |idx| PairCell {
        pair: Arc::clone(&pair),
        idx,
    };
    let waiter = |idx| Waiter::new(handle(idx), strategy).map_err(|e| Unavailable(e.to_string()));
    Ok((
        DoorbellEnd {
            end: Duplex::new(Notifier::new(handle(1)), waiter(0)?),
            received: 0,
        },
        DoorbellEnd {
            end: Duplex::new(Notifier::new(handle(0)), waiter(1)?),
            received: 0,
        },
    ))
}
