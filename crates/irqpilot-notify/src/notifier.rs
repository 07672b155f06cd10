//! The `Notifier` / `Waiter` pair: a one-consumer doorbell on one futex word, with spin, block
//! and adaptive hybrid waiting.
//!
//! # Protocol
//!
//! A [`NotifyCell`] holds one 32-bit word: bit 0 is `SLEEPING` (the waiter may be in
//! `futex_wait`), bits 1..31 are a wrapping sequence number. [`Notifier::notify`] adds 2 to the
//! word (one `lock xadd`) and makes the `futex_wake` system call **only if** `SLEEPING` was set,
//! so back-to-back notifications to a spinning waiter cost no system call. The waiter sets
//! `SLEEPING` with a compare-and-swap that succeeds only while the sequence is unchanged, then
//! calls `futex_wait` on the word it just wrote; since read-modify-writes of one word are totally
//! ordered, either the notifier's add sees the bit (and wakes) or the waiter's CAS sees the new
//! sequence (and does not sleep). No wake-up is lost. Only the waiter clears `SLEEPING`.

use crate::clock::now_ns;
use crate::error::NotifyError;
use crate::hybrid::{HybridConfig, HybridState, SpinPolicy, spin_iteration_ps};
use crate::shm::{ProcessShareable, SharedMapping};
use rustix::thread::futex;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

const SLEEPING: u32 = 1;
const SEQ_STEP: u32 = 2;
const SEQ_MASK: u32 = u32::MAX >> 1;

/// How a [`Waiter`] waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// Busy-poll the word with `spin_loop()` (x86 `pause`); never sleeps. Lowest latency, burns
    /// a CPU while waiting. Meaningless when the notifier runs on the same CPU.
    Spin,
    /// Check once, then `futex_wait`. No CPU while idle; every wake-up pays the kernel.
    Block,
    /// Spin for an adaptive budget, then block (see [`crate::hybrid`] for the rule).
    Hybrid(HybridConfig),
}

impl Strategy {
    /// `Hybrid` with the default tuning.
    pub fn hybrid() -> Strategy {
        Strategy::Hybrid(HybridConfig::default())
    }
}

/// The shared state of one notifier/waiter pair: one cache line.
///
/// Create it with [`NotifyCell::new`] for threads of one process (private futex operations) or
/// [`NotifyCell::new_process_shared`] for a cell placed in memory shared between processes (see
/// [`process_channel`]).
#[repr(C, align(64))]
pub struct NotifyCell {
    /// `SLEEPING` bit + sequence; the futex word.
    word: AtomicU32,
    /// Whether a `Waiter` currently owns the cell.
    claimed: AtomicBool,
    /// Use shared (not `FUTEX_PRIVATE_FLAG`) futex operations.
    process_shared: bool,
    /// `CLOCK_MONOTONIC` ns at the last notify that had to wake a sleeper (a hint for the hybrid
    /// policy's gap estimate).
    wake_ns: AtomicU64,
}

// SAFETY: atomics and a bool only; no pointers; meaningful in any process that maps it.
unsafe impl ProcessShareable for NotifyCell {}

impl NotifyCell {
    /// A cell for threads of one process.
    pub const fn new() -> NotifyCell {
        NotifyCell {
            word: AtomicU32::new(0),
            claimed: AtomicBool::new(false),
            process_shared: false,
            wake_ns: AtomicU64::new(0),
        }
    }

    /// A cell to be placed in `MAP_SHARED` memory and used from several processes (shared futex
    /// operations, keyed by the physical page rather than the address space).
    pub const fn new_process_shared() -> NotifyCell {
        NotifyCell {
            process_shared: true,
            ..NotifyCell::new()
        }
    }

    fn futex_flags(&self) -> futex::Flags {
        if self.process_shared {
            futex::Flags::empty()
        } else {
            futex::Flags::PRIVATE
        }
    }

    /// Number of notifications so far (wrapping at 2^31).
    pub fn sequence(&self) -> u32 {
        self.word.load(Ordering::Acquire) >> 1
    }
}

impl Default for NotifyCell {
    fn default() -> Self {
        NotifyCell::new()
    }
}

impl fmt::Debug for NotifyCell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let w = self.word.load(Ordering::Relaxed);
        f.debug_struct("NotifyCell")
            .field("sequence", &(w >> 1))
            .field("sleeping", &(w & SLEEPING != 0))
            .field("process_shared", &self.process_shared)
            .finish()
    }
}

