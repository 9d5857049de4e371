//! A load driver for `warden serve`, run as a second process on this machine (see
//! `benches/serve-load.sh`): SESSIONS sessions of 50 events each, in order within a session,
//! over CONNECTIONS kept-alive HTTP/1.1 connections, each with one request in flight. First,
//! as the baseline of the same run, the same connections send `GET /v1/health` (the HTTP floor:
//! no tick). Bounded in requests and in time. Prints one JSON object.
//!
//! ```text
//! cargo run --release -p warden-serve --example load -- ADDR [SESSIONS] [CONNECTIONS] [MAX_SECONDS]
//! ```
//!
//! With `WARDEN_LOAD_CA=cert.pem`, it speaks TLS, trusting that certificate.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use rustls::pki_types::pem::PemObject;
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// Over TLS when `WARDEN_LOAD_CA` names the server's certificate (PEM): a client that trusts it.
fn tls_connector() -> Option<TlsConnector> {
    let ca = std::env::var_os("WARDEN_LOAD_CA")?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_file_iter(&ca).expect("the CA file") {
        roots
            .add(cert.expect("a certificate"))
            .expect("a usable certificate");
    }
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("TLS versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    Some(TlsConnector::from(std::sync::Arc::new(config)))
}

/// Events per session.
const EVENTS: usize = 50;

/// The events of session `s`: a query, then turns of a research agent (a search that returns
/// results, a fetch that fails now and then, the turn's end), and the session's end.
fn session_events(s: usize) -> Vec<Value> {
    let mut events = vec![
        json!({"hook": "on_query_start", "query": format!("Research and compare write-ahead logging, case {s}"), "user": {"id": format!("user-{}", s % 50)}}),
    ];
    let mut turn = 0;
    while events.len() < EVENTS - 1 {
        turn += 1;
        let usage = (turn as f64 * 0.11 + (s % 7) as f64 * 0.01).min(0.99);
        let batch = [
            json!({"hook": "on_turn_start", "turn": {"number": turn, "token_usage": usage, "context_usage": usage * 0.9, "iteration_count": turn, "max_iterations": 10, "context_window": 200000}}),
            json!({"hook": "on_tool_call", "tool": {"name": "vault_search", "arguments": {"query": "wal", "limit": 20}}}),
            json!({"hook": "on_tool_complete", "tool": {"name": "vault_search"}, "result": {"count": (s + turn) % 12}}),
            json!({"hook": "on_tool_call", "tool": {"name": "web_fetch", "arguments": {"url": "https://example.org/wal"}}}),
            if (s + turn).is_multiple_of(3) {
                json!({"hook": "on_tool_failure", "tool": {"name": "web_fetch"}, "error": "timeout"})
            } else {
                json!({"hook": "on_tool_complete", "tool": {"name": "web_fetch"}, "result": {"status": 200}})
            },
            json!({"hook": "on_turn_end", "message": {"role": "assistant", "content": "Notes so far."}}),
        ];
        for e in batch {
            if events.len() < EVENTS - 1 {
                events.push(e);
            }
        }
    }
    events.push(json!({"hook": "on_session_end"}));
    events
}

/// HTTP/1.1 over `io`, its connection driven by a task of its own.
async fn handshake<I>(io: I) -> Result<hyper::client::conn::http1::SendRequest<Full<Bytes>>, String>
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(sender)
}

struct Connection {
    sender: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    host: String,
}

impl Connection {
    async fn open(addr: SocketAddr, tls: Option<&TlsConnector>) -> Result<Connection, String> {
        let stream = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        let sender = match tls {
            None => handshake(stream).await?,
            Some(tls) => {
                let name = ServerName::from(addr.ip());
                handshake(tls.connect(name, stream).await.map_err(|e| e.to_string())?).await?
            }
        };
        Ok(Connection {
            sender,
            host: addr.to_string(),
        })
    }

    /// One request; whether it was answered 200 and how long it took.
    async fn send(&mut self, method: &str, path: &str, body: Option<Bytes>) -> (bool, Duration) {
        let start = Instant::now();
        let mut req = hyper::Request::builder()
            .method(method)
            .uri(path)
            .header("host", &self.host);
        if body.is_some() {
            req = req.header("content-type", "application/json");
        }
        let Ok(req) = req.body(Full::new(body.unwrap_or_default())) else {
            return (false, start.elapsed());
        };
        let ok = match self.sender.send_request(req).await {
            Ok(r) => {
                let status = r.status();
                r.into_body().collect().await.is_ok() && status == 200
            }
            Err(_) => false,
        };
        (ok, start.elapsed())
    }
}

