//! Thread mode: each side on its own pinned thread of this process.

use super::{Control, Measured, RunSpec, SideFail, pinger, ponger};
use crate::error::RunError;
use crate::mechanism::Endpoint;
use crate::shm::SharedMapping;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Instant;

enum Msg {
    Pinger(Result<(Vec<u64>, u64), SideFail>),
    Ponger(Result<u64, SideFail>),
    Died(&'static str),
}

/// Runs one measurement on two threads. On timeout the side threads are left behind (blocked
/// in the mechanism) and the measurement is reported as timed out.
pub(crate) fn run<A, B>(mut a: A, mut b: B, spec: &RunSpec) -> Result<Measured, RunError>
where
    A: Endpoint + 'static,
    B: Endpoint + 'static,
{
    let ctl = Arc::new(SharedMapping::new(Control::default()).map_err(|e| match e {
        crate::error::NotifyError::Map { errno, .. } => RunError::Setup {
            what: "mmap of the control block",
            errno,
        },
        _ => RunError::Setup {
            what: "control block",
            errno: rustix::io::Errno::NOMEM,
        },
    })?);
    let spec = *spec;
    // At least one measured round trip: the last one is what ends the ponger.
    let n = usize::try_from(spec.iterations.max(1)).unwrap_or(usize::MAX);
    let (tx, rx) = mpsc::channel::<Msg>();

    let ponger_thread = {
        let ctl = Arc::clone(&ctl);
        let tx = tx.clone();
        std::thread::Builder::new()
            .name("notify-ponger".into())
            .spawn(move || {
                let r = catch_unwind(AssertUnwindSafe(|| ponger(&mut b, &ctl, &spec)));
                let _ = tx.send(match r {
                    Ok(r) => Msg::Ponger(r),
                    Err(_) => Msg::Died("ponger"),
                });
            })
            .map_err(RunError::Spawn)?
    };
    let pinger_thread = {
        let ctl = Arc::clone(&ctl);
        std::thread::Builder::new()
            .name("notify-pinger".into())
            .spawn(move || {
                // Non-zero fill: every page is written (faulted in) before timing starts.
                let mut samples = vec![u64::MAX; n];
                let r = catch_unwind(AssertUnwindSafe(|| {
                    pinger(&mut a, &ctl, &spec, &mut samples)
                }));
                let _ = tx.send(match r {
                    Ok(r) => Msg::Pinger(r.map(|cpu| {
                        samples.truncate(ctl.measured());
                        (samples, cpu)
                    })),
                    Err(_) => Msg::Died("pinger"),
                });
            })
            .map_err(RunError::Spawn)?
    };

    let deadline = Instant::now() + spec.timeout;
    let mut ping: Option<(Vec<u64>, u64)> = None;
    let mut pong: Option<u64> = None;
    while ping.is_none() || pong.is_none() {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(Msg::Pinger(r)) => ping = Some(r.map_err(|f| f.into_run_error("pinger"))?),
            Ok(Msg::Ponger(r)) => pong = Some(r.map_err(|f| f.into_run_error("ponger"))?),
            Ok(Msg::Died(side)) => {
                return Err(RunError::Died {
                    side,
                    detail: "thread panicked".to_string(),
                });
            }
            Err(_) => {
                return Err(RunError::TimedOut {
                    after_ms: u64::try_from(spec.timeout.as_millis()).unwrap_or(u64::MAX),
                });
            }
        }
    }
    let _ = ponger_thread.join();
    let _ = pinger_thread.join();
    match (ping, pong) {
        (Some((samples, pinger_cpu_ns)), Some(ponger_cpu_ns)) => Ok(Measured {
            samples,
            pinger_cpu_ns,
            ponger_cpu_ns,
        }),
        _ => Err(RunError::Died {
            side: "both",
            detail: "no result".to_string(),
        }),
    }
}
