//! Every corpus `/proc/interrupts` as the only file of a root: `snapshot` (JSON and table),
//! `status` and `watch` all work, and the snapshot's JSON agrees with the parser. The corpus is
//! read in place and copied only into temporary roots, never into the repository.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{interrupts_only, ok};
use irqpilot_linux::format::interrupts::parse_interrupts;
use serde_json::Value;

#[test]
fn every_corpus_file_works_as_a_root() {
    let Some(corpus) = common::corpus() else {
        return;
    };
    let mut files: Vec<_> = std::fs::read_dir(&corpus)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .collect();
    files.sort();
    assert!(files.len() >= 25, "{}", files.len());
    for path in files {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read(&path).unwrap();
        let table = parse_interrupts(std::str::from_utf8(&text).unwrap()).unwrap();
        let dir = interrupts_only(&text);
        let root = dir.path().to_str().unwrap();

        let v: Value =
            serde_json::from_str(&ok(&["--root", root, "--format", "json", "snapshot"])).unwrap();
        let cpus: Vec<u64> = v["cpus"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_u64().unwrap())
            .collect();
        assert_eq!(
            cpus,
            table
                .cpus
                .iter()
                .map(|c| u64::from(c.0))
                .collect::<Vec<_>>(),
            "{name}"
        );
        let rows = v["interrupts"].as_array().unwrap();
        assert_eq!(rows.len(), table.rows().len(), "{name}");
        for (j, row) in rows.iter().zip(table.rows()) {
            assert_eq!(j["irq"], row.label.to_string(), "{name}");
            assert_eq!(
                j["total"].as_u64(),
                Some(table.total(row)),
                "{name} {}",
                row.label
            );
            let per: Vec<u64> = j["per_cpu"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c.as_u64().unwrap())
                .collect();
            if table.is_per_cpu(row) {
                assert_eq!(per, table.counts(row), "{name} {}", row.label);
            } else {
                assert!(per.is_empty(), "{name} {}", row.label);
            }
        }
        let t = ok(&["--root", root, "snapshot"]);
        assert_eq!(t.lines().count(), table.rows().len() + 1, "{name}");
        let s = ok(&["--root", root, "status", "--sample", "0"]);
        assert!(
            s.contains("not available"),
            "{name}: a bare root has gaps\n{s}"
        );
        let s: Value = serde_json::from_str(&ok(&[
            "--root", root, "--format", "json", "status", "--sample", "0",
        ]))
        .unwrap();
        let listed = s["devices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["irqs"].as_array().unwrap().len())
            .sum::<usize>()
            + s["other_irqs"].as_array().unwrap().len();
        let numbered = table
            .rows()
            .iter()
            .filter(|r| r.label.irq().is_some())
            .count();
        assert_eq!(
            listed, numbered,
            "{name}: every numbered row is an IRQ of the report"
        );
        let w = ok(&[
            "--root",
            root,
            "--format",
            "json",
            "watch",
            "--interval",
            "1ms",
            "--count",
            "1",
        ]);
        let w: Value = serde_json::from_str(w.trim()).unwrap();
        assert_eq!(
            w["cpus"].as_array().unwrap().len(),
            table.cpus.len(),
            "{name}"
        );
    }
}
