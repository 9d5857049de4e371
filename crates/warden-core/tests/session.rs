//! Session behavior through the public API: delivery points, the facts rules see, malformed
//! events, the bus, reloading, and the async session.

use std::fs;
use std::path::Path;

use serde_json::json;
use warden_core::{DeliverAt, Effect, Evaluation, Event, Hook, SessionOptions, Warden};

fn rules(dir: &Path, files: &[(&str, &str)]) -> Warden {
    for (name, text) in files {
        fs::write(dir.join(name), text).unwrap();
    }
    let w = Warden::builder().rules_dir(dir).build().unwrap();
    assert!(w.diagnostics().is_empty(), "{:?}", w.diagnostics());
    w
}

fn notify(id: &str, trigger: &str, condition: &str, message: &str, deliver_at: &str) -> String {
    format!(
        "[rule]\nid = \"{id}\"\ntrigger = \"{trigger}\"\n[condition]\nexpression = \"{condition}\"\n\
         [action]\ntype = \"notify_self\"\nmessage = \"{message}\"\ndeliver_at = \"{deliver_at}\"\n"
    )
}

#[test]
fn notifications_wait_for_their_delivery_point() {
    let dir = tempfile::tempdir().unwrap();
    let w = rules(
        dir.path(),
        &[
            (
                "a.toml",
                &notify(
                    "at-turn-start",
                    "on_tool_complete",
                    "true",
                    "next turn",
                    "turn_start",
                ),
            ),
            (
                "b.toml",
                &notify(
                    "at-turn-end",
                    "on_tool_complete",
                    "true",
                    "end of turn",
                    "turn_end",
                ),
            ),
            (
                "c.toml",
                &notify("now", "on_tool_complete", "true", "right away", "immediate"),
            ),
        ],
    );
    let mut s = w.session();
    let o = s.tick(Hook::OnToolComplete, Event::tool_complete("x", json!({})));
    assert_eq!(o.notifications().count(), 3);
    let now: Vec<_> = o.injected().iter().map(|n| &*n.message).collect();
    assert_eq!(now, ["right away"]);
    assert_eq!(s.pending().len(), 2);
    let o = s.tick(Hook::OnTurnEnd, Event::new());
    assert_eq!(
        o.injected().iter().map(|n| &*n.message).collect::<Vec<_>>(),
        ["end of turn"]
    );
    let o = s.tick(Hook::OnTurnStart, Event::new());
    assert_eq!(
        o.injected().iter().map(|n| &*n.message).collect::<Vec<_>>(),
        ["next turn"]
    );
    assert_eq!(
        o.injected().get(0).unwrap().deliver_at,
        DeliverAt::TurnStart
    );
    assert!(s.pending().is_empty());
}

#[test]
fn shorthands_work_in_templates_as_in_conditions() {
    let dir = tempfile::tempdir().unwrap();
    let w = rules(
        dir.path(),
        &[(
            "s.toml",
            &notify(
                "shorthands",
                "on_turn_start",
                "token_usage > 0.5 and turn_number >= 1 and context.history.tool_count == 0",
                "{{ token_usage }} {{ turn_number }} {{ context.token_usage }} {{ context.history.tool_count }}",
                "immediate",
            ),
        )],
    );
    let mut s = w.session();
    let o = s.tick(Hook::OnTurnStart, Event::new().with_token_usage(0.75));
    assert!(o.errors.is_empty(), "{:?}", o.errors);
    assert_eq!(&*o.injected().get(0).unwrap().message, "0.75 1 0.75 0");
}

