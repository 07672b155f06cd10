//! A criterion measurement of this thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`) instead of wall
//! time: on a shared machine the time a benchmark waits for a CPU is not its cost, and "share of
//! one core" is a CPU-time question. Included by path from the other crates' benches too.

use criterion::Throughput;
use criterion::measurement::{Measurement, ValueFormatter};

/// This thread's CPU time, in nanoseconds.
#[derive(Debug)]
pub struct CpuTime;

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

impl Measurement for CpuTime {
    type Intermediate = u64;
    type Value = u64;

    fn start(&self) -> u64 {
        thread_cpu_ns()
    }
    fn end(&self, start: u64) -> u64 {
        thread_cpu_ns().saturating_sub(start)
    }
    fn add(&self, a: &u64, b: &u64) -> u64 {
        a + b
    }
    fn zero(&self) -> u64 {
        0
    }
    fn to_f64(&self, v: &u64) -> f64 {
        *v as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        &CpuFormatter
    }
}

#[derive(Debug)]
struct CpuFormatter;

impl ValueFormatter for CpuFormatter {
    fn scale_values(&self, ns: f64, values: &mut [f64]) -> &'static str {
        let (factor, unit) = if ns < 1e3 {
            (1.0, "ns cpu")
        } else if ns < 1e6 {
            (1e-3, "µs cpu")
        } else {
            (1e-6, "ms cpu")
        };
        values.iter_mut().for_each(|v| *v *= factor);
        unit
    }

    fn scale_throughputs(&self, typical: f64, t: &Throughput, values: &mut [f64]) -> &'static str {
        let bytes = match *t {
            Throughput::Bytes(b) | Throughput::BytesDecimal(b) => b as f64,
            Throughput::Elements(e) | Throughput::ElementsAndBytes { elements: e, .. } => {
                values.iter_mut().for_each(|v| *v = e as f64 * 1e9 / *v);
                let _ = typical;
                return "elem/s";
            }
            Throughput::Bits(b) => b as f64 / 8.0,
        };
        values
            .iter_mut()
            .for_each(|v| *v = bytes * 1e9 / *v / (1024.0 * 1024.0));
        "MiB/s"
    }

    fn scale_for_machines(&self, _values: &mut [f64]) -> &'static str {
        "ns"
    }
}
