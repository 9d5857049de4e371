//! What `warden demo` and `warden replay --format text` print for a person: each event on one
//! line, then, indented, what Warden decided, naming the rule behind every line.
//!
//! A rule left running (a behavior or a script that waits) is said to wait once, then again
//! only when it moves on: when it resumes and waits at another node, acts, or finishes.
//! Where a behavior waits is read from the node trace, so the session is run in explain mode
//! (which decides exactly as an ordinary session does: the scenarios check it).

use std::collections::HashMap;
use std::fmt::Write as _;

use warden_core::{Effect, Evaluation, Event, Hook, NodeStatus, Outcome};

/// Follows a session event by event, and says what happened.
pub(crate) struct Narrator {
    /// The rules left running, each with the node it waits at (none for a script).
    waiting: HashMap<String, Option<String>>,
    /// The turn in progress, as the events said (or counted their turn starts).
    turn: Option<u32>,
    /// Every evaluation, the rules that did not fire too (`--explain`).
    explain: bool,
    /// Every behavior node that ran (`--trace`).
    nodes: bool,
    events: usize,
    fired: usize,
    injected: usize,
    errors: usize,
}

impl Narrator {
    pub(crate) fn new(explain: bool, nodes: bool) -> Self {
        Narrator {
            waiting: HashMap::new(),
            turn: None,
            explain,
            nodes,
            events: 0,
            fired: 0,
            injected: 0,
            errors: 0,
        }
    }

    /// The line of an event: its number, its hook, what it reports.
    pub(crate) fn event(&mut self, index: usize, hook: Hook, e: &Event) -> String {
        self.events += 1;
        if hook == Hook::OnTurnStart {
            let reported = e.turn.as_ref().and_then(|t| t.number);
            self.turn = reported.or(Some(self.turn.map_or(1, |n| n + 1)));
        }
        format!(
            "[{index:>2}] {:<17} {}\n",
            hook.name(),
            self.summary(hook, e)
        )
    }

    /// The line of a trace line that could not be read.
    pub(crate) fn unreadable(&mut self, index: usize, error: &str) -> String {
        self.errors += 1;
        format!("[{index:>2}] unreadable trace line: {error}\n")
    }

    /// The closing line: events, firings, notifications, errors.
    pub(crate) fn totals(&self) -> String {
        format!(
            "{} event{}, {} rule firing{}, {} notification{} injected, {} error{}.\n",
            self.events,
            s(self.events),
            self.fired,
            s(self.fired),
            self.injected,
            s(self.injected),
            self.errors,
            s(self.errors),
        )
    }

    fn summary(&self, hook: Hook, e: &Event) -> String {
        let mut s = String::new();
        match hook {
            Hook::OnQueryStart => {
                if let Some(q) = &e.query {
                    let _ = write!(s, "\"{}\"", q.text);
                }
            }
            Hook::OnTurnStart => {
                if let Some(n) = self.turn {
                    let _ = write!(s, "turn {n}");
                }
                if let Some(t) = &e.turn {
                    if let Some(u) = t.token_usage {
                        let _ = write!(s, ", tokens {:.0}%", u * 100.0);
                    }
                    if let Some(i) = t.iteration_count {
                        let _ = write!(s, ", iteration {i}");
                    }
                }
            }
            Hook::OnToolCall | Hook::OnToolComplete | Hook::OnToolFailure => {
                let name = e.tool.as_ref().map_or("?", |t| t.name.as_str());
                let _ = write!(s, "{name}");
                if let Some(count) = e.result.as_ref().and_then(|r| r.get("count")) {
                    let _ = write!(s, " -> {count} results");
                }
                if let Some(err) = &e.error {
                    let _ = write!(s, " failed: {err}");
                }
            }
            Hook::OnModeChange => {
                if let Some(d) = &e.data {
                    let _ = write!(s, "{} -> {}", d["from"], d["to"]);
                }
            }
            Hook::OnTurnEnd | Hook::OnSessionEnd => {
                let _ = match (hook, self.turn) {
                    (Hook::OnTurnEnd, Some(n)) => write!(s, "end of turn {n}"),
                    (Hook::OnTurnEnd, None) => write!(s, "end of a turn"),
                    (_, Some(n)) => write!(s, "after {n} turn{}", if n == 1 { "" } else { "s" }),
                    (_, None) => write!(s, "before any turn"),
                };
                if e.turn.as_ref().and_then(|t| t.is_final) == Some(true) {
                    s.push_str(", final answer");
                }
                if let Some(m) = &e.message {
                    let _ = write!(s, ", {}: \"{}\"", m.role, m.content);
                }
            }
        }
        s
    }