#[test]
fn a_completion_sees_the_arguments_of_its_call() {
    let dir = tempfile::tempdir().unwrap();
    let w = rules(
        dir.path(),
        &[(
            "a.toml",
            &notify(
                "args",
                "on_tool_complete",
                "tool.arguments.q == 'wal'",
                "searched {{ tool.arguments.q }}",
                "immediate",
            ),
        )],
    );
    let mut s = w.session();
    s.tick(
        Hook::OnToolCall,
        Event::tool_call("search", json!({"q": "wal"})),
    );
    let o = s.tick(
        Hook::OnToolComplete,
        Event::tool_complete("search", json!({"count": 1})),
    );
    assert_eq!(o.fired(), ["args"]);
    assert_eq!(&*o.injected().get(0).unwrap().message, "searched wal");
}

#[test]
fn a_tool_hook_without_a_tool_is_reported_and_runs_no_rule() {
    let w = Warden::builder().builtin_rules().build().unwrap();
    let mut s = w.session();
    let o = s.tick(
        Hook::OnToolComplete,
        Event {
            result: Some(json!({"count": 9})),
            ..Event::new()
        },
    );
    assert!(o.effects.is_empty());
    assert_eq!(o.errors.len(), 1);
    assert!(o.errors[0].rule.is_none());
    assert!(
        o.errors[0].error.contains("without a tool"),
        "{}",
        o.errors[0].error
    );
}

#[test]
fn local_rules_cannot_take_a_builtin_id() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(
        dir.path().join("t.toml"),
        notify(
            "token-budget-warning",
            "on_turn_start",
            "true",
            "mine",
            "immediate",
        ),
    )
    .unwrap();
    let w = Warden::builder()
        .builtin_rules()
        .rules_dir(dir.path())
        .build()
        .unwrap();
    let d = w.diagnostics();
    assert_eq!(d.len(), 1, "{d:?}");
    assert!(
        d[0].message()
            .contains("duplicate rule id `token-budget-warning`")
    );
    assert!(
        d[0].help()
            .unwrap()
            .contains("rules/token-budget-warning.toml"),
        "{:?}",
        d[0].help()
    );
}

#[test]
fn disabled_rules_are_checked_too() {
    let dir = tempfile::tempdir().unwrap();
    let text = notify(
        "off",
        "on_turn_start",
        "context.turn.nubmer > 1",
        "x",
        "immediate",
    )
    .replace("[condition]", "enabled = false\n[condition]");
    fs::write(dir.path().join("off.toml"), text).unwrap();
    let w = Warden::builder().rules_dir(dir.path()).build().unwrap();
    let d = w.diagnostics();
    assert_eq!(d.len(), 1);
    assert!(d[0].help().unwrap().contains("context.turn.number"));
    assert_eq!(
        w.program().rules().count(),
        0,
        "a rule that does not compile is not listed as loaded"
    );
}

#[test]
fn rules_see_the_frame_of_the_tick_not_each_others_effects() {
    let dir = tempfile::tempdir().unwrap();
    let writer = "[rule]\nid = \"writer\"\ntrigger = \"on_turn_start\"\npriority = 200\ncondition = \"true\"\n\
                  [action]\ntype = \"set_state\"\nkey = \"seen\"\nvalue = true\n";
    let reader = notify(
        "reader",
        "on_turn_start",
        "context.state.get('seen') == true",
        "saw it",
        "immediate",
    );
    let w = rules(dir.path(), &[("w.toml", writer), ("r.toml", &reader)]);
    let mut s = w.session();
    let first = s.tick(Hook::OnTurnStart, Event::new());
    assert_eq!(
        first.fired(),
        ["writer"],
        "the reader runs after the writer but reads the frozen frame"
    );
    let second = s.tick(Hook::OnTurnStart, Event::new());
    assert_eq!(second.fired(), ["writer", "reader"]);
}

