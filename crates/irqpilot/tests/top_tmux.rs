//! `irqpilot top` used as a person would: in tmux, against the twin's exported live tree
//! (`irqpilot sim ... --export-root DIR --realtime`), keys sent with `send-keys`, the screen
//! read with `capture-pane`. Then a recording of the same machine replayed with `top --replay`
//! and a seek. tmux runs on a private socket, so no one's own tmux server is touched.
//!
//! Needs tmux: under `CI=true` a missing tmux fails the test (`.ci/run` installs it); elsewhere
//! the test prints SKIPPED.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::{scratch_dir, tool};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A tmux server of our own; killed (with its sessions) on drop.
struct Tmux {
    bin: PathBuf,
    socket: String,
}

impl Tmux {
    fn new(bin: PathBuf) -> Tmux {
        Tmux {
            bin,
            socket: format!("irqpilot-test-{}", std::process::id()),
        }
    }

    fn cmd(&self, args: &[&str]) -> std::process::Output {
        Command::new(&self.bin)
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .unwrap()
    }

    fn start(&self, name: &str, w: u16, h: u16, command: &str) {
        let out = self.cmd(&[
            "new-session",
            "-d",
            "-s",
            name,
            "-x",
            &w.to_string(),
            "-y",
            &h.to_string(),
            command,
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn keys(&self, name: &str, keys: &[&str]) {
        for k in keys {
            let out = self.cmd(&["send-keys", "-t", name, k]);
            assert!(out.status.success());
        }
    }

    fn text(&self, name: &str, text: &str) {
        let out = self.cmd(&["send-keys", "-t", name, "-l", text]);
        assert!(out.status.success());
    }

    fn screen(&self, name: &str) -> String {
        String::from_utf8_lossy(&self.cmd(&["capture-pane", "-p", "-t", name]).stdout).into_owned()
    }

    fn alive(&self, name: &str) -> bool {
        self.cmd(&["has-session", "-t", name]).status.success()
    }

    /// Waits until the screen satisfies `ok`; returns it (panics with the last screen).
    fn wait_for(&self, name: &str, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(40);
        loop {
            let s = self.screen(name);
            if ok(&s) {
                return s;
            }
            if Instant::now() > deadline {
                panic!("waited 40 s for {what}; the screen:\n{s}");
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]);
    }
}

/// The twin exporting a live tree; killed (by its pid: it is our child) on drop.
struct Twin(Child);

impl Drop for Twin {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn twin(root: &Path) -> Twin {
    let child = Command::new(env!("CARGO_BIN_EXE_irqpilot"))
        .args([
            "sim",
            "isolation-rt-24cpu",
            "--duration",
            "300s",
            "--realtime",
        ])
        .arg("--export-root")
        .arg(root)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t = Twin(child);
    let deadline = Instant::now() + Duration::from_secs(30);
    // The ready file comes last, after the isolation and topology files and the first
    // refresh: `proc/softirqs` alone let top read a tree with no isolated CPUs yet.
    while !root.join(irqpilot_sim::export::READY_FILE).is_file() {
        assert!(Instant::now() < deadline, "the twin wrote no tree");
        std::thread::sleep(Duration::from_millis(100));
    }
    t
}

/// Lines of the IRQ panel: between its header and the findings.
fn irq_rows(screen: &str) -> Vec<&str> {
    screen
        .lines()
        .skip_while(|l| !l.starts_with("IRQ "))
        .skip(1)
        .take_while(|l| !l.contains("findings"))
        .filter(|l| !l.trim().is_empty())
        .collect()
}

/// CPU rows: a number, its node, and its kind.
fn cpu_rows(screen: &str) -> Vec<(u32, String)> {
    screen
        .lines()
        .skip_while(|l| !l.starts_with("CPU "))
        .skip(1)
        .take_while(|l| !l.contains("busiest IRQs"))
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let cpu = w.next()?.parse().ok()?;
            let _node = w.next()?;
            Some((cpu, w.next()?.to_string()))
        })
        .collect()
}

#[test]
fn top_on_the_live_twin_then_on_its_recording() {
    let Some(tmux) = tool("tmux") else { return };
    let dir = scratch_dir();
    let root = dir.path().join("twin");
    let _twin = twin(&root);
    let bin = env!("CARGO_BIN_EXE_irqpilot");
    let tmux = Tmux::new(tmux);
    let rec = dir.path().join("top.irqrec");
    tmux.start(
        "top",
        80,
        24,
        &format!(
            "{bin} --root {} top --record {}",
            root.display(),
            rec.display()
        ),
    );
    // A person waits for numbers: CPU rows and the busiest IRQs with their device.
    let s = tmux.wait_for("top", "IRQ rows", |s| irq_rows(s).len() >= 3);
    assert!(s.starts_with("irqpilot top"), "{s}");
    assert!(s.contains("imbalance 1m"), "{s}");
    let cpus = cpu_rows(&s);
    assert!(cpus.len() >= 5, "{s}");
    // 4 housekeeping CPUs (0-3), the other 20 isolated.
    for (cpu, kind) in &cpus {
        assert_eq!(kind, if *cpu < 4 { "hk" } else { "iso" }, "CPU {cpu}: {s}");
    }
    let busiest = irq_rows(&s)[0];
    assert!(
        busiest.contains("eth0") && busiest.contains("eth0-TxRx-"),
        "{s}"
    );
    assert!(s.contains("findings:"), "{s}");
    assert!(s.contains("REC top.irqrec"), "{s}");

    // Filter by device: only that queue's IRQ is left.
    tmux.keys("top", &["/"]);
    tmux.text("top", "eth0-TxRx-7");
    tmux.keys("top", &["Enter"]);
    let s = tmux.wait_for("top", "the device filter", |s| {
        s.contains("device ~ \"eth0-TxRx-7\"") && irq_rows(s).len() == 1
    });
    assert!(irq_rows(&s)[0].contains("eth0-TxRx-7"), "{s}");

    // Filter by CPUs: only CPUs 0-3, all housekeeping.
    tmux.keys("top", &["x", "c"]);
    tmux.text("top", "0-3");
    tmux.keys("top", &["Enter"]);
    let s = tmux.wait_for("top", "the CPU filter", |s| s.contains("only 0-3"));
    let cpus = cpu_rows(&s);
    assert!(
        !cpus.is_empty() && cpus.iter().all(|(c, k)| *c < 4 && k == "hk"),
        "{s}"
    );
    assert!(irq_rows(&s).iter().all(|l| l.contains("eth0-TxRx-")), "{s}");

    // Pause shows, help opens and closes, q quits.
    tmux.keys("top", &["Space"]);
    tmux.wait_for("top", "PAUSED", |s| {
        s.lines().next().is_some_and(|l| l.contains("PAUSED"))
    });
    tmux.keys("top", &["?"]);
    tmux.wait_for("top", "the help", |s| s.contains("irqpilot top: keys"));
    tmux.keys("top", &["Escape", "q"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while tmux.alive("top") {
        assert!(Instant::now() < deadline, "top did not quit");
        std::thread::sleep(Duration::from_millis(100));
    }

    // The recording top made replays: same machine, a replay clock, seeking forward.
    assert!(rec.exists());
    tmux.start(
        "replay",
        100,
        30,
        &format!("{bin} top --replay {} --speed 1", rec.display()),
    );
    let s = tmux.wait_for("replay", "replayed IRQ rows", |s| irq_rows(s).len() >= 3);
    assert!(s.contains("replay 0:00:0"), "{s}");
    assert!(irq_rows(&s)[0].contains("eth0-TxRx-"), "{s}");
    tmux.keys("replay", &["Space", "Right"]);
    tmux.wait_for("replay", "the seek", |s| {
        s.contains("replay 0:00:1") || s.contains("(end)")
    });
    tmux.keys("replay", &["q"]);
}

#[test]
fn top_without_a_terminal_points_to_watch() {
    let out = Command::new(env!("CARGO_BIN_EXE_irqpilot"))
        .args(["top"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("needs a terminal") && err.contains("irqpilot watch"),
        "{err}"
    );
}
