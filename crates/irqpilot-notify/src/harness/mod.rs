//! The ping-pong loop shared by thread and process mode.
//!
//! The pinger sends token `n`, waits for the reply, checks it carries `n`, and records the round
//! trip (`CLOCK_MONOTONIC` read before the send and after the receive). The ponger echoes. Both
//! pin themselves first, run the mechanism's per-side preparation, meet at a barrier, run the
//! warm-up (discarded), then the measured round trips, and read their own CPU time
//! (`CLOCK_THREAD_CPUTIME_ID`; see [`crate::cpu::thread_cpu_ns`] for why not `getrusage`) around
//! the measured part only. With an idle gap, the pinger sleeps to an absolute deadline `gap`
//! after the previous reply before each ping; only send to reply is timed.

pub(crate) mod process;
pub(crate) mod threads;

use crate::clock::{now_ns, sleep_until};
use crate::cpu::{pin_current_thread, thread_cpu_ns, tighten_timer_slack};
use crate::error::{Op, RunError, WireError};
use crate::mechanism::Endpoint;
use crate::shm::ProcessShareable;
use crossbeam_utils::CachePadded;
use irqpilot_core::CpuId;
use rustix::io::Errno;
use rustix::thread::futex;
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

/// What one measurement runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RunSpec {
    pub pinger_cpu: CpuId,
    pub ponger_cpu: CpuId,
    pub warmup: u64,
    pub iterations: u64,
    /// Idle time between a reply and the next ping, ns (0 = back-to-back).
    pub gap_ns: u64,
    /// Give up (and report) after this long.
    pub timeout: Duration,
    /// Stop the measured round trips early once they have taken this long, ns (0 = never).
    pub max_time_ns: u64,
}

/// Raw results of one measurement.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Measured {
    /// One RTT per measured round trip, ns.
    pub samples: Vec<u64>,
    /// Pinger CPU time during the measured round trips, ns.
    pub pinger_cpu_ns: u64,
    /// Ponger CPU time during the measured round trips, ns.
    pub ponger_cpu_ns: u64,
}

/// Why a side stopped. `Copy` and allocation-free, so a forked child can report it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SideFail {
    Pin { cpu: CpuId, errno: Errno },
    Wire(WireError),
}

impl From<WireError> for SideFail {
    fn from(e: WireError) -> Self {
        SideFail::Wire(e)
    }
}

impl SideFail {
    pub(crate) fn into_run_error(self, side: &'static str) -> RunError {
        match self {
            SideFail::Pin { cpu, errno } => RunError::Pin { cpu, errno },
            SideFail::Wire(source) => RunError::Wire { side, source },
        }
    }
}

/// How a side finished, as written into shared memory by a child process.
#[repr(C)]
#[derive(Default)]
pub(crate) struct SideReport {
    /// 0 = running, 1 = ok, 2 = failed.
    state: AtomicU32,
    cpu_ns: AtomicU64,
    /// 1 pin, 2 os error, 3 short transfer, 4 sequence.
    kind: AtomicU32,
    op: AtomicU32,
    errno: AtomicI32,
    a: AtomicU64,
    b: AtomicU64,
}

impl SideReport {
    pub(crate) fn store(&self, result: Result<u64, SideFail>) {
        match result {
            Ok(cpu) => {
                self.cpu_ns.store(cpu, Ordering::Relaxed);
                self.state.store(1, Ordering::Release);
            }
            Err(fail) => {
                let (kind, op, errno, a, b) = match fail {
                    SideFail::Pin { cpu, errno } => {
                        (1, 0, errno.raw_os_error(), u64::from(cpu.0), 0)
                    }
                    SideFail::Wire(WireError::Os { op, errno }) => {
                        (2, op as u32, errno.raw_os_error(), 0, 0)
                    }
                    SideFail::Wire(WireError::Short { op, bytes }) => {
                        (3, op as u32, 0, bytes as u64, 0)
                    }
                    SideFail::Wire(WireError::Sequence { expected, received }) => {
                        (4, 0, 0, expected, received)
                    }
                };
                self.kind.store(kind, Ordering::Relaxed);
                self.op.store(op, Ordering::Relaxed);
                self.errno.store(errno, Ordering::Relaxed);
                self.a.store(a, Ordering::Relaxed);
                self.b.store(b, Ordering::Relaxed);
                self.state.store(2, Ordering::Release);
            }
        }
    }

