//! The `warden` command, run as a user would: managing rules and settings, plugins, rule
//! tests and the execution log.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `warden` in `dir` (so its warden.toml applies).
fn warden(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(args)
        .current_dir(dir)
        .env_remove("WARDEN_CONFIG")
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// An installation: the example plugins, a database, user ann.
fn install() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs::write(
        dir.path().join("warden.toml"),
        format!(
            "plugins = [{:?}]\ncapabilities = [\"vault_search\", \"web_search\"]\ndatabase = \"warden.db\"\nuser = \"ann\"\n[log]\nsample = 1\n",
            root().join("examples/plugins")
        ),
    )
    .unwrap();
    dir
}

#[test]
fn rules_are_listed_switched_and_configured_per_user() {
    let dir = install();
    let d = dir.path();
    let list = warden(d, &["rules", "list", "--json"]);
    assert!(list.status.success(), "{:?}", text(&list));
    let rules: Vec<Value> = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(
        rules.len(),
        20,
        "4 built-in rules, a built-in behavior, 3 research-assistant rules, 12 guardrails rules"
    );
    assert!(
        rules
            .iter()
            .all(|r| r["enabled"] == (r["key"] != "research-then-synthesize"))
    );

    // A core rule refuses, and says why.
    let o = warden(d, &["rules", "disable", "token-budget-warning"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o)
            .1
            .contains("is a core rule and cannot be switched off"),
        "{:?}",
        text(&o)
    );

    let o = warden(d, &["rules", "disable", "search-first"]);
    assert!(o.status.success(), "{:?}", text(&o));
    assert_eq!(
        text(&o).0.trim(),
        "research-assistant/search-first is off for ann"
    );

    let o = warden(d, &["rules", "set", "research-assistant.max_sources", "80"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o)
            .1
            .contains("must be at most 50 (the manifest's max), not 80")
    );
    let o = warden(d, &["rules", "set", "max_sources", "4"]);
    assert!(o.status.success(), "{:?}", text(&o));

    // The choices are in the database: another invocation, or a running agent, sees them.
    let (out, _) = text(&warden(d, &["rules", "list"]));
    let line = out
        .lines()
        .find(|l| l.starts_with("research-assistant/search-first"))
        .unwrap();
    assert!(
        line.contains(" off ") && line.contains("max_sources=4*"),
        "{line}"
    );
    // Another user is untouched.
    let (out, _) = text(&warden(
        d,
        &["--user", "bob", "rules", "show", "search-first"],
    ));
    assert!(out.contains("state      on for bob"), "{out}");

    // Replaying a session as ann: the rule she switched off stays quiet, and her limit shows.
    let trace = d.join("t.jsonl");
    fs::write(
        &trace,
        "{\"hook\": \"on_query_start\", \"query\": {\"text\": \"research this\"}}\n{\"hook\": \"on_tool_complete\", \"tool\": {\"name\": \"vault_search\"}, \"result\": {\"count\": 5}}\n",
    )
    .unwrap();
    let o = warden(d, &["replay", "t.jsonl", "--session", "s1"]);
    let (out, _) = text(&o);
    assert!(!out.contains("search-first"), "{out}");
    assert!(out.contains("more than the 4 you work with"), "{out}");

    // ...and every evaluation went into the execution log.
    let o = warden(d, &["log", "--session", "s1", "--json"]);
    let rows: Vec<Value> = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        rows.iter().any(
            |r| r["rule"] == "research-assistant/summarize-large-results" && r["acted"] == true
        )
    );
    let o = warden(d, &["log", "--failures"]);
    assert_eq!(text(&o).0.trim(), "no recorded evaluation matches");
}

