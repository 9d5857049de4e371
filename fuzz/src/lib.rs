//! The entry functions of Warden's fuzz targets: one per kind of input Warden reads from
//! outside, each feeding the bytes to the real reader and asserting what must hold whatever the
//! bytes are. A failed assertion or a panic is a crash; libFuzzer's `-timeout` catches a hang.
//!
//! This file is compiled twice: as the library of the `warden-fuzz` crate, which the targets in
//! `fuzz_targets/` call, and as a module of the main workspace's `tests/fuzz_corpus.rs`, which
//! replays every file of `corpus/<target>/` through the same function at every `cargo test`, so
//! CI checks every input that once crashed (and the corpus that covers the rest) without
//! libFuzzer. It may therefore only name crates both have: the `warden-*` crates and
//! `serde_json`.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use serde_json::{Value, json};
use warden_core::{Diagnostic, Warden};
use warden_expr::{CompileOptions, Compiler, Facts, Frame, MapId, Scalar, ScalarId, Verdict};

/// A target's entry: it takes the input's bytes, and panics on what must not happen.
pub type Entry = fn(&[u8]);

/// Every target: its name (the file in `fuzz_targets/`, the folder in `corpus/`) and its entry.
pub const TARGETS: &[(&str, Entry)] = &[
    ("condition", condition),
    ("rule_file", rule_file),
    ("manifest", manifest),
    ("modes", modes),
    ("config", config),
    ("template", template),
    ("trace", trace),
    ("claude_code_hook", claude_code_hook),
    ("serve_body", serve_body),
    ("shell_command", shell_command),
];

/// Operator files are UTF-8 (`warden_input::read_text` refuses anything else before a reader
/// sees it), so only UTF-8 input reaches the readers.
fn text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok()
}

/// What every diagnostic of a file must be: placed within the file or naming a field (or the
/// summary of those left out), with a message, and printable both ways without panicking.
fn check_diagnostics(text: &str, diagnostics: &[Diagnostic]) {
    let lines = text.split('\n').count();
    for d in diagnostics {
        assert!(
            !d.message().trim().is_empty(),
            "a diagnostic says nothing: {d:?}"
        );
        assert!(
            d.omitted() > 0 || d.line().is_some() || d.field().is_some(),
            "a diagnostic names neither a line nor a field: {d}"
        );
        if let Some((line, col)) = d.location() {
            assert!(
                (1..=lines).contains(&line) && col >= 1,
                "{d} points outside the file ({lines} lines)"
            );
        }
        let _ = d.to_string();
    }
    assert!(
        diagnostics.len() <= Diagnostic::MAX_PER_FILE + 1,
        "{} diagnostics for one file, more than the cap",
        diagnostics.len()
    );
    let _ = warden_cli::render_diagnostics(diagnostics);
}

/// Compiles `loaded` into a program and checks its diagnostics against the file it came from.
fn compile(text: &str, loaded: warden_load::Loaded) {
    let program = warden_core::Program::compile(loaded, 1);
    let of_file: Vec<Diagnostic> = program
        .diagnostics()
        .iter()
        .filter(|d| d.path() == Path::new(FILE))
        .cloned()
        .collect();
    check_diagnostics(text, &of_file);
}

/// The name every fuzzed file is given (relative: nothing is read from it).
const FILE: &str = "fuzz/input.toml";

fn empty_loaded() -> warden_load::Loaded {
    warden_load::Loaded {
        rules: Vec::new(),
        plugins: Vec::new(),
        diagnostics: Vec::new(),
        folders: Vec::new(),
        modes: None,
    }
}

/// Facts that answer every question with `pick`'s kind of value, whatever the schema says the
/// field is: evaluation must cope with missing and ill-typed data.
struct OddFacts(u8);

impl Facts for OddFacts {
    fn scalar(&self, id: ScalarId) -> Scalar<'_> {
        pick(self.0.wrapping_add(id.0 as u8))
    }
    fn map_get(&self, _id: MapId, key: &str) -> Option<Scalar<'_>> {
        (!key.is_empty()).then(|| pick(self.0 ^ key.len() as u8))
    }
    fn root(&self, name: &str) -> warden_expr::rhai::Dynamic {
        match self.0 % 3 {
            0 => warden_expr::rhai::Dynamic::UNIT,
            _ => warden_expr::rhai::serde::to_dynamic(json!({
                "turn": {"number": i64::MAX, "token_usage": f64::NAN},
                "history": {"tools": [{"name": name, "success": false}], "messages": []},
                "name": "web_search", "count": -1, "items": [1, "two", null, {"x": []}]
            }))
            .unwrap_or(warden_expr::rhai::Dynamic::UNIT),
        }
    }
}

