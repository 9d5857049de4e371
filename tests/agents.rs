//! Codex and Gemini CLI supervised through `warden hook codex` and `warden hook gemini-cli`,
//! one process per event as the agents run them, in a project set up by `warden init`: the
//! payloads are shaped as the real CLIs send them (recorded from Codex 0.171 and Gemini CLI
//! 0.61), and the answers are checked against what each CLI takes. (The real CLIs drive the
//! same hooks in `tests/codex_cli.rs` and `tests/gemini_cli.rs`.)

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

/// A project set up by `warden init AGENT` (the built-in rules and the guardrails).
struct Project {
    dir: tempfile::TempDir,
    agent: &'static str,
    session: String,
}

impl Project {
    fn new(agent: &'static str) -> Project {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src")).unwrap();
        let init = Command::new(env!("CARGO_BIN_EXE_warden"))
            .args(["init", agent, "--dir"])
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(init.status.success(), "{init:?}");
        Project {
            dir,
            agent,
            session: "01a2243d-d101-7fe1-b91f-b4c9332385cc".into(),
        }
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    /// Codex's session file.
    fn rollout(&self) -> PathBuf {
        self.root().join("rollout.jsonl")
    }

    fn append_rollout(&self, line: Value) {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.rollout())
            .unwrap();
        writeln!(f, "{line}").unwrap();
    }

