//! A small WebDriver (W3C) client over the tests' HTTP client: chromedriver started on a port
//! of its own, one headless Chromium session with a fresh profile, and the few commands the
//! browser tests use. Finds chromedriver and Chromium on the usual paths (or `CHROMEDRIVER`
//! and `CHROMIUM`); without them the tests print why they skip.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{Value, json};

use super::Client;

/// The key of an element reference in W3C WebDriver.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// The flags Chromium runs with: headless, and quiet on a closed network.
const FLAGS: [&str; 9] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
];

fn find(var: &str, candidates: &[&str]) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(var) {
        // Named by hand: that one or none.
        return Some(PathBuf::from(p)).filter(|p| p.is_file());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for name in candidates {
        let p = PathBuf::from(name);
        if p.is_absolute() && p.is_file() {
            return Some(p);
        }
        for dir in std::env::split_paths(&path) {
            let full = dir.join(name);
            if full.is_file() {
                return Some(full);
            }
        }
    }
    None
}

/// chromedriver and Chromium, or why the browser tests cannot run here.
pub fn tools() -> Result<(PathBuf, PathBuf), String> {
    let driver = find("CHROMEDRIVER", &["/usr/bin/chromedriver", "chromedriver"])
        .ok_or("chromedriver not found (Debian: apt-get install chromium-driver); CI runs it")?;
    let browser = find(
        "CHROMIUM",
        &[
            "/usr/bin/chromium",
            "chromium",
            "chromium-browser",
            "google-chrome",
        ],
    )
    .ok_or("chromium not found (Debian: apt-get install chromium); CI runs it")?;
    Ok((driver, browser))
}

/// A browser session, driven through chromedriver.
pub struct Browser {
    driver: Child,
    client: Client,
    session: String,
    _profile: tempfile::TempDir,
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Ending the session closes Chromium; then chromedriver goes.
        let client = self.client.clone();
        let session = self.session.clone();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            if let Ok(rt) = rt {
                rt.block_on(async {
                    let _ = tokio::time::timeout(
                        Duration::from_secs(10),
                        client.delete(&format!("/session/{session}")),
                    )
                    .await;
                });
            }
        })
        .join();
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

impl Browser {
    /// Starts chromedriver and a headless Chromium of `width` x `height`.
    pub async fn start(driver: &PathBuf, chromium: &PathBuf, width: u32, height: u32) -> Browser {
        Browser::start_with(driver, chromium, width, height, false).await
    }

