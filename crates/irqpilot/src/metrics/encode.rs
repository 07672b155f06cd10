//! The frame as OpenMetrics text, through prometheus-client's [`Collector`]: each family of
//! [`super::catalog`] in order, one series per label set.

use super::catalog::{self, Id, Kind, Metric, Scope};
use super::frame::{Frame, USER_HZ};
use irqpilot_core::RowLabel;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Unit;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

/// The collector registered with the endpoint's registry: encodes the shared frame.
#[derive(Debug)]
pub struct FrameCollector(pub Arc<Mutex<Frame>>);

impl Collector for FrameCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let frame = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        for m in catalog::METRICS {
            let wanted = match m.scope {
                Scope::Always => true,
                Scope::PerCpuIrqs => frame.per_cpu_irqs,
                Scope::Daemon => frame.daemon.is_some(),
            };
            if wanted {
                encode_family(&mut encoder, m, &frame)?;
            }
        }
        Ok(())
    }
}

fn counter(e: &mut MetricEncoder, labels: &impl EncodeLabelSet, v: u64) -> fmt::Result {
    e.encode_family(labels)?
        .encode_counter::<NoLabelSet, u64, f64>(&v, None)
}

fn counter_f(e: &mut MetricEncoder, labels: &impl EncodeLabelSet, v: f64) -> fmt::Result {
    e.encode_family(labels)?
        .encode_counter::<NoLabelSet, f64, f64>(&v, None)
}

fn gauge(e: &mut MetricEncoder, labels: &impl EncodeLabelSet, v: f64) -> fmt::Result {
    e.encode_family(labels)?.encode_gauge(&v)
}

/// A series without labels (`name value`, not `name{} value`).
fn bare_gauge(e: &mut MetricEncoder, v: f64) -> fmt::Result {
    e.encode_gauge(&v)
}

fn bare_counter(e: &mut MetricEncoder, v: u64) -> fmt::Result {
    e.encode_counter::<NoLabelSet, u64, f64>(&v, None)
}

fn encode_family(enc: &mut DescriptorEncoder, m: &Metric, f: &Frame) -> fmt::Result {
    let unit = m.unit.map(|u| match u {
        "seconds" => Unit::Seconds,
        other => Unit::Other(other.to_string()),
    });
    let kind = match m.kind {
        Kind::Counter => MetricType::Counter,
        Kind::Gauge => MetricType::Gauge,
    };
    let mut e = enc.encode_descriptor(m.name, m.help, unit.as_ref(), kind)?;
    let e = &mut e;
    let snap = f.newest();
    let t = &snap.interrupts;
    match m.id {
        Id::BuildInfo => {
            gauge(e, &[("version", env!("CARGO_PKG_VERSION"))], 1.0)?;
        }
        Id::IrqInterrupts => {
            for row in t.rows() {
                let RowLabel::Irq(irq) = row.label else {
                    continue;
                };
                // An IRQ the inventory does not know yet waits for it (no series whose labels
                // would change a scrape later).
                let Some(l) = f.labels.irqs.get(&irq) else {
                    continue;
                };
                let labels = [
                    ("irq", l.irq.as_str()),
                    ("name", l.name.as_str()),
                    ("device", l.device.as_str()),
                    ("queue", l.queue.as_str()),
                ];
                counter(e, &labels, t.total(row))?;
            }
        }
        Id::IrqCpuInterrupts => {
            for row in t.rows() {
                let RowLabel::Irq(irq) = row.label else {
                    continue;
                };
                let Some(l) = f.labels.irqs.get(&irq) else {
                    continue;
                };
                for (cpu, v) in t.cpus.iter().zip(t.counts(row)) {
                    if *v > 0 {
                        counter(e, &[("irq", l.irq.as_str()), ("cpu", f.cpu_name(*cpu))], *v)?;
                    }
                }
            }
        }
        Id::CpuInterrupts => {
            for (cpu, v) in t.cpus.iter().zip(&f.cpu_totals) {
                counter(e, &[("cpu", f.cpu_name(*cpu))], *v)?;
            }
        }
        Id::CpuSoftirqs => {
            if let Some(s) = &snap.softirqs {
                for (ty, counts) in &s.rows {
                    for (cpu, v) in s.cpus.iter().zip(counts) {
                        counter(e, &[("cpu", f.cpu_name(*cpu)), ("type", ty.as_str())], *v)?;
                    }
                }
            }
        }
        Id::CpuHardirqSeconds | Id::CpuSoftirqSeconds => {
            let hard = m.id == Id::CpuHardirqSeconds;
            if let Some(stat) = &snap.stat {
                for (cpu, ticks) in &stat.per_cpu {
                    let v = if hard { ticks.irq } else { ticks.softirq };
                    if let Some(v) = v {
                        counter_f(e, &[("cpu", f.cpu_name(*cpu))], v as f64 / USER_HZ)?;
                    }
                }
            }
        }
        Id::CpuIsolated => {
            for cpu in &t.cpus {
                let v = if f.labels.isolated.contains(*cpu) {
                    1.0
                } else {
                    0.0
                };
                gauge(e, &[("cpu", f.cpu_name(*cpu))], v)?;
            }
        }
        Id::Imbalance => {
            if let Some(v) = f.imbalance {
                bare_gauge(e, v)?;
            }
        }
        Id::Findings => {
            for ((sev, kind), v) in &f.findings {
                gauge(e, &[("severity", *sev), ("kind", kind.as_str())], *v as f64)?;
            }
        }
        Id::ModerationDelay => {
            for (device, queue, us) in &f.labels.delays {
                gauge(
                    e,
                    &[("device", device.as_str()), ("queue", queue.as_str())],
                    *us,
                )?;
            }
        }
        Id::ModerationTarget => {
            bare_gauge(e, f.target_per_sec)?;
        }
        Id::Migrations | Id::Changes | Id::ApplyErrors | Id::Periods | Id::Period | Id::Reloads => {
            if let Some(d) = &f.daemon {
                encode_daemon(e, m, d)?;
            }
        }
    }
    Ok(())
}