/// A [`NotifyCell`] in its own shared mapping, cheap to clone; survives `fork()`.
#[derive(Clone, Debug)]
pub struct SharedCell(Arc<SharedMapping<NotifyCell>>);

impl SharedCell {
    /// Maps a fresh process-shared cell.
    pub fn new() -> Result<SharedCell, NotifyError> {
        Ok(SharedCell(Arc::new(SharedMapping::new(
            NotifyCell::new_process_shared(),
        )?)))
    }
}

impl Deref for SharedCell {
    type Target = NotifyCell;
    fn deref(&self) -> &NotifyCell {
        &self.0
    }
}

/// The sending side: wakes the [`Waiter`] of the same cell. Clone it for several producers.
#[derive(Clone)]
pub struct Notifier<H: Deref<Target = NotifyCell> = Arc<NotifyCell>> {
    cell: H,
}

impl<H: Deref<Target = NotifyCell>> Notifier<H> {
    /// A notifier for the cell behind `cell`.
    pub fn new(cell: H) -> Notifier<H> {
        Notifier { cell }
    }

    /// Posts one notification. Makes a `futex_wake` system call only when the waiter announced
    /// that it may be asleep, and returns whether it did (the waiter was asleep or about to be).
    #[inline]
    pub fn notify(&self) -> bool {
        let cell = &*self.cell;
        let prev = cell.word.fetch_add(SEQ_STEP, Ordering::SeqCst);
        if prev & SLEEPING != 0 {
            self.wake_slow(cell);
            return true;
        }
        false
    }

    #[cold]
    fn wake_slow(&self, cell: &NotifyCell) {
        cell.wake_ns.store(now_ns(), Ordering::Relaxed);
        // futex_wake can fail only with EFAULT (impossible for a reference) or EINVAL
        // (impossible flags), so the result carries no information.
        let _ = futex::wake(&cell.word, cell.futex_flags(), 1);
    }
}

impl<H: Deref<Target = NotifyCell>> fmt::Debug for Notifier<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Notifier")
            .field("cell", &*self.cell)
            .finish()
    }
}

/// The receiving side: waits for notifications posted through the same cell. One per cell.
pub struct Waiter<H: Deref<Target = NotifyCell> = Arc<NotifyCell>> {
    cell: H,
    strategy: Strategy,
    policy: Option<SpinPolicy>,
    iter_ps: u64,
    seen: u32,
}

