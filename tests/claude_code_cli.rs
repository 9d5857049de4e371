//! The real Claude Code, supervised by Warden: the CLI from the npm registry runs Warden's
//! hooks (`warden init claude-code`), talking to a scripted model on loopback
//! (`support/messages_api.rs`) instead of Anthropic's API. The scripted model only ever
//! targets a scratch folder the test made, outside the project.
//!
//! Each scenario runs in Claude Code's `default` and `bypassPermissions` modes:
//! - a refused `rm -rf` of the scratch folder leaves it in place, and the model reads the
//!   reason as the tool's result;
//! - four refusals in a row stop the session, and the fourth command does not run either;
//! - a session started after another's refusals is not stopped;
//! - an agent that wants to stop while its tests fail is sent back to work, at most the
//!   capped number of times (`[claude_code] max_continues`, 3);
//! - 170,000 tokens reported by the model make the token-budget warning reach the model at its
//!   next call, every run.
//!
//! `.ci/run` installs the CLI (`npm install @anthropic-ai/claude-code`) into a cache folder and
//! names it in `WARDEN_CLAUDE_CODE`; without it these tests say they skip (and fail when
//! `WARDEN_REQUIRE_AGENT_CLIS` is set, as CI sets it).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

#[path = "support/agent_cli.rs"]
mod agent_cli;
#[path = "support/messages_api.rs"]
mod messages_api;

use messages_api::{ModelServer, Turn, last_message_text, tool_results};

/// One Claude Code at a time: each is a large process, and the machine may have two cores.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

const MODES: [&str; 2] = ["default", "bypassPermissions"];

/// The `claude` executable, or why these tests skip.
fn claude() -> Option<PathBuf> {
    agent_cli::executable("WARDEN_CLAUDE_CODE", "Claude Code", "claude")
}

/// A project set up by `warden init claude-code` (the built-in rules and the guardrails that
/// ship with Warden), a home of its own for Claude Code, and a scratch folder in that home.
struct Setup {
    root: tempfile::TempDir,
}

impl Setup {
    fn new() -> Setup {
        let root = tempfile::tempdir().unwrap();
        let s = Setup { root };
        std::fs::create_dir_all(s.project().join("src")).unwrap();
        std::fs::write(s.project().join("src/main.rs"), "fn main() {}\n").unwrap();
        std::fs::create_dir_all(s.scratch()).unwrap();
        std::fs::write(s.scratch().join("keep.txt"), "keep me\n").unwrap();
        std::fs::create_dir_all(s.home()).unwrap();
        // A test runner that fails, found on the PATH Claude Code's shell gets.
        let bin = s.root.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let pytest = bin.join("pytest");
        std::fs::write(&pytest, "#!/bin/sh\necho '2 tests failed'\nexit 1\n").unwrap();
        let mut perms = std::fs::metadata(&pytest).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
        std::fs::set_permissions(&pytest, perms).unwrap();
        let init = Command::new(env!("CARGO_BIN_EXE_warden"))
            .args(["init", "claude-code", "--dir"])
            .arg(s.project())
            .output()
            .unwrap();
        // What `warden init` writes, as it writes it: the guardrails are on out of the box.
        assert!(init.status.success(), "{init:?}");
        s
    }

    fn project(&self) -> PathBuf {
        self.root.path().join("project")
    }

    /// A folder in the home Claude Code runs with: outside the project, and not a folder for
    /// temporary files (the temporary folder the test runs in is one).
    fn scratch(&self) -> PathBuf {
        self.home().join("scratch")
    }

    fn home(&self) -> PathBuf {
        self.root.path().join("home")
    }

