//! `warden serve` as an operator runs it: the configuration of the other commands, a refusal
//! to listen on the network without a token or in clear, tokens from a file, hot reload, TLS
//! certificates read again at SIGHUP, and SIGTERM with a request in flight (it is answered,
//! its writes saved, before the process exits).

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// How long a test waits for what comes as soon as the server gets to it (a changed rule
/// reloaded, a certificate read again): a hang detector, not a speed check; a wait ends as soon
/// as what it waits for comes.
const PATIENCE: Duration = Duration::from_secs(60);

/// A `warden serve` process, stopped when dropped.
struct Serve {
    child: Child,
    port: u16,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `warden serve --listen 127.0.0.1:0 ARGS` in `dir`, and reads the port it prints.
fn serve(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Serve {
    serve_logging_to(dir, args, env, Stdio::inherit())
}

/// The same, its standard error (its log) sent to `stderr`.
fn serve_logging_to(dir: &Path, args: &[&str], env: &[(&str, &str)], stderr: Stdio) -> Serve {
    let mut child = Command::new(env!("CARGO_BIN_EXE_warden"))
        .arg("serve")
        .args(["--listen", "127.0.0.1:0"])
        .args(args)
        .current_dir(dir)
        .env_remove("WARDEN_CONFIG")
        .env_remove("WARDEN_TOKEN")
        .env_remove("WARDEN_AGENT_TOKEN")
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line
        .split("://127.0.0.1:")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no address in {line:?}"));
    Serve { child, port }
}

/// One HTTP/1.1 request, `Connection: close`; the status and the body.
fn http(port: u16, method: &str, path: &str, headers: &[&str], body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !body.is_empty() {
        head.push_str("Content-Type: application/json\r\n");
    }
    for h in headers {
        head.push_str(h);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body.as_bytes()).unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    let status = answer[9..12].parse().unwrap();
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

fn json(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

#[test]
fn a_network_address_without_a_token_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(["serve", "--listen", "0.0.0.0:7878"])
        .current_dir(dir.path())
        .env_remove("WARDEN_TOKEN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("refusing to listen on 0.0.0.0:7878 without a token"),
        "{err}"
    );
    assert!(err.contains("--token-file"), "{err}");
    // A weak token is refused too, saying why.
    let out = Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(["serve", "--listen", "0.0.0.0:7878"])
        .current_dir(dir.path())
        .env("WARDEN_TOKEN", "secret")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("shorter than 16"));
    // With a token, still not in clear: TLS, or a proxy said to provide it.
    let out = Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(["serve", "--listen", "0.0.0.0:7878"])
        .current_dir(dir.path())
        .env("WARDEN_TOKEN", "tls-token-0123456789abcdefghijkl")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("refusing to serve plain HTTP on 0.0.0.0:7878"),
        "{err}"
    );
    assert!(err.contains("--plain-http"), "{err}");
}

#[test]
fn tokens_come_from_a_file_and_the_configuration_from_warden_toml() {
    let dir = tempfile::tempdir().unwrap();
    let root = env!("CARGO_MANIFEST_DIR");
    fs::write(
        dir.path().join("warden.toml"),
        format!(
            "plugins = [{:?}]\ncapabilities = [\"vault_search\", \"web_search\"]\ndatabase = \"warden.db\"\nuser = \"ann\"\n",
            Path::new(root).join("examples/plugins")
        ),
    )
    .unwrap();
    let token = "file-token-0123456789abcdefghij";
    fs::write(dir.path().join("token"), format!("{token}\n")).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(dir.path().join("token"), fs::Permissions::from_mode(0o600)).unwrap();
    }
    let s = serve(dir.path(), &["--token-file", "token"], &[]);
    assert_eq!(http(s.port, "GET", "/v1/rules", &[], "").0, 401);
    let auth = format!("Authorization: Bearer {token}");
    let (status, body) = http(s.port, "GET", "/v1/rules", &[&auth], "");
    assert_eq!(status, 200);
    let rules = json(&body);
    assert_eq!(
        rules.as_array().unwrap().len(),
        20,
        "warden.toml's plugins and the built-in rules"
    );
    // `user` in warden.toml is whom requests act for when they name nobody.
    let (status, _) = http(
        s.port,
        "PUT",
        "/v1/rules/search-first/enabled",
        &[&auth],
        "false",
    );
    assert_eq!(status, 200);
    drop(s);
    let out = Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(["rules", "show", "search-first", "--json"])
        .current_dir(dir.path())
        .env_remove("WARDEN_CONFIG")
        .output()
        .unwrap();
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        shown["enabled"], false,
        "the choice is in the database, for ann"
    );
}

