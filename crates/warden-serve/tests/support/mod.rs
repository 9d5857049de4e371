//! What the server's tests share: a real server on a loopback port, an HTTP client (hyper's),
//! a reader of server-sent events, and a plugin folder with rules that decide, emit, and
//! carry hostile text.

#![allow(dead_code)]

pub mod webdriver;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use warden_core::Warden;
use warden_serve::{ServeError, ServeOptions, Server};

/// A server running in this process, on a port of its own.
pub struct Running {
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), ServeError>>,
}

impl Running {
    /// Starts a server for `warden` on 127.0.0.1, on a free port.
    pub async fn start(warden: Warden, options: ServeOptions) -> Running {
        Running::start_on(warden, options, [127, 0, 0, 1].into()).await
    }

    /// Starts a server for `warden` on `ip`, on a free port.
    pub async fn start_on(
        warden: Warden,
        mut options: ServeOptions,
        ip: std::net::IpAddr,
    ) -> Running {
        options.listen = SocketAddr::new(ip, 0);
        let server = Server::bind(warden, options)
            .await
            .expect("the server binds");
        let addr = server.local_addr();
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(server.run(async move {
            let _ = rx.await;
        }));
        Running {
            addr,
            stop: Some(tx),
            task,
        }
    }

    /// Asks the server to stop, and waits until it has.
    pub async fn stop(mut self) -> Result<(), ServeError> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        tokio::time::timeout(Duration::from_secs(30), &mut self.task)
            .await
            .expect("the server stops within 30 s")
            .expect("the server task does not panic")
    }

    /// A client of this server.
    pub fn client(&self) -> Client {
        Client {
            addr: self.addr,
            headers: Vec::new(),
        }
    }
}

/// An answer.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: hyper::HeaderMap,
    pub body: Bytes,
}

impl Answer {
    /// The body as JSON (panics with the body when it is not).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "not JSON ({e}), status {}: {}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// A header's value.
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    }

    /// The error message of a JSON error body.
    pub fn error(&self) -> String {
        self.json()["error"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }
}

/// An HTTP/1.1 client: one connection per request, headers added to every request.
#[derive(Clone)]
pub struct Client {
    pub addr: SocketAddr,
    pub headers: Vec<(String, String)>,
}

impl Client {
    /// A client of any HTTP server on this machine.
    pub fn of(addr: SocketAddr) -> Client {
        Client {
            addr,
            headers: Vec::new(),
        }
    }