    /// What Warden decided at an event, indented under its line.
    pub(crate) fn outcome(&mut self, outcome: &Outcome) -> String {
        let mut s = String::new();
        if let Some(change) = &outcome.mode_change {
            let _ = writeln!(s, "       mode         {} -> {}", change.from, change.to);
            self.evaluations(&change.outcome, &mut s);
            effects(&change.outcome, &mut s);
            self.fired += change.outcome.fired().len();
        }
        self.evaluations(outcome, &mut s);
        effects(outcome, &mut s);
        if let Some(r) = &outcome.ruling {
            let input = r
                .input
                .as_ref()
                .map(|i| format!(" with {i}"))
                .unwrap_or_default();
            let _ = writeln!(s, "   ==> {} by {}{input}: {}", r.name(), r.rule, r.reason);
        }
        if let Some(e) = &outcome.enrichment {
            let ids = e.selected_ids();
            let _ = writeln!(
                s,
                "       knowledge    {} mode, {} of {} tokens: {}",
                e.mode,
                e.tokens_used,
                e.budget,
                if ids.is_empty() {
                    "no source".to_string()
                } else {
                    ids.join(", ")
                }
            );
        }
        for n in outcome.injected() {
            let _ = writeln!(
                s,
                "   >>> inject [{} {}] from {}: {}",
                n.priority.name(),
                n.category,
                n.rule,
                n.message
            );
        }
        for h in &outcome.halted {
            self.waiting.remove(&*h.rule);
            let _ = writeln!(s, "       halted       {}: {}", h.rule, h.reason);
        }
        for e in &outcome.errors {
            let _ = writeln!(
                s,
                "   !!! error {}: {}",
                e.rule.as_deref().unwrap_or("(event)"),
                e.error
            );
        }
        // Rules in shadow: what they would have done, none of it applied.
        for rule in outcome.shadow_fired() {
            let decided = outcome.shadow_decisions().find(|(r, _, _)| *r == rule);
            match decided {
                Some((_, d, why)) if !why.is_empty() => {
                    let _ = writeln!(
                        s,
                        "       shadow       {rule} would have decided {d}: {why}"
                    );
                }
                Some((_, d, _)) => {
                    let _ = writeln!(s, "       shadow       {rule} would have decided {d}");
                }
                None => {
                    let _ = writeln!(s, "       shadow       {rule} would have fired");
                }
            }
        }
        if self.explain {
            for (rule, evaluation) in outcome.shadow_trace() {
                if !matches!(evaluation, Evaluation::Fired) {
                    let _ = writeln!(
                        s,
                        "       shadow       {rule}: {}",
                        evaluation_words(evaluation)
                    );
                }
            }
        }
        for e in &outcome.shadow_errors {
            let _ = writeln!(
                s,
                "   !!! shadow error {}: {}",
                e.rule.as_deref().unwrap_or("(event)"),
                e.error
            );
        }
        self.fired += outcome.fired().len();
        self.injected += outcome.injected().len();
        self.errors += outcome.errors.len();
        s
    }

