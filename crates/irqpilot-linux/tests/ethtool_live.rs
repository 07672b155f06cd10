//! The real `SIOCETHTOOL` path, against interfaces in a network namespace this test creates (a
//! veth pair and the namespace's own `lo`), never against the host's interfaces. Needs root and
//! `ip netns`; skipped with a message otherwise. The namespace is deleted when the test ends.

use irqpilot_core::{Action, ApplyError, CoalesceParams};
use irqpilot_linux::Root;
use irqpilot_linux::moderation::ModerationIo;
use irqpilot_linux::moderation::apply::apply_moderation;
use irqpilot_linux::moderation::ethtool_io::{
    CoalesceScope, EthtoolIo, SocketEthtool, get_coalesce, read_coalesce,
};
use irqpilot_linux::moderation::fake::FakeNvme;
use std::path::PathBuf;
use std::process::Command;

/// A network namespace with a veth pair, deleted on drop.
struct Netns {
    name: String,
}

impl Netns {
    fn create() -> Result<Netns, String> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err("not root".into());
        }
        let name = format!("irqpilot-test-{}", std::process::id());
        let ip = |args: &[&str]| -> Result<(), String> {
            let out = Command::new("ip")
                .args(args)
                .output()
                .map_err(|e| format!("ip: {e}"))?;
            if out.status.success() {
                Ok(())
            } else {
                Err(format!(
                    "ip {}: {}",
                    args.join(" "),
                    String::from_utf8_lossy(&out.stderr).trim()
                ))
            }
        };
        ip(&["netns", "add", &name])?;
        let ns = Netns { name };
        ip(&[
            "-n", &ns.name, "link", "add", "va", "type", "veth", "peer", "name", "vb",
        ])?;
        ip(&["-n", &ns.name, "link", "set", "va", "up"])?;
        Ok(ns)
    }

    fn path(&self) -> PathBuf {
        PathBuf::from(format!("/run/netns/{}", self.name))
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Deleting the namespace removes its veth pair too.
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

fn errno(e: &std::io::Error) -> Option<i32> {
    e.raw_os_error()
}

#[test]
fn veth_in_a_private_namespace() {
    let ns = match Netns::create() {
        Ok(ns) => ns,
        Err(why) => {
            eprintln!("skipped: cannot create a network namespace ({why})");
            return;
        }
    };
    let mut sock = SocketEthtool::open_in_netns(&ns.path()).expect("socket in the namespace");

    // The namespace holds only lo, va and vb: the host's eth0 is not even visible from here.
    let e = get_coalesce(&mut sock, "eth0", CoalesceScope::Device).unwrap_err();
    assert_eq!(errno(&e.source), Some(libc::ENODEV), "{e}");
    assert_eq!(e.apply_error(), ApplyError::Vanished);

    // veth and lo implement no coalescing ops: the kernel answers EOPNOTSUPP for both the
    // device-wide and the per-queue request, and the fallback reports the device-wide refusal.
    for dev in ["va", "vb", "lo"] {
        let e = get_coalesce(&mut sock, dev, CoalesceScope::Device).unwrap_err();
        assert!(e.is_unsupported(), "{e}");
        assert_eq!(e.op, "ETHTOOL_GCOALESCE");
        let e = get_coalesce(&mut sock, dev, CoalesceScope::Queue(0)).unwrap_err();
        assert!(e.is_unsupported(), "{e}");
        assert_eq!(e.op, "ETHTOOL_PERQUEUE/GCOALESCE");
        let e = read_coalesce(&mut sock, dev, Some(0)).unwrap_err();
        assert_eq!(e.scope, CoalesceScope::Device);
        assert!(
            e.to_string()
                .starts_with(&format!("{dev}: ETHTOOL_GCOALESCE")),
            "{e}"
        );
    }

    // A whole plan: every action gets its own outcome, refusals do not stop the rest.
    let root = Root::new("/nonexistent-root-for-this-test");
    let mut io = ModerationIo {
        ethtool: Some(Box::new(sock)),
        nvme: Box::new(FakeNvme::default()),
    };
    let set = |device: &str, queue| Action::SetCoalesce {
        device: device.into(),
        queue,
        params: CoalesceParams {
            rx_usecs: Some(50),
            ..Default::default()
        },
    };
    let plan = [set("va", Some(0)), set("gone0", None), set("vb", None)];
    let results: Vec<_> = plan
        .iter()
        .map(|a| apply_moderation(&root, &mut io, a).expect("a moderation action"))
        .collect();
    assert_eq!(
        results,
        [
            (None, Err(ApplyError::Unsupported)),
            (None, Err(ApplyError::Vanished)),
            (None, Err(ApplyError::Unsupported)),
        ]
    );
}

#[test]
fn raw_socket_in_this_namespace_only_reads() {
    // Reading `lo` of this process's own namespace is harmless (GCOALESCE needs no privilege and
    // changes nothing); lo has no coalescing.
    let Ok(mut sock) = SocketEthtool::open() else {
        eprintln!("skipped: no AF_INET socket");
        return;
    };
    let mut buf = irqpilot_linux::moderation::ethtool::EthtoolCoalesce::default()
        .encode(irqpilot_linux::moderation::ethtool::ETHTOOL_GCOALESCE);
    let e = sock.ethtool("lo", &mut buf).unwrap_err();
    assert_eq!(errno(&e), Some(libc::EOPNOTSUPP));
}