fn pick(n: u8) -> Scalar<'static> {
    match n % 7 {
        0 => Scalar::Null,
        1 => Scalar::Bool(true),
        2 => Scalar::Int(i64::MIN),
        3 => Scalar::Int(i64::MAX),
        4 => Scalar::Float(f64::NAN),
        5 => Scalar::Float(-0.0),
        _ => Scalar::Str("web_search"),
    }
}

/// The condition language (`warden-expr`): parse, check against Warden's context schema,
/// compile (on the native path and forced through rhai), and evaluate against facts of every
/// kind. Errors point within the expression; the "this is a bug in Warden" error never happens;
/// evaluation returns a verdict, never panics.
pub fn condition(data: &[u8]) {
    let Some(src) = text(data) else { return };
    static COMPILER: OnceLock<Compiler> = OnceLock::new();
    let compiler = COMPILER.get_or_init(|| Compiler::new(warden_core::schema().clone()));
    for force_script in [false, true] {
        let opts = CompileOptions {
            force_script,
            ..CompileOptions::default()
        };
        match compiler.compile(src, &opts) {
            Ok(cond) => {
                for seed in [0u8, 1, 2, 4, 5] {
                    let facts = OddFacts(seed);
                    let verdict = cond.eval(&mut Frame::new(&facts));
                    if let Verdict::Error(e) | Verdict::Undetermined(e) = &verdict {
                        assert!(!e.is_empty(), "{src:?}: an empty reason");
                    }
                }
                let _ = cond.necessary_threshold();
            }
            Err(e) => {
                let span = e.span();
                assert!(
                    span.start <= span.end && span.end <= src.len(),
                    "{src:?}: the error's span {span:?} is outside the expression: {e}"
                );
                assert!(
                    !e.message().is_empty(),
                    "{src:?}: an error that says nothing"
                );
                // The emitter wrote rhai that rhai refused: Warden's bug, whatever the input.
                assert!(
                    !e.message()
                        .starts_with("the condition could not be compiled ("),
                    "{src:?}: {e}"
                );
                let _ = e.to_string();
            }
        }
    }
    if let Err(e) = compiler.check(src, &CompileOptions::default()) {
        assert!(e.span().end <= src.len(), "{src:?}: {e}");
    }
}

/// Rule and behavior files (`warden-load`'s reader), then compiled into a program as a
/// reload would (conditions, templates, trees, scripts found).
pub fn rule_file(data: &[u8]) {
    let Some(src) = text(data) else { return };
    let file = warden_core::SourceFile::new(FILE, src);
    let parsed = warden_load::parse_rule_file(file, &Arc::from("local"));
    check_diagnostics(src, &parsed.diagnostics);
    if let Some(rule) = parsed.rule {
        let mut loaded = empty_loaded();
        loaded.rules.push(rule);
        compile(src, loaded);
    }
}

/// Plugin manifests.
pub fn manifest(data: &[u8]) {
    let Some(src) = text(data) else { return };
    let (manifest, diagnostics) =
        warden_load::parse_manifest(warden_core::SourceFile::new(FILE, src));
    check_diagnostics(src, &diagnostics);
    if let Some(m) = manifest {
        // A setting's default passes its own declaration's check, read back as it is written.
        for s in &m.settings {
            let default = s.default.to_json();
            let again = s.check(&default).unwrap_or_else(|e| {
                panic!("{src:?}: the default of {} fails its check: {e}", s.name)
            });
            assert_eq!(again, s.default, "{src:?}: {}", s.name);
            let _ = s.parse_text(&default.to_string());
        }
    }
}

/// Modes files, read and compiled over the built-in rules (each mode's guard is a condition).
pub fn modes(data: &[u8]) {
    let Some(src) = text(data) else { return };
    let file = warden_core::SourceFile::new(FILE, src);
    let (_, diagnostics) = warden_load::parse_modes(file.clone());
    check_diagnostics(src, &diagnostics);
    let mut loaded = empty_loaded();
    loaded.modes = Some(file);
    compile(src, loaded);
}

