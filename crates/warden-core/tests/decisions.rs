//! Decisions through the public API: rules that allow, ask, deny, rewrite, keep the agent
//! working or stop it; one ruling per event, merged by restrictiveness and priority; fail
//! closed; decisions from Lua and from behaviors; and every misuse a load error at its line.

use std::fs;
use std::path::Path;

use serde_json::json;
use warden_core::{Decision, Event, Hook, Proceed, ScriptLimits, Warden};

/// A Warden on `files`, written into `dir`. Its scripts' time limit is a minute, a hang
/// detector: a script expected to end does so within milliseconds, which the clock of a loaded
/// machine must not turn into a time limit.
fn warden(dir: &Path, files: &[(&str, &str)]) -> Warden {
    warden_timed(dir, files, std::time::Duration::from_secs(60))
}

/// The same, its scripts' time limit `timeout` (for scripts the time limit is to stop).
fn warden_timed(dir: &Path, files: &[(&str, &str)], timeout: std::time::Duration) -> Warden {
    for (name, text) in files {
        let p = dir.join(name);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }
    Warden::builder()
        .rules_dir(dir)
        .script_limits(ScriptLimits {
            timeout,
            ..ScriptLimits::default()
        })
        .build()
        .unwrap()
}

fn decide(id: &str, priority: i64, trigger: &str, condition: &str, decision: &str) -> String {
    format!(
        "[rule]\nid = \"{id}\"\ntrigger = \"{trigger}\"\npriority = {priority}\n[condition]\nexpression = \"{condition}\"\n\
         [action]\ntype = \"decide\"\ndecision = \"{decision}\"\nreason = \"{id} at {{{{ event.hook }}}}\"\n"
    )
}

fn bash(command: &str) -> Event {
    Event::tool_call("Bash", json!({ "command": command }))
}

#[test]
fn the_most_restrictive_decision_wins_and_the_loser_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let w = warden(
        dir.path(),
        &[
            (
                "a.toml",
                &decide("allow-reads", 300, "on_tool_call", "true", "allow"),
            ),
            (
                "b.toml",
                &decide(
                    "ask-shell",
                    200,
                    "on_tool_call",
                    "tool.name == 'Bash'",
                    "ask",
                ),
            ),
            (
                "c.toml",
                &decide(
                    "deny-rm",
                    100,
                    "on_tool_call",
                    "contains(tool.arguments.command, 'rm -rf')",
                    "deny",
                ),
            ),
        ],
    );
    assert!(w.diagnostics().is_empty(), "{:#?}", w.diagnostics());
    let mut s = w.session();
    let o = s.tick(Hook::OnToolCall, bash("rm -rf /"));
    let r = o.ruling.as_ref().unwrap();
    assert_eq!((r.decision, &*r.rule), (Some(Decision::Deny), "deny-rm"));
    assert_eq!(&*r.reason, "deny-rm at on_tool_call");
    assert_eq!(
        o.proceed(),
        Proceed::No {
            reason: "deny-rm at on_tool_call"
        }
    );
    let lost: Vec<(&str, String)> = o.overridden.iter().map(|x| (&*x.rule, x.why())).collect();
    assert_eq!(
        lost,
        [
            ("allow-reads", "deny beats allow".to_string()),
            ("ask-shell", "deny beats ask".to_string())
        ]
    );
    // A harmless command is asked about; another tool allowed.
    let o = s.tick(Hook::OnToolCall, bash("ls"));
    assert_eq!(
        o.proceed(),
        Proceed::Ask {
            reason: "ask-shell at on_tool_call",
            input: None
        }
    );
    let o = s.tick(Hook::OnToolCall, Event::tool_call("Read", json!({})));
    assert_eq!(o.ruling.as_ref().unwrap().decision, Some(Decision::Allow));
    assert_eq!(o.proceed(), Proceed::Yes);
}