#[test]
fn rule_files_are_reloaded_while_serving() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules");
    fs::create_dir_all(&rules).unwrap();
    let rule = |message: &str| {
        format!(
            "[rule]\nid = \"hello\"\nname = \"Hello\"\ntrigger = \"on_turn_start\"\n\n[condition]\nexpression = \"true\"\n\n[action]\ntype = \"notify_self\"\nmessage = \"{message}\"\ndeliver_at = \"immediate\"\n"
        )
    };
    fs::write(rules.join("hello.toml"), rule("first")).unwrap();
    let s = serve(dir.path(), &["--rules", "rules"], &[]);
    let event = r#"{"hook": "on_turn_start"}"#;
    let (_, body) = http(s.port, "POST", "/v1/sessions/r/events", &[], event);
    assert_eq!(json(&body)["inject"][0]["message"], "first");
    fs::write(rules.join("hello.toml"), rule("second")).unwrap();
    let deadline = Instant::now() + PATIENCE;
    loop {
        let (_, body) = http(s.port, "POST", "/v1/sessions/r/events", &[], event);
        if json(&body)["inject"][0]["message"] == "second" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the change was not picked up: {body}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let (_, health) = http(s.port, "GET", "/v1/health", &[], "");
    assert!(json(&health)["generation"].as_u64().unwrap() >= 1);
}

