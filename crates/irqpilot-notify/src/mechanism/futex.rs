//! Raw futex ping-pong: one 32-bit word per direction. The sender stores the token and always
//! calls `FUTEX_WAKE` (the textbook pattern, no "is anyone asleep" flag); the receiver calls
//! `FUTEX_WAIT` while the word still holds the previous token. Private futex operations for
//! threads, shared ones for processes.

use super::{Endpoint, Mode, Unavailable};
use crate::error::{Op, WireError};
use crate::shm::{ProcessShareable, SharedMapping};
use crossbeam_utils::CachePadded;
use rustix::io::Errno;
use rustix::thread::futex;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

struct Words {
    words: [CachePadded<AtomicU32>; 2],
}

// SAFETY: two atomics, no pointers.
unsafe impl ProcessShareable for Words {}

/// One side of the futex ping-pong.
pub(crate) struct FutexEnd {
    shared: Arc<SharedMapping<Words>>,
    flags: futex::Flags,
    tx: usize,
    rx: usize,
    last: u64,
}

impl Endpoint for FutexEnd {
    #[inline]
    fn send(&mut self, token: u64) -> Result<(), WireError> {
        let word = &self.shared.words[self.tx];
        // The word carries the token's low 32 bits; the receiver rebuilds the rest.
        word.store(token as u32, Ordering::Release);
        futex::wake(word, self.flags, 1).map_err(|e| WireError::os(Op::FutexWake, e))?;
        Ok(())
    }

    #[inline]
    fn recv(&mut self) -> Result<u64, WireError> {
        let word = &self.shared.words[self.rx];
        let last32 = self.last as u32;
        loop {
            let v = word.load(Ordering::Acquire);
            if v != last32 {
                self.last = self.last.wrapping_add(u64::from(v.wrapping_sub(last32)));
                return Ok(self.last);
            }
            match futex::wait(word, self.flags, last32, None) {
                Ok(()) | Err(Errno::AGAIN) | Err(Errno::INTR) => {}
                Err(e) => return Err(WireError::os(Op::FutexWait, e)),
            }
        }
    }
}

/// The `futex` pair.
pub(crate) fn pair(mode: Mode) -> Result<(FutexEnd, FutexEnd), Unavailable> {
    let shared = Arc::new(
        SharedMapping::new(Words {
            words: [
                CachePadded::new(AtomicU32::new(0)),
                CachePadded::new(AtomicU32::new(0)),
            ],
        })
        .map_err(|e| Unavailable(e.to_string()))?,
    );
    let flags = match mode {
        Mode::Threads => futex::Flags::PRIVATE,
        Mode::Processes => futex::Flags::empty(),
    };
    Ok((
        FutexEnd {
            shared: Arc::clone(&shared),
            flags,
            tx: 0,
            rx: 1,
            last: 0,
        },
        FutexEnd {
            shared,
            flags,
            tx: 1,
            rx: 0,
            last: 0,
        },
    ))
}
