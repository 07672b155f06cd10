//! `daemon` and `exporter` as services: signals (a SIGHUP storm does not hold periods back, no
//! polling between periods), the systemd notification protocol, logs (no colour off a
//! terminal, per-period lines only with -v), the metrics endpoint's bad input, and the daemon
//! going on when its metrics listener dies. Every daemon runs on a temporary copy of a fixture.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_irqpilot");

/// A daemon (or exporter) child with stdout and stderr in files.
struct Service {
    child: Child,
    dir: tempfile::TempDir,
}

impl Service {
    /// Copies the firecracker fixture and starts `irqpilot --root COPY --config CFG ARGS`.
    fn start(config: &str, args: &[&str], env: &[(&str, &str)]) -> Service {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        common::copy_tree(&common::firecracker(), &root);
        std::fs::write(dir.path().join("irqpilot.toml"), config).unwrap();
        let child = Command::new(BIN)
            .arg("--root")
            .arg(&root)
            .arg("--config")
            .arg(dir.path().join("irqpilot.toml"))
            .args(args)
            .env_remove("RUST_LOG")
            .env_remove("NOTIFY_SOCKET")
            .env_remove("WATCHDOG_USEC")
            .env_remove("JOURNAL_STREAM")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(dir.path().join("stdout")).unwrap())
            .stderr(std::fs::File::create(dir.path().join("stderr")).unwrap())
            .spawn()
            .unwrap();
        Service { child, dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn stdout(&self) -> String {
        std::fs::read_to_string(self.path("stdout")).unwrap()
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(self.path("stderr")).unwrap()
    }

    fn signal(&self, sig: libc::c_int) {
        // SAFETY: signalling the child this test spawned.
        assert_eq!(
            unsafe { libc::kill(self.child.id() as libc::pid_t, sig) },
            0
        );
    }

    /// Waits until stderr contains `text` (30 s at most).
    fn wait_log(&self, text: &str) -> bool {
        wait_for(|| self.stderr().contains(text))
    }

    /// SIGTERM, then the exit status.
    fn stop(self) -> (std::process::ExitStatus, String, String) {
        self.signal(libc::SIGTERM);
        self.wait()
    }

    /// The exit status (after a signal already sent).
    fn wait(mut self) -> (std::process::ExitStatus, String, String) {
        let status = self.child.wait().unwrap();
        let (out, err) = (self.stdout(), self.stderr());
        (status, out, err)
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        // Tests that fail half-way must not leave a daemon behind.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn wait_for(mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + Duration::from_secs(30);
    while Instant::now() < end {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    cond()
}

const FAST: &str = "[placement]\nmin_interval_ms = 200\nmax_interval_ms = 200\n";

/// 100 SIGHUPs at 20 Hz: every one reloads, and the 200 ms periods go on meanwhile (a reload
/// that restarted the wait would hold them back for the whole storm).
#[test]
fn a_sighup_storm_does_not_hold_periods_back() {
    let d = Service::start(FAST, &["--format", "json", "daemon", "--force"], &[]);
    assert!(d.wait_log("daemon started"), "{}", d.stderr());
    let before = d.stdout().lines().count();
    let start = Instant::now();
    for i in 0..100u32 {
        d.signal(libc::SIGHUP);
        let next = start + Duration::from_millis(50) * (i + 1);
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    let storm = start.elapsed();
    let during = d.stdout().lines().count() - before;
    let (status, _, err) = d.stop();
    assert!(status.success(), "{err}");
    let reloads = err.matches("configuration reloaded").count();
    // Signals of one kind that arrive while one is pending merge into one: nearly all count.
    assert!(reloads >= 50, "{reloads} reloads logged\n{err}");
    let expected = storm.as_millis() as usize / 200;
    assert!(
        during * 2 >= expected,
        "{during} periods during a {storm:?} storm of SIGHUPs (about {expected} due)"
    );
}

/// Voluntary context switches of all of a process's threads.
fn wakeups(pid: u32) -> u64 {
    let mut n = 0;
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let status = std::fs::read_to_string(t.unwrap().path().join("status")).unwrap_or_default();
        n += status
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0);
    }
    n
}

/// Between periods the daemon sleeps on its event channel: with a 10 s period it wakes about
/// once a second (the /proc/irq check), not every 50 ms.
#[test]
fn the_daemon_does_not_poll_between_periods() {
    let slow = "[placement]\nmin_interval_ms = 10000\nmax_interval_ms = 10000\n";
    let d = Service::start(slow, &["daemon", "--force"], &[]);
    assert!(d.wait_log("daemon started"), "{}", d.stderr());
    std::thread::sleep(Duration::from_millis(500));
    let pid = d.child.id();
    let first = wakeups(pid);
    std::thread::sleep(Duration::from_secs(3));
    let woke = wakeups(pid) - first;
    let (status, _, err) = d.stop();
    assert!(status.success(), "{err}");
    assert!(woke <= 12, "{woke} wake-ups in 3 s");
}

/// `Type=notify`: READY=1 with a status, watchdog pings at half of WATCHDOG_USEC,
/// RELOADING=1 then READY=1 around a reload, STOPPING=1 at the end.
#[test]
fn the_daemon_speaks_the_systemd_notification_protocol() {
    let sock_dir = tempfile::tempdir().unwrap();
    let sock_path = sock_dir.path().join("notify");
    let sock = UnixDatagram::bind(&sock_path).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let d = Service::start(
        FAST,
        &["daemon", "--force"],
        &[
            ("NOTIFY_SOCKET", sock_path.to_str().unwrap()),
            ("WATCHDOG_USEC", "400000"),
        ],
    );
    let mut got = Vec::new();
    let recv_until = |want: &str, got: &mut Vec<String>| {
        let mut buf = [0u8; 4096];
        loop {
            let n = sock
                .recv(&mut buf)
                .unwrap_or_else(|e| panic!("{e}: waiting for {want} after {got:?}"));
            let msg = String::from_utf8_lossy(&buf[..n]).to_string();
            got.push(msg.clone());
            if msg.lines().any(|l| l == want) {
                return msg;
            }
        }
    };
    let ready = recv_until("READY=1", &mut got);
    assert!(ready.contains("STATUS=running: root "), "{ready}");
    let t = Instant::now();
    recv_until("WATCHDOG=1", &mut got);
    recv_until("WATCHDOG=1", &mut got);
    assert!(t.elapsed() < Duration::from_secs(5), "{got:?}");
    d.signal(libc::SIGHUP);
    let reloading = recv_until("RELOADING=1", &mut got);
    assert!(reloading.contains("MONOTONIC_USEC="), "{reloading}");
    recv_until("READY=1", &mut got);
    d.signal(libc::SIGTERM);
    recv_until("STOPPING=1", &mut got);
    let (status, _, err) = d.wait();
    assert!(status.success(), "{err}");
}

/// Logs: no colour codes when stderr is not a terminal; at default verbosity the start-up
/// summary and the changes, but no line per period, which -v adds.
#[test]
fn daemon_logs_are_plain_and_per_period_lines_need_v() {
    // CPU 1 banned: the first period moves the IRQs there, a change to log.
    let cfg = format!("{FAST}ban_cpus = \"1\"\n");
    let d = Service::start(&cfg, &["daemon", "--force", "--iterations", "3"], &[]);
    let (status, _, err) = d.wait();
    assert!(status.success() || status.code() == Some(3), "{err}");
    assert!(!err.contains('\u{1b}'), "ANSI codes in a pipe: {err:?}");
    assert!(err.contains("daemon started: root "), "{err}");
    assert!(err.contains("applied"), "the changes are logged: {err}");
    assert!(!err.contains("period done"), "{err}");
    let mut v = Service::start(FAST, &["-v", "daemon", "--force", "--iterations", "3"], &[]);
    v.child.wait().unwrap();
    assert_eq!(
        v.stderr().matches("period done").count(),
        3,
        "{}",
        v.stderr()
    );
}

/// On a terminal the same logs are coloured.
#[test]
fn daemon_logs_are_coloured_on_a_terminal() {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped: no script(1) to give the daemon a terminal");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    common::copy_tree(&common::firecracker(), &root);
    let cmd = format!(
        "{BIN} --root {} --config /dev/null daemon --force --once",
        root.display()
    );
    let out = Command::new("script")
        .args(["-qfec", &cmd, "/dev/null"])
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("daemon started"), "{text}");
    assert!(text.contains('\u{1b}'), "no colour on a terminal: {text:?}");
}

/// One GET, the whole answer (status line, headers, body).
fn http_get(addr: &str, path: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// Bad input to the metrics endpoint: a clear error naming it, exit 1, nothing left running.
#[test]
fn metrics_bad_input_is_a_clear_error() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = taken.local_addr().unwrap().to_string();
    let fixture = common::firecracker();
    let root = fixture.to_str().unwrap();
    for (args, needle) in [
        (
            vec!["--root", root, "exporter", "--listen", busy.as_str()],
            busy.as_str(),
        ),
        (
            vec!["--root", root, "exporter", "--listen", "0.0.0.0:9877"],
            "--metrics-allow-remote",
        ),
        (
            vec![
                "--root",
                "/nonexistent/root",
                "exporter",
                "--listen",
                "127.0.0.1:0",
            ],
            "/nonexistent/root",
        ),
        (
            vec!["--root", root, "exporter", "--listen", "nine:9877"],
            "\"nine:9877\"",
        ),
    ] {
        let out = Command::new(BIN)
            .args(["--config", "/dev/null"])
            .args(&args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(err.starts_with("irqpilot: "), "{err}");
    }
    // The port in use says so.
    let out = Command::new(BIN)
        .args([
            "--config",
            "/dev/null",
            "--root",
            root,
            "exporter",
            "--listen",
            &busy,
        ])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("in use"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The daemon checks its endpoint before it changes anything.
    let d = tempfile::tempdir().unwrap();
    let copy = d.path().join("root");
    common::copy_tree(&fixture, &copy);
    let before = common::tree_files(&copy.join("proc/irq"));
    let out = Command::new(BIN)
        .args(["--config", "/dev/null", "--root"])
        .arg(&copy)
        .args(["daemon", "--force", "--once", "--metrics", "192.0.2.1:9877"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("--metrics 192.0.2.1:9877") && err.contains("loopback"),
        "{err}"
    );
    assert_eq!(common::tree_files(&copy.join("proc/irq")), before);
    drop(taken);
}

/// The exporter serves /metrics (OpenMetrics to who asks, the classic format otherwise), /,
/// and 404 elsewhere.
#[test]
fn the_exporter_serves_metrics() {
    let port = common::free_port();
    let addr = format!("127.0.0.1:{port}");
    let e = Service::start("", &["exporter", "--listen", &addr], &[]);
    assert!(e.wait_log("exporter started"), "{}", e.stderr());
    let text = http_get(&addr, "/metrics");
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("text/plain; version=0.0.4"), "{text}");
    assert!(
        text.contains("# TYPE irqpilot_irq_interrupts_total counter"),
        "{text}"
    );
    assert!(
        text.contains("irqpilot_irq_interrupts_total{irq=\"38\",name=\"virtio2-input.0\",device=\"eth0\",queue=\"rx0\"}"),
        "{text}"
    );
    assert!(
        !text.contains("irqpilot_placement_migrations_total"),
        "daemon-only: {text}"
    );
    let mut s = TcpStream::connect(&addr).unwrap();
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: application/openmetrics-text;version=1.0.0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut om = String::new();
    s.read_to_string(&mut om).unwrap();
    assert!(om.contains("application/openmetrics-text"), "{om}");
    assert!(om.trim_end().ends_with("# EOF"), "{om}");
    assert!(http_get(&addr, "/").contains("/metrics"));
    assert!(http_get(&addr, "/nope").starts_with("HTTP/1.1 404"));
    let (status, _, err) = e.stop();
    assert!(status.success(), "{err}");
}

/// The metrics listener dies (accept fails with EMFILE once the daemon's descriptor limit is
/// lowered under it): the daemon says so, and goes on reloading and running periods.
#[test]
fn the_daemon_goes_on_when_its_metrics_listener_dies() {
    let port = common::free_port();
    let addr = format!("127.0.0.1:{port}");
    let slow = "[placement]\nmin_interval_ms = 10000\nmax_interval_ms = 10000\n";
    let d = Service::start(
        slow,
        &["--format", "json", "daemon", "--force", "--metrics", &addr],
        &[],
    );
    assert!(d.wait_log("daemon started"), "{}", d.stderr());
    assert!(http_get(&addr, "/metrics").contains("irqpilot_daemon_periods_total"));
    let pid = d.child.id() as libc::pid_t;
    let open = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count() as u64;
    let mut old = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    let low = libc::rlimit {
        rlim_cur: open + 1,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: prlimit(2) on the child this test spawned, with valid pointers.
    let rc = unsafe { libc::prlimit(pid, libc::RLIMIT_NOFILE, std::ptr::null(), &mut old) };
    assert_eq!(rc, 0);
    let low = libc::rlimit {
        rlim_max: old.rlim_max,
        ..low
    };
    // SAFETY: as above.
    assert_eq!(
        unsafe { libc::prlimit(pid, libc::RLIMIT_NOFILE, &low, std::ptr::null_mut()) },
        0
    );
    let mut held = Vec::new();
    for _ in 0..8 {
        if let Ok(s) = TcpStream::connect(&addr) {
            held.push(s);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let died = d.wait_log("the daemon goes on without metrics");
    // SAFETY: as above.
    assert_eq!(
        unsafe { libc::prlimit(pid, libc::RLIMIT_NOFILE, &old, std::ptr::null_mut()) },
        0
    );
    drop(held);
    assert!(died, "{}", d.stderr());
    assert!(
        d.stderr()
            .contains(&format!("metrics endpoint {addr} stopped")),
        "{}",
        d.stderr()
    );
    // Still alive: a reload to short periods takes, and periods run.
    std::fs::write(d.path("irqpilot.toml"), FAST).unwrap();
    let periods = d.stdout().lines().count();
    d.signal(libc::SIGHUP);
    assert!(d.wait_log("configuration reloaded"), "{}", d.stderr());
    assert!(
        wait_for(|| d.stdout().lines().count() >= periods + 2),
        "{}",
        d.stderr()
    );
    let (status, _, err) = d.stop();
    assert!(status.success(), "{err}");
}

/// Under systemd with stderr on the journal but no journald socket (a container), logs go to
/// stderr after saying why.
#[test]
fn without_journald_logs_stay_on_stderr() {
    if Path::new("/run/systemd/journal/socket").exists() {
        eprintln!("skipped: a real journald is listening here");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let err_path = dir.path().join("stderr");
    let err_file = std::fs::File::create(&err_path).unwrap();
    let meta = err_file.metadata().unwrap();
    use std::os::unix::fs::MetadataExt;
    let stream = format!("{}:{}", meta.dev(), meta.ino());
    let root = dir.path().join("root");
    common::copy_tree(&common::firecracker(), &root);
    let status = Command::new(BIN)
        .arg("--root")
        .arg(&root)
        .args(["--config", "/dev/null", "daemon", "--force", "--once"])
        .env("JOURNAL_STREAM", &stream)
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(err_file)
        .status()
        .unwrap();
    let err = std::fs::read_to_string(&err_path).unwrap();
    assert!(status.success() || status.code() == Some(3), "{err}");
    assert!(err.contains("journald unreachable"), "{err}");
    assert!(err.contains("daemon started"), "{err}");
}