#[cfg(unix)]
#[test]
fn sigterm_answers_the_request_in_flight_then_exits() {
    // The tick is held in flight by the test itself, not by a script that runs "long enough":
    // its rule writes plugin state, and the test holds the database's write lock until the
    // server has stopped taking connections. However slow or loaded the machine, the stop comes
    // while the tick is in flight, and the tick ends only after it.
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules");
    fs::create_dir_all(&rules).unwrap();
    fs::write(
        dir.path().join("warden.toml"),
        "rules = [\"rules\"]\n\n[database]\npath = \"warden.db\"\nlock_timeout = 600\n",
    )
    .unwrap();
    fs::write(
        rules.join("held.toml"),
        "[rule]\nid = \"held\"\nname = \"Held\"\ntrigger = \"on_turn_start\"\n\n[condition]\nexpression = \"true\"\n\n[action]\ntype = \"set_state\"\nkey = \"n\"\nvalue = \"1\"\n",
    )
    .unwrap();
    let mut s = serve(dir.path(), &[], &[]);
    let port = s.port;
    let holder = warden::Store::open(dir.path().join("warden.db")).unwrap();
    let held = holder.tick();
    held.begin().unwrap();
    let request = std::thread::spawn(move || {
        http(
            port,
            "POST",
            "/v1/sessions/held/events",
            &[],
            r#"{"hook": "on_turn_start"}"#,
        )
    });
    // The tick is in flight (it waits for the lock as long as the test holds it).
    let deadline = Instant::now() + Duration::from_secs(60);
    while !http(port, "GET", "/v1/metrics", &[], "")
        .1
        .contains("warden_ticks_in_flight 1")
    {
        assert!(Instant::now() < deadline, "the tick never started");
        std::thread::sleep(Duration::from_millis(10));
    }
    let killed = Command::new("kill")
        .args(["-TERM", &s.child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    // The server has stopped taking connections: the stop is under way, the tick still held.
    while TcpStream::connect(("127.0.0.1", port)).is_ok() {
        assert!(
            Instant::now() < deadline,
            "the server never stopped listening"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        !request.is_finished(),
        "the tick ended while the lock was held"
    );
    drop(held);
    let (status, body) = request.join().unwrap();
    assert_eq!(status, 200, "{body}");
    // The tick ran to its end after the stop: the rule fired and its write was saved.
    let outcome = json(&body);
    assert_eq!(outcome["session"], "held");
    assert_eq!(outcome["fired"], json!(["held"]), "{body}");
    assert_eq!(outcome["saved"], true, "{body}");
    let code = s.child.wait().unwrap();
    assert!(code.success(), "{code:?}");
    let mut rest = String::new();
    s.child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut rest)
        .unwrap();
    assert!(rest.contains("warden stopped"), "{rest}");
}

#[test]
fn the_python_client_of_the_book_runs_against_the_server() {
    let python = ["python3", "python"].into_iter().find(|p| {
        Command::new(p)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    });
    let Some(python) = python else {
        println!("skipped: no python3 on this machine; CI has one");
        return;
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let plugins = root.join("examples/plugins");
    let plugins = plugins.to_str().unwrap();
    let s = serve(
        dir.path(),
        &[
            "--builtin",
            "--plugins",
            plugins,
            "--capability",
            "vault_search,web_search",
        ],
        &[],
    );
    let out = Command::new(python)
        .arg(root.join("examples/serve/client.py"))
        .arg(format!("http://127.0.0.1:{}", s.port))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let expected = fs::read_to_string(root.join("examples/serve/client.out")).unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), expected);
}

/// One `warden hook claude-code` process (Claude Code's command hook) given `payload`.
fn command_hook(config: &Path, payload: &str) -> std::process::Output {
    let mut hook = Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(["hook", "claude-code", "--config"])
        .arg(config)
        .env_remove("CLAUDE_PROJECT_DIR")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    hook.stdin
        .take()
        .unwrap()
        .write_all(payload.as_bytes())
        .unwrap();
    hook.wait_with_output().unwrap()
}

/// Claude Code's answer is built once, in its crate: the command hook (`warden hook
/// claude-code`, a process per event) and the service's http hook (`POST /v1/claude-code`)
/// answer the same payload with the same JSON, the note about rule files that do not load
/// included.
#[test]
fn the_http_hook_answers_what_the_command_hook_answers() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/plugins");
    fs::create_dir_all(dir.path().join("rules")).unwrap();
    fs::write(
        dir.path().join("rules/broken.toml"),
        "[rule]\nid = \"broken\"\ntrigger = \"on_turn_strat\"\ncondition = \"true\"\n[action]\ntype = \"log\"\nmessage = \"x\"\n",
    )
    .unwrap();
    fs::write(
        dir.path().join("warden.toml"),
        format!(
            "builtin = true\nrules = [\"rules\"]\nplugins = [{:?}]\ndatabase = \"warden.db\"\n",
            plugins.display().to_string()
        ),
    )
    .unwrap();
    let server = serve(dir.path(), &[], &[]);
    let payloads = [
        json!({"hook_event_name": "UserPromptSubmit", "prompt": "clean up", "cwd": dir.path()}),
        json!({"hook_event_name": "PreToolUse", "tool_name": "Bash", "cwd": dir.path(),
            "tool_input": {"command": "rm -rf /"}, "tool_use_id": "toolu_1"}),
        json!({"hook_event_name": "PostToolUseFailure", "tool_name": "Bash", "cwd": dir.path(),
            "tool_input": {"command": "cargo test"}, "error": "2 tests failed"}),
        json!({"hook_event_name": "Stop", "stop_hook_active": false, "cwd": dir.path()}),
    ];
    for (i, payload) in payloads.iter().enumerate() {
        let as_session = |id: &str| {
            let mut p = payload.clone();
            p["session_id"] = json!(id);
            p.to_string()
        };
        let out = command_hook(&dir.path().join("warden.toml"), &as_session("command"));
        let command: Value = match String::from_utf8_lossy(&out.stdout).trim() {
            "" => Value::Object(Default::default()),
            text => json(text),
        };
        let (status, body) = http(
            server.port,
            "POST",
            "/v1/claude-code",
            &[],
            &as_session("http"),
        );
        assert_eq!(status, 200, "{body}");
        assert_eq!(json(&body), command, "payload {i}: {payload}");
        if i == 0 {
            let note = command["systemMessage"].as_str().unwrap_or_default();
            assert!(note.contains("problem(s) in the rule files"), "{command}");
        }
    }
    // The Settings page says so too, with the file and line.
    let (_, page) = http(server.port, "GET", "/", &[], "");
    assert!(
        page.contains("1 problem in the rule files: those rules are not loaded")
            && page.contains("broken.toml:3"),
        "{page}"
    );
}

