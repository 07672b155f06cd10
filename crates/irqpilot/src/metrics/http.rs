//! The HTTP side: `GET /metrics` (OpenMetrics text), `GET /` (a pointer to it), 404 otherwise.
//! tiny_http accepts connections on its own threads and queues requests; one thread here
//! answers them in turn, so scrapes never overlap and memory stays that of one scrape.
//!
//! When the listener dies the thread sends [`Event::MetricsDown`] and ends; the service logs it
//! and goes on without metrics. tiny_http reports an `accept` error (EMFILE, say) through its
//! queue, but its accepting thread can also panic (when cloning an accepted socket fails with
//! EMFILE) and close the socket without a word: so every [`PROBE_EVERY`] the thread connects to
//! its own address, and a refused connection means the listener is gone.

use super::Scraper;
use crate::service::Event;
use anyhow::{Context, Result, anyhow, bail};
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

/// OpenMetrics' media type (what prometheus-client encodes), served to clients that accept it
/// (Prometheus asks for it first).
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Prometheus' classic text format, served to everyone else.
pub const CLASSIC: &str = "text/plain; version=0.0.4; charset=utf-8";

/// How often the serving thread checks that its listener still accepts connections.
pub const PROBE_EVERY: Duration = Duration::from_secs(5);

/// Parses the address to listen on (`127.0.0.1:9877`, `[::1]:9877`, `localhost:9877`) and
/// refuses one that is not loopback unless `allow_remote`. `what` names the flag in errors.
pub fn listen_address(text: &str, allow_remote: bool, what: &str) -> Result<SocketAddr> {
    let addr = match text.parse::<SocketAddr>() {
        Ok(a) => a,
        Err(_) => {
            let (host, _) = text.rsplit_once(':').ok_or_else(|| {
                anyhow!("{what} {text:?}: expected ADDRESS:PORT, e.g. 127.0.0.1:9877")
            })?;
            if host != "localhost" {
                bail!(
                    "{what} {text:?}: expected an IP address and port (127.0.0.1:9877, [::1]:9877) or localhost:PORT"
                );
            }
            text.to_socket_addrs()
                .with_context(|| format!("{what} {text:?}"))?
                .find(|a| a.ip().is_loopback())
                .ok_or_else(|| anyhow!("{what} {text:?}: localhost has no loopback address"))?
        }
    };
    if !addr.ip().is_loopback() && !allow_remote {
        bail!(
            "{what} {addr}: not a loopback address; the metrics endpoint has no authentication, \
             so serving it to other machines needs --metrics-allow-remote"
        );
    }
    Ok(addr)
}

/// A running metrics endpoint.
pub struct Endpoint {
    addr: SocketAddr,
    server: Arc<tiny_http::Server>,
    stopping: Arc<AtomicBool>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("addr", &self.addr)
            .finish()
    }
}

/// Sends [`Event::MetricsDown`] when the serving thread ends, however it ends (a panic too).
struct DownGuard {
    addr: SocketAddr,
    events: Option<Sender<Event>>,
    why: String,
}

impl Drop for DownGuard {
    fn drop(&mut self) {
        let why = if self.why.is_empty() {
            "the serving thread ended unexpectedly".to_string()
        } else {
            std::mem::take(&mut self.why)
        };
        let text = format!("metrics endpoint {} stopped: {why}", self.addr);
        if let Some(tx) = &self.events {
            let _ = tx.send(Event::MetricsDown(text));
        }
    }
}

impl Endpoint {
    /// Binds `addr` (a port in use is an error naming it) and serves `scraper` from a thread.
    pub fn start(
        addr: SocketAddr,
        scraper: Scraper,
        events: Option<Sender<Event>>,
    ) -> Result<Endpoint> {
        let listener =
            TcpListener::bind(addr).with_context(|| format!("metrics endpoint {addr}"))?;
        let local = listener.local_addr().unwrap_or(addr);
        let server = tiny_http::Server::from_listener(listener, None)
            .map_err(|e| anyhow!("metrics endpoint {local}: {e}"))?;
        let server = Arc::new(server);
        let serving = Arc::clone(&server);
        let stopping = Arc::new(AtomicBool::new(false));
        let stop_flag = Arc::clone(&stopping);
        std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || {
                let mut guard = DownGuard {
                    addr: local,
                    events,
                    why: String::new(),
                };
                match serve(&serving, scraper, probe_address(local), &stop_flag) {
                    Some(why) => guard.why = why,
                    None => guard.events = None,
                }
            })
            .context("starting the metrics thread")?;
        Ok(Endpoint {
            addr: local,
            server,
            stopping,
        })
    }

    /// The address it listens on (the port the kernel chose for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops serving (the thread ends without reporting anything).
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.server.unblock();
    }
}