    /// Runs the hook command `warden init` wrote for this agent on `payload` (the common fields
    /// added); its answer (`None` when it printed nothing).
    fn hook(&self, event: &str, mut payload: Value) -> Option<Value> {
        let p = payload.as_object_mut().unwrap();
        p.insert("session_id".into(), json!(self.session));
        p.insert("hook_event_name".into(), json!(event));
        p.insert("cwd".into(), json!(self.root()));
        match self.agent {
            "codex" => {
                p.insert("transcript_path".into(), json!(self.rollout()));
                p.insert("model".into(), json!("gpt-5.5"));
                p.insert("permission_mode".into(), json!("bypassPermissions"));
                p.insert(
                    "turn_id".into(),
                    json!("01a2243d-d11d-7972-be1a-e3272369c1fe"),
                );
            }
            _ => {
                p.insert(
                    "transcript_path".into(),
                    json!(self.root().join("chats/session.jsonl")),
                );
                p.insert("timestamp".into(), json!("2026-11-28T22:19:20.771Z"));
            }
        }
        let mut child = Command::new(env!("CARGO_BIN_EXE_warden"))
            .args(["hook", self.agent, "--config"])
            .arg(self.root().join(".warden/warden.toml"))
            .env("GEMINI_PROJECT_DIR", self.root())
            .env_remove("CLAUDE_PROJECT_DIR")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(payload.to_string().as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{out:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        (!text.trim().is_empty()).then(|| serde_json::from_str(&text).unwrap())
    }
}

/// What Codex takes at `PreToolUse` (its published output schema, and what 0.171 supports:
/// `continue`, `stopReason`, `suppressOutput` or `ask` there make it run the call).
fn assert_codex_pre_tool_use(answer: &Value) {
    let keys: Vec<&str> = answer.as_object().unwrap().keys().map(|k| &**k).collect();
    for k in &keys {
        assert!(
            ["hookSpecificOutput", "systemMessage"].contains(k),
            "{answer}"
        );
    }
    let specific = answer["hookSpecificOutput"].as_object().unwrap();
    for k in specific.keys() {
        assert!(
            [
                "hookEventName",
                "permissionDecision",
                "permissionDecisionReason",
                "updatedInput",
                "additionalContext"
            ]
            .contains(&k.as_str()),
            "{answer}"
        );
    }
    assert_eq!(specific["hookEventName"], "PreToolUse");
    assert_ne!(specific.get("permissionDecision"), Some(&json!("ask")));
}

#[test]
fn codex_refusals_are_denials_codex_takes_and_the_session_is_durable_across_processes() {
    let p = Project::new("codex");
    assert!(p.root().join(".codex/hooks.json").is_file());
    assert_eq!(p.hook("SessionStart", json!({"source": "startup"})), None);
    assert_eq!(
        p.hook("UserPromptSubmit", json!({"prompt": "Tidy up."})),
        None
    );
    let mut reasons = Vec::new();
    for i in 0..5 {
        let answer = p
            .hook(
                "PreToolUse",
                json!({"tool_name": "Bash", "tool_use_id": format!("call_{i}"),
                       "tool_input": {"command": format!("rm -rf ~/scratch{i}")}}),
            )
            .expect("a refusal");
        assert_codex_pre_tool_use(&answer);
        assert_eq!(answer["hookSpecificOutput"]["permissionDecision"], "deny");
        reasons.push(
            answer["hookSpecificOutput"]["permissionDecisionReason"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    assert!(reasons[0].contains("scratch0"), "{reasons:?}");
    // Four refusals in a row (each in its own process): the session stops, and Codex, which
    // cannot be stopped from PreToolUse, has every call refused from then on.
    assert!(reasons[4].contains("the session stops here"), "{reasons:?}");
    let harmless = p
        .hook(
            "PreToolUse",
            json!({"tool_name": "Bash", "tool_use_id": "call_9", "tool_input": {"command": "ls"}}),
        )
        .expect("still refused");
    assert_eq!(harmless["hookSpecificOutput"]["permissionDecision"], "deny");
    // A person's new prompt starts again.
    p.hook("UserPromptSubmit", json!({"prompt": "Go on."}));
    assert_eq!(
        p.hook(
            "PreToolUse",
            json!({"tool_name": "Bash", "tool_use_id": "call_10", "tool_input": {"command": "ls"}}),
        ),
        None
    );
}

#[test]
fn codex_cannot_ask_so_an_ask_is_a_refusal_that_says_how_to_approve() {
    let p = Project::new("codex");
    std::fs::write(
        p.root().join(".warden/rules/ask-before-deleting.toml"),
        r#"
[rule]
id = "ask-before-deleting"
trigger = "on_tool_call"
tool = "Bash"
condition = "matches(tool.arguments.command, '^rm ')"

[action]
type = "decide"
decision = "ask"
reason = "Deleting needs a person's yes"
"#,
    )
    .unwrap();
    p.hook("UserPromptSubmit", json!({"prompt": "Tidy up."}));
    let answer = p
        .hook(
            "PreToolUse",
            json!({"tool_name": "Bash", "tool_use_id": "call_0", "tool_input": {"command": "rm notes.txt"}}),
        )
        .unwrap();
    assert_codex_pre_tool_use(&answer);
    let s = &answer["hookSpecificOutput"];
    assert_eq!(s["permissionDecision"], "deny");
    let reason = s["permissionDecisionReason"].as_str().unwrap();
    assert!(
        reason.starts_with("Deleting needs a person's yes"),
        "{reason}"
    );
    assert!(
        reason.contains("warden rules disable ask-before-deleting"),
        "{reason}"
    );
}

#[test]
fn codex_apply_patch_writes_are_judged_by_the_file_rules() {
    let p = Project::new("codex");
    p.hook("UserPromptSubmit", json!({"prompt": "Edit."}));
    let patch = format!(
        "*** Begin Patch\n*** Add File: {}/notes.txt\n+hi\n*** Update File: .codex/hooks.json\n@@\n-x\n+y\n*** End Patch\n",
        p.root().display()
    );
    let answer = p
        .hook(
            "PreToolUse",
            json!({"tool_name": "apply_patch", "tool_use_id": "call_0", "tool_input": {"command": patch}}),
        )
        .unwrap();
    assert_codex_pre_tool_use(&answer);
    assert_eq!(answer["hookSpecificOutput"]["permissionDecision"], "deny");
    assert!(
        answer["hookSpecificOutput"]["permissionDecisionReason"]
            .as_str()
            .unwrap()
            .contains(".codex/hooks.json")
    );
    let inside = "*** Begin Patch\n*** Add File: notes.txt\n+hi\n*** End Patch\n";
    assert_eq!(
        p.hook(
            "PreToolUse",
            json!({"tool_name": "apply_patch", "tool_use_id": "call_1", "tool_input": {"command": inside}}),
        ),
        None
    );
}

#[test]
fn codex_failing_tests_send_the_agent_back_at_most_three_times() {
    let p = Project::new("codex");
    p.hook("UserPromptSubmit", json!({"prompt": "Fix the tests."}));
    p.hook(
        "PreToolUse",
        json!({"tool_name": "Bash", "tool_use_id": "call_0", "tool_input": {"command": "pytest"}}),
    );
    // Codex has no failure event: its session file records the exit code.
    p.append_rollout(
        json!({"type": "event_msg", "payload": {"type": "item_completed",
        "item": {"type": "CommandExecution", "id": "call_0", "status": "failed", "exit_code": 1,
                 "aggregated_output": "2 tests failed\n"}}}),
    );
    p.hook(
        "PostToolUse",
        json!({"tool_name": "Bash", "tool_use_id": "call_0", "tool_input": {"command": "pytest"},
               "tool_response": "2 tests failed\n"}),
    );
    let mut sent_back = 0;
    for i in 0..6 {
        let answer = p.hook(
            "Stop",
            json!({"stop_hook_active": i > 0, "last_assistant_message": "Done."}),
        );
        match answer {
            Some(a) if a.get("decision") == Some(&json!("block")) => {
                assert!(
                    a["reason"].as_str().unwrap().contains("test run failed"),
                    "{a}"
                );
                let keys: Vec<&String> = a.as_object().unwrap().keys().collect();
                assert_eq!(keys, ["decision", "reason"], "only Codex's Stop fields");
                sent_back += 1;
            }
            _ => break,
        }
    }
    assert_eq!(sent_back, 3, "`[claude_code] max_continues` caps it");
}

#[test]
fn codex_token_usage_is_read_from_its_session_file() {
    let p = Project::new("codex");
    p.hook("UserPromptSubmit", json!({"prompt": "Go."}));
    for (i, input) in [(0, 1000), (1, 250_000)] {
        p.append_rollout(json!({"type": "token_usage_record", "payload": {
            "response_id": format!("resp_{i}"),
            "usage": {"input_tokens": input, "cached_input_tokens": 0, "output_tokens": 10}}}));
        p.append_rollout(
            json!({"type": "event_msg", "payload": {"type": "token_count",
            "info": {"model_context_window": 258_400}}}),
        );
        let answer = p.hook(
            "PreToolUse",
            json!({"tool_name": "Bash", "tool_use_id": format!("call_{i}"), "tool_input": {"command": "ls"}}),
        );
        if i == 0 {
            assert_eq!(answer, None);
        } else {
            let a = answer.expect("the budget warning");
            assert_codex_pre_tool_use(&a);
            let context = a["hookSpecificOutput"]["additionalContext"]
                .as_str()
                .unwrap();
            assert!(context.contains("Token budget at 96%"), "{context}");
        }
    }
}

#[test]
fn gemini_cli_refusals_and_the_durable_session() {
    let p = Project::new("gemini-cli");
    assert!(p.root().join(".gemini/settings.json").is_file());
    assert_eq!(
        p.hook("SessionStart", json!({"source": "startup"})),
        Some(json!({}))
    );
    p.hook("BeforeAgent", json!({"prompt": "Tidy up."}));
    let mut last = json!(null);
    for i in 0..4 {
        last = p
            .hook(
                "BeforeTool",
                json!({"tool_name": "run_shell_command",
                       "tool_input": {"command": format!("rm -rf ~/scratch{i}"), "description": "clean"}}),
            )
            .unwrap();
        assert_eq!(last["decision"], "deny", "{last}");
    }
    // The fourth refusal in a row stops the session: Gemini CLI ends the run.
    assert_eq!(last["continue"], false, "{last}");
    assert!(
        last["stopReason"]
            .as_str()
            .unwrap()
            .contains("session stops")
    );
}

#[test]
fn gemini_cli_after_model_usage_brings_the_budget_warning_with_the_tool_result() {
    let p = Project::new("gemini-cli");
    p.hook("BeforeAgent", json!({"prompt": "Go."}));
    let after_model = |prompt_tokens: u64| {
        json!({"llm_request": {"model": "gemini-2.5-pro", "messages": []},
               "llm_response": {"text": "", "candidates": [{"content": {"role": "model", "parts": []},
                   "finishReason": "STOP", "index": 0}],
                   "usageMetadata": {"promptTokenCount": prompt_tokens, "candidatesTokenCount": 10,
                                     "totalTokenCount": prompt_tokens + 10}}})
    };
    let call = json!({"tool_name": "read_file", "tool_input": {"file_path": "src/main.rs"}});
    let mut done = call.clone();
    done["tool_response"] = json!({"llmContent": "fn main() {}", "returnDisplay": ""});
    // The prompt's first model call, then a second that fills the context: its turn starts at
    // its tool call.
    p.hook("AfterModel", after_model(1_000));
    p.hook("BeforeTool", call.clone());
    p.hook("AfterTool", done.clone());
    p.hook("AfterModel", after_model(1_000_000));
    let before = p.hook("BeforeTool", call.clone()).unwrap();
    assert_eq!(before.get("decision"), None, "{before}");
    // Gemini CLI reads context after a tool (`AfterTool`), not before it.
    let after = p.hook("AfterTool", done).unwrap();
    assert_eq!(after["hookSpecificOutput"]["hookEventName"], "AfterTool");
    let context = after["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap();
    assert!(context.contains("Token budget at 95%"), "{context}");
}

#[test]
fn gemini_cli_sent_back_prompts_are_not_the_users_and_the_cap_holds() {
    let p = Project::new("gemini-cli");
    p.hook("BeforeAgent", json!({"prompt": "Fix the tests."}));
    let call = json!({"tool_name": "run_shell_command", "tool_input": {"command": "pytest"}});
    p.hook("BeforeTool", call.clone());
    let mut failed = call.clone();
    failed["tool_response"] = json!({"llmContent": "<untrusted_context>\nOutput: 2 tests failed\nExit Code: 1\n</untrusted_context>", "returnDisplay": "2 tests failed"});
    // Gemini CLI's AfterTool of a failed command.
    p.hook("AfterTool", failed);
    let mut sent_back = 0;
    for i in 0..6 {
        let answer = p
            .hook(
                "AfterAgent",
                json!({"prompt": "Fix the tests.", "prompt_response": "Done.", "stop_hook_active": i > 0}),
            )
            .unwrap();
        if answer.get("decision") != Some(&json!("deny")) {
            break;
        }
        sent_back += 1;
        // Gemini CLI sends the reason on as a new prompt: not the user's, so the count goes on.
        let reason = answer["reason"].as_str().unwrap().to_string();
        p.hook("BeforeAgent", json!({ "prompt": reason }));
    }
    assert_eq!(sent_back, 3, "{sent_back}");
}

#[test]
fn a_codex_session_file_is_backtested_as_its_hooks() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/codex/rollout.jsonl");
    let out = Command::new(env!("CARGO_BIN_EXE_warden"))
        .args([
            "--builtin",
            "--plugins",
            "builtin:guardrails",
            "replay",
            "--from",
            "codex",
            "--format",
            "text",
        ])
        .arg(&data)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    // The recorded session ran a failing `pytest`, then the agent stopped: the guardrails
    // would have sent it back.
    assert!(
        text.contains("PostToolUse Bash `pytest`: guardrails/record-test-failure fired"),
        "{text}"
    );
    assert!(
        text.contains("Stop Stop: continue (guardrails/keep-working-while-tests-fail)"),
        "{text}"
    );
}

#[test]
fn a_gemini_cli_chat_record_is_backtested_as_its_hooks() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/gemini-cli/chat.jsonl");
    let out = Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(["--builtin", "replay", "--from", "gemini-cli", "--summary"])
        .args(["--format", "json"])
        .arg(&data)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    // A prompt, a shell call, its (failed) result, the stop, the end.
    assert_eq!(summary["transcripts"], 1, "{summary}");
    assert_eq!(summary["events"], 5, "{summary}");
    assert_eq!(summary["errors"], 0, "{summary}");
}