    /// The same client, sending `name: value` with every request.
    pub fn with(mut self, name: &str, value: &str) -> Client {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    /// Sends a request and returns the answer's head and the body still streaming.
    pub async fn open(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<Vec<u8>>,
    ) -> hyper::Response<Incoming> {
        let stream = TcpStream::connect(self.addr).await.expect("connects");
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .expect("handshake");
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let mut req = hyper::Request::builder().method(method).uri(path);
        if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
            req = req.header("host", format!("127.0.0.1:{}", self.addr.port()));
        }
        for (k, v) in &self.headers {
            req = req.header(k.as_str(), v.as_str());
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = req
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .expect("a valid request");
        sender.send_request(req).await.expect("an answer")
    }

    /// Sends a request and reads the whole answer.
    pub async fn send(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<Vec<u8>>,
    ) -> Answer {
        let response = self.open(method, path, headers, body).await;
        let (parts, body) = response.into_parts();
        let body = body.collect().await.expect("a body").to_bytes();
        Answer {
            status: parts.status.as_u16(),
            headers: parts.headers,
            body,
        }
    }

    pub async fn get(&self, path: &str) -> Answer {
        self.send("GET", path, &[], None).await
    }

    pub async fn delete(&self, path: &str) -> Answer {
        self.send("DELETE", path, &[], None).await
    }

    /// `method` with a JSON body.
    pub async fn json(&self, method: &str, path: &str, body: &Value) -> Answer {
        self.send(
            method,
            path,
            &[("content-type", "application/json")],
            Some(body.to_string().into_bytes()),
        )
        .await
    }

    pub async fn post(&self, path: &str, body: &Value) -> Answer {
        self.json("POST", path, body).await
    }

    pub async fn put(&self, path: &str, body: &Value) -> Answer {
        self.json("PUT", path, body).await
    }

    /// Subscribes to the event stream, and waits for its `ready` event.
    pub async fn events(&self) -> Events {
        let response = self.open("GET", "/v1/events", &[], None).await;
        assert_eq!(response.status(), 200, "the event stream opens");
        let mut events = Events {
            body: response.into_body(),
            buf: String::new(),
        };
        // A hang detector: the `ready` event comes as soon as the stream opens.
        let (name, _) = events
            .next(Duration::from_secs(60))
            .await
            .expect("a ready event");
        assert_eq!(name, "ready");
        events
    }
}

/// A server-sent event stream being read.
pub struct Events {
    body: Incoming,
    buf: String,
}

impl Events {
    /// The next event (name, data), or None after `wait` without one.
    pub async fn next(&mut self, wait: Duration) -> Option<(String, Value)> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                let mut name = "message".to_string();
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(n) = line.strip_prefix("event:") {
                        name = n.trim().to_string();
                    } else if let Some(d) = line.strip_prefix("data:") {
                        data.push_str(d.trim_start());
                    }
                }
                if data.is_empty() {
                    continue; // a keep-alive comment
                }
                let value = serde_json::from_str(&data).expect("event data is JSON");
                return Some((name, value));
            }
            let frame = tokio::time::timeout_at(deadline, self.body.frame())
                .await
                .ok()??;
            if let Ok(bytes) = frame.expect("the stream reads").into_data() {
                self.buf.push_str(&String::from_utf8_lossy(&bytes));
            }
        }
    }

    /// Whether the stream ends (its body finishes, or its connection closes) within `wait`;
    /// events sent before the end are passed over. `false` when it is still open then.
    pub async fn ends_within(&mut self, wait: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            match tokio::time::timeout_at(deadline, self.body.frame()).await {
                Err(_) => return false,
                Ok(None | Some(Err(_))) => return true,
                Ok(Some(Ok(_))) => {}
            }
        }
    }

    /// The next event named `name` (others are skipped), or None after `wait`.
    pub async fn next_named(&mut self, name: &str, wait: Duration) -> Option<Value> {
        self.next_where(name, wait, |_| true).await
    }

    /// The next event named `name` whose data passes `keep`, or None after `wait`.
    pub async fn next_where(
        &mut self,
        name: &str,
        wait: Duration,
        keep: impl Fn(&Value) -> bool,
    ) -> Option<Value> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let (n, v) = self.next(left).await?;
            if n == name && keep(&v) {
                return Some(v);
            }
        }
    }
}

/// A rule whose name, description and message carry markup, to check that nothing shows it
/// as markup.
pub const HOSTILE: &str =
    "<script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned = 2\">";

/// A plugin folder: `demo` (settings with bounds, a reminder after a number of tool calls, a
/// rule that denies `rm -rf`, a rule that emits an event).
pub fn plugins(dir: &Path) {
    let demo = dir.join("demo");
    std::fs::create_dir_all(demo.join("rules")).unwrap();
    std::fs::write(
        demo.join("manifest.toml"),
        r#"[plugin]
id = "demo"
name = "Demo plugin"
version = "0.2.0"
description = "A reminder, a guard and an announcement"

[rules]
include = ["rules/*.toml"]

[settings.max_calls]
type = "integer"
default = 3
min = 1
max = 10
description = "Web searches before the reminder"

[settings.tone]
type = "string"
default = "brief"
options = ["brief", "detailed"]
description = "How the reminder reads"
"#,
    )
    .unwrap();
    std::fs::write(
        demo.join("rules/remind.toml"),
        r#"[rule]
id = "remind"
name = "Remind to synthesize"
description = "After a few web searches, asks the agent to use what it found"
trigger = "on_tool_call"
tool = "web_search"
priority = 50

[condition]
expression = "context.history.counts.tool_calls >= settings.max_calls"

[action]
type = "notify_self"
message = "Call {{ context.history.counts.tool_calls }} ({{ settings.tone }}): use what you found before searching again."
category = "hint"
"#,
    )
    .unwrap();
    std::fs::write(
        demo.join("rules/no-rm.toml"),
        r#"[rule]
id = "no-rm"
name = "No rm -rf"
description = "Denies a recursive forced rm"
trigger = "on_tool_call"
tool = "Bash"
priority = 200

[condition]
expression = "matches(tool.arguments.command, 'rm\\s+-rf')"

[action]
type = "decide"
decision = "deny"
reason = "`{{ tool.arguments.command }}` deletes too much; ask the user to run it."
"#,
    )
    .unwrap();
    std::fs::write(
        demo.join("rules/announce.toml"),
        r#"[rule]
id = "announce"
name = "Announce queries"
description = "Emits an event for every query"
trigger = "on_query_start"
priority = 10

[condition]
expression = "true"

[action]
type = "emit_event"
event_type = "query_seen"
payload = { text = "{{ event.query.text }}" }
"#,
    )
    .unwrap();
}