/// `warden.toml`.
pub fn config(data: &[u8]) {
    let Some(src) = text(data) else { return };
    if let Err(diagnostics) = warden_load::Config::parse(Path::new(FILE), src) {
        assert!(!diagnostics.is_empty(), "refused without a reason");
        check_diagnostics(src, &diagnostics);
    }
}

/// Message templates: the checks made before minijinja compiles one (size, nesting), its
/// syntax, the paths it reads, then a render under the rule limits with values of every kind.
pub fn template(data: &[u8]) {
    let Some(src) = text(data) else { return };
    let values = json!({
        "context": {
            "turn": {"number": 3, "token_usage": 0.85, "context_usage": 0.5},
            "state": {"n": 2, "list": [1, 2, 3], "text": "ab"},
            "history": {"tools": [{"name": "web_search", "success": false}], "messages": []},
            "mode": "full"
        },
        "event": {"query": {"text": "compare"}},
        "tool": {"name": "web_search", "arguments": {"q": "x", "n": -1}},
        "result": {"count": 12, "items": ["a", null, 1.5, {"k": []}]},
        "settings": {"max": 10}
    });
    match warden_core::check_template(src, &values) {
        Ok(_) => {}
        Err(e) => {
            assert!(!e.message.is_empty(), "{src:?}: an error that says nothing");
            if let Some(line) = e.line {
                let lines = src.split('\n').count();
                assert!((1..=lines).contains(&line), "{src:?}: {e} ({lines} lines)");
            }
        }
    }
}

/// Session traces (`warden_trace`), read line by line as `warden replay` reads them:
/// every bad line is an error naming its own line, and an event read back from how it is
/// written is the same event.
pub fn trace(data: &[u8]) {
    let lines = data.split(|&b| b == b'\n').count();
    let mut last = None;
    for (line, result) in warden_trace::read_trace(data) {
        assert!(line < lines, "line {line} of a trace of {lines} lines");
        assert!(
            last.is_none_or(|l| line > l),
            "line {line} after line {last:?}"
        );
        last = Some(line);
        match result {
            Ok(ev) => {
                let written = warden_wire::v1::Event::of(&ev.event);
                let Value::Object(map) = serde_json::to_value(&written).expect("an event writes")
                else {
                    panic!("an event is written as an object")
                };
                let again = warden_wire::v1::read_event(map.clone())
                    .unwrap_or_else(|e| panic!("{map:?} written from an event is refused: {e}"));
                assert_eq!(again, *ev.event, "an event written and read back changed");
            }
            Err(e) => {
                assert_eq!(e.line, line, "{e}");
                assert!(!e.message.is_empty());
            }
        }
    }
}

/// Claude Code hook payloads, answered by an in-memory Warden with the built-in rules, as
/// `warden hook claude-code` answers them: never a panic, and an answer that is a JSON object.
pub fn claude_code_hook(data: &[u8]) {
    use std::cell::{Cell, RefCell};
    thread_local! {
        // A fresh Warden (and in-memory store) now and then, so the sessions the payloads
        // open do not pile up over millions of runs.
        static WARDEN: RefCell<Option<Warden>> = const { RefCell::new(None) };
        static RUNS: Cell<u32> = const { Cell::new(0) };
    }
    let runs = RUNS.with(|r| {
        r.set(r.get().wrapping_add(1));
        r.get()
    });
    WARDEN.with(|w| {
        let mut w = w.borrow_mut();
        if w.is_none() || runs.is_multiple_of(5000) {
            *w = Some(
                Warden::builder()
                    .builtin_rules()
                    .build()
                    .expect("the built-in rules build"),
            );
        }
        let warden = w.as_ref().expect("built above");
        let config = warden_core::ClaudeCodeConfig::default();
        // The same bytes as each agent's payload.
        for agent in warden_agents::Agent::ALL {
            let answer = warden_agents::answer(
                agent,
                warden,
                &config,
                &warden_agents::Options::default(),
                data,
            );
            if let Some(json) = &answer.json {
                assert!(json.is_object(), "the answer is not an object: {json}");
            }
            // What a closed configuration answers must be sound too: a refusal, in the agent's
            // schema.
            let closed = warden_core::ClaudeCodeConfig {
                fail_closed: true,
                ..warden_core::ClaudeCodeConfig::default()
            };
            let event = agent.event_name(warden_agents::HookEvent::ToolCall);
            let refused = warden_agents::fail(agent, &closed, Some(event), "x");
            assert!(
                refused.json.is_some(),
                "{agent}: no answer when failing closed"
            );
        }
    });
}

