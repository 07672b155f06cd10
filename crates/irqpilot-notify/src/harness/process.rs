//! Process mode: each side in its own forked, pinned, single-threaded child. The children only
//! run the loop (no allocation after fork: every object, the control block and the sample array
//! exist before `fork`), report through shared memory and leave with `_exit`. The parent reaps
//! both with `waitpid`, and on timeout kills the two children it forked, and only those.

use super::{Control, Measured, RunSpec, SideFail, SideReport, pinger, ponger};
use crate::cpu::last_errno;
use crate::error::{NotifyError, RunError};
use crate::mechanism::Endpoint;
use crate::shm::{SharedMapping, SharedSamples};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

fn setup_error(what: &'static str, e: NotifyError) -> RunError {
    match e {
        NotifyError::Map { errno, .. } | NotifyError::Futex { errno, .. } => {
            RunError::Setup { what, errno }
        }
        NotifyError::WaiterTaken => RunError::Setup {
            what,
            errno: rustix::io::Errno::BUSY,
        },
    }
}

/// Forks a child that runs `body`, stores its outcome in `report` and exits.
fn fork_side<F>(body: F, report: &SideReport) -> Result<libc::pid_t, RunError>
where
    F: FnOnce() -> Result<u64, SideFail>,
{
    // SAFETY: the child runs only `body` (the ping-pong loop over objects created before the
    // fork: system calls and atomics, no allocation, no locks), writes the outcome into shared
    // memory and leaves with `_exit`, which runs no destructors or atexit handlers.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(RunError::Setup {
            what: "fork",
            errno: last_errno(),
        });
    }
    if pid == 0 {
        let code = match catch_unwind(AssertUnwindSafe(body)) {
            Ok(r) => {
                let ok = r.is_ok();
                report.store(r);
                if ok { 0 } else { 1 }
            }
            Err(_) => 101,
        };
        // SAFETY: leaving the child without unwinding into the parent's copy of the stack.
        unsafe { libc::_exit(code) };
    }
    Ok(pid)
}

fn kill_and_reap(pid: libc::pid_t) {
    // SAFETY: `pid` is a child this module forked and has not reaped yet.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        let mut status = 0;
        libc::waitpid(pid, &mut status, 0);
    }
}

/// The pinger and ponger children; any still unreaped on drop are killed and reaped.
struct Children([Option<libc::pid_t>; 2]);

impl Drop for Children {
    fn drop(&mut self) {
        for pid in self.0.iter_mut().filter_map(Option::take) {
            kill_and_reap(pid);
        }
    }
}

fn describe_status(status: libc::c_int) -> String {
    if libc::WIFEXITED(status) {
        format!("exited with status {}", libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        format!("killed by signal {}", libc::WTERMSIG(status))
    } else {
        format!("wait status {status:#x}")
    }
}

/// Runs one measurement in two child processes.
pub(crate) fn run<A, B>(mut a: A, mut b: B, spec: &RunSpec) -> Result<Measured, RunError>
where
    A: Endpoint,
    B: Endpoint,
{
    let ctl = SharedMapping::new(Control::default())
        .map_err(|e| setup_error("mmap of the control block", e))?;
    // At least one measured round trip: the last one is what ends the ponger.
    let n = usize::try_from(spec.iterations.max(1)).unwrap_or(usize::MAX);
    let mut samples =
        SharedSamples::new(n).map_err(|e| setup_error("mmap of the sample array", e))?;

    // Whatever happens from here on (an early return, a panic), children not yet reaped are
    // killed and reaped when `children` drops.
    let mut children = Children([None, None]);
    children.0[1] = Some(fork_side(|| ponger(&mut b, &ctl, spec), &ctl.ponger)?);
    children.0[0] = Some(fork_side(
        || pinger(&mut a, &ctl, spec, samples.as_mut_slice()),
        &ctl.pinger,
    )?);

    let deadline = Instant::now() + spec.timeout;
    let pids = &mut children.0;
    let mut statuses = [0; 2];
    while pids.iter().any(Option::is_some) {
        for (slot, status) in pids.iter_mut().zip(statuses.iter_mut()) {
            if let Some(pid) = *slot {
                // SAFETY: reaping our own child without blocking.
                let r = unsafe { libc::waitpid(pid, status, libc::WNOHANG) };
                if r == pid || r < 0 {
                    *slot = None;
                }
            }
        }
        if pids.iter().all(Option::is_none) {
            break;
        }
        // One side gone without success: the other would wait for it forever.
        let gone_bad = |slot: &Option<libc::pid_t>, report: &SideReport| {
            slot.is_none() && !matches!(report.load(), Some(Ok(_)))
        };
        if gone_bad(&pids[0], &ctl.pinger) || gone_bad(&pids[1], &ctl.ponger) {
            for pid in pids.iter_mut().filter_map(Option::take) {
                kill_and_reap(pid);
            }
            break;
        }
        if Instant::now() >= deadline {
            for pid in pids.iter_mut().filter_map(Option::take) {
                kill_and_reap(pid);
            }
            return Err(RunError::TimedOut {
                after_ms: u64::try_from(spec.timeout.as_millis()).unwrap_or(u64::MAX),
            });
        }
        std::thread::sleep(Duration::from_millis(2));
    }

    let side = |report: &SideReport, name: &'static str, status: libc::c_int| match report.load() {
        Some(Ok(cpu)) => Ok(cpu),
        Some(Err(f)) => Err(f.into_run_error(name)),
        None => Err(RunError::Died {
            side: name,
            detail: describe_status(status),
        }),
    };
    let pinger_cpu_ns = side(&ctl.pinger, "pinger", statuses[0])?;
    let ponger_cpu_ns = side(&ctl.ponger, "ponger", statuses[1])?;
    Ok(Measured {
        samples: samples.as_mut_slice()[..ctl.measured().min(n)].to_vec(),
        pinger_cpu_ns,
        ponger_cpu_ns,
    })
}
