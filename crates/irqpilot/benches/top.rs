//! `irqpilot top` at one sample a second on the generated 256-CPU server, whose counter files
//! this benchmark rewrites every second (`MovingServer`: every device IRQ moving at the rate
//! its counts imply), so each screen has real work: parse the three files, compute rates,
//! findings every 5 s, draw.
//!
//! 1. In process: the CPU time of one frame (sample, update, draw into a 200x50 buffer),
//!    i.e. the share of one core at 1 s.
//! 2. The real program in tmux (when tmux is installed), for IRQPILOT_BENCH_SECS seconds
//!    (default 60): its CPU time after the first 10 s (start-up: the inventory of ~20,000 files)
//!    and its peak resident memory.
//!
//! `cargo bench -p irqpilot --bench top`
//!
//! Targets (issue 12): <= 2% of a core, <= 30 MB resident.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../../irqpilot-linux/benches/support/cpu_time.rs"]
mod cpu_time;

use criterion::measurement::Measurement;
use irqpilot::live::Sampler;
use irqpilot::top::state::{State, WallClock};
use irqpilot::top::view;
use irqpilot_core::Platform;
use irqpilot_core::findings::FindingsConfig;
use irqpilot_linux::generate::MovingServer;
use irqpilot_linux::tree::{write_counters, write_tree};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// CPU seconds (user + system) of a process, from `/proc/PID/stat`.
fn process_cpu_s(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    // Fields 14 and 15 (utime, stime) are 12 and 13 after the command's closing parenthesis.
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Some(ticks / hz)
}

fn status_kb(pid: u32, key: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find(|l| l.starts_with(key))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn frames() {
    let mut server = MovingServer::new(1);
    let machine = server.machine().unwrap();
    let mut sampler = Sampler::new(&machine);
    let mut st = State::new(
        "/srv/generated".into(),
        machine,
        FindingsConfig::default(),
        Duration::from_secs(1),
        WallClock {
            unix_ns: 0,
            mono_ns: server.now().0,
        },
    );
    let mut term = Terminal::new(TestBackend::new(200, 50)).unwrap();
    sampler.sample(&mut server).unwrap();
    let n = 120u64;
    let mut cpu = 0u64;
    for _ in 0..n {
        server.sleep(1_000_000_000);
        let t0 = cpu_time::CpuTime.start();
        sampler.sample(&mut server).unwrap();
        st.update(&sampler);
        term.draw(|f| view::draw(f, &mut st)).unwrap();
        cpu += cpu_time::CpuTime.end(t0);
    }
    let per = cpu as f64 / n as f64 / 1e6;
    println!(
        "top frame (in process, counters from memory): {per:.2} ms CPU per frame: {:.2}% of a core at 1 s",
        per / 10.0
    );
}

fn tool(name: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(name))
            .find(|p| p.is_file())
    })
}

/// Rewrites the counter files of `root` every second, each file replaced whole (renamed over)
/// so a reader never sees half of one.
fn ticker(root: &Path, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    let root = root.to_path_buf();
    std::thread::spawn(move || {
        let mut server = MovingServer::new(1);
        let staging = root.with_extension("staging");
        std::fs::create_dir_all(staging.join("proc")).unwrap();
        while !stop.load(Ordering::SeqCst) {
            server.sleep(1_000_000_000);
            write_counters(&staging, server.snapshot_now()).unwrap();
            for f in ["interrupts", "stat", "softirqs"] {
                std::fs::rename(staging.join("proc").join(f), root.join("proc").join(f)).unwrap();
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    })
}

fn program() {
    let Some(tmux) = tool("tmux") else {
        println!("top process: skipped (tmux is not installed)");
        return;
    };
    let secs: u64 = std::env::var("IRQPILOT_BENCH_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    let dir = tempfile::Builder::new()
        .prefix("irqpilot-bench-")
        .tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    let root = dir.path().join("server");
    let server = MovingServer::new(1);
    let mut m = server.clone();
    write_tree(&root, &m.machine().unwrap(), server.snapshot_now()).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let t = ticker(&root, Arc::clone(&stop));
    let socket = format!("irqpilot-bench-{}", std::process::id());
    let run = |args: &[&str]| {
        Command::new(&tmux)
            .arg("-L")
            .arg(&socket)
            .args(args)
            .output()
            .unwrap()
    };
    let cmd = format!(
        "exec {} --root {} top --interval 1s",
        env!("CARGO_BIN_EXE_irqpilot"),
        root.display()
    );
    let out = run(&[
        "new-session",
        "-d",
        "-s",
        "top",
        "-x",
        "200",
        "-y",
        "50",
        &cmd,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pid: u32 =
        String::from_utf8_lossy(&run(&["display", "-p", "-t", "top", "#{pane_pid}"]).stdout)
            .trim()
            .parse()
            .unwrap();
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    std::thread::sleep(Duration::from_secs(10));
    let (c0, w0) = (process_cpu_s(pid).unwrap(), Instant::now());
    std::thread::sleep(Duration::from_secs(secs));
    let (c1, wall) = (process_cpu_s(pid).unwrap(), w0.elapsed().as_secs_f64());
    let hwm = status_kb(pid, "VmHWM:").unwrap_or(0);
    let rss = status_kb(pid, "VmRSS:").unwrap_or(0);
    let screen =
        String::from_utf8_lossy(&run(&["capture-pane", "-p", "-t", "top"]).stdout).into_owned();
    let _ = run(&["kill-server"]);
    stop.store(true, Ordering::SeqCst);
    t.join().unwrap();
    assert!(screen.contains("busiest IRQs"), "{screen}");
    println!(
        "top process ({}, {secs} s after 10 s of start-up): {:.2} s CPU in {wall:.1} s = {:.2}% of a core; resident {:.1} MB now, {:.1} MB at most",
        comm.trim(),
        c1 - c0,
        (c1 - c0) * 100.0 / wall,
        rss as f64 / 1024.0,
        hwm as f64 / 1024.0
    );
}

fn main() {
    frames();
    program();
}