    /// The same, trusting any certificate when `any_certificate` (a test's self-signed one).
    pub async fn start_with(
        driver: &PathBuf,
        chromium: &PathBuf,
        width: u32,
        height: u32,
        any_certificate: bool,
    ) -> Browser {
        let port = free_port();
        let child = Command::new(driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let client = Client::of(SocketAddr::from(([127, 0, 0, 1], port)));
        let profile = tempfile::tempdir().unwrap();
        // A hang detector: the driver is ready as soon as it has started.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(Ok(r)) =
                tokio::time::timeout(Duration::from_secs(2), try_status(&client)).await
                && r
            {
                break;
            }
            assert!(Instant::now() < deadline, "chromedriver did not come up");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let mut args: Vec<String> = FLAGS.iter().map(|s| s.to_string()).collect();
        args.push(format!("--user-data-dir={}", profile.path().display()));
        args.push(format!("--window-size={width},{height}"));
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "acceptInsecureCerts": any_certificate,
            "goog:chromeOptions": {"binary": chromium, "args": args},
        }}});
        let r = client.post("/session", &caps).await;
        assert_eq!(r.status, 200, "a browser session: {}", r.text());
        let session = r.json()["value"]["sessionId"]
            .as_str()
            .expect("a session id")
            .to_string();
        Browser {
            driver: child,
            client,
            session,
            _profile: profile,
        }
    }

    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let url = format!("/session/{}{path}", self.session);
        let r = match body {
            Some(b) => self.client.json(method, &url, &b).await,
            None => self.client.send(method, &url, &[], None).await,
        };
        let v = r.json();
        assert_eq!(r.status, 200, "{method} {path}: {v}");
        v["value"].clone()
    }

    /// Opens `url`.
    pub async fn goto(&self, url: &str) {
        self.call("POST", "/url", Some(json!({"url": url}))).await;
    }

    /// Reloads the page (and waits until it has loaded, as `goto` does).
    pub async fn refresh(&self) {
        self.call("POST", "/refresh", Some(json!({}))).await;
    }

    /// The elements matching a CSS selector (possibly none).
    pub async fn all(&self, css: &str) -> Vec<String> {
        let v = self
            .call(
                "POST",
                "/elements",
                Some(json!({"using": "css selector", "value": css})),
            )
            .await;
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| e[ELEMENT].as_str().map(str::to_string))
            .collect()
    }

    /// The first element matching a CSS selector (panics when there is none).
    pub async fn one(&self, css: &str) -> String {
        self.all(css)
            .await
            .into_iter()
            .next()
            .unwrap_or_else(|| panic!("no element `{css}`"))
    }

    /// Clicks an element.
    pub async fn click(&self, element: &str) {
        self.call(
            "POST",
            &format!("/element/{element}/click"),
            Some(json!({})),
        )
        .await;
    }

    /// Types into an element (WebDriver key codes allowed).
    pub async fn keys(&self, element: &str, text: &str) {
        self.call(
            "POST",
            &format!("/element/{element}/value"),
            Some(json!({"text": text})),
        )
        .await;
    }

    /// Empties a text field.
    pub async fn clear(&self, element: &str) {
        self.call(
            "POST",
            &format!("/element/{element}/clear"),
            Some(json!({})),
        )
        .await;
    }

    /// The rendered text of an element.
    pub async fn text(&self, element: &str) -> String {
        self.call("GET", &format!("/element/{element}/text"), None)
            .await
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// An attribute of an element (null when absent).
    pub async fn attr(&self, element: &str, name: &str) -> Value {
        self.call("GET", &format!("/element/{element}/attribute/{name}"), None)
            .await
    }

    /// Runs a script in the page (`arguments[0]`... are `args`) and returns its value.
    pub async fn run(&self, script: &str, args: Value) -> Value {
        self.call(
            "POST",
            "/execute/sync",
            Some(json!({"script": script, "args": args})),
        )
        .await
    }

    /// An element as a script argument.
    pub fn arg(element: &str) -> Value {
        json!({ ELEMENT: element })
    }

    /// Moves the mouse over an element.
    pub async fn hover(&self, element: &str) {
        let actions = json!({"actions": [{
            "type": "pointer", "id": "mouse", "parameters": {"pointerType": "mouse"},
            "actions": [{"type": "pointerMove", "duration": 0, "origin": {ELEMENT: element}, "x": 0, "y": 0}],
        }]});
        self.call("POST", "/actions", Some(actions)).await;
    }

    /// Presses keys on whatever has the focus.
    pub async fn press(&self, keys: &[&str]) {
        let mut list = Vec::new();
        for k in keys {
            list.push(json!({"type": "keyDown", "value": k}));
            list.push(json!({"type": "keyUp", "value": k}));
        }
        let actions = json!({"actions": [{"type": "key", "id": "keyboard", "actions": list}]});
        self.call("POST", "/actions", Some(actions)).await;
    }

    /// A PNG of the viewport.
    pub async fn screenshot(&self) -> Vec<u8> {
        let v = self.call("GET", "/screenshot", None).await;
        base64::engine::general_purpose::STANDARD
            .decode(v.as_str().unwrap_or_default())
            .expect("a base64 PNG")
    }

    /// Waits until `check` holds (polling the page), or panics with `what` after a minute (a
    /// hang detector: what a test waits for comes as soon as the page gets to it).
    pub async fn wait_for(&self, what: &str, script: &str, args: Value) -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let v = self.run(script, args.clone()).await;
            if !(v.is_null() || v == json!(false) || v == json!("")) {
                return v;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

async fn try_status(client: &Client) -> Result<bool, ()> {
    let stream = tokio::net::TcpStream::connect(client.addr)
        .await
        .map_err(|_| ())?;
    drop(stream);
    let r = client.get("/status").await;
    Ok(r.status == 200 && r.json()["value"]["ready"] == true)
}