#[test]
fn a_rewrite_changes_the_arguments_with_typed_values() {
    let dir = tempfile::tempdir().unwrap();
    let w = warden(
        dir.path(),
        &[(
            "clamp.toml",
            r#"[rule]
id = "clamp-limit"
trigger = "on_tool_call"
tool = "search"
condition = "get(tool.arguments, 'limit', 1000) > 50"

[action]
type = "rewrite"

[action.set]
"arguments.limit" = "{{ [tool.arguments.limit | default(1000), 50] | min }}"
"arguments.options.dry_run" = true
"#,
        )],
    );
    assert!(w.diagnostics().is_empty(), "{:#?}", w.diagnostics());
    let mut s = w.session();
    let o = s.tick(
        Hook::OnToolCall,
        Event::tool_call("search", json!({"q": "wal", "limit": 500})),
    );
    let want = json!({"q": "wal", "limit": 50, "options": {"dry_run": true}});
    assert_eq!(o.proceed(), Proceed::WithInput(&want));
    assert_eq!(o.ruling.as_ref().unwrap().name(), "rewrite");
    // Within the limit: nothing to rewrite.
    let o = s.tick(
        Hook::OnToolCall,
        Event::tool_call("search", json!({"limit": 10})),
    );
    assert!(o.ruling.is_none());
    // The path's parent is not a table: a rule error, and the call is untouched.
    let o = s.tick(
        Hook::OnToolCall,
        Event::tool_call("search", json!({"limit": 500, "options": "fast"})),
    );
    assert!(o.ruling.is_none(), "{:?}", o.ruling);
    assert!(
        o.errors[0]
            .error
            .contains("`arguments.options` is a string, not a table"),
        "{:?}",
        o.errors
    );
}

#[test]
fn continue_keeps_a_final_turn_working_and_stop_ends_the_session() {
    let dir = tempfile::tempdir().unwrap();
    let w = warden(
        dir.path(),
        &[
            (
                "keep.toml",
                &decide(
                    "tests-still-red",
                    100,
                    "on_turn_end",
                    "context.turn.final and context.state.get('red', false)",
                    "continue",
                ),
            ),
            (
                "stop.toml",
                &decide(
                    "runaway",
                    100,
                    "on_turn_start",
                    "context.turn.number > 3",
                    "stop",
                ),
            ),
        ],
    );
    assert!(w.diagnostics().is_empty(), "{:#?}", w.diagnostics());
    w.store()
        .apply_writes(&[vec![warden_store::StateWrite::set(
            warden_core::StateScope::new("default", "default", "local"),
            "red",
            json!(true),
        )]])
        .unwrap();
    let mut s = w.session();
    s.tick(Hook::OnTurnStart, Event::new());
    let o = s.tick(Hook::OnTurnEnd, Event::new());
    assert!(o.ruling.is_none(), "not a final turn");
    let o = s.tick(Hook::OnTurnEnd, Event::new().final_turn());
    assert!(matches!(o.proceed(), Proceed::KeepWorking { .. }));
    // `final` is a fact of that turn only.
    s.tick(Hook::OnTurnStart, Event::new());
    assert!(!s.facts().turn.is_final);
    s.tick(Hook::OnTurnStart, Event::new());
    let o = s.tick(Hook::OnTurnStart, Event::new());
    assert!(matches!(o.proceed(), Proceed::Stop { .. }));
}

#[test]
fn a_failing_guard_denies_when_set_to_fail_closed() {
    let dir = tempfile::tempdir().unwrap();
    let w = warden_timed(
        dir.path(),
        &[
            (
                "open.toml",
                "[rule]\nid = \"slow-open\"\ntrigger = \"on_tool_call\"\n[condition]\nscript = \"spin.lua\"\n\
                 [action]\ntype = \"decide\"\ndecision = \"deny\"\nreason = \"no\"\n",
            ),
            (
                "closed.toml",
                "[rule]\nid = \"slow-closed\"\ntrigger = \"on_tool_call\"\non_error = \"deny\"\n[condition]\nscript = \"spin.lua\"\n\
                 [action]\ntype = \"decide\"\ndecision = \"deny\"\nreason = \"no\"\n",
            ),
            ("spin.lua", "while true do end"),
        ],
        std::time::Duration::from_millis(200),
    );
    assert!(w.diagnostics().is_empty(), "{:#?}", w.diagnostics());
    let mut s = w.session();
    let o = s.tick(Hook::OnToolCall, bash("ls"));
    assert_eq!(o.errors.len(), 2, "both time out: {:?}", o.errors);
    let r = o.ruling.as_ref().unwrap();
    assert_eq!(
        (r.decision, &*r.rule),
        (Some(Decision::Deny), "slow-closed")
    );
    assert!(
        r.reason.contains("failed and is set to fail closed"),
        "{}",
        r.reason
    );
    assert!(r.reason.contains("time limit"), "{}", r.reason);
}