#[derive(Default)]
struct Tally {
    latencies: Vec<Duration>,
    errors: usize,
}

fn summary(mut t: Tally, took: Duration) -> Value {
    t.latencies.sort_unstable();
    let n = t.latencies.len();
    let at = |q: f64| -> f64 {
        if n == 0 {
            return 0.0;
        }
        let i = ((n as f64 * q).ceil() as usize).clamp(1, n) - 1;
        t.latencies[i].as_secs_f64() * 1e3
    };
    json!({
        "requests": n,
        "errors": t.errors,
        "seconds": took.as_secs_f64(),
        "per_second": n as f64 / took.as_secs_f64(),
        "p50_ms": at(0.50),
        "p99_ms": at(0.99),
        "max_ms": at(1.0),
    })
}

/// One request: method, path, body.
type Request = (&'static str, String, Option<Bytes>);

/// Sends each connection's requests (`work[k]`, in order) over a connection of its own, all
/// connections at once. The requests are built before the clock starts: the driver shares the
/// machine's cores with the server, and building them is no part of what is measured.
async fn drive(addr: SocketAddr, work: Vec<Vec<Request>>, deadline: Instant) -> (Tally, Duration) {
    let start = Instant::now();
    let mut tasks = Vec::new();
    let tls = tls_connector();
    for requests in work {
        let tls = tls.clone();
        tasks.push(tokio::spawn(async move {
            let mut tally = Tally::default();
            let Ok(mut conn) = Connection::open(addr, tls.as_ref()).await else {
                tally.errors += 1;
                return tally;
            };
            for (method, path, body) in requests {
                if Instant::now() > deadline {
                    break;
                }
                let (ok, took) = conn.send(method, &path, body).await;
                tally.latencies.push(took);
                if !ok {
                    tally.errors += 1;
                    match Connection::open(addr, tls.as_ref()).await {
                        Ok(c) => conn = c,
                        Err(_) => break,
                    }
                }
            }
            tally
        }));
    }
    let mut all = Tally::default();
    for t in tasks {
        if let Ok(t) = t.await {
            all.latencies.extend(t.latencies);
            all.errors += t.errors;
        }
    }
    (all, start.elapsed())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(addr) = args.first().and_then(|a| a.parse::<SocketAddr>().ok()) else {
        eprintln!("usage: load ADDR [SESSIONS] [CONNECTIONS] [MAX_SECONDS]");
        std::process::exit(2);
    };
    let sessions: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(1000);
    let connections: usize = args
        .get(2)
        .and_then(|a| a.parse().ok())
        .unwrap_or(16)
        .max(1);
    let max_seconds: u64 = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(120);
    let deadline = Instant::now() + Duration::from_secs(max_seconds);

    // The floor: as many health checks as there will be events.
    let per_conn = sessions * EVENTS / connections;
    let health: Request = ("GET", "/v1/health".to_string(), None);
    let (floor, floor_took) =
        drive(addr, vec![vec![health; per_conn]; connections], deadline).await;

    // The load: session s goes to connection s % connections, its events in order.
    let work = (0..connections)
        .map(|k| {
            let mut requests = Vec::new();
            for s in (k..sessions).step_by(connections) {
                let path = format!("/v1/sessions/load-{s}/events");
                for e in session_events(s) {
                    requests.push(("POST", path.clone(), Some(Bytes::from(e.to_string()))));
                }
            }
            requests
        })
        .collect();
    let (load, load_took) = drive(addr, work, deadline).await;
    let floor = summary(floor, floor_took);
    let load = summary(load, load_took);
    let ratio =
        load["per_second"].as_f64().unwrap_or(0.0) / floor["per_second"].as_f64().unwrap_or(1.0);
    println!(
        "{}",
        json!({
            "sessions": sessions,
            "events_per_session": EVENTS,
            "connections": connections,
            "baseline_health": floor,
            "events": load,
            "events_per_second_vs_health": ratio,
        })
    );
}