#[test]
fn a_rule_in_shadow_is_evaluated_logged_and_never_applied() {
    let dir = install();
    let d = dir.path();
    let o = warden(d, &["rules", "shadow", "deny-destructive-shell"]);
    assert!(o.status.success(), "{:?}", text(&o));
    assert!(
        text(&o)
            .0
            .starts_with("guardrails/deny-destructive-shell is in shadow for ann\n"),
        "{:?}",
        text(&o)
    );
    // Core rules cannot be put in shadow: what they decide would not apply.
    let o = warden(d, &["rules", "shadow", "token-budget-warning"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o).1.contains("cannot be put in shadow"),
        "{:?}",
        text(&o)
    );
    let (out, _) = text(&warden(d, &["rules", "list"]));
    let line = out
        .lines()
        .find(|l| l.starts_with("guardrails/deny-destructive-shell"))
        .unwrap();
    assert!(line.split_whitespace().nth(4) == Some("shadow"), "{line}");

    // The call the rule would refuse runs; what it would have decided is printed, marked.
    fs::write(
        d.join("t.jsonl"),
        "{\"hook\": \"on_tool_call\", \"tool\": {\"name\": \"Bash\", \"arguments\": {\"command\": \"rm -rf ~\"}}}\n",
    )
    .unwrap();
    let (out, _) = text(&warden(d, &["replay", "t.jsonl", "--session", "s1"]));
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        lines.iter().all(|l| l["shadow"] == true),
        "nothing live fired: {out}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l["rule"] == "guardrails/deny-destructive-shell" && l["decision"] == "deny"),
        "{out}"
    );
    let (out, _) = text(&warden(d, &["log", "--shadow"]));
    assert!(
        out.contains("guardrails/deny-destructive-shell")
            && out.contains("[shadow] would have decided deny; live rules: nothing decided"),
        "{out}"
    );
    let o = warden(d, &["log", "--shadow", "--json"]);
    let rows: Vec<Value> = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        !rows.is_empty() && rows.iter().all(|r| r["shadow"] == true),
        "{rows:?}"
    );
    assert_eq!(rows[0]["live_decision"], "none");

    // A whole plugin, and back to what its files say.
    let o = warden(d, &["rules", "shadow", "--plugin", "guardrails", "--json"]);
    let rules: Vec<Value> = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(rules.len(), 12);
    assert!(rules.iter().all(|r| r["state"] == "shadow"), "{rules:?}");
    let o = warden(d, &["rules", "reset", "--plugin", "guardrails"]);
    assert!(o.status.success(), "{:?}", text(&o));
    let (out, _) = text(&o);
    assert!(
        out.contains("guardrails/deny-destructive-shell follows its file again: on for ann"),
        "{out}"
    );
    let (out, _) = text(&warden(d, &["replay", "t.jsonl", "--session", "s2"]));
    assert!(
        out.contains("\"decision\":\"deny\"") && !out.contains("\"shadow\""),
        "{out}"
    );
    let o = warden(d, &["rules", "shadow", "--plugin", "gaurdrails"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o).1.contains("did you mean `guardrails`"),
        "{:?}",
        text(&o)
    );
}

#[test]
fn writes_without_a_database_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let o = warden(dir.path(), &["rules", "disable", "large-result-summary"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o).1.contains("needs a database: give --db FILE"),
        "{:?}",
        text(&o)
    );
}

#[test]
fn plugins_are_listed_with_why_one_was_skipped() {
    let dir = install();
    let o = warden(dir.path(), &["plugins", "list", "--json"]);
    let plugins: Vec<Value> = serde_json::from_slice(&o.stdout).unwrap();
    let review = plugins.iter().find(|p| p["id"] == "code-review").unwrap();
    assert_eq!(
        review["skipped"],
        "it requires `git_diff`, which this host does not provide"
    );
    let research = plugins
        .iter()
        .find(|p| p["id"] == "research-assistant")
        .unwrap();
    assert_eq!(research["settings"][0]["name"], "max_sources");
    assert_eq!(research["settings"][0]["max"], 50.0);
}