fn encode_daemon(e: &mut MetricEncoder, m: &Metric, d: &super::DaemonStats) -> fmt::Result {
    match m.id {
        Id::Migrations => bare_counter(e, d.migrations),
        Id::Periods => bare_counter(e, d.periods),
        Id::Period => bare_gauge(e, d.period_seconds),
        Id::Changes => {
            for (action, v) in &d.changes {
                counter(e, &[("action", *action)], *v)?;
            }
            Ok(())
        }
        Id::ApplyErrors => {
            for (kind, v) in &d.apply_errors {
                counter(e, &[("kind", *kind)], *v)?;
            }
            Ok(())
        }
        Id::Reloads => {
            counter(e, &[("result", "ok")], d.reloads_ok)?;
            counter(e, &[("result", "error")], d.reloads_error)
        }
        _ => Ok(()),
    }
}

/// The same exposition in Prometheus' classic text format (0.0.4), for clients that do not ask
/// for OpenMetrics (`curl`, `promtool check metrics`): a counter family's metadata names its
/// `_total` samples, and the `# UNIT` and `# EOF` lines go.
pub fn classic_text(openmetrics: &str, out: &mut String) {
    out.clear();
    out.reserve(openmetrics.len());
    let mut lines = openmetrics.lines().peekable();
    while let Some(line) = lines.next() {
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap_or("");
            let counter = lines
                .peek()
                .is_some_and(|next| *next == format!("# TYPE {name} counter"));
            if counter {
                let help = &rest[name.len()..];
                out.push_str("# HELP ");
                out.push_str(name);
                out.push_str("_total");
                out.push_str(help);
                out.push('\n');
                out.push_str("# TYPE ");
                out.push_str(name);
                out.push_str("_total counter\n");
                lines.next();
                continue;
            }
        }
        out.push_str(line);
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classic_text_names_counters_by_their_samples() {
        let om = "# HELP a_b Help.\n# TYPE a_b counter\n# UNIT a_b seconds\na_b_total{cpu=\"0\"} 1\n# HELP g Gauge.\n# TYPE g gauge\ng 2.0\n# EOF\n";
        let mut out = String::new();
        classic_text(om, &mut out);
        assert_eq!(
            out,
            "# HELP a_b_total Help.\n# TYPE a_b_total counter\na_b_total{cpu=\"0\"} 1\n# HELP g Gauge.\n# TYPE g gauge\ng 2.0\n"
        );
    }
}