/// The http hook answers in the session the server keeps in memory; a command hook (another
/// process) ticking the same session in between is not lost: the server's copy catches up.
#[test]
fn the_http_hook_sees_what_a_command_hook_did_in_between() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(
        dir.path().join("warden.toml"),
        "builtin = true\ndatabase = \"warden.db\"\n",
    )
    .unwrap();
    let server = serve(dir.path(), &[], &[]);
    let failure = json!({"session_id": "shared", "hook_event_name": "PostToolUseFailure",
        "tool_name": "WebFetch", "tool_input": {"url": "https://example.com"}, "error": "timeout",
        "cwd": dir.path()})
    .to_string();
    let post = || {
        let (status, body) = http(server.port, "POST", "/v1/claude-code", &[], &failure);
        assert_eq!(status, 200, "{body}");
        body
    };
    post();
    assert!(
        command_hook(&dir.path().join("warden.toml"), &failure)
            .status
            .success()
    );
    // The third failure of the session: the built-in warning counts all three.
    let third = post();
    assert!(third.contains("WebFetch has failed 3 times"), "{third}");
}

/// Waits (at most [`PATIENCE`]) until `done` holds of what `GET path` answers; its last answer.
fn until(port: u16, path: &str, what: &str, done: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let (_, body) = http(port, "GET", path, &[], "");
        if done(&body) {
            return body;
        }
        assert!(Instant::now() < deadline, "{what}: {body}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A configured plugins folder that disappears while the server runs keeps the rules in force
/// and says so on the Settings page; when it comes back (created anew, with a plugin copied
/// in at once), its plugins load, and the page no longer warns.
#[test]
fn a_plugins_folder_that_goes_and_comes_back_is_followed() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    let plugin = |id: &str| {
        let p = plugins.join(id);
        fs::create_dir_all(p.join("rules")).unwrap();
        fs::write(
            p.join("manifest.toml"),
            format!("[plugin]\nid = \"{id}\"\nname = \"{id}\"\nversion = \"1.0.0\"\n\n[rules]\ninclude = [\"rules/*.toml\"]\n"),
        )
        .unwrap();
        fs::write(
            p.join("rules/hello.toml"),
            "[rule]\nid = \"hello\"\ntrigger = \"on_turn_start\"\ncondition = \"true\"\n\n[action]\ntype = \"log\"\nmessage = \"hello\"\n",
        )
        .unwrap();
    };
    plugin("first");
    fs::write(
        dir.path().join("warden.toml"),
        "builtin = false\nplugins = [\"plugins\"]\n",
    )
    .unwrap();
    let s = serve(dir.path(), &[], &[]);
    let (_, rules) = http(s.port, "GET", "/v1/rules", &[], "");
    assert!(rules.contains("first/hello"), "{rules}");

    fs::remove_dir_all(&plugins).unwrap();
    let page = until(
        s.port,
        "/",
        "the page does not say the change was not applied",
        |b| b.contains("the change was not applied"),
    );
    assert!(page.contains("plugins"), "{page}");
    let (_, rules) = http(s.port, "GET", "/v1/rules", &[], "");
    assert!(
        rules.contains("first/hello"),
        "the last good rules stay: {rules}"
    );

    plugin("second");
    until(s.port, "/v1/rules", "the new plugin was not loaded", |b| {
        b.contains("second/hello")
    });
    until(s.port, "/", "the page still warns", |b| {
        !b.contains("the change was not applied")
    });
}

#[test]
fn a_declared_shell_tool_is_judged_and_an_undeclared_one_is_warned_of_once() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(
        dir.path().join("warden.toml"),
        "plugins = [\"builtin:guardrails\"]\n[shell]\ntools = [\"sh_exec\"]\n",
    )
    .unwrap();
    let log = dir.path().join("stderr.log");
    let s = serve_logging_to(
        dir.path(),
        &["--no-watch", "--shell-tool", "in_container=cmdline"],
        &[],
        Stdio::from(fs::File::create(&log).unwrap()),
    );

    let call = |session: &str, tool: &str, field: &str, command: &str| {
        let event = json!({"hook": "on_tool_call", "project": {"root": "/home/ada/app"},
            "tool": {"name": tool, "arguments": {field: command}}});
        let path = format!("/v1/sessions/{session}/events");
        let (status, body) = http(s.port, "POST", &path, &[], &event.to_string());
        assert_eq!(status, 200, "{body}");
        json(&body)
    };
    // Declared in warden.toml, and on the command line with a field of its own.
    let out = call("a", "sh_exec", "command", "cd / && rm -rf *");
    assert_eq!(out["ruling"]["decision"], "deny", "{out}");
    let out = call("b", "in_container", "cmdline", "bash -c 'rm -rf ~'");
    assert_eq!(out["ruling"]["decision"], "deny", "{out}");
    // Not declared: not judged, and the log says so once.
    for session in ["c", "d"] {
        let out = call(session, "run_shell", "command", "rm -rf /");
        assert!(out["ruling"]["decision"].is_null(), "{out}");
    }
    drop(s);
    let log = fs::read_to_string(&log).unwrap();
    assert_eq!(
        log.matches("the tool `run_shell` is given a `command`, but it is not declared a shell")
            .count(),
        1,
        "{log}"
    );
}

