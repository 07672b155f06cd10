//! Applications the configuration names by process (`[[placement.applications]] process =
//! "nginx"`), followed while the daemon runs: a process that starts, exits, restarts elsewhere
//! or is re-pinned (`taskset`) draws its device's IRQs along within [`EVERY`], without a
//! reload. Reading every `/proc/PID/comm` costs a few ms on a busy host, so it is not done
//! every moderation period.

use super::super::placement_common::{Unresolved, resolve_applications};
use irqpilot_core::PlacementConfig;
use irqpilot_linux::Root;
use std::time::{Duration, Instant};

/// How often the processes are looked up again.
pub const EVERY: Duration = Duration::from_secs(5);

/// The configuration as written (processes by name) and when to look the processes up next.
#[derive(Debug)]
pub struct AppWatch {
    configured: PlacementConfig,
    unresolved: Vec<Unresolved>,
    next: Instant,
}

impl AppWatch {
    /// Follows `configured`'s processes; `resolved` is what the daemon started with.
    pub fn new(
        configured: PlacementConfig,
        root: &Root,
        now: Instant,
    ) -> (AppWatch, PlacementConfig) {
        let (resolved, unresolved) = resolve_applications(root, configured.clone());
        for u in &unresolved {
            u.warn();
        }
        let watch = AppWatch {
            configured,
            unresolved,
            next: now + EVERY,
        };
        (watch, resolved)
    }

    /// Whether the configuration names any process.
    fn follows(&self) -> bool {
        self.configured
            .applications
            .iter()
            .any(|a| a.process.is_some())
    }

    /// The configuration resolved anew when a look-up was due and the applications' CPUs differ
    /// from `current`'s; a process that went away or came back is logged once.
    pub fn poll(
        &mut self,
        root: &Root,
        current: &PlacementConfig,
        now: Instant,
    ) -> Option<PlacementConfig> {
        if now < self.next || !self.follows() {
            return None;
        }
        self.next = now + EVERY;
        let (resolved, unresolved) = resolve_applications(root, self.configured.clone());
        for u in unresolved.iter().filter(|u| !self.unresolved.contains(u)) {
            u.warn();
        }
        self.unresolved = unresolved;
        if resolved.applications == current.applications {
            return None;
        }
        tracing::info!(
            applications = %describe(&resolved),
            "application CPUs changed; placing their devices' IRQs again"
        );
        Some(resolved)
    }
}

/// `device@cpus` for each application.
fn describe(cfg: &PlacementConfig) -> String {
    let list: Vec<String> = cfg
        .applications
        .iter()
        .map(|a| format!("{}@{}", a.device, a.cpus))
        .collect();
    list.join(",")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use irqpilot_core::CpuSet;
    use irqpilot_core::placement::Application;

    fn write(dir: &std::path::Path, rel: &str, text: &str) {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    /// A process re-pinned, gone, or started while the daemon runs changes the placement
    /// configuration at the next look-up, and not before it is due.
    #[test]
    fn follows_a_process_that_moves_leaves_and_comes_back() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::new(d.path());
        write(d.path(), "proc/77/comm", "memcached\n");
        write(
            d.path(),
            "proc/77/task/77/status",
            "Cpus_allowed_list:\t2\n",
        );
        let configured = PlacementConfig {
            applications: vec![Application {
                device: "eth0".into(),
                cpus: CpuSet::new(),
                process: Some("memcached".into()),
            }],
            ..PlacementConfig::default()
        };
        let t0 = Instant::now();
        let (mut watch, mut current) = AppWatch::new(configured, &root, t0);
        assert_eq!(current.applications[0].cpus.to_string(), "2");

        // Re-pinned with taskset: seen only once a look-up is due.
        write(
            d.path(),
            "proc/77/task/77/status",
            "Cpus_allowed_list:\t6-7\n",
        );
        assert!(watch.poll(&root, &current, t0 + EVERY / 2).is_none());
        current = watch.poll(&root, &current, t0 + EVERY).unwrap();
        assert_eq!(current.applications[0].cpus.to_string(), "6-7");
        // Nothing changed: nothing to do.
        assert!(watch.poll(&root, &current, t0 + EVERY * 2).is_none());

        // Exited: its device goes back to device-near placement.
        std::fs::remove_dir_all(d.path().join("proc/77")).unwrap();
        current = watch.poll(&root, &current, t0 + EVERY * 3).unwrap();
        assert!(current.applications.is_empty());

        // Started again under another pid.
        write(d.path(), "proc/90/comm", "memcached\n");
        write(d.path(), "proc/90/status", "Cpus_allowed_list:\t1\n");
        current = watch.poll(&root, &current, t0 + EVERY * 4).unwrap();
        assert_eq!(current.applications[0].cpus.to_string(), "1");
    }

    /// Without processes in the configuration nothing under /proc is read.
    #[test]
    fn no_processes_no_lookups() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::new(d.path().join("absent"));
        let (mut watch, current) = AppWatch::new(PlacementConfig::default(), &root, Instant::now());
        assert!(
            watch
                .poll(&root, &current, Instant::now() + EVERY * 10)
                .is_none()
        );
    }
}