impl<H: Deref<Target = NotifyCell>> Waiter<H> {
    /// The waiter of the cell behind `cell`. Notifications posted before this call are
    /// considered consumed. Fails if the cell already has a waiter.
    pub fn new(cell: H, strategy: Strategy) -> Result<Waiter<H>, NotifyError> {
        if cell
            .claimed
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Err(NotifyError::WaiterTaken);
        }
        let seen = cell.sequence();
        let (policy, iter_ps) = match strategy {
            Strategy::Hybrid(cfg) => (Some(SpinPolicy::new(cfg)), spin_iteration_ps()),
            Strategy::Spin | Strategy::Block => (None, 0),
        };
        Ok(Waiter {
            cell,
            strategy,
            policy,
            iter_ps,
            seen,
        })
    }

    /// The strategy in use.
    pub fn strategy(&self) -> Strategy {
        self.strategy
    }

    /// The hybrid policy's current belief (`None` for spin and block).
    pub fn hybrid_state(&self) -> Option<HybridState> {
        self.policy.as_ref().map(SpinPolicy::state)
    }

    /// Returns the number of notifications since the last successful wait, if any, without
    /// waiting.
    pub fn try_wait(&mut self) -> Option<u32> {
        let w = self.cell.word.load(Ordering::Acquire);
        self.take(w)
    }

    /// Waits for at least one notification and returns how many arrived since the last wait
    /// (notifications coalesce, like an eventfd counter).
    #[inline]
    pub fn wait(&mut self) -> u32 {
        // Without a deadline the wait cannot time out; the loop only guards the type.
        loop {
            if let Some(n) = self.wait_until(None, None) {
                return n;
            }
        }
    }

    /// Like [`wait`](Self::wait) but gives up after `timeout`, returning `None`.
    pub fn wait_timeout(&mut self, timeout: Duration) -> Option<u32> {
        self.wait_until(Some(deadline_after(timeout)), None)
    }

    #[inline]
    fn take(&mut self, w: u32) -> Option<u32> {
        let seq = w >> 1;
        if seq == self.seen {
            return None;
        }
        let n = seq.wrapping_sub(self.seen) & SEQ_MASK;
        self.seen = seq;
        Some(n)
    }

    /// Waits until a notification or `deadline`. `peer_was_asleep` is the request/response hint
    /// (`Some` right after notifying the peer).
    #[inline]
    pub(crate) fn wait_until(
        &mut self,
        deadline: Option<u64>,
        peer_was_asleep: Option<bool>,
    ) -> Option<u32> {
        let w = self.cell.word.load(Ordering::Acquire);
        if let Some(n) = self.take(w) {
            if let Some(p) = self.policy.as_mut() {
                p.observe(0);
            }
            return Some(n);
        }
        match self.strategy {
            Strategy::Spin => self.spin(deadline),
            Strategy::Block => self.block(deadline, None),
            Strategy::Hybrid(_) => self.hybrid(deadline, peer_was_asleep),
        }
    }

    #[inline]
    fn spin(&mut self, deadline: Option<u64>) -> Option<u32> {
        let mut i: u32 = 0;
        loop {
            std::hint::spin_loop();
            let w = self.cell.word.load(Ordering::Acquire);
            if let Some(n) = self.take(w) {
                return Some(n);
            }
            i = i.wrapping_add(1);
            if i % 1024 == 0 {
                if let Some(d) = deadline {
                    if now_ns() >= d {
                        return None;
                    }
                }
            }
        }
    }

    #[inline]
    fn hybrid(&mut self, deadline: Option<u64>, peer_was_asleep: Option<bool>) -> Option<u32> {
        let budget_ns = match (self.policy.as_mut(), peer_was_asleep) {
            (None, _) => 0,
            (Some(p), None) => p.next_budget_ns(),
            (Some(p), Some(asleep)) => p.next_budget_after_notify_ns(asleep),
        };
        let iters = u64::from(budget_ns) * 1000 / self.iter_ps.max(1);
        let mut i = 0u64;
        while i < iters {
            std::hint::spin_loop();
            let w = self.cell.word.load(Ordering::Acquire);
            if let Some(n) = self.take(w) {
                let gap = i * self.iter_ps / 1000;
                if let Some(p) = self.policy.as_mut() {
                    p.observe(gap);
                    if peer_was_asleep == Some(false) {
                        p.observe_awake_spin(true);
                    }
                }
                return Some(n);
            }
            i += 1;
        }
        if let (Some(p), Some(false), true) = (self.policy.as_mut(), peer_was_asleep, iters > 0) {
            p.observe_awake_spin(false);
        }
        self.block(deadline, Some(u64::from(budget_ns)))
    }

    /// Announces `SLEEPING` and sleeps in `futex_wait` until the sequence moves or `deadline`
    /// passes. `spun_ns` is set for the hybrid strategy, which learns from the gap.
    #[cold]
    fn block(&mut self, deadline: Option<u64>, spun_ns: Option<u64>) -> Option<u32> {
        let cell = &*self.cell;
        let flags = cell.futex_flags();
        let t_block = now_ns();
        let woken = loop {
            let w = cell.word.load(Ordering::Acquire);
            if (w >> 1) != self.seen {
                break Some(w);
            }
            let sleeping = w | SLEEPING;
            if w & SLEEPING == 0
                && cell
                    .word
                    .compare_exchange(w, sleeping, Ordering::SeqCst, Ordering::Relaxed)
                    .is_err()
            {
                continue;
            }
            let timeout = match deadline {
                None => None,
                Some(d) => {
                    let now = now_ns();
                    if now >= d {
                        break None;
                    }
                    let left = d - now;
                    Some(rustix::time::Timespec {
                        tv_sec: (left / 1_000_000_000) as _,
                        tv_nsec: (left % 1_000_000_000) as _,
                    })
                }
            };
            // EAGAIN (the word moved), EINTR and ETIMEDOUT all mean: look again.
            let _ = futex::wait(&cell.word, flags, sleeping, timeout.as_ref());
        };
        cell.word.fetch_and(!SLEEPING, Ordering::Relaxed);
        let w = woken?;
        if let (Some(spun), Some(policy)) = (spun_ns, self.policy.as_mut()) {
            let t_wake = now_ns();
            let hinted = cell.wake_ns.load(Ordering::Relaxed);
            let blocked = if (t_block..=t_wake).contains(&hinted) {
                policy.observe_wake_latency(t_wake - hinted);
                hinted - t_block
            } else {
                t_wake.saturating_sub(t_block)
            };
            policy.observe(spun + blocked);
        }
        self.take(w)
    }
}