#[test]
fn emitted_events_reach_subscribers() {
    let dir = tempfile::tempdir().unwrap();
    let emit = "[rule]\nid = \"emit\"\ntrigger = \"on_tool_failure\"\ncondition = \"true\"\n\
                [action]\ntype = \"emit_event\"\nevent_type = \"tool.failed\"\npayload = { tool = \"{{ tool.name }}\", n = \"{{ context.history.failures[tool.name] }}\" }\n";
    let w = rules(dir.path(), &[("e.toml", emit)]);
    let mut rx = w.subscribe();
    let mut s = w.session_with(SessionOptions {
        id: Some("s1".into()),
        ..Default::default()
    });
    s.tick(Hook::OnToolFailure, Event::tool_failure("web", "boom"));
    let e = rx.try_recv().unwrap();
    assert_eq!(
        (&*e.event_type, &*e.rule, e.session.as_str(), e.hook),
        ("tool.failed", "emit", "s1", Hook::OnToolFailure)
    );
    assert_eq!(e.payload, json!({"tool": "web", "n": 1}));
}

#[test]
fn reload_swaps_rules_and_keeps_decorator_memory() {
    let dir = tempfile::tempdir().unwrap();
    let once = notify("once", "on_turn_start", "true", "v1", "immediate")
        .replace("[condition]", "once_per_session = true\n[condition]");
    let w = rules(dir.path(), &[("o.toml", &once)]);
    let mut s = w.session();
    assert_eq!(s.tick(Hook::OnTurnStart, Event::new()).fired(), ["once"]);
    fs::write(dir.path().join("o.toml"), once.replace("v1", "v2")).unwrap();
    fs::write(
        dir.path().join("n.toml"),
        notify("new", "on_turn_start", "true", "new rule", "immediate"),
    )
    .unwrap();
    assert!(w.reload().diagnostics.is_empty());
    let o = s.tick(Hook::OnTurnStart, Event::new());
    assert_eq!(
        o.fired(),
        ["new"],
        "the once-per-session rule remembers it fired"
    );
    assert!(
        o.trace()
            .any(|(r, e)| r == "once" && *e == Evaluation::Suppressed("once per session"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_async_session_ticks_off_the_runtime() {
    let w = Warden::builder().builtin_rules().build().unwrap();
    let s = warden_core::AsyncSession::new(w.session());
    let o = s
        .tick(Hook::OnTurnStart, Event::new().with_token_usage(0.9))
        .await;
    assert_eq!(o.fired(), ["token-budget-warning"]);
    assert!(matches!(&o.effects[0], Effect::NotifySelf(n) if n.message.contains("90%")));
}

#[test]
fn a_rule_whose_state_cannot_be_saved_applies_nothing_and_the_others_apply() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let rules_dir = dir.path().join("rules");
    fs::create_dir(&rules_dir).unwrap();
    let saver = |id: &str, key: &str| {
        format!(
            "[rule]\nid = \"{id}\"\ntrigger = \"on_turn_end\"\ncondition = \"true\"\n\
             [[action]]\ntype = \"notify_self\"\nmessage = \"{id} saved\"\ndeliver_at = \"immediate\"\n\
             [[action]]\ntype = \"set_state\"\nkey = \"{key}\"\nvalue = 1\n"
        )
    };
    fs::write(rules_dir.join("a.toml"), saver("fails", "boom")).unwrap();
    fs::write(rules_dir.join("b.toml"), saver("works", "fine")).unwrap();
    let w = Warden::builder()
        .store(warden_core::Store::open(&db).unwrap())
        .rules_dir(&rules_dir)
        .build()
        .unwrap();
    // Another process breaks writes of one key (a disk error, say) behind Warden's back.
    let other = rusqlite::Connection::open(&db).unwrap();
    other
        .execute_batch(
            "CREATE TRIGGER boom BEFORE INSERT ON plugin_state WHEN NEW.key = 'boom' \
             BEGIN SELECT RAISE(ABORT, 'disk says no'); END;",
        )
        .unwrap();
    let mut s = w.session();
    let o = s.tick(Hook::OnTurnEnd, Event::new());
    assert_eq!(
        o.injected().iter().map(|n| &*n.message).collect::<Vec<_>>(),
        ["works saved"]
    );
    assert_eq!(
        o.effects.len(),
        2,
        "only the working rule's two effects: {:?}",
        o.effects
    );
    assert_eq!(o.errors.len(), 1);
    assert_eq!(o.errors[0].rule.as_deref(), Some("fails"));
    assert!(
        o.errors[0].error.contains("disk says no"),
        "{}",
        o.errors[0].error
    );
    assert!(
        o.trace()
            .any(|(r, e)| r == "fails" && matches!(e, Evaluation::Failed(_)))
    );
    let scope = warden_core::StateScope::new("default", "default", "local");
    assert_eq!(w.store().state_get(&scope, "fine").unwrap(), Some(json!(1)));
    assert_eq!(w.store().state_get(&scope, "boom").unwrap(), None);
}

#[test]
fn the_execution_log_records_every_evaluation_when_on() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(
        dir.path().join("a.toml"),
        notify(
            "hot",
            "on_turn_start",
            "context.turn.token_usage > 0.5",
            "hot",
            "immediate",
        ),
    )
    .unwrap();
    fs::write(
        dir.path().join("b.toml"),
        notify(
            "missing",
            "on_turn_start",
            "context.state.get('x').y > 1",
            "m",
            "immediate",
        ),
    )
    .unwrap();
    let w = Warden::builder()
        .rules_dir(dir.path())
        .execution_log(true)
        .build()
        .unwrap();
    let mut s = w.session_with(SessionOptions {
        id: Some("s9".into()),
        ..Default::default()
    });
    s.tick(Hook::OnTurnStart, Event::new().with_token_usage(0.2));
    s.tick(Hook::OnTurnStart, Event::new().with_token_usage(0.7));
    let rows = w
        .store()
        .executions(&warden_core::ExecutionFilter {
            session_id: Some("s9".into()),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(
        rows.len(),
        4,
        "two rules at two ticks, the skipped ones included"
    );
    let hot: Vec<_> = rows
        .iter()
        .filter(|r| r.record.rule_id == "hot")
        .map(|r| r.record.action_executed)
        .collect();
    assert_eq!(hot.iter().filter(|x| **x).count(), 1);
    assert!(rows.iter().all(|r| r.record.trigger == "on_turn_start"));
    let missing = rows.iter().find(|r| r.record.rule_id == "missing").unwrap();
    assert!(
        missing
            .record
            .error_message
            .as_deref()
            .unwrap()
            .starts_with("undetermined"),
        "{:?}",
        missing.record
    );
}

fn script_rule(dir: &Path, id: &str, trigger: &str, script: &str, extra: &str) {
    fs::create_dir_all(dir.join("scripts")).unwrap();
    fs::write(dir.join("scripts").join(format!("{id}.lua")), script).unwrap();
    fs::write(
        dir.join(format!("{id}.toml")),
        format!("[rule]\nid = \"{id}\"\ntrigger = \"{trigger}\"\n[condition]\nscript = \"scripts/{id}.lua\"\n{extra}"),
    )
    .unwrap();
}

#[test]
fn a_session_without_scripts_never_starts_lua() {
    let w = Warden::builder().builtin_rules().build().unwrap();
    let mut s = w.session();
    s.tick(Hook::OnTurnStart, Event::new().with_token_usage(0.9));
    assert_eq!(s.script_memory(), None);
}

#[test]
fn script_problems_are_diagnostics_with_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    script_rule(
        dir.path(),
        "broken",
        "on_turn_start",
        "local x = 1\nif x then\n  return x +\nend\n",
        "",
    );
    fs::write(
        dir.path().join("missing.toml"),
        "[rule]\nid = \"missing\"\ntrigger = \"on_turn_start\"\n[condition]\nscript = \"scripts/nope.lua\"\n",
    )
    .unwrap();
    fs::write(
        dir.path().join("escape.toml"),
        "[rule]\nid = \"escape\"\ntrigger = \"on_turn_start\"\n[condition]\nscript = \"../../etc/passwd.lua\"\n",
    )
    .unwrap();
    let w = Warden::builder().rules_dir(dir.path()).build().unwrap();
    let text: Vec<String> = w.diagnostics().iter().map(|d| d.to_string()).collect();
    assert_eq!(text.len(), 3, "{text:#?}");
    assert!(
        text.iter()
            .any(|t| t.contains("scripts/broken.lua:4:1") && t.contains("Lua syntax error")),
        "{text:#?}"
    );
    assert!(
        text.iter()
            .any(|t| t.contains("missing.toml:5:10") && t.contains("no script `scripts/nope.lua`")),
        "{text:#?}"
    );
    assert!(
        text.iter()
            .any(|t| t.contains("escape.toml:5:10") && t.contains("`..`")),
        "{text:#?}"
    );
}

#[test]
fn a_script_waits_across_turns_and_resumes_at_its_node() {
    let dir = tempfile::tempdir().unwrap();
    script_rule(
        dir.path(),
        "three-turns",
        "on_turn_start",
        "notify('watching from turn ' .. context.turn.number, { deliver_at = 'immediate' })\n\
         wait_turns(3)\n\
         notify('three turns later: turn ' .. context.turn.number, { deliver_at = 'immediate' })\n\
         return true",
        "",
    );
    fs::write(
        dir.path().join("other.toml"),
        notify(
            "other",
            "on_turn_start",
            "true",
            "other {{ turn_number }}",
            "immediate",
        ),
    )
    .unwrap();
    let w = Warden::builder().rules_dir(dir.path()).build().unwrap();
    let mut s = w.session();
    let messages = |o: &warden_core::Outcome| {
        o.injected()
            .iter()
            .map(|n| n.message.to_string())
            .collect::<Vec<_>>()
    };
    let first = s.tick(Hook::OnTurnStart, Event::new());
    assert_eq!(messages(&first), ["other 1", "watching from turn 1"]);
    for turn in 2..=3 {
        let o = s.tick(Hook::OnTurnStart, Event::new());
        assert_eq!(
            messages(&o),
            [format!("other {turn}")],
            "a running script does not block the other rules"
        );
        assert!(
            o.trace()
                .any(|(r, e)| r == "three-turns" && *e == Evaluation::Running)
        );
    }
    let fourth = s.tick(Hook::OnTurnStart, Event::new());
    assert_eq!(messages(&fourth), ["other 4", "three turns later: turn 4"]);
    assert_eq!(fourth.fired(), ["other", "three-turns"]);
    assert!(s.script_memory().unwrap() > 0);
}

#[test]
fn a_reload_keeps_unchanged_running_scripts_and_halts_changed_ones() {
    let dir = tempfile::tempdir().unwrap();
    let waiter = |n: u32| format!("wait_for('on_session_end')\nnotify('done {n}')\nreturn true");
    script_rule(dir.path(), "waiter", "on_turn_start", &waiter(1), "");
    script_rule(
        dir.path(),
        "other",
        "on_turn_start",
        "wait_for('on_session_end')",
        "",
    );
    let w = Warden::builder().rules_dir(dir.path()).build().unwrap();
    let mut s = w.session();
    let o = s.tick(Hook::OnTurnStart, Event::new());
    assert_eq!(
        o.trace()
            .filter(|(_, e)| **e == Evaluation::Running)
            .count(),
        2
    );

    // A reload that changes nothing these scripts depend on keeps them running, in place.
    fs::write(
        dir.path().join("unrelated.toml"),
        "[rule]\nid = \"a-new-rule\"\ntrigger = \"on_turn_end\"\ncondition = \"true\"\n[action]\ntype = \"log\"\nmessage = \"x\"\n",
    )
    .unwrap();
    assert!(w.reload().diagnostics.is_empty());
    let o = s.tick(Hook::OnTurnStart, Event::new());
    assert!(o.halted.is_empty(), "{:?}", o.halted);
    assert!(
        o.trace().all(|(r, _)| r != "waiter" && r != "other"),
        "both still wait for on_session_end, so neither starts again"
    );

    // Changing one script halts that one, cleanly and said so; it starts afresh.
    script_rule(dir.path(), "waiter", "on_turn_start", &waiter(2), "");
    fs::remove_file(dir.path().join("other.toml")).unwrap();
    assert!(w.reload().applied);
    let o = s.tick(Hook::OnTurnStart, Event::new());
    let halted: Vec<_> = o
        .halted
        .iter()
        .map(|h| (&*h.rule, h.reason.as_str()))
        .collect();
    assert_eq!(
        halted,
        [
            ("other", "its rule was removed in a reload"),
            ("waiter", "its rule changed in a reload")
        ]
    );
    assert!(
        o.trace()
            .any(|(r, e)| r == "waiter" && *e == Evaluation::Running)
    );
    let end = s.tick(Hook::OnSessionEnd, Event::new());
    assert!(
        end.halted.is_empty(),
        "woken by on_session_end, it finished: {:?}",
        end.halted
    );
    let done: Vec<_> = end
        .effects
        .iter()
        .filter_map(|e| match e {
            warden_core::Effect::NotifySelf(n) => Some(n.message.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(done, ["done 2"]);
}

#[test]
fn a_rules_timeout_cannot_raise_the_hosts_limit() {
    let dir = tempfile::tempdir().unwrap();
    script_rule(
        dir.path(),
        "greedy",
        "on_turn_start",
        "while true do end",
        "timeout = 60\n",
    );
    let w = Warden::builder()
        .rules_dir(dir.path())
        .script_limits(warden_core::ScriptLimits {
            timeout: std::time::Duration::from_millis(50),
            ..Default::default()
        })
        .build()
        .unwrap();
    let o = w.session().tick(Hook::OnTurnStart, Event::new());
    assert_eq!(o.errors.len(), 1);
    assert!(
        o.errors[0].error.ends_with("time limit of 50 ms"),
        "{}",
        o.errors[0].error
    );
}

#[test]
fn an_exclusive_group_woken_by_another_hook_runs_only_its_waiting_script() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("scripts")).unwrap();
    fs::write(
        dir.path().join("scripts/waits.lua"),
        "wait_for('on_tool_complete')\nreturn false",
    )
    .unwrap();
    fs::write(
        dir.path().join("waits.toml"),
        "[rule]\nid = \"waits\"\ntrigger = \"on_turn_start\"\npriority = 200\nexclusive = \"g\"\n[condition]\nscript = \"scripts/waits.lua\"\n",
    )
    .unwrap();
    fs::write(
        dir.path().join("fallback.toml"),
        "[rule]\nid = \"fallback\"\ntrigger = \"on_turn_start\"\npriority = 100\nexclusive = \"g\"\ncondition = \"true\"\n[action]\ntype = \"log\"\nmessage = \"fallback\"\n",
    )
    .unwrap();
    let w = Warden::builder().rules_dir(dir.path()).build().unwrap();
    assert!(w.diagnostics().is_empty(), "{:?}", w.diagnostics());
    let mut s = w.session();
    let o = s.tick(Hook::OnTurnStart, Event::new());
    assert!(o.fired().is_empty(), "the group waits at its first rule");
    let o = s.tick(
        Hook::OnToolComplete,
        Event::tool_complete("vault_search", serde_json::json!({})),
    );
    assert!(
        o.fired().is_empty(),
        "an on_turn_start rule must not fire at on_tool_complete: {:?}",
        o.fired()
    );
    assert!(o.trace().all(|(r, _)| r != "fallback"));
    // At its own hook again, the group starts over: the script waits again.
    let o = s.tick(Hook::OnTurnStart, Event::new());
    assert!(
        o.trace()
            .any(|(r, e)| r == "waits" && *e == Evaluation::Running)
    );
}
