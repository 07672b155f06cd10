//! `irqpilot capture --out DIR`: copies every file irqpilot reads from the root into a fixture
//! tree with a `MANIFEST.toml` (kernel, CPU count, date), for tests and bug reports.

use crate::Settings;
use crate::cli::{CaptureArgs, Format};
use anyhow::{Context, Result};
use irqpilot_linux::Root;
use irqpilot_linux::capture::{CaptureOptions, capture_with};
use std::io::Write;
use std::process::ExitCode;

/// Runs `irqpilot capture`.
pub fn run(args: &CaptureArgs, settings: &Settings) -> Result<ExitCode> {
    let root = Root::new(&settings.root);
    let opts = CaptureOptions {
        description: args.description.clone(),
    };
    let report = capture_with(&root, &args.out, &opts).with_context(|| {
        format!(
            "capturing {} into {}",
            settings.root.display(),
            args.out.display()
        )
    })?;
    let mut out = std::io::stdout().lock();
    match settings.format {
        Format::Json => {
            let skipped: Vec<serde_json::Value> = report
                .skipped
                .iter()
                .map(|s| serde_json::json!({"path": s.path, "reason": s.reason}))
                .collect();
            let doc = serde_json::json!({
                "out": args.out.display().to_string(),
                "files": report.files,
                "links": report.links,
                "kernel_release": report.kernel_release,
                "online_cpus": report.online_cpus,
                "skipped": skipped,
            });
            serde_json::to_writer_pretty(&mut out, &doc)?;
            out.write_all(b"\n")?;
        }
        Format::Table => {
            writeln!(
                out,
                "captured {} files and {} links from {} into {} (kernel {}, {} online CPUs)",
                report.files,
                report.links,
                settings.root.display(),
                args.out.display(),
                report.kernel_release.as_deref().unwrap_or("unknown"),
                report
                    .online_cpus
                    .map_or("?".to_string(), |n| n.to_string()),
            )?;
            for s in &report.skipped {
                writeln!(out, "  skipped {}: {}", s.path, s.reason)?;
            }
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
