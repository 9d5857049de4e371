//! Backtests of Claude Code transcripts, line by line.

use super::*;

fn assistant(id: &str, stop: &str, blocks: Value, tokens: u64) -> String {
    json!({"type": "assistant", "cwd": "/home/ada/app", "message": {
        "id": id, "model": "claude-sonnet-4-5", "role": "assistant", "content": blocks,
        "stop_reason": stop,
        "usage": {"input_tokens": tokens, "output_tokens": 10}}})
    .to_string()
}

fn tool_use(id: &str, command: &str) -> Value {
    json!({"type": "tool_use", "id": id, "name": "Bash", "input": {"command": command}})
}

fn result(id: &str, content: &str, is_error: bool) -> String {
    json!({"type": "user", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": id, "content": content, "is_error": is_error}]}})
    .to_string()
}

fn prompt(text: &str) -> String {
    json!({"type": "user", "cwd": "/home/ada/app", "message": {"role": "user", "content": text}})
        .to_string()
}

/// A supervisor with one rule, written from `toml` into a folder of its own.
fn one_rule(toml: &str) -> Warden {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("rule.toml"), toml).unwrap();
    Warden::builder().rules_dir(dir.path()).build().unwrap()
}

fn replay(warden: &Warden, lines: &[String]) -> Vec<Replayed> {
    let config = ClaudeCodeConfig::default();
    let mut b = Backtest::new(warden, &config, Options::default(), "s1");
    let mut out: Vec<Replayed> = lines.iter().flat_map(|l| b.line(l.as_bytes())).collect();
    out.extend(b.finish());
    out
}

fn events(r: &[Replayed]) -> Vec<String> {
    r.iter()
        .map(|r| match &r.payload.tool_name {
            Some(t) => format!("{} {t}", r.payload.event_name),
            None => r.payload.event_name.clone(),
        })
        .collect()
}

#[test]
fn a_transcript_becomes_the_live_hooks_payloads_in_order() {
    let warden = Warden::builder().builtin_rules().build().unwrap();
    let lines = [
        r#"{"type":"summary","summary":"old"}"#.to_string(),
        prompt("fix it"),
        // Two parallel calls of one model call, then their results.
        assistant(
            "m1",
            "tool_use",
            json!([tool_use("t1", "ls"), tool_use("t2", "cat x")]),
            1000,
        ),
        result("t1", "a b", false),
        result("t2", "no such file", true),
        // A subagent's line, a meta line, a slash command: not the main session's hooks.
        json!({"type": "assistant", "isSidechain": true, "message": {"id": "s", "content": [tool_use("t9", "ls")]}}).to_string(),
        json!({"type": "user", "isMeta": true, "message": {"content": "meta"}}).to_string(),
        prompt("<command-name>/clear</command-name>"),
        assistant("m2", "end_turn", json!([{"type": "text", "text": "done"}]), 1200),
        "not json".to_string(),
        prompt("and again"),
        prompt("[Request interrupted by user]"),
    ];
    let r = replay(&warden, &lines);
    assert_eq!(
        events(&r),
        [
            "UserPromptSubmit",
            "PreToolUse Bash",
            "PreToolUse Bash",
            "PostToolUse Bash",
            "PostToolUseFailure Bash",
            "Stop",
            "UserPromptSubmit",
            "SessionEnd",
        ]
    );
    assert_eq!(r[1].line, 3);
    assert_eq!(r[4].payload.error.as_deref(), Some("no such file"));
    assert_eq!(r[1].payload.cwd.as_deref(), Some("/home/ada/app"));
    // The first tool call's model call is the prompt's turn: no new turn. Each tick is
    // reported.
    assert_eq!(
        r[1].ticks.iter().map(|t| t.hook).collect::<Vec<_>>(),
        [Hook::OnToolCall]
    );
}

#[test]
fn a_refused_call_has_no_result_and_a_call_refused_when_recorded_neither() {
    let warden = one_rule(
        "[rule]\nid = \"no-curl\"\ntrigger = \"on_tool_call\"\ntool = [\"Bash\"]\n\
         [condition]\nexpression = \"'curl' in tool.shell.programs\"\n\
         [action]\ntype = \"decide\"\ndecision = \"deny\"\nreason = \"no downloads\"\n",
    );
    let lines = [
        prompt("go"),
        assistant(
            "m1",
            "tool_use",
            json!([tool_use("t1", "curl example.com")]),
            10,
        ),
        result("t1", "<html>", false),
        assistant("m2", "tool_use", json!([tool_use("t2", "rm -rf /")]), 20),
        result("t2", "PreToolUse:Bash hook error: no", true),
    ];
    let r = replay(&warden, &lines);
    assert_eq!(
        events(&r),
        // The transcript ends in the turn: its Stop comes at the end.
        [
            "UserPromptSubmit",
            "PreToolUse Bash",
            "PreToolUse Bash",
            "Stop",
            "SessionEnd"
        ]
    );
    assert!(r[1].refused);
    assert_eq!(
        r[1].ticks.last().unwrap().decision,
        Some(("deny", "no-curl".to_string(), "no downloads".to_string()))
    );
    assert!(!r[2].refused);
}

#[test]
fn claude_codes_own_lines_are_not_prompts_and_a_call_written_twice_stops_once() {
    let warden = Warden::builder().build().unwrap();
    let summary = json!({"type": "user", "isCompactSummary": true, "message": {"role": "user", "content": "This session is being continued..."}}).to_string();
    let lines = [
        prompt("go"),
        // One model call written as two lines (thinking, then text), both ending the turn.
        assistant(
            "m1",
            "end_turn",
            json!([{"type": "thinking", "thinking": "hm"}]),
            10,
        ),
        assistant(
            "m1",
            "end_turn",
            json!([{"type": "text", "text": "done"}]),
            10,
        ),
        summary,
        prompt("<bash-input>ls</bash-input>"),
        prompt("<task-notification>done</task-notification>"),
        // A prompt, then one with a byte that is not UTF-8.
        "{\"type\":\"user\",\"message\":{\"content\":\"caf\u{e9}\"}}".to_string(),
    ];
    let mut raw: Vec<Vec<u8>> = lines.iter().map(|l| l.clone().into_bytes()).collect();
    let mut bad = prompt("ok").into_bytes();
    let at = bad.windows(2).position(|w| w == b"ok").unwrap();
    bad[at] = 0xff;
    raw.push(bad);
    let config = ClaudeCodeConfig::default();
    let mut b = Backtest::new(&warden, &config, Options::default(), "s1");
    let mut r: Vec<Replayed> = raw.iter().flat_map(|l| b.line(l)).collect();
    assert_eq!(b.unread(), 0);
    r.extend(b.finish());
    assert_eq!(
        events(&r),
        [
            "UserPromptSubmit",
            "Stop",
            "UserPromptSubmit",
            "Stop",
            "UserPromptSubmit",
            "Stop",
            "SessionEnd"
        ]
    );
    assert_eq!(r[2].payload.prompt.as_deref(), Some("caf\u{e9}"));
    assert_eq!(r[4].payload.prompt.as_deref(), Some("\u{fffd}k"));
}

#[test]
fn after_a_stop_nothing_is_replayed_until_the_next_prompt() {
    let warden = one_rule(
        "[rule]\nid = \"stop-on-cat\"\ntrigger = \"on_tool_call\"\n\
         [condition]\nexpression = \"'cat' in tool.shell.programs\"\n\
         [action]\ntype = \"decide\"\ndecision = \"stop\"\nreason = \"enough\"\n",
    );
    let lines = [
        prompt("go"),
        assistant(
            "m1",
            "tool_use",
            json!([tool_use("t1", "cat x"), tool_use("t2", "ls")]),
            10,
        ),
        result("t1", "x", false),
        result("t2", "a", false),
        assistant("m2", "tool_use", json!([tool_use("t3", "cat y")]), 20),
        result("t3", "y", false),
        assistant(
            "m3",
            "end_turn",
            json!([{"type": "text", "text": "done"}]),
            30,
        ),
        prompt("again"),
        assistant("m4", "tool_use", json!([tool_use("t4", "ls")]), 40),
    ];
    let r = replay(&warden, &lines);
    assert_eq!(
        events(&r),
        [
            "UserPromptSubmit",
            "PreToolUse Bash",
            "UserPromptSubmit",
            "PreToolUse Bash",
            "Stop",
            "SessionEnd"
        ]
    );
    assert!(r[1].refused);
    assert_eq!(r[1].answer.as_ref().unwrap()["continue"], false);
}

#[test]
fn a_subagents_file_is_not_a_session() {
    let warden = Warden::builder().build().unwrap();
    let line = json!({"type": "assistant", "isSidechain": true, "message": {"id": "s", "content": [tool_use("t9", "ls")]}}).to_string();
    assert!(replay(&warden, &[line]).is_empty());
}

#[test]
fn each_call_sees_the_usage_of_its_own_model_call() {
    let warden = Warden::builder().build().unwrap();
    let lines = [
        prompt("go"),
        assistant("m1", "tool_use", json!([tool_use("t1", "ls")]), 100_000),
        assistant("m2", "tool_use", json!([tool_use("t2", "ls")]), 150_000),
    ];
    let config = ClaudeCodeConfig::default();
    let mut b = Backtest::new(&warden, &config, Options::default(), "s1");
    for l in &lines {
        b.line(l.as_bytes());
    }
    // The second model call started a turn of its own.
    let turns = b.session.facts().turn.number;
    assert_eq!(turns, 2);
    let usage = b.session.facts().turn.token_usage;
    assert!((usage - 150_010.0 / 200_000.0).abs() < 1e-9, "{usage}");
}