    /// `None` while the side has not reported.
    pub(crate) fn load(&self) -> Option<Result<u64, SideFail>> {
        match self.state.load(Ordering::Acquire) {
            1 => Some(Ok(self.cpu_ns.load(Ordering::Relaxed))),
            2 => {
                let errno = crate::error::errno(self.errno.load(Ordering::Relaxed));
                let op = Op::from_code(self.op.load(Ordering::Relaxed) as u8).unwrap_or(Op::Read);
                let (a, b) = (
                    self.a.load(Ordering::Relaxed),
                    self.b.load(Ordering::Relaxed),
                );
                Some(Err(match self.kind.load(Ordering::Relaxed) {
                    1 => SideFail::Pin {
                        cpu: CpuId(a as u32),
                        errno,
                    },
                    3 => SideFail::Wire(WireError::Short {
                        op,
                        bytes: a as usize,
                    }),
                    4 => SideFail::Wire(WireError::Sequence {
                        expected: a,
                        received: b,
                    }),
                    _ => SideFail::Wire(WireError::Os { op, errno }),
                }))
            }
            _ => None,
        }
    }
}

/// The control block both sides share (in `MAP_SHARED` memory, so it also works across fork).
#[repr(C)]
pub(crate) struct Control {
    /// Arrivals at the start barrier (a shared futex word).
    arrived: AtomicU32,
    /// The token of the last warm-up ping, and of the last measured ping. The pinger decides
    /// (by count or by time) and writes each before sending that ping, so the ponger sees it
    /// when it receives the ping. `u64::MAX` until decided.
    warmup_end: CachePadded<AtomicU64>,
    stop_at: CachePadded<AtomicU64>,
    /// Measured round trips the pinger completed.
    measured: AtomicU64,
    pub(crate) pinger: SideReport,
    pub(crate) ponger: SideReport,
}

// SAFETY: atomics only.
unsafe impl ProcessShareable for Control {}

impl Default for Control {
    fn default() -> Self {
        Control {
            arrived: AtomicU32::new(0),
            warmup_end: CachePadded::new(AtomicU64::new(u64::MAX)),
            stop_at: CachePadded::new(AtomicU64::new(u64::MAX)),
            measured: AtomicU64::new(0),
            pinger: SideReport::default(),
            ponger: SideReport::default(),
        }
    }
}

impl Control {
    /// Measured round trips the pinger completed (valid after it finished).
    pub(crate) fn measured(&self) -> usize {
        usize::try_from(self.measured.load(Ordering::Acquire)).unwrap_or(usize::MAX)
    }

    /// Two-party barrier on a shared futex (works for threads and processes, and on one CPU).
    fn barrier(&self) {
        let n = self.arrived.fetch_add(1, Ordering::AcqRel) + 1;
        if n >= 2 {
            let _ = futex::wake(&self.arrived, futex::Flags::empty(), i32::MAX as u32);
            return;
        }
        loop {
            let v = self.arrived.load(Ordering::Acquire);
            if v >= 2 {
                return;
            }
            let _ = futex::wait(&self.arrived, futex::Flags::empty(), v, None);
        }
    }
}

