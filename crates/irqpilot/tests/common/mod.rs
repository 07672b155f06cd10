//! Helpers for the binary's integration tests: running the built binary, fixture paths,
//! temporary roots.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `tests/fixtures` at the workspace root.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

/// The captured Firecracker guest.
pub fn firecracker() -> PathBuf {
    fixtures().join("firecracker-2cpu")
}

/// The shared corpus of real `/proc/interrupts` files, beside the checkout; `None` (after
/// saying so) when it is missing outside CI. Under `CI=true` a missing corpus fails.
pub fn corpus() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/proc-interrupts");
    if dir.is_dir() {
        return Some(dir);
    }
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("corpus folder {} is missing (CI=true)", dir.display());
    }
    eprintln!("SKIPPED: corpus folder {} not found", dir.display());
    None
}

/// Runs the built binary with `args`.
pub fn irqpilot(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_irqpilot"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

/// Runs the binary and requires success; returns stdout.
pub fn ok(args: &[&str]) -> String {
    let out = irqpilot(args);
    assert!(
        out.status.success(),
        "irqpilot {args:?} failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A temporary directory, on tmpfs (`/dev/shm`) when there is one: a generated 256-CPU tree is
/// ~20,000 files, and creating a file costs about a millisecond on some virtual disks.
pub fn scratch_dir() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(dir) = tempfile::Builder::new().prefix("irqpilot-").tempdir_in(shm) {
            return dir;
        }
    }
    tempfile::tempdir().unwrap()
}

/// The generated large server written by `irqpilot fixture generate` into a scratch dir.
pub fn generated(seed: u64) -> (tempfile::TempDir, PathBuf) {
    let dir = scratch_dir();
    let root = dir.path().join("large-server");
    let seed = seed.to_string();
    ok(&[
        "fixture",
        "generate",
        "--preset",
        "large-server",
        "--seed",
        &seed,
        "--out",
        root.to_str().unwrap(),
    ]);
    (dir, root)
}

/// A root holding only `proc/interrupts` with `text`.
pub fn interrupts_only(text: &[u8]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("proc")).unwrap();
    std::fs::write(dir.path().join("proc/interrupts"), text).unwrap();
    dir
}

/// Copies `from` into `to` recursively; symbolic links are recreated with the same text.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let ty = entry.file_type().unwrap();
        if ty.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&src).unwrap(), &dst).unwrap();
        } else if ty.is_dir() {
            copy_tree(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

/// Whether this process runs as root (then tests can drop to `nobody` with `setpriv`).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// A program on PATH, or `None` after saying the test is skipped. Under `CI=true` a missing
/// program fails the test (`.ci/run` installs tmux and chromium).
pub fn tool(name: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(name))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("{name} is not installed (CI=true; .ci/run installs it)");
        }
        eprintln!("SKIPPED: {name} is not installed");
    }
    found
}

/// Every file under `dir`, byte for byte, by path.
pub fn tree_files(dir: &Path) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.insert(p.clone(), std::fs::read(&p).unwrap_or_default());
            }
        }
    }
    out
}

/// A free port on loopback (bound, then released for the caller to use).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Every file under `<root>/proc/irq`, byte for byte.
pub fn irq_files(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else {
                // A file replaced whole (written beside, renamed over) may vanish between
                // the listing and the read.
                match std::fs::read(&p) {
                    Ok(b) => {
                        out.insert(p.clone(), b);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => panic!("{}: {e}", p.display()),
                }
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(&root.join("proc/irq"), &mut out);
    out
}

/// Polls `cond` every 20 ms for up to 60 s: wait for effects, not for a fixed time (a loaded
/// CI machine may be slow to start a process).
pub fn wait_for(mut cond: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    cond()
}

/// The `result` of the outcome acting on `irq` in an `apply`-shaped JSON document.
pub fn result_of(v: &serde_json::Value, irq: u64) -> Option<String> {
    v["outcomes"]
        .as_array()?
        .iter()
        .find(|o| o["action"]["irq"] == irq)
        .and_then(|o| o["result"].as_str().map(str::to_string))
}
