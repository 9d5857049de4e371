//! The scenarios, the same for `warden bench` and for criterion: one `on_turn_start` tick over
//! 100 threshold rules beside the hand-written Rust that does the same work (the floor), one
//! rule as an expression, a script or a waiting coroutine, a deep running behavior, modes.

use std::sync::Arc;

use warden_core::{DeliverAt, Event, Hook, Notification, Priority, Session, Warden};

/// How many rules the scenario loads.
pub const RULES: usize = 100;
/// The token usage of the benchmark tick: rules with thresholds below it fire (10 of 100).
pub const TOKEN_USAGE: f64 = 0.095;

/// The threshold of rule `i`: 0.00, 0.01, ... 0.99.
pub fn threshold(i: usize) -> f64 {
    i as f64 / RULES as f64
}

/// The rule files of the scenario, as (file name, TOML).
pub fn rule_files() -> Vec<(String, String)> {
    (0..RULES)
        .map(|i| {
            let toml = format!(
                "[rule]\nid = \"threshold-{i:03}\"\ntrigger = \"on_turn_start\"\npriority = {p}\n\n\
                 [condition]\nexpression = \"context.turn.token_usage > {t:.2}\"\n\n\
                 [action]\ntype = \"notify_self\"\nmessage = \"Token usage passed {t:.2}.\"\n",
                p = 1000 - i,
                t = threshold(i)
            );
            (format!("threshold-{i:03}.toml"), toml)
        })
        .collect()
}

/// The rules of the decisions scenario: the same 100 threshold rules at `on_tool_call`, the
/// first `decisions` of them (which fire) deciding `deny` instead of notifying.
pub fn decision_rule_files(decisions: usize) -> Vec<(String, String)> {
    (0..RULES)
        .map(|i| {
            let action = if i < decisions {
                "type = \"decide\"\ndecision = \"deny\"\nreason = \"Token usage passed {t:.2}.\""
            } else {
                // Delivered at once: a tool call is not a turn start.
                "type = \"notify_self\"\nmessage = \"Token usage passed {t:.2}.\"\ndeliver_at = \"immediate\""
            };
            let toml = format!(
                "[rule]\nid = \"threshold-{i:03}\"\ntrigger = \"on_tool_call\"\npriority = {p}\n\n\
                 [condition]\nexpression = \"context.turn.token_usage > {t:.2}\"\n\n[action]\n{action}\n",
                p = 1000 - i,
                t = threshold(i),
                action = action.replace("{t:.2}", &format!("{:.2}", threshold(i))),
            );
            (format!("threshold-{i:03}.toml"), toml)
        })
        .collect()
}

/// A supervisor with the decisions scenario's rules (written to `dir`).
pub fn decision_warden(dir: &std::path::Path, decisions: usize) -> Warden {
    for (name, toml) in decision_rule_files(decisions) {
        std::fs::write(dir.join(name), toml)
            .expect("the benchmark writes its rules to a temporary folder");
    }
    Warden::builder()
        .rules_dir(dir)
        .build()
        .expect("the benchmark rules load")
}

/// One tick of the decisions scenario: a tool call.
pub fn tick_tool_call(session: &mut Session) -> usize {
    let outcome = session.tick(
        Hook::OnToolCall,
        Event::tool_call("Bash", serde_json::Value::Null)
            .with_token_usage(TOKEN_USAGE)
            .at(0.0),
    );
    outcome.effects.len() + usize::from(outcome.ruling.is_some())
}

/// A supervisor loaded with the scenario's rules (written to `dir`).
pub fn warden(dir: &std::path::Path) -> Warden {
    for (name, toml) in rule_files() {
        std::fs::write(dir.join(name), toml)
            .expect("the benchmark writes its rules to a temporary folder");
    }
    Warden::builder()
        .rules_dir(dir)
        .build()
        .expect("the benchmark rules load")
}

