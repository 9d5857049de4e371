//! The first steps of a new user, through the `warden` command as a user runs it: writing a
//! rule from `warden new`, checking a single file, testing a folder, replaying from a pipe, the
//! demo and the text replay, colour, `watch --json`, versions. And the scenarios of
//! `tests/scenarios/` replayed by the binary (CI runs this file with a release build too).

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_warden")
}

/// `warden ARGS` in `dir`, as a user runs it: no configuration from the environment, no colour,
/// and not as `cargo run` (which `cargo test` would otherwise pass on).
fn command(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(bin());
    c.args(args)
        .current_dir(dir)
        .env_remove("WARDEN_CONFIG")
        .env_remove("CARGO")
        .env_remove("CARGO_MANIFEST_DIR")
        .env_remove("CARGO_PKG_NAME")
        .env("NO_COLOR", "1");
    c
}

fn warden(dir: &Path, args: &[&str]) -> Output {
    command(dir, args).output().unwrap()
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn a_scaffolded_rule_and_plugin_pass_check_and_test_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();

    let o = warden(d, &["new", "rule", "empty-search", "--in", "my-rules"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(
        out.contains("created my-rules/empty-search.toml")
            && out.contains("created my-rules/empty-search.test.toml"),
        "{out}"
    );
    let o = warden(d, &["check", "my-rules"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert_eq!(out.trim(), "1 rule loaded, 0 plugins, 0 errors, 0 warnings");
    // The folder's tests find its rules without --rules.
    let o = warden(d, &["test", "my-rules"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.trim_end().ends_with("2 passed, 0 failed"), "{out}");

    let o = warden(d, &["new", "plugin", "search-help", "--in", "plugins"]);
    assert!(o.status.success(), "{:?}", text(&o));
    for f in [
        "manifest.toml",
        "rules/large-results.toml",
        "rules/search-help.test.toml",
    ] {
        assert!(d.join("plugins/search-help").join(f).is_file(), "{f}");
    }
    for target in ["plugins", "plugins/search-help"] {
        let o = warden(d, &["check", target]);
        let (out, err) = text(&o);
        assert!(o.status.success(), "{target}: {out}\n{err}");
        assert!(
            out.contains("1 rule loaded, 1 plugin, 0 errors, 0 warnings"),
            "{out}"
        );
        let o = warden(d, &["test", target]);
        let (out, err) = text(&o);
        assert!(o.status.success(), "{target}: {out}\n{err}");
        assert!(out.trim_end().ends_with("3 passed, 0 failed"), "{out}");
    }

    // A rule written into a plugin is named after it, and is tested with it.
    let o = warden(d, &["new", "rule", "extra", "--in", "plugins/search-help"]);
    assert!(o.status.success(), "{:?}", text(&o));
    let tests = fs::read_to_string(d.join("plugins/search-help/rules/extra.test.toml")).unwrap();
    assert!(tests.contains("\"search-help/extra\""), "{tests}");
    let o = warden(d, &["test", "plugins/search-help"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.trim_end().ends_with("5 passed, 0 failed"), "{out}");

    // Nothing is overwritten, and a refusal writes nothing.
    fs::write(d.join("my-rules/empty-search.toml"), "# mine\n").unwrap();
    let o = warden(d, &["new", "rule", "empty-search", "--in", "my-rules"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o)
            .1
            .contains("my-rules/empty-search.toml already exists"),
        "{:?}",
        text(&o)
    );
    assert_eq!(
        fs::read_to_string(d.join("my-rules/empty-search.toml")).unwrap(),
        "# mine\n"
    );
    let o = warden(d, &["new", "plugin", "search-help", "--in", "plugins"]);
    assert_eq!(o.status.code(), Some(2));

    // A name that is not a kebab-case id is refused, with the id it could be.
    for (kind, name, want) in [
        ("rule", "Empty_Search", "such as `empty-search`"),
        ("plugin", "../evil", "not a kebab-case plugin id"),
        ("rule", "a/b", "not a kebab-case rule id"),
        ("rule", "-x", "not a kebab-case rule id"),
    ] {
        let o = warden(d, &["new", kind, "--in", "fresh", "--", name]);
        assert_eq!(o.status.code(), Some(2), "{name}");
        assert!(text(&o).1.contains(want), "{name}: {:?}", text(&o));
    }
    assert!(!d.join("fresh").exists() && !d.join("evil").exists());
}

#[test]
fn check_takes_a_rule_file_a_behavior_file_and_a_plugin_folder() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::create_dir(d.join("rules")).unwrap();
    fs::write(
        d.join("rules/repeat-tool.toml"),
        "[rule]\nid = \"repeat-tool\"\ntrigger = \"on_tool_call\"\npriorty = 5\n[condition]\nexpression = \"tool_calls(tool.name) >= 3\"\n[action]\ntype = \"log\"\nmessage = \"again\"\n",
    )
    .unwrap();
    fs::write(
        d.join("rules/wait.toml"),
        "[behavior]\nid = \"wait\"\ntrigger = \"on_query_start\"\n[tree]\ntype = \"sequence\"\nchildren = [{ type = \"wait_turns\", turns = 1 }, { type = \"log\", message = \"a turn later\" }]\n",
    )
    .unwrap();
    fs::write(d.join("rules/broken.toml"), "[rule\n").unwrap();

    // One file: its own problems only (not those of broken.toml beside it).
    let o = warden(d, &["check", "rules/repeat-tool.toml"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(
        err.contains("rules/repeat-tool.toml:4") && err.contains("did you mean `priority`?"),
        "{err}"
    );
    assert!(
        !err.contains("broken.toml") && !err.contains("Not a directory"),
        "{err}"
    );
    let o = warden(d, &["check", "rules/wait.toml"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert_eq!(out.trim(), "1 rule loaded, 0 plugins, 0 errors, 0 warnings");

    // A test file, or a file that is not TOML, says what to do instead.
    fs::write(d.join("rules/repeat-tool.test.toml"), "").unwrap();
    let o = warden(d, &["check", "rules/repeat-tool.test.toml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o)
            .1
            .contains("run them with `warden test rules/repeat-tool.test.toml`")
    );
    fs::write(d.join("notes.md"), "").unwrap();
    let o = warden(d, &["check", "notes.md"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o)
            .1
            .contains("rule and behavior files end in `.toml`")
    );

    // A plugin folder, and a rule of a plugin, which is checked with its manifest.
    let plugin = root().join("examples/plugins/research-assistant");
    let o = warden(d, &["check", plugin.to_str().unwrap()]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.contains("3 rules loaded, 1 plugin"), "{out}");
    let rule = plugin.join("rules/enough-sources.toml");
    let o = warden(d, &["check", rule.to_str().unwrap()]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(err.contains("checking the plugin"), "{err}");
    assert!(out.contains("1 plugin, 0 errors"), "{out}");
}

#[test]
fn test_loads_the_rules_its_tests_sit_beside_or_says_how() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::create_dir(d.join("my-rules")).unwrap();
    fs::write(
        d.join("my-rules/same-tool-three-times.toml"),
        "[rule]\nid = \"same-tool-three-times\"\ntrigger = \"on_tool_call\"\n[condition]\nexpression = \"tool_calls(tool.name) >= 3\"\n[action]\ntype = \"notify_self\"\nmessage = \"{{ tool.name }} again\"\n",
    )
    .unwrap();
    let case = |rule: &str| {
        format!(
            "[[test]]\nname = \"the third call\"\nevents = [\n  {{ hook = \"on_tool_call\", tool = {{ name = \"grep\" }} }},\n  {{ hook = \"on_tool_call\", tool = {{ name = \"grep\" }} }},\n  {{ hook = \"on_tool_call\", tool = {{ name = \"grep\" }} }},\n]\nfires = [\"{rule}\"]\nmessages = [\"grep again\"]\n"
        )
    };
    fs::write(
        d.join("my-rules/same-tool.test.toml"),
        case("same-tool-three-times"),
    )
    .unwrap();
    for target in ["my-rules", "my-rules/same-tool.test.toml"] {
        let o = warden(d, &["test", target]);
        let (out, err) = text(&o);
        assert!(o.status.success(), "{target}: {out}\n{err}");
        assert!(out.trim_end().ends_with("1 passed, 0 failed"), "{out}");
    }

    // Tests away from their rules: the help says how to load them, not to name a plugin.
    fs::create_dir(d.join("tests")).unwrap();
    fs::write(
        d.join("tests/same-tool.test.toml"),
        case("same-tool-three-times"),
    )
    .unwrap();
    let o = warden(d, &["test", "tests"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(
        err.contains("no rule `same-tool-three-times` is loaded")
            && err.contains("pass `--rules DIR`"),
        "{err}"
    );
    assert!(
        !err.contains("help: plugin rules are named"),
        "a local rule's help points at --rules: {err}"
    );
    let o = warden(d, &["--rules", "my-rules", "test", "tests"]);
    assert!(o.status.success(), "{:?}", text(&o));
}

/// Lines read from a child's output on a thread, so that a test can wait for one with a
/// deadline instead of hanging when the child does not answer.
fn lines_of(reader: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(reader).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// How long a test waits for an answer before it concludes none is coming (generous: the
/// machine is shared, and a missing answer would otherwise hang the test).
const PATIENCE: Duration = Duration::from_secs(60);

#[test]
fn replay_answers_each_event_from_a_pipe_as_soon_as_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::create_dir(d.join("rules")).unwrap();
    fs::write(
        d.join("rules/empty.toml"),
        "[rule]\nid = \"empty\"\ntrigger = \"on_tool_complete\"\n[condition]\nexpression = \"get(result, 'count', 0) == 0\"\n[action]\ntype = \"notify_self\"\nmessage = \"nothing found\"\ndeliver_at = \"immediate\"\n",
    )
    .unwrap();
    let mut child = command(d, &["replay", "-", "--rules", "rules", "--all"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let answers = lines_of(child.stdout.take().unwrap());
    let events = [
        r#"{"hook": "on_tool_call", "tool": {"name": "web_search"}}"#,
        r#"{"hook": "on_tool_complete", "tool": {"name": "web_search"}, "result": {"count": 0}}"#,
        r#"{"hook": "on_tool_complete", "tool": {"name": "web_search"}, "result": {"count": 4}}"#,
        "not json",
    ];
    let mut answered = Vec::new();
    for (i, event) in events.iter().enumerate() {
        // One line, then wait for its answer before writing the next: the session is fed
        // as an agent loop would feed it.
        writeln!(stdin, "{event}").unwrap();
        stdin.flush().unwrap();
        let mut lines = Vec::new();
        loop {
            let line = answers.recv_timeout(PATIENCE).unwrap_or_else(|_| {
                panic!("no answer to event {i} within {PATIENCE:?}: the replay does not stream")
            });
            let v: Value = serde_json::from_str(&line).unwrap();
            assert_eq!(v["event"], i, "{line}");
            let done = v["done"] == true;
            lines.push(v);
            if done {
                break;
            }
        }
        answered.push(lines);
    }
    drop(stdin);
    assert!(
        child.wait().unwrap().code() == Some(1),
        "a bad line: status 1"
    );
    // A quiet event gets its closing line only; the others their actions first.
    assert_eq!(answered[0].len(), 1);
    assert_eq!(answered[0][0]["fired"], serde_json::json!([]));
    assert_eq!(answered[1][0]["message"], "nothing found");
    assert_eq!(answered[1][1]["fired"], serde_json::json!(["empty"]));
    assert_eq!(answered[2].len(), 1);
    assert!(
        answered[3][0]["error"]
            .as_str()
            .unwrap()
            .starts_with("standard input: line 4: not valid JSON"),
        "{:?}",
        answered[3]
    );
    assert_eq!(answered[3][1]["errors"], 1);
}

/// The same conversation, held by a shell as another program would: a child process that
/// writes one event, reads the answer up to its closing line, then writes the next.
#[test]
fn a_shell_can_hold_a_conversation_with_replay_through_a_pipe() {
    if Command::new("bash").arg("--version").output().is_err() {
        println!("skipped: bash not found; this test needs its coproc");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        r#"
coproc W {{ "{bin}" replay - --all 2>/dev/null; }}
ask() {{
  echo "$1" >&"${{W[1]}}"
  while read -r line <&"${{W[0]}}"; do
    echo "$line"
    case "$line" in *'"done":true'*) return ;; esac
  done
}}
ask '{{"hook": "on_turn_start", "turn": {{"token_usage": 0.5}}}}'
echo "-- between"
ask '{{"hook": "on_turn_start", "turn": {{"token_usage": 0.9}}}}'
"#,
        bin = bin()
    );
    let mut child = Command::new("bash")
        .args(["-c", &script])
        .current_dir(dir.path())
        .env_remove("WARDEN_CONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let out = lines_of(child.stdout.take().unwrap());
    let deadline = Instant::now() + PATIENCE;
    let mut lines = Vec::new();
    while let Ok(line) = out.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        lines.push(line);
    }
    let _ = child.kill();
    let _ = child.wait();
    let text = lines.join("\n");
    assert_eq!(
        lines.len(),
        4,
        "two answers, the shell's own line between them: {text}"
    );
    assert!(lines[0].contains(r#""done":true"#) && lines[0].contains(r#""fired":[]"#));
    assert_eq!(lines[1], "-- between");
    assert!(lines[2].contains("Token budget at 90%"), "{text}");
    assert!(
        lines[3].contains(r#""fired":["token-budget-warning"]"#),
        "{text}"
    );
}

#[test]
fn the_demo_names_the_rule_behind_each_line_and_says_waiting_once() {
    let o = warden(&root(), &["demo"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert_eq!(
        out.matches("waiting      research-then-synthesize").count(),
        1,
        "{out}"
    );
    // Event 11's warning comes from the behavior, which says it moved on.
    let at_11: String = out
        .split("[11]")
        .nth(1)
        .and_then(|rest| rest.split("[12]").next())
        .unwrap()
        .to_string();
    assert!(
        at_11.contains("resumed      research-then-synthesize")
            && at_11.contains("[high warning] from research-then-synthesize: Two turns after"),
        "{at_11}"
    );
    for line in out.lines().filter(|l| l.contains(">>> inject")) {
        assert!(line.contains("] from "), "{line}");
    }
    // Every event line says something after its hook.
    for line in out.lines().filter(|l| l.starts_with('[')) {
        assert!(line.len() > 23 && !line.ends_with(' '), "{line:?}");
    }
    assert!(
        out.contains("[10] on_turn_end       end of turn 2\n"),
        "{out}"
    );
    assert!(
        out.contains("[19] on_session_end    after 4 turns\n"),
        "{out}"
    );
}

/// The demo's closing hint works as printed: run by cargo, from a checkout, and by an
/// installed `warden` anywhere.
#[test]
fn the_demos_closing_hint_is_a_command_that_works() {
    let hint = |o: &Output| -> String {
        let (out, err) = text(o);
        assert!(o.status.success(), "{out}\n{err}");
        out.lines()
            .last()
            .and_then(|l| l.strip_prefix("Replay it as JSON lines with: "))
            .unwrap_or_else(|| panic!("no hint: {out}"))
            .to_string()
    };
    let by_cargo = command(&root(), &["demo"])
        .env("CARGO", "cargo")
        .env("CARGO_MANIFEST_DIR", root())
        .env("CARGO_PKG_NAME", "warden")
        .output()
        .unwrap();
    assert_eq!(
        hint(&by_cargo),
        "cargo run -q -- replay examples/traces/research-session.jsonl"
    );

    // `warden` found on the PATH, in a checkout and elsewhere: the hint, run by a shell with
    // the same PATH, replays the session.
    let bin_dir = Path::new(bin()).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let elsewhere = tempfile::tempdir().unwrap();
    for (dir, want) in [
        (
            root(),
            "warden replay examples/traces/research-session.jsonl".to_string(),
        ),
        (
            elsewhere.path().to_path_buf(),
            "warden demo --print-trace | warden replay -".to_string(),
        ),
    ] {
        let mut sh = Command::new("sh");
        sh.args(["-c", "warden demo"])
            .current_dir(&dir)
            .env("PATH", &path)
            .env_remove("CARGO")
            .env_remove("CARGO_MANIFEST_DIR")
            .env_remove("CARGO_PKG_NAME")
            .env_remove("WARDEN_CONFIG");
        let printed = hint(&sh.output().unwrap());
        assert_eq!(printed, want);
        let replayed = Command::new("sh")
            .args(["-c", &printed])
            .current_dir(&dir)
            .env("PATH", &path)
            .env_remove("WARDEN_CONFIG")
            .output()
            .unwrap();
        let (out, err) = text(&replayed);
        assert!(replayed.status.success(), "{printed}: {err}");
        assert!(
            out.lines().count() == 4 && out.contains("\"rule\":\"token-budget-warning\""),
            "{printed}: {out}"
        );
    }
}

#[test]
fn replay_as_text_reads_like_the_demo() {
    let o = warden(
        &root(),
        &[
            "replay",
            "examples/traces/research-session.jsonl",
            "--format",
            "text",
        ],
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(
        out.starts_with("[ 0] on_query_start    \"Compare SQLite WAL mode"),
        "{out}"
    );
    assert!(
        out.contains(
            "[ 3] on_tool_complete  vault_search -> 9 results\n       fired        large-result-summary\n   >>> inject [normal hint] from large-result-summary: vault_search returned 9 results."
        ),
        "{out}"
    );
    assert!(
        out.trim_end()
            .ends_with("20 events, 4 rule firings, 4 notifications injected, 0 errors."),
        "{out}"
    );
    // --explain adds the rules that did not fire.
    let o = warden(
        &root(),
        &[
            "replay",
            "examples/traces/research-session.jsonl",
            "--format",
            "text",
            "--explain",
        ],
    );
    let (out, _) = text(&o);
    assert!(
        out.contains("       not matched  large-result-summary"),
        "{out}"
    );
    assert!(
        out.contains("       off          research-then-synthesize"),
        "{out}"
    );
}

#[test]
fn color_follows_the_flag_and_no_color() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(
        dir.path().join("bad.toml"),
        "[rule]\nid = \"bad\"\ntrigger = \"on_turn_strat\"\n",
    )
    .unwrap();
    let colored = |args: &[&str], no_color: bool| {
        let mut c = command(dir.path(), args);
        if !no_color {
            c.env_remove("NO_COLOR");
        }
        let o = c.output().unwrap();
        assert_eq!(o.status.code(), Some(1), "{:?}", text(&o));
        text(&o).1.contains('\u{1b}')
    };
    assert!(colored(&["--color", "always", "check", "bad.toml"], true));
    assert!(colored(&["check", "bad.toml", "--color=always"], false));
    assert!(!colored(&["--color", "never", "check", "bad.toml"], false));
    // `auto`: standard error is a pipe here, so no colour, NO_COLOR or not.
    assert!(!colored(&["check", "bad.toml"], false));
    assert!(!colored(&["--color", "auto", "check", "bad.toml"], true));
    let o = warden(dir.path(), &["--color", "sometimes", "check"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o)
            .1
            .contains("[possible values: auto, always, never]")
    );
}

#[test]
fn watch_json_prints_a_line_per_reload() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::create_dir(d.join("rules")).unwrap();
    let rule = |id: &str, hook: &str| {
        format!(
            "[rule]\nid = \"{id}\"\ntrigger = \"{hook}\"\n[condition]\nexpression = \"true\"\n[action]\ntype = \"log\"\nmessage = \"x\"\n"
        )
    };
    fs::write(d.join("rules/a.toml"), rule("a", "on_turn_start")).unwrap();
    let mut child = command(d, &["watch", "--json", "--rules", "rules"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = lines_of(child.stdout.take().unwrap());
    let next = || -> Value {
        let line = lines
            .recv_timeout(PATIENCE)
            .expect("watch --json printed no line");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line}: {e}"))
    };
    let first = next();
    assert_eq!(first["rules"], 1, "{first}");
    assert_eq!(first["watching"][0], "rules", "{first}");
    // A broken change is not applied, and says why; a good one is.
    fs::write(d.join("rules/b.toml"), rule("b", "on_turn_strat")).unwrap();
    let broken = next();
    assert_eq!(broken["reloaded"], false, "{broken}");
    assert_eq!(broken["introduced"][0]["field"], "rule.trigger", "{broken}");
    assert_eq!(broken["rules"], 1);
    fs::write(d.join("rules/b.toml"), rule("b", "on_turn_start")).unwrap();
    let fixed = next();
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(fixed["reloaded"], true, "{fixed}");
    assert_eq!(fixed["rules"], 2, "{fixed}");
}

#[test]
fn rules_and_plugins_show_their_versions() {
    let plugins = root().join("examples/plugins");
    let p = plugins.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let o = warden(
        dir.path(),
        &[
            "--plugins",
            p,
            "--capability",
            "vault_search,web_search",
            "rules",
            "show",
            "search-first",
        ],
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.contains("\n  version    "), "{out}");
    let o = warden(
        dir.path(),
        &[
            "--plugins",
            p,
            "--capability",
            "vault_search,web_search",
            "rules",
            "list",
            "--json",
        ],
    );
    let rules: Vec<Value> = serde_json::from_slice(&o.stdout).unwrap();
    assert!(rules.iter().all(|r| r["version"].is_string()), "{rules:?}");
    let o = warden(
        dir.path(),
        &[
            "--plugins",
            p,
            "--capability",
            "vault_search,web_search",
            "plugins",
            "list",
            "--json",
        ],
    );
    let list: Vec<Value> = serde_json::from_slice(&o.stdout).unwrap();
    let research = list
        .iter()
        .find(|p| p["id"] == "research-assistant")
        .unwrap();
    assert!(
        research["rule_versions"]["search-first"].is_string(),
        "{research}"
    );
    let o = warden(
        dir.path(),
        &[
            "--plugins",
            p,
            "--capability",
            "vault_search,web_search",
            "plugins",
            "list",
        ],
    );
    let (out, _) = text(&o);
    let line = out
        .lines()
        .find(|l| l.trim_start().starts_with("rules") && l.contains("search-first"))
        .unwrap();
    assert!(line.contains("search-first 1.0.0"), "{line}");
}

/// Whether a line of `--explain` output is an explanation (not an effect or an error).
fn is_explanation(v: &Value) -> bool {
    ["evaluation", "overridden", "halted"]
        .iter()
        .any(|k| v.get(k).is_some())
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

/// The scenarios that need nothing but their rule folder (or the built-in rules), replayed
/// by the `warden` binary: it must print what the library's replay pins. Several traces of
/// one folder share a database, as they share a store there. CI runs this in release too:
/// the binary users install must say what the tests say.
#[test]
fn the_binary_replays_the_scenarios_as_the_tests_expect() {
    let mut replayed = 0;
    let mut failures = Vec::new();
    let mut dirs: Vec<PathBuf> = fs::read_dir(root().join("tests/scenarios"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for dir in dirs {
        if dir.join("scenario.toml").exists()
            || dir.join("plugins").exists()
            || dir.join("diagnostics.txt").exists()
        {
            continue;
        }
        let mut traces: Vec<PathBuf> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                let n = p.file_name().unwrap().to_string_lossy();
                n.ends_with(".jsonl")
                    && ![".expected.jsonl", ".explain.jsonl", ".nodes.jsonl"]
                        .iter()
                        .any(|s| n.ends_with(s))
            })
            .collect();
        traces.sort();
        let db = tempfile::tempdir().unwrap();
        let explain_db = tempfile::tempdir().unwrap();
        for trace in traces {
            let stem = trace.file_stem().unwrap().to_string_lossy().into_owned();
            let run = |db: &Path, explain: bool| {
                let mut args = vec![
                    "replay".to_string(),
                    trace.display().to_string(),
                    "--session".into(),
                    stem.clone(),
                    "--db".into(),
                    db.join("warden.db").display().to_string(),
                ];
                if dir.join("rules").is_dir() {
                    args.extend(["--rules".into(), dir.join("rules").display().to_string()]);
                }
                if explain {
                    args.push("--explain".into());
                }
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let o = warden(&dir, &args);
                let (out, err) = text(&o);
                assert!(o.status.success(), "{}: {err}", trace.display());
                json_lines(&out)
            };
            replayed += 1;
            let expected = json_lines(
                &fs::read_to_string(dir.join(format!("{stem}.expected.jsonl"))).unwrap(),
            );
            let got = run(db.path(), false);
            if got != expected {
                failures.push(format!(
                    "{}:\n  expected {expected:#?}\n  got {got:#?}",
                    trace.display()
                ));
            }
            let explained = run(explain_db.path(), true);
            let effects: Vec<Value> = explained
                .iter()
                .filter(|v| !is_explanation(v))
                .cloned()
                .collect();
            if effects != expected {
                failures.push(format!(
                    "{}: --explain decided differently",
                    trace.display()
                ));
            }
            let explain_file = dir.join(format!("{stem}.explain.jsonl"));
            if explain_file.exists() {
                let want = json_lines(&fs::read_to_string(&explain_file).unwrap());
                let got: Vec<Value> = explained.into_iter().filter(is_explanation).collect();
                if got != want {
                    failures.push(format!(
                        "{}:\n  expected {want:#?}\n  got {got:#?}",
                        explain_file.display()
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(replayed >= 15, "only {replayed} traces replayed");
}