#[test]
fn scripts_and_behaviors_decide_too() {
    let dir = tempfile::tempdir().unwrap();
    let w = warden(
        dir.path(),
        &[
            (
                "guard.toml",
                "[rule]\nid = \"lua-guard\"\ntrigger = \"on_tool_call\"\n[condition]\nscript = \"guard.lua\"\n",
            ),
            (
                "guard.lua",
                "local args = tool.arguments\n\
                 if args.command and args.command:find('sudo', 1, true) then return deny('no sudo') end\n\
                 if args.limit and args.limit > 20 then return rewrite({ limit = 20, ['page.size'] = 5 }) end\n\
                 return false",
            ),
            (
                "flow.toml",
                "[behavior]\nid = \"second-call-asks\"\ntrigger = \"on_query_start\"\n[tree]\ntype = \"sequence\"\nchildren = [\n\
                 { type = \"wait_for\", hook = \"on_tool_call\" },\n\
                 { type = \"decide\", decision = \"ask\", reason = \"first call of the query: check it\" },\n]\n",
            ),
        ],
    );
    assert!(w.diagnostics().is_empty(), "{:#?}", w.diagnostics());
    let mut s = w.session();
    s.tick(Hook::OnQueryStart, Event::query("go"));
    let o = s.tick(Hook::OnToolCall, bash("sudo ls"));
    let r = o.ruling.as_ref().unwrap();
    assert_eq!((r.decision, &*r.rule), (Some(Decision::Deny), "lua-guard"));
    assert_eq!(o.overridden[0].rule.as_ref(), "second-call-asks");
    let o = s.tick(
        Hook::OnToolCall,
        Event::tool_call("search", json!({"limit": 100})),
    );
    assert_eq!(
        o.ruling.as_ref().unwrap().input,
        Some(json!({"limit": 20, "page": {"size": 5}}))
    );
}