impl<H: Deref<Target = NotifyCell>> Drop for Waiter<H> {
    fn drop(&mut self) {
        self.cell.claimed.store(false, Ordering::Release);
    }
}

impl<H: Deref<Target = NotifyCell>> fmt::Debug for Waiter<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Waiter")
            .field("cell", &*self.cell)
            .field("strategy", &self.strategy)
            .field("hybrid", &self.hybrid_state())
            .finish()
    }
}

pub(crate) fn deadline_after(timeout: Duration) -> u64 {
    now_ns().saturating_add(u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX))
}

/// A notifier/waiter pair for threads of one process.
///
/// ```
/// use irqpilot_notify::{channel, Strategy};
///
/// // Ping-pong between two threads with the adaptive hybrid strategy: one cell per direction.
/// let (ping_tx, mut ping_rx) = channel(Strategy::hybrid());
/// let (pong_tx, mut pong_rx) = channel(Strategy::hybrid());
/// let ponger = std::thread::spawn(move || {
///     for _ in 0..1000 {
///         ping_rx.wait();
///         pong_tx.notify();
///     }
/// });
/// for _ in 0..1000 {
///     ping_tx.notify();
///     assert_eq!(pong_rx.wait(), 1); // exactly one reply per ping
/// }
/// ponger.join().unwrap();
///
/// // Notifications coalesce: a waiter that falls behind gets the count.
/// let (tx, mut rx) = channel(Strategy::Block);
/// tx.notify();
/// tx.notify();
/// assert_eq!(rx.wait(), 2);
/// assert_eq!(rx.try_wait(), None);
/// ```
pub fn channel(strategy: Strategy) -> (Notifier, Waiter) {
    let cell = Arc::new(NotifyCell::new());
    let notifier = Notifier::new(Arc::clone(&cell));
    let waiter = Waiter {
        cell,
        strategy,
        policy: match strategy {
            Strategy::Hybrid(cfg) => Some(SpinPolicy::new(cfg)),
            _ => None,
        },
        iter_ps: match strategy {
            Strategy::Hybrid(_) => spin_iteration_ps(),
            _ => 0,
        },
        seen: 0,
    };
    waiter.cell.claimed.store(true, Ordering::Release);
    (notifier, waiter)
}

