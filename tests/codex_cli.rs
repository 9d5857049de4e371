//! The real Codex CLI, supervised by Warden: the CLI from the npm registry runs Warden's hooks
//! (`warden init codex`), talking to a scripted model on loopback (`support/responses_api.rs`,
//! a custom model provider) instead of OpenAI's API. The scripted model only ever targets a
//! scratch folder the test made, outside the project.
//!
//! Each scenario runs `codex exec` with its sandbox off (`--dangerously-bypass-approvals-and-sandbox`)
//! and on (`--sandbox workspace-write`, which lets a command write in the temporary folder the
//! scratch folder is in: only Warden keeps it):
//! - a refused `rm -rf` of the scratch folder leaves it in place, and the model reads Warden's
//!   reason as the tool's result (Codex's own refusal of `rm -rf` comes after the hook's, and
//!   says something else); so does `rm -r`, which Codex would run;
//! - four refusals in a row stop the session: the fourth command does not run, nor does any
//!   call after it (a hook cannot end a Codex turn, so every later call is refused), and the
//!   agent is not sent back to work;
//! - a session started after another's refusals is not stopped;
//! - an agent that wants to stop while its tests fail is sent back to work, at most the capped
//!   number of times (3); Codex gives a hook no exit code, Warden reads it in Codex's session file;
//! - 220,000 tokens reported by the model (85% of the window Codex reports for its model) make
//!   the token-budget warning reach the model at its next call, every run (Codex writes each
//!   response's usage to its session file before the hooks of its calls run);
//! - a patch (`apply_patch`) that writes outside the project is refused and writes nothing;
//!   one inside the project is written.
//!
//! The project is made trusted in Codex's user configuration, and Warden's hooks trusted the
//! way Codex's `/hooks` review trusts them: the hash Codex computes for each hook (asked of
//! `codex app-server`, `hooks/list`) recorded as its `trusted_hash`. No flag skips the trust.
//!
//! `.ci/run` installs the CLI (`npm install @openai/codex`) into a cache folder and names it in
//! `WARDEN_CODEX`; without it these tests say they skip (and fail when
//! `WARDEN_REQUIRE_AGENT_CLIS` is set, as CI sets it).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

#[path = "support/agent_cli.rs"]
mod agent_cli;
#[path = "support/responses_api.rs"]
mod responses_api;

use responses_api::{ModelServer, Turn, last_message_text, tool_results};

/// One Codex at a time: each is a large process, and the machine may have two cores.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// How `codex exec` runs: its sandbox off, and on.
const MODES: [(&str, &[&str]); 2] = [
    (
        "no sandbox",
        &["--dangerously-bypass-approvals-and-sandbox"],
    ),
    ("workspace-write", &["--sandbox", "workspace-write"]),
];

/// The model Codex is told it talks to: one it knows (so that it offers `apply_patch`).
const MODEL: &str = "gpt-5.5";

/// The `codex` executable, or why these tests skip.
fn codex() -> Option<PathBuf> {
    agent_cli::executable("WARDEN_CODEX", "Codex CLI", "codex")
}

/// A project set up by `warden init codex` (the built-in rules and the guardrails that ship
/// with Warden), a home of its own for Codex (`HOME` and `CODEX_HOME`), and a scratch folder in
/// that home.
struct Setup {
    root: tempfile::TempDir,
    codex: PathBuf,
    /// `[hooks.state]` entries that trust Warden's hooks, for Codex's user configuration.
    hook_trust: String,
}

impl Setup {
    fn new(codex: &Path) -> Setup {
        let root = tempfile::tempdir().unwrap();
        let mut s = Setup {
            root,
            codex: codex.to_path_buf(),
            hook_trust: String::new(),
        };
        std::fs::create_dir_all(s.project().join("src")).unwrap();
        std::fs::write(s.project().join("src/main.rs"), "fn main() {}\n").unwrap();
        std::fs::create_dir_all(s.scratch()).unwrap();
        std::fs::write(s.scratch().join("keep.txt"), "keep me\n").unwrap();
        std::fs::create_dir_all(s.codex_home()).unwrap();
        // A test runner that fails. Codex runs commands in a login shell, which sets its own
        // PATH: the user's profile puts the test's `bin` first, as a user's would.
        let bin = s.root.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let pytest = bin.join("pytest");
        std::fs::write(&pytest, "#!/bin/sh\necho '2 tests failed'\nexit 1\n").unwrap();
        let mut perms = std::fs::metadata(&pytest).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
        std::fs::set_permissions(&pytest, perms).unwrap();
        std::fs::write(
            s.home().join(".bash_profile"),
            format!("export PATH=\"{}:$PATH\"\n", bin.display()),
        )
        .unwrap();
        let init = Command::new(env!("CARGO_BIN_EXE_warden"))
            .args(["init", "codex", "--dir"])
            .arg(s.project())
            .output()
            .unwrap();
        // What `warden init` writes, as it writes it: the guardrails are on out of the box.
        assert!(init.status.success(), "{init:?}");
        s.write_config("http://127.0.0.1:9/v1");
        s.hook_trust = s.trust_hooks();
        s
    }