#[test]
fn a_decision_where_it_means_nothing_is_a_load_error_that_says_where_it_is_valid() {
    for (trigger, action, want) in [
        (
            "on_turn_end",
            "type = \"decide\"\ndecision = \"deny\"\nreason = \"x\"",
            "`deny` means nothing at on_turn_end: it is made at on_tool_call (refuse the call) and on_query_start (refuse the prompt)",
        ),
        (
            "on_tool_call",
            "type = \"decide\"\ndecision = \"continue\"\nreason = \"x\"",
            "`continue` means nothing at on_tool_call",
        ),
        (
            "on_tool_call",
            "type = \"decide\"\ndecision = \"dney\"\nreason = \"x\"",
            "unknown decision `dney`",
        ),
        (
            "on_tool_complete",
            "type = \"rewrite\"\nset = { \"arguments.limit\" = 5 }",
            "a rewrite changes a tool call's arguments before it runs",
        ),
        (
            "on_tool_call",
            "type = \"rewrite\"\nset = { \"limit\" = 5 }",
            "`limit` is not a path inside the tool's arguments",
        ),
        (
            "on_tool_call",
            "type = \"rewrite\"\nset = { \"arguments.limit\" = \"{{ tool.argumnts.limit }}\" }",
            "argumnts",
        ),
        (
            "on_tool_call",
            "type = \"decide\"\ndecision = \"deny\"",
            "a decide action needs `reason`",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let text = format!(
            "[rule]\nid = \"r\"\ntrigger = \"{trigger}\"\ncondition = \"true\"\n[action]\n{action}\n"
        );
        let w = warden(dir.path(), &[("r.toml", &text)]);
        let all: Vec<String> = w.diagnostics().iter().map(ToString::to_string).collect();
        assert!(
            all.iter()
                .any(|d| d.contains(want) && d.contains("r.toml:")),
            "{action}: {all:#?}"
        );
        assert_eq!(w.program().rule_keys().count(), 0, "{action}");
    }
    let dir = tempfile::tempdir().unwrap();
    let w = warden(
        dir.path(),
        &[(
            "r.toml",
            "[rule]\nid = \"r\"\ntrigger = \"on_turn_start\"\non_error = \"deny\"\ncondition = \"true\"\n[action]\ntype = \"log\"\nmessage = \"x\"\n",
        )],
    );
    let all: Vec<String> = w.diagnostics().iter().map(ToString::to_string).collect();
    assert!(
        all.iter().any(|d| d.contains("r.toml:4:")
            && d.contains("`on_error = \"deny\"` means nothing at on_turn_start")),
        "{all:#?}"
    );
}

#[test]
fn a_decision_made_at_the_wrong_hook_at_run_time_is_a_rule_error() {
    let dir = tempfile::tempdir().unwrap();
    let w = warden(
        dir.path(),
        &[
            (
                "late.toml",
                "[rule]\nid = \"late\"\ntrigger = \"on_tool_complete\"\n[condition]\nscript = \"late.lua\"\n",
            ),
            ("late.lua", "return deny('too late')"),
        ],
    );
    let mut s = w.session();
    let o = s.tick(Hook::OnToolComplete, Event::tool_complete("x", json!({})));
    assert!(o.ruling.is_none());
    assert!(
        o.errors[0]
            .error
            .contains("`deny` means nothing at on_tool_complete"),
        "{:?}",
        o.errors
    );
}

#[test]
fn a_stop_at_a_mode_change_is_merged_into_the_events_one_ruling() {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in [
        (
            "stop.toml",
            "[rule]\nid = \"stop-on-change\"\ntrigger = \"on_mode_change\"\ncore = true\ncondition = \"true\"\n\
             [action]\ntype = \"decide\"\ndecision = \"stop\"\nreason = \"mode {{ event.data.to }}\"\n"
                .to_string(),
        ),
        (
            "deny.toml",
            decide("deny-all", 900, "on_tool_call", "true", "deny").replace(
                "[rule]\n",
                "[rule]\ncore = true\n",
            ),
        ),
    ] {
        fs::write(dir.path().join(name), text).unwrap();
    }
    let w = Warden::builder()
        .rules_dir(dir.path())
        .builtin_modes("context-window")
        .build()
        .unwrap();
    assert!(w.diagnostics().iter().all(|d| !d.is_error()));
    let mut s = w.session();
    let o = s.tick(Hook::OnToolCall, bash("ls").with_context_window(200_000));
    assert!(o.mode_change.is_some());
    let r = o.ruling.as_ref().unwrap();
    // The stop of the mode change beats the deny of the call.
    assert_eq!(
        (r.decision, &*r.rule),
        (Some(Decision::Stop), "stop-on-change")
    );
    assert_eq!(o.overridden.len(), 1);
    assert_eq!(&*o.overridden[0].rule, "deny-all");
    // One decision line for the event, not one per step.
    let lines = warden_wire::v1::replay::outcome_lines(0, &o);
    let decisions: Vec<_> = lines
        .iter()
        .filter(|l| l.get("decision").is_some())
        .collect();
    assert_eq!(decisions.len(), 1, "{lines:#?}");
    assert_eq!(decisions[0]["decision"], "stop");
}

#[test]
fn a_stop_at_a_tool_call_refuses_it_and_holds_until_the_next_prompt() {
    let dir = tempfile::tempdir().unwrap();
    let w = warden(
        dir.path(),
        &[
            (
                "stop.toml",
                &decide(
                    "stop-on-boom",
                    100,
                    "on_tool_call",
                    "tool.name == 'boom'",
                    "stop",
                ),
            ),
            (
                "allow.toml",
                &decide("allow-all", 50, "on_tool_call", "true", "allow"),
            ),
            (
                "continue.toml",
                &decide("keep-going", 10, "on_turn_end", "true", "continue"),
            ),
        ],
    );
    assert!(w.diagnostics().is_empty(), "{:#?}", w.diagnostics());
    let mut s = w.session();
    let o = s.tick(Hook::OnToolCall, Event::tool_call("boom", json!({})));
    assert_eq!(o.refused(), Some("stop-on-boom at on_tool_call"));
    assert_eq!(o.ends_session(), Some("stop-on-boom at on_tool_call"));
    assert!(!o.proceed().runs());
    assert_eq!(
        s.stopped(),
        Some(("stop-on-boom", "stop-on-boom at on_tool_call"))
    );
    // A later call is refused with the stop's reason, though a rule allows it.
    let o = s.tick(Hook::OnToolCall, bash("ls"));
    assert_eq!(
        o.proceed(),
        Proceed::No {
            reason: "stop-on-boom at on_tool_call"
        }
    );
    assert_eq!(o.overridden.len(), 1, "{:?}", o.overridden);
    assert_eq!(&*o.overridden[0].rule, "allow-all");
    // An agent that wants to stop is not sent back to work.
    let o = s.tick(Hook::OnTurnEnd, Event::new().final_turn());
    assert!(matches!(o.proceed(), Proceed::Stop { .. }), "{o:?}");
    // A new prompt lifts it.
    s.tick(Hook::OnQueryStart, Event::query("go on"));
    assert_eq!(s.stopped(), None);
    let o = s.tick(Hook::OnToolCall, bash("ls"));
    assert!(o.proceed().runs());
    // Saved and read back, a stop still holds.
    let mut s = w.open_session("durable", Default::default()).unwrap();
    s.tick(Hook::OnToolCall, Event::tool_call("boom", json!({})));
    let mut again = w.open_session("durable", Default::default()).unwrap();
    let o = again.tick(Hook::OnToolCall, bash("ls"));
    assert_eq!(o.refused(), Some("stop-on-boom at on_tool_call"));
}

/// The guardrails plugin counts refusals per session: three in one session stop it, and a
/// new session of the same user and project starts at zero.
#[test]
fn one_sessions_refusals_never_stop_another() {
    let plugins = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/plugins");
    let w = Warden::builder().plugins_dir(plugins).build().unwrap();
    let mut a = w.open_session("a", Default::default()).unwrap();
    for _ in 0..3 {
        let o = a.tick(Hook::OnToolCall, bash("rm -rf /"));
        assert!(matches!(o.proceed(), Proceed::No { .. }));
    }
    let o = a.tick(Hook::OnToolCall, bash("ls -la"));
    assert!(matches!(o.proceed(), Proceed::Stop { .. }), "{o:?}");
    let mut b = w.open_session("b", Default::default()).unwrap();
    let o = b.tick(Hook::OnToolCall, bash("ls -la"));
    assert!(o.proceed().runs(), "{o:?}");
    assert_eq!(
        b.facts().session_state.get("guardrails"),
        None,
        "B's state is its own"
    );
    // A's failing tests keep A working, not B.
    a.tick(Hook::OnQueryStart, Event::query("fix the tests"));
    let mut failing = Event::tool_failure("Bash", "2 tests failed");
    failing.tool.as_mut().unwrap().arguments = json!({ "command": "cargo test" });
    a.tick(Hook::OnToolFailure, failing);
    let o = b.tick(Hook::OnTurnEnd, Event::new().final_turn());
    assert!(o.ruling.is_none(), "{o:?}");
    let o = a.tick(Hook::OnTurnEnd, Event::new().final_turn());
    assert!(matches!(o.proceed(), Proceed::KeepWorking { .. }), "{o:?}");
}