/// One benchmark tick through Warden.
pub fn tick(session: &mut Session) -> usize {
    let outcome = session.tick(
        Hook::OnTurnStart,
        Event::new().with_token_usage(TOKEN_USAGE).at(0.0),
    );
    outcome.effects.len()
}

/// The same work written by hand: the hand-written floor.
pub struct Floor {
    rules: Vec<(Arc<str>, f64, Arc<str>)>,
    category: Arc<str>,
}

impl Default for Floor {
    fn default() -> Self {
        Floor {
            rules: (0..RULES)
                .map(|i| {
                    let t = threshold(i);
                    (
                        Arc::from(format!("threshold-{i:03}")),
                        t,
                        Arc::from(format!("Token usage passed {t:.2}.")),
                    )
                })
                .collect(),
            category: Arc::from("info"),
        }
    }
}

impl Floor {
    /// One tick by hand: an `if` per rule, a notification per match.
    pub fn tick(&self, token_usage: f64) -> Vec<Notification> {
        let mut out = Vec::new();
        for (id, t, message) in &self.rules {
            if token_usage > *t {
                out.push(Notification {
                    rule: id.clone(),
                    message: message.clone(),
                    category: self.category.clone(),
                    priority: Priority::Normal,
                    deliver_at: DeliverAt::TurnStart,
                    fired_at: Hook::OnTurnStart,
                });
            }
        }
        out
    }
}

/// The script scenarios: one rule on `on_turn_start`, as an expression, as a script condition
/// that reads the context, and as a waiting coroutine resumed at every tick.
pub enum OneRule {
    /// `context.turn.token_usage > 0.9` as an expression.
    Expression,
    /// The same, as a script.
    ScriptCondition,
    /// A script that yields at every tick (`while true do coroutine.yield() end`).
    Coroutine,
    /// A condition reading three context fields, as an expression.
    ExpressionThreeFields,
    /// The same, as a script.
    ScriptThreeFields,
}

/// The condition of [`OneRule::ExpressionThreeFields`] and [`OneRule::ScriptThreeFields`]: the
/// two parts that hold come first, so that both ways read all three fields.
const THREE_FIELDS: &str =
    "context.turn.number >= 0 and context.mode != '' and context.turn.token_usage > 0.9";

/// The script of [`OneRule::Coroutine`], waiting at every tick.
const WAITING: &str = "while true do coroutine.yield() end";

/// The waiting coroutine of [`OneRule::Coroutine`] resumed by the script runtime alone
/// (`warden-lua`'s `Runtime`), with no session, rule or tick around it: what the resume costs
/// Lua and the sandbox, for beside the session's resume.
pub struct BareResume {
    runtime: warden_lua::Runtime,
    task: warden_lua::Task,
}

/// The host of [`BareResume`]: the script reads nothing, and any field would be nil (an
/// answer not written).
struct Silent;

impl warden_lua::Host for Silent {
    fn field(&self, _: &mut warden_lua::Out<'_>, _: &str, _: &str) -> mlua::Result<()> {
        Ok(())
    }
}

impl BareResume {
    /// The runtime, with the session's default limits, and the coroutine started (waiting).
    pub fn new() -> Self {
        let limits = warden_lua::Limits::default();
        let mut runtime = warden_lua::Runtime::new(limits, warden_lua::Vocabulary::NONE)
            .expect("the benchmark makes a Lua runtime");
        let script = warden_lua::Script::new(1, "wait.lua", WAITING);
        let (task, _) = runtime.start(&script, &Silent, limits.timeout);
        let task = task.expect("the benchmark's coroutine waits");
        BareResume { runtime, task }
    }

    /// Resumes the coroutine once: 1 when it waits again, as it should.
    pub fn resume(&mut self) -> usize {
        let step = self
            .runtime
            .resume(&self.task, &Silent, self.runtime.limits().timeout);
        usize::from(matches!(step, warden_lua::Step::Waiting { .. }))
    }
}

impl Default for BareResume {
    fn default() -> Self {
        Self::new()
    }
}