    /// The project: a folder whose name has a space, as many have (the hook command must
    /// name it whole).
    fn project(&self) -> PathBuf {
        self.root.path().join("my project")
    }

    /// A folder in the home Codex runs with: outside the project.
    fn scratch(&self) -> PathBuf {
        self.home().join("scratch")
    }

    fn home(&self) -> PathBuf {
        self.root.path().join("home")
    }

    fn codex_home(&self) -> PathBuf {
        self.home().join(".codex")
    }

    /// Codex's user configuration: the scripted model as a custom provider at `url`, the
    /// project trusted, Warden's hooks trusted.
    fn write_config(&self, url: &str) {
        let project = self.project().display().to_string();
        let config = format!(
            r#"model = "{MODEL}"
model_provider = "warden-test"
check_for_update_on_startup = false

[model_providers.warden-test]
name = "Warden's scripted model"
base_url = {url:?}
wire_api = "responses"
env_key = "WARDEN_TEST_MODEL_KEY"
request_max_retries = 0
stream_max_retries = 0

[projects.{project:?}]
trust_level = "trusted"
{}"#,
            self.hook_trust
        );
        std::fs::write(self.codex_home().join("config.toml"), config).unwrap();
    }

    /// A command run as Codex runs: this home, this project.
    fn command(&self, program: &Path) -> Command {
        let mut c = Command::new(program);
        c.current_dir(self.project())
            .env("HOME", self.home())
            .env("CODEX_HOME", self.codex_home())
            .env("WARDEN_TEST_MODEL_KEY", "sk-warden-test")
            .env_remove("OPENAI_API_KEY")
            .env_remove("OPENAI_BASE_URL")
            .env_remove("CODEX_API_KEY");
        c
    }

