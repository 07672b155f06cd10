//! Reports as a person opens them: `irqpilot report` on a recording of the twin, and
//! `irqpilot sim --report` with `--compare`, rendered by headless Chromium (Debian's package):
//! the DOM must hold the plots, and a screenshot must show them (many colours, much ink).
//!
//! Needs chromium: under `CI=true` a missing one fails (`.ci/run` installs it); elsewhere the
//! browser part prints SKIPPED and the HTML checks still run.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::{ok, scratch_dir, tool};
use std::collections::HashSet;
use std::path::Path;
use std::process::Command;

/// Chromium's `--dump-dom` of a page; a screenshot of it is written to `shot`.
fn render(chromium: &Path, page: &Path, shot: &Path) -> String {
    let profile = tempfile::tempdir().unwrap();
    let run = |extra: &[String]| {
        let out = Command::new(chromium)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .args(extra)
            .arg(format!("file://{}", page.display()))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    run(&[
        "--window-size=1100,2400".to_string(),
        format!("--screenshot={}", shot.display()),
    ]);
    assert!(shot.exists(), "no screenshot");
    run(&["--dump-dom".to_string()])
}

/// Distinct colours and the share of non-white pixels of a PNG screenshot.
fn ink(png_path: &Path) -> (usize, f64) {
    let decoder = png::Decoder::new(std::fs::File::open(png_path).unwrap());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let px = info.color_type.samples();
    let bytes = &buf[..info.buffer_size()];
    let mut colours = HashSet::new();
    let mut inked = 0usize;
    let n = bytes.len() / px;
    for p in bytes.chunks(px) {
        let rgb = (p[0], p[1], p[2]);
        colours.insert(rgb);
        if rgb.0 < 240 || rgb.1 < 240 || rgb.2 < 240 {
            inked += 1;
        }
    }
    (colours.len(), inked as f64 / n.max(1) as f64)
}

/// The page is one self-contained file: no scripts, nothing fetched from anywhere.
fn self_contained(html: &str) {
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(!html.contains("<script"));
    for bad in ["src=\"http", "href=\"http", "url(http", "@import"] {
        assert!(!html.contains(bad), "{bad}");
    }
}

#[test]
fn a_recording_of_the_twin_becomes_a_page_with_plots() {
    let dir = scratch_dir();
    let rec = dir.path().join("twin.irqrec");
    let html = dir.path().join("report.html");
    ok(&[
        "sim",
        "isolation-rt-24cpu",
        "--duration",
        "600ms",
        "--record",
        rec.to_str().unwrap(),
    ]);
    let said = ok(&[
        "report",
        rec.to_str().unwrap(),
        "--out",
        html.to_str().unwrap(),
    ]);
    assert!(
        said.starts_with(&format!("wrote {}", html.display())),
        "{said}"
    );
    let page = std::fs::read_to_string(&html).unwrap();
    self_contained(&page);
    assert!(page.len() < 5_000_000);
    for id in [
        "heatmap-rate",
        "heatmap-time",
        "device-rates",
        "imbalance",
        "findings-table",
    ] {
        assert!(page.contains(&format!("id=\"{id}\"")), "no #{id}");
    }
    // The twin's isolated CPUs take device interrupts: the findings say so, with when.
    assert!(page.contains("reaches isolated CPU"), "findings missing");
    assert!(page.contains("twin isolation-rt-24cpu"));
    assert!(
        page.contains("\neth0\n</text>"),
        "no eth0 in the device legend"
    );

    let Some(chromium) = tool("chromium") else {
        return;
    };
    let shot = dir.path().join("report.png");
    let dom = render(&chromium, &html, &shot);
    for id in ["heatmap-rate", "device-rates", "imbalance"] {
        let at = dom
            .find(&format!("id=\"{id}\""))
            .unwrap_or_else(|| panic!("#{id} not in the DOM"));
        let figure = &dom[at..dom[at..].find("</figure>").map_or(dom.len(), |e| at + e)];
        assert!(figure.contains("<svg"), "#{id} holds no svg");
    }
    assert!(
        dom.contains("data:image/png;base64,"),
        "heat map cells missing"
    );
    let (colours, inked) = ink(&shot);
    assert!(
        colours > 50 && inked > 0.05,
        "screenshot looks blank: {colours} colours, {inked:.3} inked"
    );
}

#[test]
fn a_twin_comparison_overlays_the_policies() {
    let dir = scratch_dir();
    let html = dir.path().join("compare.html");
    let table = ok(&[
        "sim",
        "nic-100g-32q-lowload",
        "--duration",
        "200ms",
        "--compare",
        "moderation=static,dim",
        "--report",
        html.to_str().unwrap(),
    ]);
    // The usual comparison table still prints.
    assert!(table.contains("comparing moderation"), "{table}");
    let page = std::fs::read_to_string(&html).unwrap();
    self_contained(&page);
    for id in [
        "results-table",
        "throughput-over-time",
        "interrupts-over-time",
        "latency-percentiles",
        "run0-heatmap-rate",
        "run1-heatmap-rate",
    ] {
        assert!(page.contains(&format!("id=\"{id}\"")), "no #{id}");
    }
    assert!(page.contains("moderation=static") && page.contains("moderation=dim"));
    let Some(chromium) = tool("chromium") else {
        return;
    };
    let shot = dir.path().join("compare.png");
    let dom = render(&chromium, &html, &shot);
    assert!(dom.contains("id=\"latency-percentiles\""));
    let (colours, inked) = ink(&shot);
    assert!(
        colours > 50 && inked > 0.05,
        "screenshot looks blank: {colours} colours, {inked:.3} inked"
    );
}
