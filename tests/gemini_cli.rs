//! The real Gemini CLI, supervised by Warden: the CLI from the npm registry runs Warden's hooks
//! (`warden init gemini-cli`), talking to a scripted model on loopback
//! (`support/gemini_api.rs`, named by `GOOGLE_GEMINI_BASE_URL`) instead of Google's API. The
//! scripted model only ever targets a scratch folder the test made, outside the project.
//!
//! Each scenario runs in Gemini CLI's `yolo` approval mode and in its `default` mode with a
//! policy that lets the shell tool run (without it, `gemini -p` does not even offer the shell
//! tool to the model):
//! - a refused `rm -rf` of the scratch folder leaves it in place, and the model reads the
//!   reason as the tool's result;
//! - four refusals in a row stop the session (the session is durable across hook processes),
//!   and the fourth command does not run either;
//! - a session started after another's refusals is not stopped;
//! - an agent that wants to stop while its tests fail is sent back to work, at most the
//!   capped number of times (`[claude_code] max_continues`, 3);
//! - 900,000 prompt tokens reported by the model (`usageMetadata`, which Gemini CLI's
//!   `AfterModel` hook passes on) make the token-budget warning reach the model at its next
//!   call, every run.
//!
//! Gemini CLI runs with a home of its own: API-key auth (`security.auth.selectedType`; the key
//! is any string), no usage statistics, telemetry or update checks (with them on it looks up
//! Google's hosts), and the project folder trusted (an untrusted folder's hooks do not run).
//!
//! `.ci/run` installs the CLI (`npm install @google/gemini-cli`) into a cache folder and names
//! it in `WARDEN_GEMINI_CLI`; without it these tests say they skip (and fail when
//! `WARDEN_REQUIRE_AGENT_CLIS` is set, as CI sets it).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

#[path = "support/agent_cli.rs"]
mod agent_cli;
#[path = "support/gemini_api.rs"]
mod gemini_api;

use gemini_api::{ModelServer, Turn, function_responses, last_content_text};

/// One Gemini CLI at a time: each is a large process, and the machine may have two cores.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

const MODES: [&str; 2] = ["yolo", "default"];

/// The model the CLI is told to use: named, so that it calls no model router first.
const MODEL: &str = "gemini-2.5-pro";

/// The `gemini` executable, or why these tests skip.
fn gemini() -> Option<PathBuf> {
    agent_cli::executable("WARDEN_GEMINI_CLI", "Gemini CLI", "gemini")
}