    /// Runs one `claude -p` session to its end against `model`; its JSON result.
    fn run(&self, claude: &Path, model: &ModelServer, mode: &str) -> Value {
        let mut child = Command::new(claude)
            .args([
                "-p",
                "Tidy up the workspace.",
                "--output-format",
                "json",
                "--model",
                "claude-sonnet-4-5",
                "--permission-mode",
                mode,
            ])
            .current_dir(self.project())
            .env("HOME", self.home())
            .env("ANTHROPIC_BASE_URL", &model.url)
            .env("ANTHROPIC_API_KEY", "sk-ant-warden-test")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            // Claude Code refuses bypassPermissions as root outside a sandbox: this is one.
            .env("IS_SANDBOX", "1")
            .env("PATH", self.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let start = Instant::now();
        while child.try_wait().unwrap().is_none() {
            if start.elapsed() > Duration::from_secs(180) {
                let _ = child.kill();
                panic!("Claude Code did not finish within 180 s");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
            panic!(
                "Claude Code's output is not its JSON result ({e}):\n{stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
    }

    /// The PATH of Claude Code's tools: the test's own `bin` first.
    fn path(&self) -> std::ffi::OsString {
        let mut paths = vec![self.root.path().join("bin")];
        paths.extend(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        ));
        std::env::join_paths(paths).unwrap()
    }

    /// Lets `default` mode run the test runner without asking (as a user's settings would).
    fn allow_pytest(&self) {
        std::fs::write(
            self.project().join(".claude/settings.local.json"),
            r#"{"permissions": {"allow": ["Bash(pytest:*)"]}}"#,
        )
        .unwrap();
    }

    fn rm_scratch(&self) -> Turn {
        Turn::bash(&format!("rm -rf {}", self.scratch().display()))
    }

    fn read_main(&self) -> Turn {
        Turn::tool(
            "Read",
            json!({ "file_path": self.project().join("src/main.rs") }),
        )
    }

    fn scratch_is_there(&self) -> bool {
        self.scratch().join("keep.txt").is_file()
    }
}

#[ignore = "needs the real Claude Code: set WARDEN_CLAUDE_CODE and run `cargo test -- --ignored` (CI does)"]
#[test]
fn a_refused_rm_leaves_the_folder_and_the_model_reads_why() {
    let Some(claude) = claude() else { return };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    for mode in MODES {
        let s = Setup::new();
        let model = ModelServer::start(vec![s.rm_scratch(), Turn::text("I left it.")]);
        let result = s.run(&claude, &model, mode);
        assert!(
            s.scratch_is_there(),
            "{mode}: the scratch folder was removed"
        );
        let requests = model.requests();
        assert_eq!(requests.len(), 2, "{mode}: {result}");
        let results = tool_results(&requests[1]);
        assert!(
            results.iter().any(|r| r.contains("outside the project")),
            "{mode}: the model was not told why: {results:?}"
        );
        eprintln!("{mode}: the model read: {}", results.join(" | "));
    }
}

#[ignore = "needs the real Claude Code: set WARDEN_CLAUDE_CODE and run `cargo test -- --ignored` (CI does)"]
#[test]
fn four_refusals_stop_the_session_and_the_fourth_does_not_run_either() {
    let Some(claude) = claude() else { return };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    for mode in MODES {
        let s = Setup::new();
        let mut script: Vec<Turn> = (0..4).map(|_| s.rm_scratch()).collect();
        script.push(Turn::text("Stopped?"));
        let model = ModelServer::start(script);
        let result = s.run(&claude, &model, mode);
        assert!(
            s.scratch_is_there(),
            "{mode}: the scratch folder was removed: {result}"
        );
        // The session ended at the fourth call's hook: the model was not called again.
        assert_eq!(model.taken(), 4, "{mode}: {result}");
        eprintln!(
            "{mode}: stopped after {} model calls, Claude Code says {}",
            model.taken(),
            result["terminal_reason"]
        );

        // Another session of the same project is not stopped by the first one's refusals.
        let model = ModelServer::start(vec![s.read_main(), Turn::text("Read it.")]);
        let result = s.run(&claude, &model, mode);
        let requests = model.requests();
        assert_eq!(
            requests.len(),
            2,
            "{mode}: the new session was stopped: {result}"
        );
        let results = tool_results(&requests[1]);
        assert!(
            results.iter().any(|r| r.contains("fn main")),
            "{mode}: the new session's call did not run: {results:?}"
        );
    }
}

#[ignore = "needs the real Claude Code: set WARDEN_CLAUDE_CODE and run `cargo test -- --ignored` (CI does)"]
#[test]
fn a_token_budget_warning_reaches_the_next_model_call_every_time() {
    let Some(claude) = claude() else { return };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let runs: usize = std::env::var("WARDEN_CLAUDE_CODE_RUNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(20);
    let mut seen = Vec::new();
    for mode in MODES {
        for run in 0..runs {
            let s = Setup::new();
            let model = ModelServer::start(vec![
                s.read_main(),
                s.read_main().tokens(170_000),
                Turn::text("Done."),
            ]);
            let result = s.run(&claude, &model, mode);
            let requests = model.requests();
            assert_eq!(requests.len(), 3, "{mode} run {run}: {result}");
            let before = last_message_text(&requests[1]);
            let after = last_message_text(&requests[2]);
            assert!(
                !before.contains("Token budget"),
                "{mode} run {run}: warned too early: {before}"
            );
            assert!(
                after.contains("Token budget at 85%"),
                "{mode} run {run}: the warning did not reach the model:\n{after}"
            );
            seen.push(mode);
        }
    }
    eprintln!(
        "the warning reached the model's next call in {} of {} runs",
        seen.len(),
        2 * runs
    );
}

#[ignore = "needs the real Claude Code: set WARDEN_CLAUDE_CODE and run `cargo test -- --ignored` (CI does)"]
#[test]
fn failing_tests_send_the_agent_back_to_work_at_most_three_times() {
    let Some(claude) = claude() else { return };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    for mode in MODES {
        let s = Setup::new();
        s.allow_pytest();
        let mut script = vec![Turn::bash("pytest")];
        script.extend((0..5).map(|i| Turn::text(&format!("Finished ({i})."))));
        let model = ModelServer::start(script);
        let result = s.run(&claude, &model, mode);
        let requests = model.requests();
        // The test run, the first answer, then three times back to work: five model calls.
        assert_eq!(requests.len(), 5, "{mode}: {result}");
        let failed = tool_results(&requests[1]).join(" ");
        assert!(failed.contains("2 tests failed"), "{mode}: {failed}");
        for (i, r) in requests[2..].iter().enumerate() {
            let told = last_message_text(r);
            assert!(
                told.contains("The last test run failed"),
                "{mode}: call {} was not sent back to work: {told}",
                i + 3
            );
        }
        eprintln!(
            "{mode}: sent back to work {} times, then let stop ({})",
            requests.len() - 2,
            result["result"]
        );
    }
}

/// The transcript Claude Code kept of a session (the one `.jsonl` under its home's
/// `.claude/projects/`).
fn transcript_of(home: &Path) -> PathBuf {
    let projects = home.join(".claude/projects");
    let mut found = Vec::new();
    for dir in std::fs::read_dir(&projects).unwrap() {
        for f in std::fs::read_dir(dir.unwrap().path()).unwrap() {
            let p = f.unwrap().path();
            if p.extension().is_some_and(|e| e == "jsonl") {
                found.push(p);
            }
        }
    }
    assert_eq!(
        found.len(),
        1,
        "one transcript under {}: {found:?}",
        projects.display()
    );
    found.pop().unwrap()
}

/// A backtest of a real session's transcript (`warden replay --from claude-code`) refuses
/// exactly the calls the live hooks refused in that session, with the same rules. Set
/// `WARDEN_RECORD_TRANSCRIPT` to a path to keep the transcript (the repository's test data,
/// `tests/data/claude-code/`, was recorded so).
#[ignore = "needs the real Claude Code: set WARDEN_CLAUDE_CODE and run `cargo test -- --ignored` (CI does)"]
#[test]
fn a_backtest_of_a_real_transcript_refuses_what_the_live_hooks_refused() {
    let Some(claude) = claude() else { return };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let s = Setup::new();
    s.allow_pytest();
    let model = ModelServer::start(vec![
        s.read_main(),
        Turn::bash("ls -la"),
        Turn::bash("pytest"),
        s.rm_scratch(),
        Turn::bash("cargo --version"),
        Turn::text("Done."),
    ]);
    let result = s.run(&claude, &model, "bypassPermissions");
    assert!(
        s.scratch_is_there(),
        "the scratch folder was removed: {result}"
    );
    let transcript = transcript_of(&s.home());
    if let Some(keep) = std::env::var_os("WARDEN_RECORD_TRANSCRIPT") {
        std::fs::copy(&transcript, keep).unwrap();
    }
    // What the live hooks refused: the calls whose result is the hook's refusal.
    let text = std::fs::read_to_string(&transcript).unwrap();
    let mut live = std::collections::BTreeSet::new();
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        for block in v["message"]["content"].as_array().into_iter().flatten() {
            if block["type"] == "tool_result"
                && block["is_error"] == true
                && block["content"].to_string().contains("outside the project")
            {
                live.insert(block["tool_use_id"].as_str().unwrap().to_string());
            }
        }
    }
    assert_eq!(live.len(), 1, "the live hooks refused the rm: {text}");
    let out = Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(["replay", "--from", "claude-code"])
        .arg(&transcript)
        .arg("--config")
        .arg(s.project().join(".warden/warden.toml"))
        // Paths are judged as the live hook judged them: in the session's home.
        .env("HOME", s.home())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let mut replayed = std::collections::BTreeSet::new();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        if v["refused"] == true {
            replayed.insert(v["tool_use_id"].as_str().unwrap().to_string());
        }
    }
    assert_eq!(
        replayed, live,
        "the backtest refused other calls than the live hooks"
    );
}
