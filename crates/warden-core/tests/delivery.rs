//! Delivery: what waits for its delivery point is bounded and not repeated, and what is due is
//! written as one block for the agent's context.

use std::fs;

use serde_json::json;
use warden_core::{Event, Hook, Warden};

fn warden_with(rule: &str, template: Option<&str>) -> (tempfile::TempDir, Warden) {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("rule.toml"), rule).unwrap();
    let mut b = Warden::builder().rules_dir(dir.path());
    if let Some(t) = template {
        b = b.render_template(t);
    }
    (dir, b.build().unwrap())
}

const EACH_CALL: &str = r#"
[rule]
id = "each-call"
trigger = "on_tool_complete"

[condition]
expression = "true"

[action]
type = "notify_self"
message = "{{ tool.name }} done"
deliver_at = "turn_end"
"#;

#[test]
fn a_waiting_message_is_not_queued_twice_and_the_mailbox_is_bounded() {
    let (_d, w) = warden_with(EACH_CALL, None);
    let mut s = w.session();
    for _ in 0..5 {
        s.tick(
            Hook::OnToolComplete,
            Event::tool_complete("search", json!({})),
        );
    }
    assert_eq!(
        s.pending().len(),
        1,
        "the same message from the same rule waits once"
    );
    // A session whose turns never end: at most 1000 wait, the oldest dropped and said so.
    let mut dropped = 0;
    for i in 0..1200 {
        let o = s.tick(
            Hook::OnToolComplete,
            Event::tool_complete(format!("t{i}"), json!({})),
        );
        dropped += o
            .errors
            .iter()
            .filter(|e| e.error.contains("were dropped"))
            .count();
    }
    assert_eq!(s.pending().len(), 1000);
    assert_eq!(dropped, 201);
    assert_eq!(
        &*s.pending()[0].message,
        "t200 done",
        "the oldest went first"
    );
    let o = s.tick(Hook::OnTurnEnd, Event::new());
    assert_eq!(o.injected().len(), 1000);
    assert!(s.pending().is_empty());
}

#[test]
fn an_agent_over_its_budget_is_told_so_not_refused() {
    // Over budget is when a supervisor is needed most: 1.706 is a fact, read from a trace line
    // as from the API, and the budget rule fires on it.
    let w = Warden::builder().builtin_rules().build().unwrap();
    let mut s = w.session();
    let line = r#"{"hook": "on_turn_start", "turn": {"token_usage": 1.706, "context_usage": 1.2}}"#;
    let read = warden_wire::v1::line::parse_line(1, line).unwrap();
    assert_eq!(
        *read.event,
        Event::new().with_token_usage(1.706).with_context_usage(1.2)
    );
    let o = s.tick_shared(read.hook, read.event);
    assert_eq!(
        o.rendered(),
        Some(
            "[warden]\n- HIGH warning: Token budget at 170%. Consider wrapping up or summarizing."
        )
    );
    assert!(o.errors.is_empty(), "{:?}", o.errors);
    assert_eq!(s.facts().turn.token_usage, 1.706);
}

#[test]
fn the_notifications_due_are_rendered_once_for_every_host() {
    let w = Warden::builder().builtin_rules().build().unwrap();
    let mut s = w.session();
    let o = s.tick(Hook::OnTurnStart, Event::new().with_token_usage(0.85));
    assert_eq!(
        o.rendered(),
        Some("[warden]\n- HIGH warning: Token budget at 85%. Consider wrapping up or summarizing.")
    );
    let o = s.tick(Hook::OnTurnEnd, Event::new());
    assert_eq!(o.rendered(), None);

    let (_d, w) = warden_with(
        EACH_CALL,
        Some("{% for n in notifications %}* {{ n.message }} ({{ n.rule }})\n{% endfor %}"),
    );
    let mut s = w.session();
    s.tick(Hook::OnToolComplete, Event::tool_complete("web", json!({})));
    let o = s.tick(Hook::OnTurnEnd, Event::new());
    assert_eq!(o.rendered(), Some("* web done (each-call)\n"));
    let err = Warden::builder()
        .render_template("{% if %}")
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("[render] template"), "{err}");
}

#[test]
fn an_operators_template_that_fails_at_a_tick_is_one_of_its_errors_and_warden_writes_the_block() {
    // Strict: the second notification does not exist at this tick.
    let (_d, w) = warden_with(
        EACH_CALL.replace("turn_end", "immediate").as_str(),
        Some("{{ notifications[1].message }}"),
    );
    let mut s = w.session();
    let o = s.tick(Hook::OnToolComplete, Event::tool_complete("web", json!({})));
    assert_eq!(o.rendered(), Some("[warden]\n- web done"));
    assert!(
        o.errors
            .iter()
            .any(|e| e.rule.is_none() && e.error.contains("[render] template")),
        "{:?}",
        o.errors
    );
    // A template that writes only blanks says nothing.
    let (_d, w) = warden_with(
        EACH_CALL.replace("turn_end", "immediate").as_str(),
        Some("{% for n in notifications %} {% endfor %}\n"),
    );
    let o = w
        .session()
        .tick(Hook::OnToolComplete, Event::tool_complete("web", json!({})));
    assert_eq!(o.injected().len(), 1);
    assert_eq!(o.rendered(), None);
    assert!(o.errors.is_empty(), "{:?}", o.errors);
}

#[test]
fn a_mode_changes_notifications_are_in_the_events_block_not_a_block_of_their_own() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(
        dir.path().join("changed.toml"),
        "[rule]\nid = \"changed\"\ntrigger = \"on_mode_change\"\ncore = true\ncondition = \"true\"\n\
         [action]\ntype = \"notify_self\"\nmessage = \"now {{ event.data.to }}\"\ndeliver_at = \"immediate\"\n",
    )
    .unwrap();
    let w = Warden::builder()
        .rules_dir(dir.path())
        .builtin_modes("context-window")
        .build()
        .unwrap();
    let o = w.session().tick(
        Hook::OnToolCall,
        Event::tool_call("Bash", json!({"command": "ls"})).with_context_window(200_000),
    );
    let change = o.mode_change.as_ref().expect("the mode changed");
    assert_eq!(change.outcome.injected().len(), 1);
    assert_eq!(change.outcome.rendered(), None);
    let block = o.rendered().expect("the event's block");
    assert!(block.starts_with("[warden]\n- now "), "{block}");
}
