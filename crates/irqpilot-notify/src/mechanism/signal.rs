//! POSIX real-time signals, thread-directed with `tgkill` (never process-directed, so no other
//! thread of the process can catch them). The token travels in a shared slot written before the
//! signal is sent; the signal is the notification.
//!
//! Three receivers:
//! * `signal`: the signal is blocked in the receiving thread, which waits in `sigwaitinfo`;
//! * `signal-handler`: a handler counts the signal; the receiver keeps it blocked except inside
//!   `sigsuspend`, so it sleeps (blocking style);
//! * `signal-handler-spin`: the signal is unblocked and the receiver spins on the handler's count.
//!
//! The handler only does an atomic add (async-signal-safe). Handlers are process-wide, so every
//! signal measurement holds one lock from set-up to the end, and the previous dispositions are
//! restored afterwards.

use super::{Endpoint, Unavailable};
use crate::cpu::last_errno;
use crate::error::{Op, WireError};
use crate::shm::{ProcessShareable, SharedMapping};
use crossbeam_utils::CachePadded;
use libc::c_int;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Signals used: `SIGRTMIN + OFFSET` (received by the pinger) and `+ OFFSET + 1` (ponger).
/// glibc reserves the two below SIGRTMIN; the offset keeps clear of the few that libraries
/// commonly take right at SIGRTMIN.
const OFFSET: c_int = 6;

/// How the receiver waits for the signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SignalWait {
    Sigwaitinfo,
    HandlerSuspend,
    HandlerSpin,
}

impl SignalWait {
    fn uses_handler(self) -> bool {
        !matches!(self, SignalWait::Sigwaitinfo)
    }
}

static LOCK: Mutex<()> = Mutex::new(());
static HANDLER_BASE: AtomicI32 = AtomicI32::new(0);
static HITS: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];

extern "C" fn on_signal(sig: c_int) {
    // Async-signal-safe: atomics only.
    let idx = sig - HANDLER_BASE.load(Ordering::Relaxed);
    if let Some(h) = usize::try_from(idx).ok().and_then(|i| HITS.get(i)) {
        h.fetch_add(1, Ordering::Release);
    }
}

struct Ids {
    pid: AtomicI32,
    tid: AtomicI32,
}

struct SignalShared {
    ids: [CachePadded<Ids>; 2],
    slots: [CachePadded<AtomicU64>; 2],
}

// SAFETY: atomics only.
unsafe impl ProcessShareable for SignalShared {}

fn sigset_of(sig: c_int) -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; sigemptyset/sigaddset initialise and modify it in place.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        set
    }
}

/// One side of a signal ping-pong. Side 0 is the pinger, side 1 the ponger.
pub(crate) struct SignalEnd {
    shared: Arc<SharedMapping<SignalShared>>,
    me: usize,
    base: c_int,
    wait: SignalWait,
    peer: Option<(i32, i32)>,
    hits_seen: u64,
    wait_set: libc::sigset_t,
    suspend_mask: libc::sigset_t,
}

impl SignalEnd {
    fn my_sig(&self) -> c_int {
        self.base + self.me as c_int
    }

    fn peer_ids(&mut self) -> (i32, i32) {
        if let Some(p) = self.peer {
            return p;
        }
        let ids = &self.shared.ids[1 - self.me];
        let p = (
            ids.pid.load(Ordering::Acquire),
            ids.tid.load(Ordering::Acquire),
        );
        self.peer = Some(p);
        p
    }
}

impl Endpoint for SignalEnd {
    fn prepare(&mut self) -> Result<(), WireError> {
        let set = sigset_of(self.my_sig());
        // SAFETY: sigset_t is plain data.
        let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
        let how = if self.wait == SignalWait::HandlerSpin {
            libc::SIG_UNBLOCK
        } else {
            libc::SIG_BLOCK
        };
        // SAFETY: valid sigset pointers; changes only this thread's mask.
        let rc = unsafe { libc::pthread_sigmask(how, &set, &mut old) };
        if rc != 0 {
            return Err(WireError::os(Op::Sigmask, crate::error::errno(rc)));
        }
        // sigsuspend's mask: what the thread had, with our signal let through.
        // SAFETY: `old` is an initialised sigset.
        unsafe { libc::sigdelset(&mut old, self.my_sig()) };
        self.suspend_mask = old;
        self.wait_set = set;
        self.hits_seen = HITS[self.me].load(Ordering::Acquire);
        let ids = &self.shared.ids[self.me];
        ids.pid.store(
            rustix::process::getpid().as_raw_nonzero().get(),
            Ordering::Release,
        );
        ids.tid.store(
            rustix::thread::gettid().as_raw_nonzero().get(),
            Ordering::Release,
        );
        Ok(())
    }