/// A notifier/waiter pair whose cell lives in `MAP_SHARED` memory with shared futex operations:
/// create it before `fork()`, then use the notifier in one process and the waiter in the other.
pub fn process_channel(
    strategy: Strategy,
) -> Result<(Notifier<SharedCell>, Waiter<SharedCell>), NotifyError> {
    let cell = SharedCell::new()?;
    let waiter = Waiter::new(cell.clone(), strategy)?;
    Ok((Notifier::new(cell), waiter))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn ping_pong(strategy: Strategy, rounds: u32) {
        let (ping_tx, mut ping_rx) = channel(strategy);
        let (pong_tx, mut pong_rx) = channel(strategy);
        let ponger = std::thread::spawn(move || {
            for _ in 0..rounds {
                assert_eq!(ping_rx.wait_timeout(Duration::from_secs(20)), Some(1));
                pong_tx.notify();
            }
        });
        for _ in 0..rounds {
            ping_tx.notify();
            assert_eq!(pong_rx.wait_timeout(Duration::from_secs(20)), Some(1));
        }
        ponger.join().unwrap();
    }

    #[test]
    fn ping_pong_every_strategy() {
        ping_pong(Strategy::Spin, 2000);
        ping_pong(Strategy::Block, 2000);
        ping_pong(Strategy::hybrid(), 2000);
    }

    #[test]
    fn notify_reports_a_sleeping_waiter() {
        let (tx, mut rx) = channel(Strategy::Block);
        assert!(!tx.notify(), "nobody asleep yet");
        assert_eq!(rx.wait(), 1);
        let t = std::thread::spawn(move || {
            rx.wait_timeout(Duration::from_secs(20));
        });
        let deadline = Instant::now() + Duration::from_secs(20);
        while tx.cell.word.load(Ordering::Acquire) & SLEEPING == 0 {
            assert!(Instant::now() < deadline);
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(tx.notify());
        t.join().unwrap();
    }

    #[test]
    fn coalesces_and_counts() {
        let (tx, mut rx) = channel(Strategy::hybrid());
        for _ in 0..5 {
            tx.notify();
        }
        assert_eq!(rx.wait(), 5);
        assert_eq!(rx.try_wait(), None);
    }

    #[test]
    fn timeout_without_notification() {
        for strategy in [Strategy::Spin, Strategy::Block, Strategy::hybrid()] {
            let (_tx, mut rx) = channel(strategy);
            let t0 = Instant::now();
            assert_eq!(rx.wait_timeout(Duration::from_millis(20)), None);
            assert!(t0.elapsed() >= Duration::from_millis(20));
        }
    }

    #[test]
    fn sleeping_waiter_is_woken_and_bit_cleared() {
        let (tx, mut rx) = channel(Strategy::Block);
        let t =
            std::thread::spawn(move || rx.wait_timeout(Duration::from_secs(20)).map(|n| (n, rx)));
        // Wait until the waiter announced sleep, then notify.
        let deadline = Instant::now() + Duration::from_secs(20);
        while tx.cell.word.load(Ordering::Acquire) & SLEEPING == 0 {
            assert!(Instant::now() < deadline);
            std::thread::sleep(Duration::from_millis(1));
        }
        tx.notify();
        let (n, rx) = t.join().unwrap().unwrap();
        assert_eq!(n, 1);
        assert_eq!(tx.cell.word.load(Ordering::Acquire) & SLEEPING, 0);
        drop(rx);
    }

    #[test]
    fn one_waiter_per_cell() {
        let cell = Arc::new(NotifyCell::new());
        let w = Waiter::new(Arc::clone(&cell), Strategy::Spin).unwrap();
        assert!(matches!(
            Waiter::new(Arc::clone(&cell), Strategy::Spin),
            Err(NotifyError::WaiterTaken)
        ));
        drop(w);
        assert!(Waiter::new(cell, Strategy::Block).is_ok());
    }

    #[test]
    fn sequence_wraps_cleanly() {
        let cell = Arc::new(NotifyCell::new());
        cell.word.store((SEQ_MASK - 1) << 1, Ordering::Relaxed);
        let tx = Notifier::new(Arc::clone(&cell));
        let mut rx = Waiter::new(Arc::clone(&cell), Strategy::Spin).unwrap();
        tx.notify();
        tx.notify();
        tx.notify();
        assert_eq!(rx.wait(), 3);
    }

    #[test]
    fn hybrid_goes_to_sleep_when_notifications_are_rare() {
        let (tx, mut rx) = channel(Strategy::hybrid());
        let t = std::thread::spawn(move || {
            for _ in 0..12 {
                std::thread::sleep(Duration::from_millis(2));
                tx.notify();
            }
        });
        // Count notifications, not waits: a waiter delayed by 2 ms on a loaded machine sees two
        // coalesced.
        let mut got = 0;
        while got < 12 {
            got += rx.wait_timeout(Duration::from_secs(20)).unwrap();
        }
        t.join().unwrap();
        assert_eq!(rx.hybrid_state().unwrap().budget_ns, 0);
    }

    #[test]
    fn process_shared_cell_works_across_fork() {
        let (tx, mut rx) = process_channel(Strategy::Block).unwrap();
        // SAFETY: the child only notifies (an atomic add and maybe a futex syscall) and leaves
        // with _exit, touching nothing the parent's other threads could hold locked.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            for _ in 0..3 {
                tx.notify();
            }
            // SAFETY: leave the child without running destructors or atexit handlers.
            unsafe { libc::_exit(0) };
        }
        let mut got = 0;
        while got < 3 {
            got += rx.wait_timeout(Duration::from_secs(20)).unwrap();
        }
        let mut status = 0;
        // SAFETY: reaping the child this test forked.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert_eq!(got, 3);
    }
}