/// A supervisor with the one rule of `kind` (written to `dir`).
pub fn one_rule(dir: &std::path::Path, kind: OneRule) -> Warden {
    let three = format!("return {}", THREE_FIELDS.replace("!=", "~="));
    let condition = match kind {
        OneRule::Expression => "expression = \"context.turn.token_usage > 0.9\"".to_string(),
        OneRule::ExpressionThreeFields => format!("expression = \"{THREE_FIELDS}\""),
        OneRule::ScriptCondition | OneRule::Coroutine | OneRule::ScriptThreeFields => {
            let (name, body) = match kind {
                OneRule::ScriptCondition => ("usage.lua", "return context.turn.token_usage > 0.9"),
                OneRule::ScriptThreeFields => ("three.lua", three.as_str()),
                _ => ("wait.lua", WAITING),
            };
            std::fs::write(dir.join(name), body)
                .expect("the benchmark writes its script to a temporary folder");
            format!("script = \"{name}\"")
        }
    };
    let rule = format!(
        "[rule]\nid = \"one\"\ntrigger = \"on_turn_start\"\n[condition]\n{condition}\n\
         [action]\ntype = \"notify_self\"\nmessage = \"over 90%\"\n"
    );
    std::fs::write(dir.join("one.toml"), rule)
        .expect("the benchmark writes its rule to a temporary folder");
    Warden::builder()
        .rules_dir(dir)
        .build()
        .expect("the benchmark rule loads")
}

/// `n` rule files of the kinds operators write (a threshold, a tool filter, a template that
/// reads the context, a set_state), for loading cold.
pub fn many_rule_files(n: usize) -> Vec<(String, String)> {
    (0..n)
        .map(|i| {
            let body = match i % 4 {
                0 => format!(
                    "trigger = \"on_turn_start\"\npriority = {p}\n\n[condition]\nexpression = \"context.turn.token_usage > {t:.3}\"\n\n\
                     [action]\ntype = \"notify_self\"\nmessage = \"Token usage is {{{{ context.turn.token_usage | percent }}}} (rule {i}).\"\n",
                    p = 1 + i % 200,
                    t = (i % 100) as f64 / 100.0
                ),
                1 => format!(
                    "trigger = \"on_tool_complete\"\ntool = [\"web_search\", \"tool_{i}\"]\n\n[condition]\nexpression = \"result.count > {k}\"\n\n\
                     [action]\ntype = \"notify_self\"\nmessage = \"{{{{ tool.name }}}} returned {{{{ result.count }}}} results.\"\ndeliver_at = \"immediate\"\n",
                    k = i % 20
                ),
                2 => format!(
                    "trigger = \"on_tool_failure\"\n\n[condition]\nexpression = \"failure_count(tool.name) >= {k} and context.turn.number > 1\"\n\n\
                     [action]\ntype = \"log\"\nlevel = \"warn\"\nmessage = \"{{{{ tool.name }}}} failed {{{{ context.history.failures[tool.name] }}}} times: {{{{ event.error }}}}\"\n",
                    k = 2 + i % 5
                ),
                _ => "trigger = \"on_turn_end\"\n\n[condition]\nexpression = \"any(t.success for t in context.history.tools)\"\n\n\
                      [action]\ntype = \"set_state\"\nkey = \"last_turn\"\nvalue = \"{{ context.turn.number }}\"\n"
                    .to_string(),
            };
            (
                format!("rule-{i:04}.toml"),
                format!("[rule]\nid = \"rule-{i:04}\"\n{body}"),
            )
        })
        .collect()
}

/// A rule that reads one key of its plugin state at every `on_turn_start` (its condition and
/// its message), written to `dir`.
pub fn state_reader_rule(dir: &std::path::Path) -> std::io::Result<()> {
    std::fs::write(
        dir.join("state-reader.toml"),
        "[rule]\nid = \"state-reader\"\ntrigger = \"on_turn_start\"\n\n\
         [condition]\nexpression = \"context.state.get('k1', 0) >= 0\"\n\n\
         [action]\ntype = \"log\"\nmessage = \"k1 is {{ context.state.get('k1', 'unset') }}\"\n",
    )
}

