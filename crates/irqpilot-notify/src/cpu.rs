//! Pinning a thread to one CPU, reading the calling thread's CPU time, and this process's
//! allowed CPUs.

use crate::error::{Op, WireError};
use irqpilot_core::{CpuId, CpuSet};
use rustix::thread::{CpuSet as RawCpuSet, sched_getaffinity, sched_setaffinity};

/// Pins the calling thread (or single-threaded process) to `cpu` with `sched_setaffinity(0, ..)`.
pub fn pin_current_thread(cpu: CpuId) -> Result<(), rustix::io::Errno> {
    let idx = cpu.0 as usize;
    if idx >= RawCpuSet::MAX_CPU {
        return Err(rustix::io::Errno::INVAL);
    }
    let mut set = RawCpuSet::new();
    set.set(idx);
    sched_setaffinity(None, &set)
}

/// The CPUs this thread may run on (`sched_getaffinity(0)`); `None` if the call fails.
pub fn allowed_cpus() -> Option<CpuSet> {
    let raw = sched_getaffinity(None).ok()?;
    Some(
        (0..RawCpuSet::MAX_CPU)
            .filter(|&i| raw.is_set(i))
            .map(|i| CpuId(i as u32))
            .collect(),
    )
}

/// CPU time (user + system) of the calling thread in ns, from
/// `clock_gettime(CLOCK_THREAD_CPUTIME_ID)`.
///
/// Not `getrusage(RUSAGE_THREAD)`: that reads the scheduler's `sum_exec_runtime` without the
/// slice the thread is running right now, which is only folded in at a tick or a context switch,
/// so a thread that spins without sleeping shows ~0 for milliseconds (measured here: the spin
/// ping-pong read 0 ns per round trip). The thread CPU clock adds the running slice and is exact.
pub fn thread_cpu_ns() -> Result<u64, WireError> {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Ok((ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64))
}

/// CPU time of the calling thread in ns from `getrusage(RUSAGE_THREAD)` (tick-granular for a
/// thread that never sleeps; see [`thread_cpu_ns`]).
pub fn thread_rusage_ns() -> Result<u64, WireError> {
    // SAFETY: `rusage` is plain old data; all-zero is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable `rusage` for the duration of the call.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    if rc != 0 {
        return Err(WireError::os(Op::Getrusage, last_errno()));
    }
    let tv_ns = |tv: libc::timeval| tv.tv_sec as u64 * 1_000_000_000 + tv.tv_usec as u64 * 1_000;
    Ok(tv_ns(ru.ru_utime) + tv_ns(ru.ru_stime))
}

/// Sets the calling thread's timer slack to 1 ns (`PR_SET_TIMERSLACK`), so absolute-deadline
/// sleeps between pings end on time instead of up to 50 us late.
pub fn tighten_timer_slack() -> Result<(), WireError> {
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and touches only this thread.
    let rc = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
    if rc != 0 {
        return Err(WireError::os(Op::Prctl, last_errno()));
    }
    Ok(())
}

/// The calling thread's last errno as a rustix `Errno`.
pub(crate) fn last_errno() -> rustix::io::Errno {
    crate::error::errno(
        std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_cpu_time_advances_with_work() {
        let a = thread_cpu_ns().unwrap();
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed() < std::time::Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let b = thread_cpu_ns().unwrap();
        // On a loaded machine the thread may have run for much less than the 30 ms of wall time.
        assert!(b > a, "cpu time did not advance: {a} -> {b}");
        assert!(thread_rusage_ns().unwrap() > 0);
    }

    #[test]
    fn pin_to_an_allowed_cpu_and_refuse_a_huge_one() {
        let allowed = allowed_cpus().unwrap();
        let first = allowed.first().unwrap();
        std::thread::spawn(move || pin_current_thread(first).unwrap())
            .join()
            .unwrap();
        assert!(pin_current_thread(CpuId(1_000_000)).is_err());
    }
}
