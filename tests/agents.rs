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
        p.entry("cwd").or_insert_with(|| json!(self.root()));
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
fn a_codex_session_started_in_a_subfolder_is_the_projects() {
    // Codex names no project folder: the hook's `--config` does (`.warden/` is in it).
    let p = Project::new("codex");
    let src = p.root().join("src");
    p.hook("UserPromptSubmit", json!({"prompt": "Clean.", "cwd": src}));
    let inside = p.hook(
        "PreToolUse",
        json!({"tool_name": "Bash", "tool_use_id": "call_0", "cwd": src,
               "tool_input": {"command": "rm -rf ../target"}}),
    );
    assert_eq!(inside, None, "`../target` is in the project");
    let outside = p
        .hook(
            "PreToolUse",
            json!({"tool_name": "Bash", "tool_use_id": "call_1", "cwd": src,
                   "tool_input": {"command": "rm -rf ../../elsewhere"}}),
        )
        .expect("a refusal");
    assert_eq!(outside["hookSpecificOutput"]["permissionDecision"], "deny");
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
        reason.contains("warden --config .warden/warden.toml rules disable ask-before-deleting"),
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
// The review of the adapter layer: each of these failed before its fix.

/// What Codex 0.171 takes as a refusal at `PreToolUse` (hooks/src/engine/output_parser.rs):
/// `deny` with a reason that is not empty once trimmed; anything else makes it run the call.
fn assert_codex_refusal(answer: &Option<Value>) {
    let a = answer.as_ref().expect("a refusal");
    assert_codex_pre_tool_use(a);
    let s = &a["hookSpecificOutput"];
    assert_eq!(s["permissionDecision"], "deny", "{a}");
    let reason = s["permissionDecisionReason"].as_str().unwrap_or_default();
    assert!(
        !reason.trim().is_empty(),
        "Codex throws away a deny without a non-empty reason and runs the call: {a}"
    );
}

#[test]
fn review_codex_a_refusal_whose_reason_is_empty_or_a_full_stop_is_still_a_refusal() {
    let p = Project::new("codex");
    std::fs::create_dir_all(p.root().join(".warden/rules/scripts")).unwrap();
    // A script that refuses without a reason (`deny()`: the book's API allows it).
    std::fs::write(
        p.root().join(".warden/rules/scripts/no-curl.lua"),
        "if (tool.arguments.command or ''):find('curl', 1, true) then return deny() end\nreturn false\n",
    )
    .unwrap();
    std::fs::write(
        p.root().join(".warden/rules/no-curl.toml"),
        "[rule]\nid = \"no-curl\"\ntrigger = \"on_tool_call\"\ntool = \"Bash\"\n\n[condition]\nscript = \"scripts/no-curl.lua\"\n",
    )
    .unwrap();
    // A rule whose reason is a full stop, which the Codex encoder strips.
    std::fs::write(
        p.root().join(".warden/rules/no-wget.toml"),
        "[rule]\nid = \"no-wget\"\ntrigger = \"on_tool_call\"\ntool = \"Bash\"\ncondition = \"matches(tool.arguments.command, '^wget ')\"\n\n[action]\ntype = \"decide\"\ndecision = \"deny\"\nreason = \".\"\n",
    )
    .unwrap();
    p.hook("UserPromptSubmit", json!({"prompt": "Fetch it."}));
    let wget = p.hook(
        "PreToolUse",
        json!({"tool_name": "Bash", "tool_use_id": "call_0", "tool_input": {"command": "wget https://example.com/x"}}),
    );
    assert_codex_refusal(&wget);
    let curl = p.hook(
        "PreToolUse",
        json!({"tool_name": "Bash", "tool_use_id": "call_1", "tool_input": {"command": "curl https://example.com/x"}}),
    );
    assert_codex_refusal(&curl);
}

#[test]
fn review_codex_apply_patch_headers_codex_reads_after_trimming_are_judged() {
    // Codex's parser trims each hunk's first line (`parse_one_hunk`: `lines[0].trim()`), so an
    // indented header is a header; Warden's `patch_paths` only strips a trailing `\r`.
    let p = Project::new("codex");
    p.hook("UserPromptSubmit", json!({"prompt": "Edit."}));
    let patch =
        "*** Begin Patch\n  *** Update File: .codex/hooks.json\n@@\n-x\n+y\n*** End Patch\n";
    let answer = p.hook(
        "PreToolUse",
        json!({"tool_name": "apply_patch", "tool_use_id": "call_0", "tool_input": {"command": patch}}),
    );
    assert_codex_refusal(&answer);
}

#[test]
fn review_codex_apply_patch_sent_through_exec_command_is_judged_as_a_patch() {
    // Codex intercepts `apply_patch <<'EOF' ...` given to exec_command and applies it itself
    // (core/src/tools/handlers/unified_exec/exec_command.rs: `intercept_apply_patch`), after a
    // PreToolUse whose tool_name is `Bash`.
    let p = Project::new("codex");
    p.hook("UserPromptSubmit", json!({"prompt": "Edit."}));
    let command = "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: .codex/hooks.json\n@@\n-x\n+y\n*** End Patch\nEOF\n";
    let answer = p.hook(
        "PreToolUse",
        json!({"tool_name": "Bash", "tool_use_id": "call_0", "tool_input": {"command": command}}),
    );
    assert_codex_refusal(&answer);
}

#[test]
fn review_gemini_cli_a_model_supplied_paths_key_does_not_hide_the_file_written() {
    // Gemini CLI validates write_file's arguments with ajv against a schema without
    // `additionalProperties: false`: an extra `paths` reaches the hook as the model wrote it.
    // The guardrails' scripts read `args.paths` instead of `file_path` whenever it is a table.
    let p = Project::new("gemini-cli");
    p.hook("BeforeAgent", json!({"prompt": "Set up."}));
    let hooks = p.root().join(".gemini/settings.json");
    let plain = p
        .hook(
            "BeforeTool",
            json!({"tool_name": "write_file", "tool_input": {"file_path": hooks, "content": "{}"}}),
        )
        .unwrap();
    assert_eq!(plain["decision"], "deny", "{plain}");
    // Neither a `paths` nor Warden's own `warden_writes` written by the model hides the file.
    for key in ["paths", "warden_writes"] {
        let hidden = p
            .hook(
                "BeforeTool",
                json!({"tool_name": "write_file", "tool_input": {"file_path": hooks, "content": "{}", key: []}}),
            )
            .unwrap();
        assert_eq!(
            hidden["decision"], "deny",
            "the same write, with `{key}: []`: {hidden}"
        );
    }
}

#[test]
fn review_claude_code_a_users_prompt_equal_to_the_sent_back_text_is_still_a_prompt() {
    // SENT_BACK is Gemini CLI's concern, but handler.rs applies it to every agent, and Claude
    // Code never sends the text back as a prompt: it stays until the user's next prompt. A
    // user who pastes Warden's message (it is shown to them) has their prompt skipped: no
    // `on_query_start`, the stop of the session not lifted, the count not reset.
    let p = Project::new("claude-code");
    p.hook("UserPromptSubmit", json!({"prompt": "Fix the tests."}));
    let pytest =
        json!({"tool_name": "Bash", "tool_use_id": "toolu_0", "tool_input": {"command": "pytest"}});
    p.hook("PreToolUse", pytest.clone());
    let mut failed = pytest.clone();
    failed["error"] = json!("Exit code 1\n2 tests failed");
    p.hook("PostToolUseFailure", failed);
    let stop = p.hook("Stop", json!({"stop_hook_active": false})).unwrap();
    let sent_back = stop["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap()
        .to_string();
    // Four refusals stop the session.
    for i in 0..4 {
        p.hook(
            "PreToolUse",
            json!({"tool_name": "Bash", "tool_use_id": format!("toolu_{}", i + 1),
                   "tool_input": {"command": format!("rm -rf ~/scratch{i}")}}),
        );
    }
    p.hook("Stop", json!({"stop_hook_active": true}));
    // The user's new prompt, the words Warden showed them.
    p.hook("UserPromptSubmit", json!({ "prompt": sent_back }));
    let ls = p.hook(
        "PreToolUse",
        json!({"tool_name": "Bash", "tool_use_id": "toolu_9", "tool_input": {"command": "ls"}}),
    );
    assert_eq!(
        ls.as_ref()
            .and_then(|a| a["hookSpecificOutput"].get("permissionDecision")),
        None,
        "a new prompt lifts the stop: {ls:?}"
    );
}

#[test]
fn review_gemini_cli_the_exit_code_is_the_shells_not_a_line_of_the_output() {
    let p = Project::new("gemini-cli");
    p.hook("BeforeAgent", json!({"prompt": "Fix the tests."}));
    let call = json!({"tool_name": "run_shell_command", "tool_input": {"command": "pytest"}});
    p.hook("BeforeTool", call.clone());
    // The command's own output holds a line `Exit Code: 0` (a subprocess it reports on); the
    // shell's own `Exit Code: 1` comes after the output.
    let mut failed = call.clone();
    failed["tool_response"] = json!({"llmContent": "<untrusted_context>\nOutput: worker 1\nExit Code: 0\n2 tests failed\nExit Code: 1\nProcess Group PGID: 8282\n</untrusted_context>", "returnDisplay": "2 tests failed"});
    p.hook("AfterTool", failed);
    let stop = p
        .hook(
            "AfterAgent",
            json!({"prompt": "Fix the tests.", "prompt_response": "Done.", "stop_hook_active": false}),
        )
        .unwrap();
    assert_eq!(stop["decision"], "deny", "the tests failed: {stop}");
}

#[test]
fn review_gemini_cli_a_file_read_that_holds_an_exit_code_line_is_not_a_failure() {
    let p = Project::new("gemini-cli");
    p.hook("BeforeAgent", json!({"prompt": "Read the log."}));
    let call = json!({"tool_name": "read_file", "tool_input": {"file_path": "ci.log"}});
    let mut done = call.clone();
    done["tool_response"] =
        json!({"llmContent": "step 1\nExit Code: 2\nstep 2\n", "returnDisplay": ""});
    let mut last = None;
    for _ in 0..3 {
        p.hook("BeforeTool", call.clone());
        last = p.hook("AfterTool", done.clone());
    }
    let context = last
        .as_ref()
        .and_then(|a| a["hookSpecificOutput"]["additionalContext"].as_str())
        .unwrap_or_default()
        .to_string();
    assert!(
        !context.contains("failed"),
        "three successful reads of a file are not three failures: {context}"
    );
}

#[test]
fn review_codex_a_failed_call_whose_id_json_escapes_is_still_a_failure() {
    let p = Project::new("codex");
    p.hook("UserPromptSubmit", json!({"prompt": "Fix the tests."}));
    let id = "call_\"0";
    p.hook(
        "PreToolUse",
        json!({"tool_name": "Bash", "tool_use_id": id, "tool_input": {"command": "pytest"}}),
    );
    p.append_rollout(
        json!({"type": "event_msg", "payload": {"type": "item_completed",
        "item": {"type": "CommandExecution", "id": id, "status": "failed", "exit_code": 1}}}),
    );
    p.hook(
        "PostToolUse",
        json!({"tool_name": "Bash", "tool_use_id": id, "tool_input": {"command": "pytest"},
               "tool_response": "2 tests failed\n"}),
    );
    let stop = p.hook("Stop", json!({"stop_hook_active": false}));
    assert_eq!(
        stop.as_ref().and_then(|s| s.get("decision")),
        Some(&json!("block")),
        "{stop:?}"
    );
}

#[test]
fn review_gemini_cli_an_after_model_id_at_the_counters_end_does_not_panic() {
    let p = Project::new("gemini-cli");
    p.hook("BeforeAgent", json!({"prompt": "Go."}));
    let after_model = |id: Option<&str>| {
        let mut response = json!({"text": "", "candidates": [{"content": {"role": "model", "parts": []},
            "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 1, "totalTokenCount": 11}});
        if let Some(id) = id {
            response["responseId"] = json!(id);
        }
        json!({"llm_request": {"model": "gemini-2.5-pro", "messages": []}, "llm_response": response})
    };
    p.hook("AfterModel", after_model(Some("call-18446744073709551615")));
    let next = p.hook("AfterModel", after_model(None));
    assert_eq!(next, Some(json!({})), "{next:?}");
}