    #[inline]
    fn send(&mut self, token: u64) -> Result<(), WireError> {
        let peer = 1 - self.me;
        self.shared.slots[peer].store(token, Ordering::Release);
        let (pid, tid) = self.peer_ids();
        // SAFETY: tgkill takes three integers; it signals only the named thread.
        let rc = unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, self.base + peer as c_int) };
        if rc != 0 {
            return Err(WireError::os(Op::Tgkill, last_errno()));
        }
        Ok(())
    }

    #[inline]
    fn recv(&mut self) -> Result<u64, WireError> {
        match self.wait {
            SignalWait::Sigwaitinfo => loop {
                // SAFETY: `wait_set` is initialised; a null siginfo pointer is allowed.
                let r = unsafe { libc::sigwaitinfo(&self.wait_set, std::ptr::null_mut()) };
                if r == self.my_sig() {
                    break;
                }
                if r < 0 {
                    let e = last_errno();
                    if e != rustix::io::Errno::INTR {
                        return Err(WireError::os(Op::Sigwaitinfo, e));
                    }
                }
            },
            SignalWait::HandlerSpin => loop {
                let h = HITS[self.me].load(Ordering::Acquire);
                if h != self.hits_seen {
                    self.hits_seen = h;
                    break;
                }
                std::hint::spin_loop();
            },
            SignalWait::HandlerSuspend => loop {
                let h = HITS[self.me].load(Ordering::Acquire);
                if h != self.hits_seen {
                    self.hits_seen = h;
                    break;
                }
                // The signal is blocked outside sigsuspend, so one that arrives between the
                // check and this call stays pending and ends the suspend at once.
                // SAFETY: `suspend_mask` is an initialised sigset; returns -1/EINTR after the
                // handler ran.
                unsafe { libc::sigsuspend(&self.suspend_mask) };
            },
        }
        Ok(self.shared.slots[self.me].load(Ordering::Acquire))
    }
}

/// Keeps other signal measurements out and restores the signal dispositions on drop. Hold it
/// until both sides have finished.
pub(crate) struct SignalSession {
    _lock: MutexGuard<'static, ()>,
    sigs: [c_int; 2],
    old: Option<[libc::sigaction; 2]>,
}

impl Drop for SignalSession {
    fn drop(&mut self) {
        if let Some(old) = &self.old {
            for (sig, act) in self.sigs.iter().zip(old) {
                // SAFETY: restoring a disposition previously returned by sigaction.
                unsafe { libc::sigaction(*sig, act, std::ptr::null_mut()) };
            }
        }
    }
}

fn install_handler(sig: c_int) -> Result<libc::sigaction, Unavailable> {
    // SAFETY: sigaction is plain data; the handler is an `extern "C" fn(c_int)` that only
    // touches atomics.
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = on_signal as extern "C" fn(c_int) as usize;
        act.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut act.sa_mask);
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(sig, &act, &mut old) != 0 {
            return Err(Unavailable(format!(
                "sigaction({sig}) failed: {}",
                std::io::Error::last_os_error()
            )));
        }
        Ok(old)
    }
}

/// A signal pair and the session guard that must outlive the measurement.
pub(crate) fn pair(wait: SignalWait) -> Result<(SignalEnd, SignalEnd, SignalSession), Unavailable> {
    let lock = LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let base = libc::SIGRTMIN() + OFFSET;
    if base + 1 > libc::SIGRTMAX() {
        return Err(Unavailable(format!(
            "real-time signals SIGRTMIN+{OFFSET}..+{} exceed SIGRTMAX ({})",
            OFFSET + 1,
            libc::SIGRTMAX()
        )));
    }
    let sigs = [base, base + 1];
    let mut session = SignalSession {
        _lock: lock,
        sigs,
        old: None,
    };
    if wait.uses_handler() {
        HANDLER_BASE.store(base, Ordering::Relaxed);
        let first = install_handler(sigs[0])?;
        let second = match install_handler(sigs[1]) {
            Ok(o) => o,
            Err(e) => {
                // SAFETY: restoring what sigaction returned a moment ago.
                unsafe { libc::sigaction(sigs[0], &first, std::ptr::null_mut()) };
                return Err(e);
            }
        };
        session.old = Some([first, second]);
    }
    let shared = Arc::new(
        SharedMapping::new(SignalShared {
            ids: std::array::from_fn(|_| {
                CachePadded::new(Ids {
                    pid: AtomicI32::new(0),
                    tid: AtomicI32::new(0),
                })
            }),
            slots: std::array::from_fn(|_| CachePadded::new(AtomicU64::new(0))),
        })
        .map_err(|e| Unavailable(e.to_string()))?,
    );
    let end = |me: usize| SignalEnd {
        shared: Arc::clone(&shared),
        me,
        base,
        wait,
        peer: None,
        hits_seen: 0,
        wait_set: sigset_of(base + me as c_int),
        suspend_mask: sigset_of(base + me as c_int),
    };
    Ok((end(0), end(1), session))
}