#[test]
fn rule_tests_run_like_a_test_runner() {
    let dir = install();
    let o = warden(dir.path(), &["--builtin", "test"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.contains("ok   token budget: warns above 80%"), "{out}");
    assert!(out.contains("research-assistant.test.toml"), "{out}");
    assert!(out.contains("guardrails.test.toml"), "{out}");
    assert!(out.trim_end().ends_with("575 passed, 0 failed"), "{out}");

    fs::write(
        dir.path().join("wrong.test.toml"),
        "[[test]]\nname = \"a wrong expectation\"\nevents = [{ hook = \"on_turn_start\", turn = { token_usage = 0.85 } }]\nmessages = [\"Token budget at 86%. Consider wrapping up or summarizing.\"]\n",
    )
    .unwrap();
    let o = warden(dir.path(), &["--builtin", "test", "wrong.test.toml"]);
    let (out, _) = text(&o);
    assert_eq!(o.status.code(), Some(1));
    assert!(out.contains("FAIL a wrong expectation"), "{out}");
    assert!(
        out.contains("expected: Token budget at 86%")
            && out.contains("actual:   Token budget at 85%"),
        "{out}"
    );
    assert!(out.contains("0 passed, 1 failed"), "{out}");
}

#[test]
fn check_validates_a_folder_of_plugins_away_from_its_host() {
    let o = warden(&root(), &["check", "examples/plugins"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(
        out.contains("16 rules loaded, 3 plugins, 0 errors"),
        "{out}"
    );

    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p");
    fs::create_dir_all(p.join("rules")).unwrap();
    fs::write(
        p.join("manifest.toml"),
        "[plugin]\nid = \"p\"\n[settings.limit]\ntype = \"integer\"\ndefault = 99\nmax = 10\n",
    )
    .unwrap();
    let o = warden(dir.path(), &["check", "p", "--json"]);
    assert_eq!(o.status.code(), Some(1));
    let d: Vec<Value> = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(d[0]["field"], "settings.limit.default");
    assert_eq!(d[0]["line"], 5);
    assert!(
        d[0]["message"]
            .as_str()
            .unwrap()
            .contains("must be at most 10")
    );
}

#[test]
fn a_broken_configuration_names_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("warden.toml"), "plugin = [\"plugins\"]\n").unwrap();
    let o = warden(dir.path(), &["rules", "list"]);
    assert_eq!(o.status.code(), Some(2));
    let (_, err) = text(&o);
    assert!(
        err.contains("unknown field `plugin`") && err.contains("did you mean `plugins`?"),
        "{err}"
    );
}

#[test]
fn enrich_shows_what_a_query_gets() {
    let o = warden(
        &root(),
        &[
            "enrich",
            "How do I write a rule whose Lua script waits?",
            "--sources",
            "examples/knowledge/sources.toml",
            "--window",
            "64000",
        ],
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(
        out.starts_with("mode reduced (context window 64000 tokens): budget 3300"),
        "{out}"
    );
    assert!(
        out.contains("left out:") && out.contains("not core-tagged, and the mode is reduced"),
        "{out}"
    );
    assert!(out.contains("<reference_material>"), "{out}");
    // The refused source is named, with its gate.
    assert!(
        err.contains("`community-tips`") && err.contains("gate 5"),
        "{err}"
    );

    let o = warden(
        &root(),
        &[
            "enrich",
            "x",
            "--json",
            "--sources",
            "examples/knowledge/sources.toml",
            "--window",
            "16000",
        ],
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["enrichment"]["mode"], "unavailable");
    assert_eq!(v["health"]["registered"], true);

    let dir = tempfile::tempdir().unwrap();
    let o = warden(dir.path(), &["enrich", "x"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o)
            .1
            .contains("no knowledge sources: give --sources FILE")
    );
}

#[test]
fn tree_and_plugins_list_show_what_loaded_and_fail_when_files_had_errors() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules");
    fs::create_dir(&rules).unwrap();
    fs::write(
        rules.join("good.toml"),
        "[rule]\nid = \"good\"\ntrigger = \"on_turn_start\"\ncondition = \"true\"\n[action]\ntype = \"log\"\nmessage = \"x\"\n",
    )
    .unwrap();
    let o = warden(
        dir.path(),
        &["--rules", "rules", "tree", "--hook", "on_turn_start"],
    );
    assert!(o.status.success(), "{:?}", text(&o));
    fs::write(
        rules.join("bad.toml"),
        "[rule]\nid = \"bad\"\ntrigger = \"on_turn_strat\"\n",
    )
    .unwrap();
    let o = warden(
        dir.path(),
        &["--rules", "rules", "tree", "--hook", "on_turn_start"],
    );
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(
        out.contains("good [priority"),
        "the tree of what loaded: {out}"
    );
    assert!(err.contains("on_turn_strat"), "{err}");
    let o = warden(
        dir.path(),
        &["--plugins", "missing-folder", "plugins", "list"],
    );
    let (out, err) = text(&o);
    // A folder that does not exist is an error at start, not a plugin list that is empty.
    assert_eq!(o.status.code(), Some(2), "{out}\n{err}");
    assert!(
        err.contains("the plugins folder missing-folder does not exist"),
        "{err}"
    );
}

#[test]
fn control_characters_in_file_names_and_contents_never_reach_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules");
    fs::create_dir(&rules).unwrap();
    // An escape sequence in the file's name, in a key (TOML escapes) and in a raw byte of a
    // comment (which TOML refuses, so the line is shown).
    fs::write(
        rules.join("clear\u{1b}[2J.toml"),
        "[rule]\nid = \"x\"\ntrigger = \"on_turn_start\"\n\"\\u001b[31mred\" = 1\n# \u{1b}]0;pwned\u{7}\n",
    )
    .unwrap();
    let o = warden(dir.path(), &["check", "rules"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(
        !out.contains('\u{1b}') && !err.contains('\u{1b}') && !err.contains('\u{7}'),
        "{err:?}"
    );
    assert!(
        err.contains("clear\\u{1b}[2J.toml"),
        "the name, escaped: {err}"
    );
}

/// `warden bench --json` prints each figure with its id, unit, and the floor it is measured
/// beside, for scripts and CI; `--repeat` runs one scenario and prints nothing, and names the
/// scenarios when given one that does not exist.
#[test]
fn bench_prints_its_figures_as_json_and_repeats_one_scenario() {
    let dir = tempfile::tempdir().unwrap();
    let o = warden(dir.path(), &["bench", "--shell", "--json", "--rounds", "1"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let report: Value = serde_json::from_str(&out).expect("JSON");
    let figures = report["figures"].as_array().expect("figures");
    let analysis = figures
        .iter()
        .find(|f| f["id"] == "shell.typical.analysis")
        .expect("the analysis");
    assert_eq!(analysis["unit"], "us");
    assert_eq!(analysis["baseline"], "shell.typical.parse_floor");
    assert!(
        analysis["ratio"].as_f64().is_some_and(|r| r > 0.0),
        "{analysis}"
    );

    let o = warden(
        dir.path(),
        &["bench", "--repeat", "expression", "--ticks", "10"],
    );
    assert!(o.status.success(), "{}", text(&o).1);
    assert!(o.stdout.is_empty());
    let o = warden(
        dir.path(),
        &["bench", "--repeat", "nothing", "--ticks", "1"],
    );
    let (_, err) = text(&o);
    assert!(!o.status.success());
    assert!(
        err.contains("no scenario `nothing`") && err.contains("hundred-rules"),
        "{err}"
    );
}

/// The real transcript in tests/data/claude-code (see its README): its session's home, as the
/// live hook saw it.
const RECORDED_HOME: &str = "/tmp/.tmpyjphxP/home";

fn recorded() -> PathBuf {
    root().join("tests/data/claude-code/session.jsonl")
}

/// A project set up by `warden init claude-code`: the built-in rules and the guardrails.
fn claude_code_project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let o = warden(dir.path(), &["init", "claude-code", "--dir", "."]);
    assert!(o.status.success(), "{}", text(&o).1);
    dir
}

fn backtest(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_warden"))
        .args([
            "replay",
            "--from",
            "claude-code",
            "--config",
            ".warden/warden.toml",
        ])
        .args(args)
        .current_dir(dir)
        .env_remove("WARDEN_CONFIG")
        .env("NO_COLOR", "1")
        .env("HOME", RECORDED_HOME)
        .output()
        .unwrap()
}

/// A backtest of a real Claude Code transcript refuses the calls the live hooks refused when it
/// was recorded (their results are the hooks' reasons), sends the agent back as they did, and
/// leaves the database alone.
#[test]
fn a_backtest_of_a_recorded_session_decides_as_its_live_hooks_did() {
    let dir = claude_code_project();
    let db = dir.path().join(".warden/warden.db");
    let db_before = fs::read(&db).unwrap();
    let transcript = recorded();
    let o = backtest(dir.path(), &[transcript.to_str().unwrap()]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let refused: Vec<&str> = lines
        .iter()
        .filter(|l| l["refused"] == true)
        .map(|l| l["tool_use_id"].as_str().unwrap())
        .collect();
    // What the live hooks refused, read from the transcript.
    let mut live = Vec::new();
    for line in fs::read_to_string(&transcript).unwrap().lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        for b in v["message"]["content"].as_array().into_iter().flatten() {
            if b["type"] == "tool_result"
                && b["is_error"] == true
                && b["content"]
                    .as_str()
                    .unwrap_or("")
                    .starts_with("PreToolUse:")
            {
                live.push(b["tool_use_id"].as_str().unwrap().to_string());
            }
        }
    }
    assert_eq!(refused, live, "{out}");
    assert_eq!(refused, ["toolu_scripted_4"]);
    let deny = lines.iter().find(|l| l["refused"] == true).unwrap();
    assert_eq!(deny["rule"], "guardrails/deny-destructive-shell");
    assert_eq!(deny["event"], "PreToolUse");
    // The agent was sent back at each of its four stops, as live (the fourth let it stop).
    let continues = lines.iter().filter(|l| l["decision"] == "continue").count();
    assert_eq!(continues, 4, "{out}");
    // The refused call's result is not replayed: its failure did not happen.
    assert!(
        !lines
            .iter()
            .any(|l| l["event"] == "PostToolUseFailure" && l["tool_use_id"] == "toolu_scripted_4"),
        "{out}"
    );
    // Nothing was written to the project's database.
    assert_eq!(fs::read(&db).unwrap(), db_before);

    // The events the transcript makes, as a Warden trace: replayed, the same refusal.
    let o = backtest(dir.path(), &[transcript.to_str().unwrap(), "--print-trace"]);
    assert!(o.status.success(), "{}", text(&o).1);
    fs::write(dir.path().join("trace.jsonl"), &o.stdout).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(["replay", "trace.jsonl", "--config", ".warden/warden.toml"])
        .current_dir(dir.path())
        .env("HOME", RECORDED_HOME)
        .output()
        .unwrap();
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let denies: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["decision"] == "deny")
        .collect();
    assert_eq!(denies.len(), 1, "{out}");
    assert_eq!(denies[0]["rule"], "guardrails/deny-destructive-shell");

    // The summary, as text: per rule, and per session what would have been refused.
    let o = backtest(
        dir.path(),
        &[
            transcript.to_str().unwrap(),
            "--summary",
            "--format",
            "text",
        ],
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("1 transcript(s), "), "{out}");
    assert!(
        out.contains("guardrails/deny-destructive-shell: fired on 1 event(s); deny 1"),
        "{out}"
    );
    assert!(
        out.contains("guardrails/keep-working-while-tests-fail: fired on 4 event(s); continue 4"),
        "{out}"
    );
    assert!(out.contains("session.jsonl: 1 call(s)"), "{out}");
    let line = deny["line"].as_u64().unwrap();
    assert!(
        out.contains(&format!(
            "line {line}: Bash `rm -rf /tmp/.tmpyjphxP/home/scratch`"
        )),
        "{out}"
    );
}

/// `--against` prints only what changes: without the guardrails, the old rule set refused
/// nothing, so the new one newly refuses the `rm` and newly sends the agent back.
#[test]
fn a_backtest_against_another_rule_set_prints_only_the_changes() {
    let dir = claude_code_project();
    fs::write(dir.path().join("old.toml"), "builtin = true\n").unwrap();
    let transcript = recorded();
    let o = backtest(
        dir.path(),
        &[
            transcript.to_str().unwrap(),
            "--against",
            "old.toml",
            "--format",
            "text",
        ],
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        out.contains(
            "guardrails/deny-destructive-shell would newly refuse 1 call(s) in 1 session(s):"
        ),
        "{out}"
    );
    assert!(out.contains("session.jsonl:35 Bash `rm -rf"), "{out}");
    // Sent back three times: the fourth `continue` is past `max_continues`, and lets it stop.
    assert!(
        out.contains(
            "guardrails/keep-working-while-tests-fail would newly send the agent back at 3 call(s)"
        ),
        "{out}"
    );
    // The same rule set on both sides changes nothing.
    let o = backtest(
        dir.path(),
        &[
            transcript.to_str().unwrap(),
            "--against",
            ".warden/warden.toml",
            "--format",
            "text",
        ],
    );
    assert_eq!(
        text(&o).0,
        "no decision changes between the two rule sets\n"
    );
}

/// A folder is every `*.jsonl` under it (other files skipped); lines that are not JSON, or of
/// kinds Warden does not use, are skipped; a file that cannot be read makes the exit status 1
/// after the others are replayed.
#[test]
fn a_backtest_of_a_folder_skips_what_it_does_not_use() {
    let dir = claude_code_project();
    let history = dir.path().join("history/project-a");
    fs::create_dir_all(&history).unwrap();
    let mut text_of = fs::read_to_string(recorded()).unwrap();
    text_of.push_str("not json at all\n{\"type\":\"something-new\"}\n");
    fs::write(history.join("one.jsonl"), &text_of).unwrap();
    fs::write(history.join("two.jsonl"), &text_of).unwrap();
    fs::write(history.join("notes.txt"), "not a transcript").unwrap();
    // A Warden trace named *.jsonl is not a Claude Code transcript: passed over, and said.
    fs::write(
        history.join("trace.jsonl"),
        "{\"hook\":\"on_turn_start\"}\n",
    )
    .unwrap();
    let o = backtest(dir.path(), &["history", "--summary"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("backtesting ") && err.contains(".warden/warden.toml"),
        "{err}"
    );
    assert!(
        err.contains("trace.jsonl holds no Claude Code conversation"),
        "{err}"
    );
    let summary: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(summary["transcripts"], 2, "{out}");
    assert_eq!(summary["not_transcripts"], 1, "{out}");
    let first = &summary["refused"]["project-a/one.jsonl"][0];
    assert_eq!(first["rule"], "guardrails/deny-destructive-shell", "{out}");
    assert!(
        first["reason"].as_str().unwrap().ends_with("and name it"),
        "{out}"
    );
    assert_eq!(
        summary["rules"]["guardrails/deny-destructive-shell"]["decisions"]["deny"],
        2
    );
    let refused = summary["refused"].as_object().unwrap();
    assert_eq!(
        refused.keys().collect::<Vec<_>>(),
        ["project-a/one.jsonl", "project-a/two.jsonl"]
    );

    // Transcripts that cannot be read (a broken link, a device, which is never read forever):
    // the others are replayed, and the status says so. A link to a folder is passed over.
    let locked = history.join("three.jsonl");
    std::os::unix::fs::symlink("/nonexistent/transcript.jsonl", &locked).unwrap();
    std::os::unix::fs::symlink("/dev/zero", history.join("zero.jsonl")).unwrap();
    std::os::unix::fs::symlink(dir.path(), history.join("loop.jsonl")).unwrap();
    let o = backtest(dir.path(), &["history", "--summary", "--format", "text"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}{err}");
    assert!(err.contains("three.jsonl"), "{err}");
    assert!(err.contains("zero.jsonl: not a regular file"), "{err}");
    assert!(!err.contains("loop.jsonl"), "{err}");
    assert!(out.contains("2 transcript(s)"), "{out}");
    // Only with --from.
    let o = warden(dir.path(), &["replay", "history", "--summary"]);
    assert!(!o.status.success());
    assert!(text(&o).1.contains("--from"), "{}", text(&o).1);
}

/// A rule test can take its events from a recorded session: `transcript = "..."` runs the case
/// through the events the transcript makes (as `--print-trace` numbers them), and a wrong
/// expectation, an event it does not make, or a transcript that is not there each say so.
#[test]
fn a_rule_test_runs_on_a_recorded_transcript() {
    let dir = tempfile::tempdir().unwrap();
    fs::copy(recorded(), dir.path().join("session.jsonl")).unwrap();
    fs::write(
        dir.path().join("recorded.test.toml"),
        r#"[[test]]
name = "the recorded session: the rm outside the project is refused"
transcript = "session.jsonl"
[[test.expect]]
event = 9
fires = ["guardrails/record-test-failure"]
[[test.expect]]
event = 11
decision = "deny"
reason = "`rm -rf /tmp/.tmpyjphxP/home/scratch` deletes `/tmp/.tmpyjphxP/home/scratch`, outside the project: delete only what is inside the project, and name it"
[[test.expect]]
event = 16
decision = "continue"

[[test]]
name = "a wrong expectation"
transcript = "session.jsonl"
[[test.expect]]
event = 11
decision = "allow"

[[test]]
name = "an event the transcript does not make"
transcript = "session.jsonl"
[[test.expect]]
event = 99
decision = "deny"
"#,
    )
    .unwrap();
    let run = |file: &str| {
        Command::new(env!("CARGO_BIN_EXE_warden"))
            .args(["test", file, "--plugins", "builtin:guardrails", "--builtin"])
            .current_dir(dir.path())
            .env_remove("WARDEN_CONFIG")
            .env("NO_COLOR", "1")
            .env("HOME", RECORDED_HOME)
            .output()
            .unwrap()
    };
    let o = run("recorded.test.toml");
    let (out, err) = text(&o);
    assert!(!o.status.success());
    assert!(
        out.contains("  ok   the recorded session: the rm outside the project is refused"),
        "{out}{err}"
    );
    assert!(out.contains("  FAIL a wrong expectation"), "{out}");
    assert!(out.contains("event 11 (on_tool_call)"), "{out}");
    assert!(
        out.contains("there is no event 99: the transcript makes 24"),
        "{out}"
    );
    assert!(out.contains("1 passed, 2 failed"), "{out}");

    fs::write(
        dir.path().join("missing.test.toml"),
        "[[test]]\nname = \"no such file\"\ntranscript = \"elsewhere.jsonl\"\n",
    )
    .unwrap();
    let o = run("missing.test.toml");
    let (out, err) = text(&o);
    assert!(!o.status.success());
    let all = format!("{out}{err}");
    assert!(
        all.contains("test[0].transcript") && all.contains("elsewhere.jsonl` cannot be read"),
        "{all}"
    );
    assert!(!all.contains("has no `events`"), "{all}");
}