/// A rule that writes a new key of its plugin state at every `on_turn_start` and reads one,
/// written to `dir`.
pub fn state_writer_rule(dir: &std::path::Path) -> std::io::Result<()> {
    std::fs::write(
        dir.join("state-writer.toml"),
        "[rule]\nid = \"state-writer\"\ntrigger = \"on_turn_start\"\n\n\
         [condition]\nexpression = \"true\"\n\n\
         [[action]]\ntype = \"set_state\"\nkey = \"turn-{{ context.turn.number }}\"\nvalue = \"{{ context.turn.token_usage }}\"\n\n\
         [[action]]\ntype = \"log\"\nmessage = \"first turn: {{ context.state.get('turn-1', 'unset') }}\"\n",
    )
}

/// A rule that names the tool of each call and how often it was called, written to `dir`.
pub fn tool_counter_rule(dir: &std::path::Path) -> std::io::Result<()> {
    std::fs::write(
        dir.join("tool-counter.toml"),
        "[rule]\nid = \"tool-counter\"\ntrigger = \"on_tool_call\"\n\n\
         [condition]\nexpression = \"tool_calls(tool.name) >= 1\"\n\n\
         [action]\ntype = \"log\"\nmessage = \"{{ tool.name }}: {{ context.history.calls[tool.name] }} calls\"\n",
    )
}

/// A behavior whose running node sits `depth` sequences down, after `siblings` conditions
/// that succeed (at every level): the frame lock resumes the running node directly, so a tick
/// must not cost more with more siblings before it.
pub fn deep_tree(dir: &std::path::Path, siblings: usize, depth: usize) -> Warden {
    let conditions: Vec<String> = (0..siblings)
        .map(|i| {
            format!(
                "{{ type = \"condition\", expression = \"context.turn.number >= {}\" }}",
                -(i as i64) - 1
            )
        })
        .collect();
    let mut node = "{ type = \"wait_turns\", turns = 10000 }".to_string();
    for _ in 0..depth {
        node = format!(
            "{{ type = \"sequence\", children = [ {}, {node} ] }}",
            conditions.join(", ")
        );
    }
    let text = format!(
        "[behavior]\nid = \"deep\"\ntrigger = \"on_turn_start\"\n\n[tree]\ntype = \"sequence\"\nchildren = [ {}, {node} ]\n",
        conditions.join(", ")
    );
    std::fs::write(dir.join("deep.toml"), text)
        .expect("the benchmark writes its behavior to a temporary folder");
    Warden::builder()
        .rules_dir(dir)
        .build()
        .expect("the benchmark behavior loads")
}

