//! `irqpilot snapshot`: one reading of `/proc/interrupts`.
//!
//! JSON (a contract other tools rely on): `{"cpus": [0, 1, ...], "interrupts": [{"irq": "24",
//! "per_cpu": [1, 0], "total": 1}, ...]}`: `cpus` are the CPU ids of the columns in order,
//! `interrupts` has one object per row in file order, `irq` is the row's label as a string
//! (`"24"`, `"NMI"`, `"ERR"`), `name` what the table's NAME column shows (the IRQ's actions,
//! `"virtio1-req.0"`, or a named row's description, `"Non-maskable interrupts"`), `per_cpu` the
//! counts aligned with `cpus` (empty for a row that does not have one count per CPU, such as
//! `ERR`), `total` their sum.
//!
//! Works on a root that holds nothing but `proc/interrupts`.

use crate::Settings;
use crate::cli::{Format, SnapshotArgs};
use crate::render::human;
use crate::render::table::{Align, Table};
use anyhow::Result;
use irqpilot_core::{InterruptRow, InterruptTable, Platform};
use irqpilot_linux::LinuxPlatform;
use irqpilot_linux::format::irq_desc::{IrqDesc, parse_descs};
use serde::Serialize;
use std::io::Write;
use std::process::ExitCode;

/// Above this many CPUs the table shows the busiest CPU instead of one column per CPU.
const MAX_CPU_COLUMNS: usize = 8;

/// The JSON document.
#[derive(Debug, Serialize)]
pub struct SnapshotJson<'a> {
    /// CPU ids of the count columns, in order.
    pub cpus: Vec<u32>,
    /// One entry per row, in file order.
    pub interrupts: Vec<RowJson<'a>>,
}

/// One row.
#[derive(Debug, Serialize)]
pub struct RowJson<'a> {
    /// The label: `"24"`, `"NMI"`, `"ERR"`.
    pub irq: String,
    /// The IRQ's actions (`"eth0-TxRx-0"`, comma-separated when shared) or a named row's
    /// description; empty when it has none.
    pub name: String,
    /// Counts aligned with `cpus`; empty for rows that are not per CPU.
    pub per_cpu: &'a [u64],
    /// Sum of the row's counts.
    pub total: u64,
}

/// The JSON form of a table.
pub fn json(t: &InterruptTable) -> SnapshotJson<'_> {
    let descs = parse_descs(t);
    SnapshotJson {
        cpus: t.cpus.iter().map(|c| c.0).collect(),
        interrupts: t
            .rows()
            .iter()
            .zip(&descs)
            .map(|(r, d)| RowJson {
                irq: r.label.to_string(),
                name: row_name(r, d.as_ref()),
                per_cpu: if t.is_per_cpu(r) { t.counts(r) } else { &[] },
                total: t.total(r),
            })
            .collect(),
    }
}

/// Runs `irqpilot snapshot`.
pub fn run(_args: &SnapshotArgs, settings: &Settings) -> Result<ExitCode> {
    let mut platform = LinuxPlatform::with_root(&settings.root);
    let snap = platform.snapshot()?;
    let mut out = std::io::stdout().lock();
    match settings.format {
        Format::Json => {
            serde_json::to_writer(&mut out, &json(&snap.interrupts))?;
            out.write_all(b"\n")?;
        }
        Format::Table => out.write_all(table(&snap.interrupts).as_bytes())?,
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// A row's NAME: its actions for a numbered IRQ, the description for a named row.
fn row_name(row: &InterruptRow, desc: Option<&IrqDesc>) -> String {
    match desc {
        Some(d) => d.actions.join(", "),
        None => row.desc().to_string(),
    }
}

/// The readable table: IRQ, total, per-CPU counts (or the busiest CPU on big machines), name.
pub fn table(t: &InterruptTable) -> String {
    let descs = parse_descs(t);
    let per_cpu_columns = t.cpus.len() <= MAX_CPU_COLUMNS;
    let mut columns: Vec<(String, Align)> =
        vec![("IRQ".into(), Align::Left), ("TOTAL".into(), Align::Right)];
    if per_cpu_columns {
        columns.extend(t.cpus.iter().map(|c| (format!("CPU{c}"), Align::Right)));
    } else {
        columns.push(("BUSIEST CPU".into(), Align::Left));
    }
    columns.push(("NAME".into(), Align::Left));
    let spec: Vec<(&str, Align)> = columns.iter().map(|(s, a)| (s.as_str(), *a)).collect();
    let mut table = Table::new(&spec);
    for (row, desc) in t.rows().iter().zip(&descs) {
        let counts = t.counts(row);
        let total = t.total(row);
        let mut cells = vec![row.label.to_string(), human::count(total)];
        if per_cpu_columns {
            if t.is_per_cpu(row) {
                cells.extend(counts.iter().map(|c| human::count(*c)));
            } else {
                cells.extend(t.cpus.iter().map(|_| String::new()));
            }
        } else if t.is_per_cpu(row) && total > 0 {
            let (j, max) = counts
                .iter()
                .enumerate()
                .max_by_key(|(j, c)| (**c, std::cmp::Reverse(*j)))
                .map_or((0, 0), |(j, c)| (j, *c));
            let cpu = t.cpus.get(j).map_or(0, |c| c.0);
            cells.push(format!("{cpu} ({:.0}%)", max as f64 * 100.0 / total as f64));
        } else {
            cells.push(String::new());
        }
        cells.push(row_name(row, desc.as_ref()));
        table.row(cells);
    }
    table.render()
}