/// A self-signed certificate for 127.0.0.1 whose subject is `CN=name`, written to `cert` and
/// `key` by `openssl`; false (saying so) when there is no `openssl`.
fn certificate(cert: &Path, key: &Path, name: &str) -> bool {
    let made = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
        .args(["ec_paramgen_curve:prime256v1", "-nodes", "-days", "2"])
        .args(["-subj", &format!("/CN={name}")])
        .args(["-addext", "subjectAltName=IP:127.0.0.1"])
        .args(["-addext", "basicConstraints=critical,CA:FALSE"])
        .arg("-keyout")
        .arg(key)
        .arg("-out")
        .arg(cert)
        .output();
    match made {
        Ok(out) => {
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            true
        }
        Err(e) if std::env::var_os("WARDEN_REQUIRE_OPENSSL").is_some() => {
            panic!("WARDEN_REQUIRE_OPENSSL is set, but openssl could not run: {e}")
        }
        Err(e) => {
            // Straight to standard error, which the harness does not capture.
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "skipped: openssl could not run: {e}");
            false
        }
    }
}

/// The subject of the certificate the server at `port` presents, as `openssl` prints it.
fn served_subject(port: u16) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "openssl s_client -connect 127.0.0.1:{port} </dev/null 2>/dev/null | openssl x509 -noout -subject"
        ))
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Over TLS, a certificate renewed on disk is served from the next SIGHUP on, and files broken
/// at a SIGHUP leave the one in use (and the log says why).
#[ignore = "needs the openssl command (to make certificates): run `cargo test -- --ignored` (CI does)"]
#[test]
fn sighup_reloads_the_tls_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    if !certificate(&cert, &key, "first") {
        return;
    }
    let log = dir.path().join("stderr.log");
    let s = serve_logging_to(
        dir.path(),
        &[
            "--no-watch",
            "--tls-cert",
            &cert.display().to_string(),
            "--tls-key",
            &key.display().to_string(),
        ],
        &[("WARDEN_TOKEN", "tls-token-0123456789abcdefghijkl")],
        Stdio::from(fs::File::create(&log).unwrap()),
    );
    assert_eq!(served_subject(s.port), "subject=CN = first");
    let hangup = || {
        let status = Command::new("kill")
            .args(["-HUP", &s.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    };
    let subject_becomes = |expected: &str| {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let now = served_subject(s.port);
            if now == expected {
                return;
            }
            assert!(Instant::now() < deadline, "still {now:?}, not {expected:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    // Renewed: served after the signal.
    assert!(certificate(&cert, &key, "second"));
    hangup();
    subject_becomes("subject=CN = second");
    // Broken: the one in use stays.
    fs::write(&cert, "not a certificate\n").unwrap();
    hangup();
    let deadline = Instant::now() + PATIENCE;
    while !fs::read_to_string(&log)
        .unwrap()
        .contains("the certificate in use stays")
    {
        assert!(
            Instant::now() < deadline,
            "{}",
            fs::read_to_string(&log).unwrap()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(served_subject(s.port), "subject=CN = second");
}
