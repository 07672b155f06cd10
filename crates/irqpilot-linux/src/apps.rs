//! Where an application runs: the union of the CPUs its threads may use, read under a root
//! (`/proc/PID/comm` names the process, `/proc/PID/task/TID/status` gives each thread's
//! `Cpus_allowed_list`). Processes and threads that exit while being read are skipped.

use crate::Root;
use crate::format::status::cpus_allowed;
use irqpilot_core::{CpuSet, PlatformError};

/// The ids of the processes named `comm` (`/proc/PID/comm`), lowest first; processes that exit
/// while being read are skipped.
pub fn pids_named(root: &Root, comm: &str) -> Result<Vec<u32>, PlatformError> {
    let proc_dir = root.join("proc");
    let entries = std::fs::read_dir(&proc_dir).map_err(|source| PlatformError::Io {
        path: proc_dir.clone(),
        source,
    })?;
    let mut pids: Vec<u32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .filter(|pid| {
            root.read(&format!("proc/{pid}/comm"))
                .is_ok_and(|c| c.trim_end_matches('\n') == comm)
        })
        .collect();
    pids.sort_unstable();
    Ok(pids)
}

/// The CPUs the threads of every process named `comm` may run on; `None` when no such
/// process runs.
pub fn process_cpus(root: &Root, comm: &str) -> Result<Option<CpuSet>, PlatformError> {
    let mut found: Option<CpuSet> = None;
    for pid in pids_named(root, comm)? {
        let cpus = threads_cpus(root, &pid.to_string())?;
        found = Some(match found {
            Some(f) => f.union(&cpus),
            None => cpus,
        });
    }
    Ok(found)
}

/// Union of the allowed CPUs of the threads of `pid` (its own status when it has no task
/// directory, as in a captured tree).
fn threads_cpus(root: &Root, pid: &str) -> Result<CpuSet, PlatformError> {
    let parse = |rel: String, text: String| {
        cpus_allowed(&text).map_err(|e| PlatformError::Parse {
            path: root.join(&rel),
            line: e.line,
            message: e.message,
        })
    };
    let mut cpus = CpuSet::new();
    if let Ok(tasks) = std::fs::read_dir(root.join(&format!("proc/{pid}/task"))) {
        for t in tasks.flatten() {
            let rel = format!("proc/{pid}/task/{}/status", t.file_name().to_string_lossy());
            if let Ok(text) = root.read(&rel) {
                cpus = cpus.union(&parse(rel, text)?);
            }
        }
    }
    if cpus.is_empty() {
        let rel = format!("proc/{pid}/status");
        if let Ok(text) = root.read(&rel) {
            cpus = parse(rel, text)?;
        }
    }
    Ok(cpus)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn write(dir: &std::path::Path, rel: &str, text: &str) {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    #[test]
    fn unions_the_threads_of_every_process_of_that_name() {
        let d = tempfile::tempdir().unwrap();
        let st = |l: &str| format!("Name:\tx\nCpus_allowed_list:\t{l}\n");
        write(d.path(), "proc/10/comm", "nginx\n");
        write(d.path(), "proc/10/status", &st("0-7"));
        write(d.path(), "proc/10/task/10/status", &st("0"));
        write(d.path(), "proc/10/task/11/status", &st("1"));
        write(d.path(), "proc/20/comm", "nginx\n");
        write(d.path(), "proc/20/status", &st("4"));
        write(d.path(), "proc/30/comm", "sshd\n");
        write(d.path(), "proc/30/status", &st("2-3"));
        write(d.path(), "proc/self/comm", "nginx\n");
        let root = Root::new(d.path());
        let got = process_cpus(&root, "nginx").unwrap().unwrap();
        assert_eq!(got.to_string(), "0-1,4");
        assert_eq!(process_cpus(&root, "postgres").unwrap(), None);
        write(d.path(), "proc/40/comm", "bad\n");
        write(d.path(), "proc/40/status", "Cpus_allowed_list:\tq\n");
        let e = process_cpus(&root, "bad").unwrap_err().to_string();
        assert!(e.contains("proc/40/status:1"), "{e}");
    }
}