    /// What a user's review of the hooks (`/hooks`) records: each hook of the project's
    /// configuration trusted at the hash Codex computes for it, as `codex app-server` lists
    /// them.
    fn trust_hooks(&self) -> String {
        let mut child = self
            .command(&self.codex)
            .arg("app-server")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let project = self.project().display().to_string();
        for message in [
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"clientInfo": {"name": "warden-test", "version": "0"}}}),
            json!({"jsonrpc": "2.0", "method": "initialized"}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "hooks/list",
                "params": {"cwds": [project]}}),
        ] {
            writeln!(stdin, "{message}").unwrap();
        }
        stdin.flush().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Ok(v) = serde_json::from_str::<Value>(&line)
                    && v["id"] == 2
                {
                    let _ = tx.send(v);
                    break;
                }
            }
        });
        let listed = rx.recv_timeout(Duration::from_secs(60));
        drop(stdin);
        let _ = child.kill();
        let _ = child.wait();
        let listed = listed.expect("codex app-server answered hooks/list within 60 s");
        let hooks: Vec<&Value> = listed["result"]["data"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|d| d["hooks"].as_array().into_iter().flatten())
            .filter(|h| h["source"] == "project")
            .collect();
        assert!(
            hooks.iter().any(|h| h["command"]
                .as_str()
                .is_some_and(|c| c.contains("hook codex"))),
            "Codex does not see Warden's hooks in the project: {listed}"
        );
        let mut trust = String::new();
        for h in hooks {
            trust.push_str(&format!(
                "\n[hooks.state.{:?}]\ntrusted_hash = {:?}\n",
                h["key"].as_str().unwrap(),
                h["currentHash"].as_str().unwrap()
            ));
        }
        trust
    }

    /// Runs one `codex exec` session to its end against `model`; its JSON events.
    fn run(&self, model: &ModelServer, flags: &[&str]) -> Vec<Value> {
        self.write_config(&model.url);
        let mut child = self
            .command(&self.codex)
            .args(["exec", "--json", "--skip-git-repo-check", "--model", MODEL])
            .args(flags)
            .arg("Tidy up the workspace.")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let start = Instant::now();
        while child.try_wait().unwrap().is_none() {
            if start.elapsed() > Duration::from_secs(180) {
                let _ = child.kill();
                panic!("Codex did not finish within 180 s");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let events: Vec<Value> = stdout
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        assert!(
            events.iter().any(|e| e["type"] == "turn.completed"),
            "Codex's turn did not complete ({}):\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        events
    }

    fn rm_scratch(&self) -> Turn {
        Turn::shell(&format!("rm -rf {}", self.scratch().display()))
    }

    fn read_main(&self) -> Turn {
        Turn::shell("cat src/main.rs")
    }

    fn scratch_is_there(&self) -> bool {
        self.scratch().join("keep.txt").is_file()
    }
}

/// The agent's last message in a session's events.
fn last_answer(events: &[Value]) -> String {
    events
        .iter()
        .rev()
        .find(|e| e["type"] == "item.completed" && e["item"]["type"] == "agent_message")
        .and_then(|e| e["item"]["text"].as_str())
        .unwrap_or_default()
        .to_string()
}

#[ignore = "needs the real Codex CLI: set WARDEN_CODEX and run `cargo test -- --ignored` (CI does)"]
#[test]
fn a_refused_rm_leaves_the_folder_and_the_model_reads_why() {
    let Some(codex) = codex() else { return };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    for (mode, flags) in MODES {
        let s = Setup::new(&codex);
        let model = ModelServer::start(vec![
            s.rm_scratch(),
            // Codex itself refuses `rm -rf`, but runs this one.
            Turn::shell(&format!("rm -r {}", s.scratch().display())),
            Turn::text("I left it."),
        ]);
        let events = s.run(&model, flags);
        assert!(
            s.scratch_is_there(),
            "{mode}: the scratch folder was removed: {events:?}"
        );
        let requests = model.requests();
        assert_eq!(requests.len(), 3, "{mode}: {events:?}");
        for (i, r) in requests[1..].iter().enumerate() {
            let results = tool_results(r);
            assert!(
                results
                    .iter()
                    .any(|r| r.contains("blocked by PreToolUse hook")
                        && r.contains("outside the project")),
                "{mode}: the model was not told why at call {}: {results:?}",
                i + 2
            );
            eprintln!("{mode}: the model read: {}", results.join(" | "));
        }
    }
}

#[ignore = "needs the real Codex CLI: set WARDEN_CODEX and run `cargo test -- --ignored` (CI does)"]
#[test]
fn four_refusals_stop_the_session_and_no_call_runs_after() {
    let Some(codex) = codex() else { return };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    for (mode, flags) in MODES {
        let s = Setup::new(&codex);
        let mut script: Vec<Turn> = (0..4).map(|_| s.rm_scratch()).collect();
        script.push(s.read_main());
        script.push(Turn::text("Stopped?"));
        script.push(Turn::text("Sent back to work?"));
        let model = ModelServer::start(script);
        let events = s.run(&model, flags);
        assert!(
            s.scratch_is_there(),
            "{mode}: the scratch folder was removed: {events:?}"
        );
        let requests = model.requests();
        // Four refused calls, the call after them, the answer; a stopped agent is not sent
        // back to work.
        assert_eq!(requests.len(), 6, "{mode}: {events:?}");
        let fourth = tool_results(&requests[4]).join(" ");
        assert!(
            fourth.contains("in a row were refused"),
            "{mode}: the fourth refusal did not say the session stops: {fourth}"
        );
        let after = tool_results(&requests[5]).join(" ");
        assert!(
            !after.contains("fn main") && after.contains("blocked by PreToolUse hook"),
            "{mode}: a call ran after the session stopped: {after}"
        );
        assert_eq!(last_answer(&events), "Stopped?", "{mode}");
        eprintln!("{mode}: after the stop the model read: {after}");

        // Another session of the same project is not stopped by the first one's refusals.
        let model = ModelServer::start(vec![s.read_main(), Turn::text("Read it.")]);
        let events = s.run(&model, flags);
        let requests = model.requests();
        assert_eq!(
            requests.len(),
            2,
            "{mode}: the new session was stopped: {events:?}"
        );
        let results = tool_results(&requests[1]);
        assert!(
            results.iter().any(|r| r.contains("fn main")),
            "{mode}: the new session's call did not run: {results:?}"
        );
    }
}

#[ignore = "needs the real Codex CLI: set WARDEN_CODEX and run `cargo test -- --ignored` (CI does)"]
#[test]
fn a_token_budget_warning_reaches_the_next_model_call_every_time() {
    let Some(codex) = codex() else { return };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let runs: usize = std::env::var("WARDEN_CODEX_RUNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(5);
    let mut seen = 0;
    for (mode, flags) in MODES {
        for run in 0..runs {
            let s = Setup::new(&codex);
            let model = ModelServer::start(vec![
                s.read_main(),
                s.read_main().tokens(220_000),
                Turn::text("Done."),
            ]);
            let events = s.run(&model, flags);
            let requests = model.requests();
            assert_eq!(requests.len(), 3, "{mode} run {run}: {events:?}");
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
            seen += 1;
        }
    }
    eprintln!(
        "the warning reached the model's next call in {seen} of {} runs",
        2 * runs
    );
}

#[ignore = "needs the real Codex CLI: set WARDEN_CODEX and run `cargo test -- --ignored` (CI does)"]
#[test]
fn failing_tests_send_the_agent_back_to_work_at_most_three_times() {
    let Some(codex) = codex() else { return };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    for (mode, flags) in MODES {
        let s = Setup::new(&codex);
        let mut script = vec![Turn::shell("pytest")];
        script.extend((0..5).map(|i| Turn::text(&format!("Finished ({i})."))));
        let model = ModelServer::start(script);
        let events = s.run(&model, flags);
        let requests = model.requests();
        // The test run, the first answer, then three times back to work: five model calls.
        assert_eq!(requests.len(), 5, "{mode}: {events:?}");
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
            last_answer(&events)
        );
    }
}

#[ignore = "needs the real Codex CLI: set WARDEN_CODEX and run `cargo test -- --ignored` (CI does)"]
#[test]
fn a_patch_outside_the_project_is_refused_and_one_inside_is_written() {
    let Some(codex) = codex() else { return };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    for (mode, flags) in MODES {
        let s = Setup::new(&codex);
        let outside = s.scratch().join("new.txt");
        let model = ModelServer::start(vec![
            Turn::patch(&format!(
                "*** Begin Patch\n*** Add File: {}\n+written by the agent\n*** End Patch\n",
                outside.display()
            )),
            Turn::patch(
                "*** Begin Patch\n*** Add File: src/lib.rs\n+pub fn f() {}\n*** End Patch\n",
            ),
            Turn::text("Patched."),
        ]);
        let events = s.run(&model, flags);
        let requests = model.requests();
        assert_eq!(requests.len(), 3, "{mode}: {events:?}");
        assert!(
            !outside.exists(),
            "{mode}: the patch wrote outside the project: {events:?}"
        );
        let refused = tool_results(&requests[1]).join(" ");
        assert!(
            refused.contains("blocked by PreToolUse hook"),
            "{mode}: the model was not told why: {refused}"
        );
        assert!(
            s.project().join("src/lib.rs").is_file(),
            "{mode}: the patch inside the project was not written: {}",
            tool_results(&requests[2]).join(" ")
        );
        eprintln!("{mode}: the model read: {refused}");
    }
}

/// Codex runs the hooks of calls the model makes side by side at the same time: two `warden`
/// processes tick the same durable session at once, and each call is judged.
#[ignore = "needs the real Codex CLI: set WARDEN_CODEX and run `cargo test -- --ignored` (CI does)"]
#[test]
fn calls_made_side_by_side_are_each_judged() {
    let Some(codex) = codex() else { return };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    for (mode, flags) in MODES {
        let s = Setup::new(&codex);
        let model = ModelServer::start(vec![
            Turn::parallel(vec![s.rm_scratch(), s.read_main(), s.rm_scratch()]),
            Turn::text("Done."),
        ]);
        let events = s.run(&model, flags);
        assert!(
            s.scratch_is_there(),
            "{mode}: the scratch folder was removed: {events:?}"
        );
        let requests = model.requests();
        assert_eq!(requests.len(), 2, "{mode}: {events:?}");
        let results = tool_results(&requests[1]);
        assert_eq!(results.len(), 3, "{mode}: {results:?}");
        assert!(
            results[0].contains("outside the project")
                && results[2].contains("outside the project"),
            "{mode}: a removal was not refused: {results:?}"
        );
        assert!(
            results[1].contains("fn main"),
            "{mode}: the call beside the refused ones did not run: {results:?}"
        );
    }
}