/// The bodies of `warden serve`'s requests, sent over loopback to a real server (started once
/// per process, with the built-in rules, an in-memory store and sessions kept in memory): the
/// first byte picks the endpoint, the rest is the body. Whatever the body, the answer is a
/// well-formed HTTP response and never a server error (5xx): a bad request gets a 4xx that
/// names what is wrong.
pub fn serve_body(data: &[u8]) {
    use std::io::{Read, Write};
    use std::net::{SocketAddr, TcpStream};
    use std::time::Duration;

    const ENDPOINTS: &[(&str, &str)] = &[
        ("POST", "/v1/sessions/fuzz/events"),
        ("POST", "/v1/claude-code"),
        ("PUT", "/v1/rules/token-budget-warning/enabled"),
        ("PUT", "/v1/plugins/builtin/settings"),
        ("POST", "/v1/rules/repeated-failure-warning/test"),
        ("POST", "/v1/sessions/fuzz-2/events?user=ada&project=p"),
    ];
    static SERVER: OnceLock<SocketAddr> = OnceLock::new();
    let addr = *SERVER.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let rt = warden_serve::runtime().expect("a runtime");
            rt.block_on(async move {
                let warden = Warden::builder()
                    .builtin_rules()
                    .build()
                    .expect("the built-in rules build");
                let options = warden_serve::ServeOptions {
                    listen: SocketAddr::from(([127, 0, 0, 1], 0)),
                    max_sessions: 64,
                    durable: false,
                    request_timeout: Duration::from_secs(20),
                    ..warden_serve::ServeOptions::default()
                };
                let server = warden_serve::Server::bind(warden, options)
                    .await
                    .expect("the server binds on loopback");
                tx.send(server.local_addr()).expect("the address is sent");
                let _ = server.run(std::future::pending()).await;
            });
        });
        rx.recv().expect("the server started")
    });
    let Some((&pick, body)) = data.split_first() else {
        return;
    };
    let (method, path) = ENDPOINTS[pick as usize % ENDPOINTS.len()];
    let mut stream = TcpStream::connect(addr).expect("the server takes connections");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("a timeout");
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream
        .write_all(head.as_bytes())
        .expect("the request is sent");
    // The server may answer and close before reading a body it refuses.
    let _ = stream.write_all(body);
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let status = std::str::from_utf8(&answer[..answer.len().min(12)])
        .ok()
        .and_then(|line| line.strip_prefix("HTTP/1.1 "))
        .and_then(|code| code.parse::<u16>().ok())
        .unwrap_or_else(|| {
            panic!(
                "{method} {path}: not an HTTP answer: {:?}",
                String::from_utf8_lossy(&answer[..answer.len().min(200)])
            )
        });
    assert!(
        status < 500,
        "{method} {path} with {:?} answered {}",
        String::from_utf8_lossy(body),
        String::from_utf8_lossy(&answer)
    );
}

/// A shell command an agent asks to run, as `tool.shell` reads it: the analysis never panics,
/// and a command it cannot read is opaque (asked about), never harmless.
pub fn shell_command(data: &[u8]) {
    let command = String::from_utf8_lossy(data);
    let env = warden_shell::Env {
        follow_links: false,
        ..warden_shell::Env::for_project("/home/ada/app").with_home("/home/ada")
    };
    let a = warden_shell::analyze(&command, &env);
    if !warden_shell::parses(&command) {
        assert!(
            a.opaque
                .iter()
                .any(|o| o.kind == warden_shell::OpaqueKind::Unparsed),
            "a command Warden cannot read is not said to be opaque: {command:?}"
        );
        assert!(a.runs_unseen_code() && !a.concern().is_empty() || a.destroys());
    }
    for f in &a.findings {
        assert!(!f.message.is_empty(), "a finding says nothing: {f:?}");
    }
    assert_eq!(a.destroys(), !a.destruction().is_empty());
    let _ = serde_json::to_string(&a);
}