/// A plugin folder: `hostile`, whose rule's name, description and message carry markup, to
/// check that nothing shows it as markup.
pub fn hostile(dir: &Path) {
    let p = dir.join("hostile");
    std::fs::create_dir_all(p.join("rules")).unwrap();
    std::fs::write(
        p.join("manifest.toml"),
        "[plugin]\nid = \"hostile\"\nname = \"Hostile <b>plugin</b>\"\nversion = \"1.0.0\"\n\n[rules]\ninclude = [\"rules/*.toml\"]\n",
    )
    .unwrap();
    let h = HOSTILE.replace('"', "\\\"");
    std::fs::write(
        p.join("rules/markup.toml"),
        format!(
            r#"[rule]
id = "markup"
name = "Markup {h}"
description = "Says {h}"
trigger = "on_tool_call"
tool = "web_search"
priority = 10

[condition]
expression = "true"

[action]
type = "notify_self"
message = "Searching again: {h}"
"#
        ),
    )
    .unwrap();
}

/// A Warden with the built-in rules and the `demo` and `hostile` plugins (in `dir`), on `db`
/// if given.
pub fn warden(dir: &Path, db: Option<&Path>) -> Warden {
    plugins(dir);
    hostile(dir);
    let mut b = Warden::builder().builtin_rules().plugins_dir(dir);
    if let Some(db) = db {
        b = b.store(warden_core::Store::open(db).expect("the database opens"));
    }
    let w = b.build().expect("the rules load");
    let errors: Vec<String> = w
        .diagnostics()
        .iter()
        .filter(|d| d.is_error())
        .map(ToString::to_string)
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
    w
}

/// Percent-encodes a rule id for a path.
pub fn enc(id: &str) -> String {
    id.replace('%', "%25").replace('/', "%2F")
}

/// A self-signed certificate for `names` (DNS names or IP addresses) and its key, made with the
/// `openssl` command in `dir`: `(cert.pem, key.pem)`. `None` (and a line saying so) when
/// `openssl` is missing, unless `WARDEN_REQUIRE_OPENSSL` is set (as `.ci/run` sets it).
#[allow(dead_code)]
pub fn certificate(dir: &Path, names: &[&str], tag: &str) -> Option<(PathBuf, PathBuf)> {
    let cert = dir.join(format!("{tag}-cert.pem"));
    let key = dir.join(format!("{tag}-key.pem"));
    let alt: Vec<String> = names
        .iter()
        .map(|n| match n.parse::<std::net::IpAddr>() {
            Ok(_) => format!("IP:{n}"),
            Err(_) => format!("DNS:{n}"),
        })
        .collect();
    let made = std::process::Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
        .args(["ec_paramgen_curve:prime256v1", "-nodes", "-days", "2"])
        .arg("-subj")
        .arg(format!("/CN={tag}"))
        .arg("-addext")
        .arg(format!("subjectAltName={}", alt.join(",")))
        // Not a CA: a TLS client refuses a CA's certificate as a server's.
        .args(["-addext", "basicConstraints=critical,CA:FALSE"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .output();
    match made {
        Ok(out) if out.status.success() => Some((cert, key)),
        Ok(out) => panic!(
            "openssl could not make a certificate: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) if std::env::var_os("WARDEN_REQUIRE_OPENSSL").is_some() => {
            panic!("WARDEN_REQUIRE_OPENSSL is set, but openssl could not run: {e}")
        }
        Err(e) => {
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "skipped: openssl could not run: {e}");
            None
        }
    }
}