/// Where to connect to reach our own listener (loopback for a wildcard address).
fn probe_address(local: SocketAddr) -> SocketAddr {
    let mut a = local;
    if a.ip().is_unspecified() {
        a.set_ip(match a {
            SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    a
}

/// Whether the listener at `addr` is gone: only a refused connection says so (another failure,
/// such as this process being out of descriptors itself, proves nothing).
fn listener_gone(addr: SocketAddr) -> bool {
    matches!(
        std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused
    )
}

/// Answers requests until the listener fails (returns why) or [`Endpoint::stop`] (`None`).
fn serve(
    server: &tiny_http::Server,
    mut scraper: Scraper,
    probe: SocketAddr,
    stopping: &AtomicBool,
) -> Option<String> {
    let mut classic = String::new();
    let mut next_probe = Instant::now() + PROBE_EVERY;
    loop {
        if stopping.load(Ordering::SeqCst) {
            return None;
        }
        let now = Instant::now();
        if now >= next_probe {
            next_probe = now + PROBE_EVERY;
            if listener_gone(probe) {
                return Some("the listener stopped accepting connections".to_string());
            }
        }
        let request = match server.recv_timeout(next_probe.saturating_duration_since(now)) {
            Ok(Some(r)) => r,
            Ok(None) => continue,
            Err(e) => return Some(e.to_string()),
        };
        let path = request.url().split('?').next().unwrap_or("");
        let get = matches!(
            request.method(),
            tiny_http::Method::Get | tiny_http::Method::Head
        );
        let result = match (get, path) {
            (true, "/metrics") => match scraper.scrape() {
                Ok(body) if accepts_openmetrics(&request) => {
                    request.respond(response(200, OPENMETRICS, body.as_bytes()))
                }
                Ok(body) => {
                    super::encode::classic_text(body, &mut classic);
                    request.respond(response(200, CLASSIC, classic.as_bytes()))
                }
                Err(e) => {
                    tracing::warn!(error = %e, "scrape failed");
                    let text = format!("irqpilot: {e}\n");
                    request.respond(response(500, "text/plain; charset=utf-8", text.as_bytes()))
                }
            },
            (true, "/") => request.respond(response(
                200,
                "text/plain; charset=utf-8",
                b"irqpilot metrics: /metrics\n",
            )),
            (true, _) => {
                request.respond(response(404, "text/plain; charset=utf-8", b"not found\n"))
            }
            (false, _) => request.respond(response(
                405,
                "text/plain; charset=utf-8",
                b"only GET and HEAD\n",
            )),
        };
        if let Err(e) = result {
            // The client went away mid-answer: its problem, not the listener's.
            tracing::debug!(error = %e, "metrics client write failed");
        }
    }
}

/// Whether the client's `Accept` names OpenMetrics.
fn accepts_openmetrics(request: &tiny_http::Request) -> bool {
    request.headers().iter().any(|h| {
        h.field.equiv("Accept") && h.value.as_str().contains("application/openmetrics-text")
    })
}

fn response<'a>(status: u16, content_type: &str, body: &'a [u8]) -> tiny_http::Response<&'a [u8]> {
    let mut headers = Vec::with_capacity(1);
    if let Ok(h) = tiny_http::Header::from_bytes(&b"Content-Type"[..], content_type.as_bytes()) {
        headers.push(h);
    }
    tiny_http::Response::new(
        tiny_http::StatusCode(status),
        headers,
        body,
        Some(body.len()),
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_without_allow_remote() {
        assert_eq!(
            listen_address("127.0.0.1:9877", false, "--listen").unwrap(),
            "127.0.0.1:9877".parse().unwrap()
        );
        assert!(listen_address("[::1]:9877", false, "--listen").is_ok());
        assert!(
            listen_address("localhost:9877", false, "--listen")
                .unwrap()
                .ip()
                .is_loopback()
        );
        let e = listen_address("0.0.0.0:9877", false, "--listen").unwrap_err();
        let msg = format!("{e:#}");
        assert!(
            msg.contains("0.0.0.0:9877") && msg.contains("--metrics-allow-remote"),
            "{msg}"
        );
        assert!(listen_address("0.0.0.0:9877", true, "--listen").is_ok());
        for bad in [
            "9877",
            "example.invalid:9877",
            "127.0.0.1",
            "127.0.0.1:http",
        ] {
            let e = listen_address(bad, true, "--listen").unwrap_err();
            assert!(format!("{e:#}").contains("--listen"), "{bad}: {e:#}");
        }
    }
}