/// The pinger side: fills `samples` (one per measured round trip) and returns its CPU time.
pub(crate) fn pinger<E: Endpoint>(
    ep: &mut E,
    ctl: &Control,
    spec: &RunSpec,
    samples: &mut [u64],
) -> Result<u64, SideFail> {
    pin_current_thread(spec.pinger_cpu).map_err(|errno| SideFail::Pin {
        cpu: spec.pinger_cpu,
        errno,
    })?;
    if spec.gap_ns > 0 {
        tighten_timer_slack()?;
    }
    ep.prepare()?;
    // Touch every sample slot before timing (in process mode the child maps them lazily).
    samples.fill(0);
    ctl.barrier();
    let mut token = 0u64;
    let mut next = now_ns();
    let mut round_trip = |token: u64, next: &mut u64| -> Result<u64, SideFail> {
        if spec.gap_ns > 0 {
            sleep_until(*next)?;
        }
        let t0 = now_ns();
        ep.send(token)?;
        let reply = ep.recv()?;
        let t1 = now_ns();
        if reply != token {
            return Err(WireError::Sequence {
                expected: token,
                received: reply,
            }
            .into());
        }
        *next = t1.saturating_add(spec.gap_ns);
        Ok(t1.saturating_sub(t0))
    };
    // Whether the clock says a phase has used up its time (checked between round trips, every
    // round trip once they are slow, every 16th while they are fast).
    let over = |i: usize, last_rtt: u64, start: u64, cap: u64| {
        cap > 0 && (last_rtt > 10_000 || i % 16 == 15) && now_ns().saturating_sub(start) >= cap
    };
    // Warm-up: `spec.warmup` round trips or a quarter of the time cap, whichever ends first.
    // The ping that ends it is announced in `warmup_end` before it is sent.
    let warm_start = now_ns();
    let mut last_rtt = 0;
    for i in 0..spec.warmup {
        token += 1;
        let last =
            i + 1 == spec.warmup || over(i as usize, last_rtt, warm_start, spec.max_time_ns / 4);
        if last {
            ctl.warmup_end.store(token, Ordering::Release);
        }
        last_rtt = round_trip(token, &mut next)?;
        if last {
            break;
        }
    }
    let cpu0 = thread_cpu_ns()?;
    let start = now_ns();
    let mut done = 0u64;
    let n = samples.len();
    for (i, slot) in samples.iter_mut().enumerate() {
        token += 1;
        // The last ping (count reached or time cap used) is announced before it is sent.
        let last = i + 1 == n || over(i, last_rtt, start, spec.max_time_ns);
        if last {
            ctl.stop_at.store(token, Ordering::Release);
        }
        last_rtt = round_trip(token, &mut next)?;
        *slot = last_rtt;
        done += 1;
        if last {
            break;
        }
    }
    let cpu1 = thread_cpu_ns()?;
    ctl.measured.store(done, Ordering::Release);
    Ok(cpu1.saturating_sub(cpu0))
}

/// The ponger side: echoes every ping until the one the pinger announced as the last, and
/// returns its CPU time from the end of the warm-up (also announced) to the end.
pub(crate) fn ponger<E: Endpoint>(
    ep: &mut E,
    ctl: &Control,
    spec: &RunSpec,
) -> Result<u64, SideFail> {
    pin_current_thread(spec.ponger_cpu).map_err(|errno| SideFail::Pin {
        cpu: spec.ponger_cpu,
        errno,
    })?;
    ep.prepare()?;
    ctl.barrier();
    let mut cpu0 = if spec.warmup == 0 {
        Some(thread_cpu_ns()?)
    } else {
        None
    };
    loop {
        let t = ep.recv()?;
        ep.send(t)?;
        match cpu0 {
            None => {
                if t == ctl.warmup_end.load(Ordering::Acquire) {
                    cpu0 = Some(thread_cpu_ns()?);
                }
            }
            Some(_) => {
                if t == ctl.stop_at.load(Ordering::Acquire) {
                    break;
                }
            }
        }
    }
    let cpu1 = thread_cpu_ns()?;
    Ok(cpu1.saturating_sub(cpu0.unwrap_or(cpu1)))
}