    /// A line per rule that did something (every rule evaluated, with `--explain`), and the
    /// nodes of behaviors (with `--trace`).
    fn evaluations(&mut self, outcome: &Outcome, s: &mut String) {
        if self.nodes {
            for (rule, node, status) in outcome.node_trace() {
                let _ = writeln!(s, "       node         {rule} {node}: {}", status.name());
            }
        }
        for (rule, evaluation) in outcome.trace() {
            let was_waiting = self.waiting.remove(rule);
            match evaluation {
                Evaluation::Fired => {
                    let _ = writeln!(s, "       fired        {rule}");
                }
                Evaluation::Undetermined(why) => {
                    let _ = writeln!(s, "       undetermined {rule}: {why}");
                }
                Evaluation::Suppressed(why) => {
                    let _ = writeln!(s, "       held back    {rule}: {why}");
                }
                Evaluation::Running => {
                    let at = waits_at(outcome, rule);
                    let acted = outcome.effects.iter().any(|e| e.rule() == rule);
                    let place = at
                        .as_deref()
                        .map(|a| format!(" at \"{a}\""))
                        .unwrap_or_default();
                    match &was_waiting {
                        None => {
                            let _ = writeln!(
                                s,
                                "       waiting      {rule}{place} (it carries on at a later hook)"
                            );
                        }
                        Some(before) if *before != at || acted => {
                            let _ = writeln!(s, "       resumed      {rule}, now waiting{place}");
                        }
                        Some(_) if self.explain => {
                            let _ = writeln!(s, "       waiting      {rule}{place}");
                        }
                        Some(_) => {}
                    }
                    self.waiting.insert(rule.to_string(), at);
                }
                Evaluation::Failed(why) if self.explain => {
                    let _ = writeln!(s, "       failed       {rule}: {why}");
                }
                Evaluation::NotMatched if self.explain => {
                    let _ = writeln!(s, "       not matched  {rule}");
                }
                Evaluation::Disabled if self.explain => {
                    let _ = writeln!(s, "       off          {rule}: switched off");
                }
                Evaluation::Inactive(mode) if self.explain => {
                    let _ = writeln!(s, "       inactive     {rule}: not active in mode `{mode}`");
                }
                _ => {}
            }
        }
        if self.explain {
            for o in &outcome.overridden {
                let _ = writeln!(
                    s,
                    "       overridden   {}: {} lost to {} ({})",
                    o.rule,
                    o.what(),
                    o.by,
                    o.why()
                );
            }
        }
    }
}

/// The node a running behavior waits at: the deepest node still running (nodes are traced
/// children first), without its number.
fn waits_at(outcome: &Outcome, rule: &str) -> Option<String> {
    outcome
        .node_trace()
        .find(|(r, _, status)| *r == rule && *status == NodeStatus::Running)
        .map(|(_, label, _)| {
            label
                .split_once(' ')
                .filter(|(n, _)| n.starts_with('#'))
                .map_or(label, |(_, rest)| rest)
                .to_string()
        })
}

/// The effects a person would not see otherwise: notifications queued for later, log lines,
/// state written, events published (notifications due now are the `>>> inject` lines).
fn effects(outcome: &Outcome, s: &mut String) {
    for effect in &outcome.effects {
        match effect {
            Effect::NotifySelf(n) if !n.deliver_at.is_due_at(outcome.hook) => {
                let _ = writeln!(
                    s,
                    "       queued       for {}, from {}: {}",
                    n.deliver_at.name(),
                    n.rule,
                    n.message
                );
            }
            Effect::Log {
                rule,
                level,
                message,
            } => {
                let _ = writeln!(s, "       log {:<8} from {rule}: {message}", level.name());
            }
            Effect::SetState {
                rule,
                plugin,
                key,
                value,
                scope,
            } => {
                let whose = if scope.is_session() {
                    " (this session's)"
                } else {
                    ""
                };
                let _ = writeln!(
                    s,
                    "       state        {plugin}.{key} = {value}{whose} (by {rule})"
                );
            }
            Effect::EmitEvent {
                rule,
                event_type,
                payload,
            } => {
                let _ = writeln!(s, "       event        {event_type} {payload} (by {rule})");
            }
            Effect::NotifySelf(_)
            | Effect::EnrichContext { .. }
            | Effect::Decide { .. }
            | Effect::Rewrite { .. } => {}
        }
    }
}

/// An evaluation of a rule in shadow that did not fire, in words (`--explain`).
fn evaluation_words(e: &Evaluation) -> String {
    match e {
        Evaluation::Fired => "fired".into(),
        Evaluation::NotMatched => "not matched".into(),
        Evaluation::Undetermined(why) => format!("undetermined: {why}"),
        Evaluation::Failed(why) => format!("failed: {why}"),
        Evaluation::Suppressed(why) => format!("held back: {why}"),
        Evaluation::Running => "waiting".into(),
        Evaluation::Disabled => "switched off".into(),
        Evaluation::Inactive(mode) => format!("not active in mode `{mode}`"),
    }
}

fn s(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}