/// The one expression rule with the built-in context-window modes: what detecting the mode
/// costs a tick (compare with [`OneRule::Expression`] alone).
pub fn one_rule_with_modes(dir: &std::path::Path) -> Warden {
    one_rule(dir, OneRule::Expression);
    Warden::builder()
        .rules_dir(dir)
        .builtin_modes("context-window")
        .build()
        .expect("the benchmark rule loads")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ten_decision_rules_deny_and_the_others_notify() {
        let dir = tempfile::tempdir().unwrap();
        let w = decision_warden(dir.path(), 10);
        assert!(w.diagnostics().is_empty(), "{:?}", w.diagnostics());
        let mut s = w.session();
        assert_eq!(tick_tool_call(&mut s), 11, "10 decisions and the ruling");
        let dir = tempfile::tempdir().unwrap();
        let mut s = decision_warden(dir.path(), 0).session();
        assert_eq!(tick_tool_call(&mut s), 10, "10 notifications, no ruling");
    }

    #[test]
    fn the_one_rule_scenarios_load_and_run() {
        for kind in [
            OneRule::Expression,
            OneRule::ScriptCondition,
            OneRule::Coroutine,
            OneRule::ExpressionThreeFields,
            OneRule::ScriptThreeFields,
        ] {
            let dir = tempfile::tempdir().unwrap();
            let w = one_rule(dir.path(), kind);
            assert!(w.diagnostics().is_empty(), "{:?}", w.diagnostics());
            let mut s = w.session();
            for _ in 0..3 {
                assert_eq!(tick(&mut s), 0);
                let o = s.tick(
                    Hook::OnTurnStart,
                    Event::new().with_token_usage(TOKEN_USAGE),
                );
                assert!(o.errors.is_empty(), "{:?}", o.errors);
            }
        }
    }

    /// The coroutine resumed by the runtime alone waits again at every resume, as the
    /// session's does (a resume that failed or finished would measure something else).
    #[test]
    fn the_bare_resume_waits_at_every_resume() {
        let mut bare = BareResume::new();
        for _ in 0..1000 {
            assert_eq!(bare.resume(), 1);
        }
    }

    #[test]
    fn the_deep_tree_keeps_running_at_its_deep_node() {
        for siblings in [1, 100] {
            let dir = tempfile::tempdir().unwrap();
            let w = deep_tree(dir.path(), siblings, 4);
            assert!(w.diagnostics().is_empty(), "{:?}", w.diagnostics());
            let mut s = w.session_with(warden_core::SessionOptions {
                explain: true,
                ..Default::default()
            });
            s.tick(Hook::OnTurnStart, Event::new());
            let o = s.tick(Hook::OnTurnStart, Event::new());
            assert!(o.errors.is_empty(), "{:?}", o.errors);
            // Resumed directly: no condition runs again, only the running path (5 sequences
            // and the wait).
            assert_eq!(o.node_trace().count(), 6, "siblings {siblings}");
        }
        let dir = tempfile::tempdir().unwrap();
        let w = one_rule_with_modes(dir.path());
        // Without the built-in rules, two of the modes activate nothing: warnings only.
        assert!(
            w.diagnostics().iter().all(|d| !d.is_error()),
            "{:?}",
            w.diagnostics()
        );
        let o = w
            .session()
            .tick(Hook::OnTurnStart, Event::new().with_context_window(200_000));
        assert_eq!(&*o.mode, "full");
    }

    #[test]
    fn the_generated_rules_load_cleanly() {
        let dir = tempfile::tempdir().unwrap();
        for (name, toml) in many_rule_files(8) {
            std::fs::write(dir.path().join(name), toml).unwrap();
        }
        state_reader_rule(dir.path()).unwrap();
        state_writer_rule(dir.path()).unwrap();
        tool_counter_rule(dir.path()).unwrap();
        let w = Warden::builder().rules_dir(dir.path()).build().unwrap();
        assert!(w.diagnostics().is_empty(), "{:?}", w.diagnostics());
        let mut s = w.session();
        let o = s.tick(
            Hook::OnToolCall,
            Event::tool_call("web", serde_json::Value::Null),
        );
        assert!(o.errors.is_empty(), "{:?}", o.errors);
        let o = s.tick(
            Hook::OnTurnStart,
            Event::new().with_turn(1).with_token_usage(0.5),
        );
        assert!(o.errors.is_empty(), "{:?}", o.errors);
        // The two threshold rules, the reader, the writer's set_state and log.
        assert_eq!(o.effects.len(), 5, "{:?}", o.effects);
    }

    #[test]
    fn warden_and_the_floor_agree() {
        let dir = tempfile::tempdir().unwrap();
        let w = warden(dir.path());
        assert!(w.diagnostics().is_empty());
        let mut s = w.session();
        let by_hand = Floor::default().tick(TOKEN_USAGE);
        let outcome = s.tick(
            Hook::OnTurnStart,
            Event::new().with_token_usage(TOKEN_USAGE),
        );
        let ours: Vec<_> = outcome.notifications().cloned().collect();
        assert_eq!(ours, by_hand);
        assert_eq!(ours.len(), 10);
    }
}