/// Runs one measurement in the given mode.
pub(crate) fn run<A, B>(
    a: A,
    b: B,
    spec: &RunSpec,
    mode: crate::mechanism::Mode,
) -> Result<Measured, RunError>
where
    A: Endpoint + 'static,
    B: Endpoint + 'static,
{
    match mode {
        crate::mechanism::Mode::Threads => threads::run(a, b, spec),
        crate::mechanism::Mode::Processes => process::run(a, b, spec),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mechanism::{Mode, futex};

    fn spec(timeout_ms: u64) -> RunSpec {
        let cpu = crate::cpu::allowed_cpus()
            .and_then(|s| s.first())
            .unwrap_or(CpuId(0));
        RunSpec {
            pinger_cpu: cpu,
            ponger_cpu: cpu,
            warmup: 10,
            iterations: 200,
            gap_ns: 0,
            timeout: Duration::from_millis(timeout_ms),
            max_time_ns: 0,
        }
    }

    /// Wraps an endpoint and corrupts one token on the way out.
    struct Corrupting<E> {
        inner: E,
        at: u64,
    }

    impl<E: Endpoint> Endpoint for Corrupting<E> {
        fn send(&mut self, token: u64) -> Result<(), WireError> {
            let t = if token == self.at { token + 1 } else { token };
            self.inner.send(t)
        }
        fn recv(&mut self) -> Result<u64, WireError> {
            self.inner.recv()
        }
    }

    /// Never answers.
    struct Silent;

    impl Endpoint for Silent {
        fn send(&mut self, _: u64) -> Result<(), WireError> {
            Ok(())
        }
        fn recv(&mut self) -> Result<u64, WireError> {
            std::thread::sleep(Duration::from_secs(3600));
            Ok(0)
        }
    }

    #[test]
    fn counts_and_cpu_time_come_back() {
        for mode in [Mode::Threads, Mode::Processes] {
            let (a, b) = futex::pair(mode).unwrap();
            let m = run(a, b, &spec(60_000), mode).unwrap();
            assert_eq!(m.samples.len(), 200);
            assert!(m.samples.iter().all(|&s| s > 0));
            assert!(m.pinger_cpu_ns > 0 && m.ponger_cpu_ns > 0, "{mode:?}");
        }
    }

    #[test]
    fn a_time_cap_stops_both_sides_early_and_cleanly() {
        for mode in [Mode::Threads, Mode::Processes] {
            let (a, b) = futex::pair(mode).unwrap();
            // Both phases would take minutes by count; the cap ends each (warm-up at a quarter).
            let s = RunSpec {
                warmup: 10_000_000,
                iterations: 10_000_000,
                max_time_ns: 20_000_000,
                ..spec(120_000)
            };
            let t0 = std::time::Instant::now();
            let m = run(a, b, &s, mode).unwrap();
            assert!(
                !m.samples.is_empty() && m.samples.len() < 10_000_000,
                "{mode:?}"
            );
            assert!(m.samples.iter().all(|&x| x > 0 && x != u64::MAX));
            assert!(t0.elapsed() < Duration::from_secs(60));
        }
    }

    #[test]
    fn a_corrupted_token_breaks_the_sequence() {
        for mode in [Mode::Threads, Mode::Processes] {
            let (a, b) = futex::pair(mode).unwrap();
            // The ponger echoes token 57 as 58: the pinger must notice.
            let b = Corrupting { inner: b, at: 57 };
            let err = run(a, b, &spec(60_000), mode).unwrap_err();
            match err {
                RunError::Wire {
                    side: "pinger",
                    source:
                        WireError::Sequence {
                            expected: 57,
                            received: 58,
                        },
                } => {}
                other => panic!("{mode:?}: {other}"),
            }
        }
    }

    #[test]
    fn a_silent_peer_times_out_instead_of_hanging() {
        for mode in [Mode::Threads, Mode::Processes] {
            let (a, _b) = futex::pair(mode).unwrap();
            let t0 = std::time::Instant::now();
            let err = run(a, Silent, &spec(300), mode).unwrap_err();
            assert!(matches!(err, RunError::TimedOut { after_ms: 300 }), "{err}");
            assert!(t0.elapsed() < Duration::from_secs(30));
        }
    }

    #[test]
    fn side_reports_round_trip_through_shared_memory() {
        let r = SideReport::default();
        assert!(r.load().is_none());
        let fail = SideFail::Wire(WireError::Short {
            op: Op::Read,
            bytes: 3,
        });
        r.store(Err(fail));
        assert_eq!(r.load(), Some(Err(fail)));
        let r = SideReport::default();
        let pin = SideFail::Pin {
            cpu: CpuId(7),
            errno: Errno::INVAL,
        };
        r.store(Err(pin));
        assert_eq!(r.load(), Some(Err(pin)));
        let r = SideReport::default();
        r.store(Ok(42));
        assert_eq!(r.load(), Some(Ok(42)));
    }
}