/// A project set up by `warden init gemini-cli` (the built-in rules and the guardrails that
/// ship with Warden), a home of its own for Gemini CLI, and a scratch folder in that home.
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
        // Gemini CLI's own settings, in its home: what a user has after choosing an API key.
        let gemini_home = s.home().join(".gemini");
        std::fs::create_dir_all(&gemini_home).unwrap();
        let settings = json!({
            "security": { "auth": { "selectedType": "gemini-api-key" } },
            "privacy": { "usageStatisticsEnabled": false },
            "telemetry": { "enabled": false },
            "general": { "enableAutoUpdate": false, "enableAutoUpdateNotification": false }
        });
        std::fs::write(gemini_home.join("settings.json"), settings.to_string()).unwrap();
        // The project trusted, as answering Gemini CLI's trust prompt leaves it.
        let trusted = json!({ s.project().display().to_string(): "TRUST_FOLDER" });
        std::fs::write(gemini_home.join("trustedFolders.json"), trusted.to_string()).unwrap();
        // The `default` mode's policy: the shell tool runs without asking (as a user's would).
        std::fs::write(
            s.policy(),
            "[[rule]]\ntoolName = \"run_shell_command\"\ndecision = \"allow\"\npriority = 100\n",
        )
        .unwrap();
        // A test runner that fails, found on the PATH Gemini CLI's shell gets.
        let bin = s.root.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let pytest = bin.join("pytest");
        std::fs::write(&pytest, "#!/bin/sh\necho '2 tests failed'\nexit 1\n").unwrap();
        let mut perms = std::fs::metadata(&pytest).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
        std::fs::set_permissions(&pytest, perms).unwrap();
        let init = Command::new(env!("CARGO_BIN_EXE_warden"))
            .args(["init", "gemini-cli", "--dir"])
            .arg(s.project())
            .output()
            .unwrap();
        // What `warden init` writes, as it writes it: the guardrails are on out of the box.
        assert!(init.status.success(), "{init:?}");
        s
    }

    /// The project: a folder whose name has a space, as many have (the hook command must
    /// name it whole).
    fn project(&self) -> PathBuf {
        self.root.path().join("my project")
    }

    /// A folder in the home Gemini CLI runs with: outside the project, and not a folder for
    /// temporary files (the temporary folder the test runs in is one).
    fn scratch(&self) -> PathBuf {
        self.home().join("scratch")
    }

    fn home(&self) -> PathBuf {
        self.root.path().join("home")
    }

    fn policy(&self) -> PathBuf {
        self.root.path().join("allow-shell.toml")
    }

    /// Runs one `gemini -p` session to its end against `model`; its JSON result.
    fn run(&self, gemini: &Path, model: &ModelServer, mode: &str) -> Value {
        let mut cmd = Command::new(gemini);
        cmd.args([
            "-p",
            "Tidy up the workspace.",
            "--output-format",
            "json",
            "--model",
            MODEL,
            "--approval-mode",
            mode,
        ]);
        if mode == "default" {
            cmd.arg("--policy").arg(self.policy());
        }
        // Nothing of the machine's environment (an API key, a Vertex AI project) leaks in.
        let mut child = cmd
            .current_dir(self.project())
            .env_clear()
            .env("HOME", self.home())
            .env("PATH", self.path())
            .env("TERM", "dumb")
            .env("GOOGLE_GEMINI_BASE_URL", &model.url)
            .env("GEMINI_API_KEY", "warden-test-key")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let start = Instant::now();
        while child.try_wait().unwrap().is_none() {
            if start.elapsed() > Duration::from_secs(180) {
                let _ = child.kill();
                panic!("Gemini CLI did not finish within 180 s");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
            panic!(
                "Gemini CLI's output is not its JSON result ({e}):\n{stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
    }

    /// The PATH of Gemini CLI's tools: the test's own `bin` first.
    fn path(&self) -> std::ffi::OsString {
        let mut paths = vec![self.root.path().join("bin")];
        paths.extend(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        ));
        std::env::join_paths(paths).unwrap()
    }

    fn rm_scratch(&self) -> Turn {
        Turn::shell(&format!("rm -rf {}", self.scratch().display()))
    }

    fn read_main(&self) -> Turn {
        Turn::call(
            "read_file",
            json!({ "file_path": self.project().join("src/main.rs") }),
        )
    }

    fn scratch_is_there(&self) -> bool {
        self.scratch().join("keep.txt").is_file()
    }
}

#[ignore = "needs the real Gemini CLI: set WARDEN_GEMINI_CLI and run `cargo test -- --ignored` (CI does)"]
#[test]
fn a_refused_rm_leaves_the_folder_and_the_model_reads_why() {
    let Some(gemini) = gemini() else { return };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    for mode in MODES {
        let s = Setup::new();
        let model = ModelServer::start(vec![s.rm_scratch(), Turn::text("I left it.")]);
        let result = s.run(&gemini, &model, mode);
        assert!(
            s.scratch_is_there(),
            "{mode}: the scratch folder was removed"
        );
        let requests = model.requests();
        assert_eq!(requests.len(), 2, "{mode}: {result}");
        let results = function_responses(&requests[1]);
        assert!(
            results.iter().any(|r| r.contains("outside the project")),
            "{mode}: the model was not told why: {results:?}"
        );
        eprintln!("{mode}: the model read: {}", results.join(" | "));
    }
}

#[ignore = "needs the real Gemini CLI: set WARDEN_GEMINI_CLI and run `cargo test -- --ignored` (CI does)"]
#[test]
fn four_refusals_stop_the_session_and_the_fourth_does_not_run_either() {
    let Some(gemini) = gemini() else { return };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    for mode in MODES {
        let s = Setup::new();
        let mut script: Vec<Turn> = (0..4).map(|_| s.rm_scratch()).collect();
        script.push(Turn::text("Stopped?"));
        let model = ModelServer::start(script);
        let result = s.run(&gemini, &model, mode);
        assert!(
            s.scratch_is_there(),
            "{mode}: the scratch folder was removed: {result}"
        );
        // The session ended at the fourth call's hook: the model was not called again. Each
        // hook is a process of its own: the refusals were counted in the stored session.
        assert_eq!(model.taken(), 4, "{mode}: {result}");
        eprintln!(
            "{mode}: stopped after {} model calls, Gemini CLI says {}",
            model.taken(),
            result["response"]
        );

        // Another session of the same project is not stopped by the first one's refusals.
        let model = ModelServer::start(vec![s.read_main(), Turn::text("Read it.")]);
        let result = s.run(&gemini, &model, mode);
        let requests = model.requests();
        assert_eq!(
            requests.len(),
            2,
            "{mode}: the new session was stopped: {result}"
        );
        let results = function_responses(&requests[1]);
        assert!(
            results.iter().any(|r| r.contains("fn main")),
            "{mode}: the new session's call did not run: {results:?}"
        );
    }
}

#[ignore = "needs the real Gemini CLI: set WARDEN_GEMINI_CLI and run `cargo test -- --ignored` (CI does)"]
#[test]
fn a_token_budget_warning_reaches_the_next_model_call_every_time() {
    let Some(gemini) = gemini() else { return };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let runs: usize = std::env::var("WARDEN_GEMINI_CLI_RUNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(3);
    let mut seen = Vec::new();
    for mode in MODES {
        for run in 0..runs {
            let s = Setup::new();
            // 900,000 of gemini-2.5-pro's 1,048,576 tokens: past 85%.
            let model = ModelServer::start(vec![
                s.read_main(),
                s.read_main().tokens(900_000),
                Turn::text("Done."),
            ]);
            let result = s.run(&gemini, &model, mode);
            let requests = model.requests();
            assert_eq!(requests.len(), 3, "{mode} run {run}: {result}");
            let before = last_content_text(&requests[1]);
            let after = last_content_text(&requests[2]);
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

#[ignore = "needs the real Gemini CLI: set WARDEN_GEMINI_CLI and run `cargo test -- --ignored` (CI does)"]
#[test]
fn failing_tests_send_the_agent_back_to_work_at_most_three_times() {
    let Some(gemini) = gemini() else { return };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    for mode in MODES {
        let s = Setup::new();
        let mut script = vec![Turn::shell("pytest")];
        script.extend((0..5).map(|i| Turn::text(&format!("Finished ({i})."))));
        let model = ModelServer::start(script);
        let result = s.run(&gemini, &model, mode);
        let requests = model.requests();
        // The test run, the first answer, then three times back to work: five model calls.
        assert_eq!(requests.len(), 5, "{mode}: {result}");
        let failed = function_responses(&requests[1]).join(" ");
        assert!(failed.contains("2 tests failed"), "{mode}: {failed}");
        // Gemini CLI sends a refused stop's reason as the next user message.
        for (i, r) in requests[2..].iter().enumerate() {
            let told = last_content_text(r);
            assert!(
                told.contains("The last test run failed"),
                "{mode}: call {} was not sent back to work: {told}",
                i + 3
            );
        }
        eprintln!(
            "{mode}: sent back to work {} times, then let stop ({})",
            requests.len() - 2,
            result["response"]
        );
    }
}
