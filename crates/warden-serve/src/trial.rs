//! The Test button (`POST /v1/rules/{id}/test`): runs one rule now, against events the caller
//! gives or a sample session, and says whether it fired, what it would inject or decide, and
//! why. Nothing real is touched: the trial runs on a Warden of its own with the same program
//! and an in-memory store, in a session of its own, with the user's settings copied in. The
//! rule runs on its own: every other rule that users may switch off is off in the trial, and
//! what core rules do there is not reported.

use serde_json::{Value as Json, json};
use warden_core::{Effect, Hook, Outcome, RuleDef, RuleInfo, SessionOptions, SetBy, Store, Warden};
use warden_wire::v1::line::parse_value;
use warden_wire::v1::replay::explain_lines;
use warden_wire::v1::{TrialReport, TrialRequest};

use crate::error::ApiError;
use crate::sessions::Owner;

/// The most events a trial runs.
pub(crate) const MAX_EVENTS: usize = 100;

/// The events of a trial: the caller's, or the sample for `rule`.
pub(crate) fn events_of(
    request: TrialRequest,
    rule: &RuleDef,
) -> Result<(Vec<Json>, bool), ApiError> {
    if request.events.is_none() && request.event.is_none() {
        return Ok((sample(rule), true));
    }
    // `event` alone is one event; with `events`, it comes after them.
    let mut events = request.events.unwrap_or_default();
    events.extend(request.event);
    if events.is_empty() {
        return Err(ApiError::unprocessable(
            "`events` is empty: give at least one event, or send `{}` for the sample",
        ));
    }
    if events.len() > MAX_EVENTS {
        return Err(ApiError::unprocessable(format!(
            "a trial runs at most {MAX_EVENTS} events"
        )));
    }
    Ok((events, false))
}

/// A short session that ends at the rule's hook, with values that the usual conditions
/// notice: a research query, a turn late in its budgets, a tool (the rule's own, when it
/// names tools) that returns many results or fails three times.
pub(crate) fn sample(rule: &RuleDef) -> Vec<Json> {
    let tool = rule.tools.first().map_or("vault_search", String::as_str);
    let query = json!({"hook": "on_query_start", "query": "Research and compare what the sources say about write-ahead logging"});
    let turn = json!({"hook": "on_turn_start", "turn": {"number": 3, "token_usage": 0.9, "context_usage": 0.85, "iteration_count": 8, "max_iterations": 10, "context_window": 200000}});
    let call = json!({"hook": "on_tool_call", "tool": {"name": tool, "arguments": {"query": "write-ahead logging", "limit": 50}}});
    let mut events = vec![query];
    match rule.trigger {
        Hook::OnQueryStart => {}
        Hook::OnTurnStart | Hook::OnModeChange => events.push(turn),
        Hook::OnToolCall => events.extend([turn, call]),
        Hook::OnToolComplete => {
            let results: Vec<Json> = (1..=12).map(|i| json!({"title": format!("Source {i}")})).collect();
            events.extend([
                turn,
                call,
                json!({"hook": "on_tool_complete", "tool": {"name": tool}, "result": {"count": 12, "results": results}}),
            ]);
        }
        Hook::OnToolFailure => {
            events.push(turn);
            for _ in 0..3 {
                events.push(call.clone());
                events.push(json!({"hook": "on_tool_failure", "tool": {"name": tool}, "error": "timeout"}));
            }
        }
        Hook::OnTurnEnd => events.extend([
            turn,
            json!({"hook": "on_turn_end", "turn": {"final": true}, "message": {"role": "assistant", "content": "Here is what I found."}}),
        ]),
        Hook::OnSessionEnd => events.extend([turn, json!({"hook": "on_session_end"})]),
    }
    events
}

/// Runs `rule` (as `info` describes it for the owner) through `events`, on a trial Warden.
pub(crate) fn run(
    warden: &Warden,
    info: &RuleInfo,
    tools: &[String],
    owner: &Owner,
    events: Vec<Json>,
    sample: bool,
) -> Result<TrialReport, ApiError> {
    let mut parsed = Vec::with_capacity(events.len());
    for (i, e) in events.iter().enumerate() {
        let t = parse_value(i, e.clone()).map_err(|err| {
            ApiError::unprocessable(format!("events[{i}]: {}", err.message)).with("event", i)
        })?;
        parsed.push(t);
    }
    let trial = trial_warden(warden, info, owner)?;
    let mut session = trial.session_with(SessionOptions {
        id: Some("trial".into()),
        user: Some(owner.user.clone()),
        project: Some(owner.project.clone()),
        explain: true,
    });
    let outcomes: Vec<Outcome> = parsed
        .into_iter()
        .map(|t| session.tick_shared(t.hook, t.event))
        .collect();
    Ok(report(info, tools, &outcomes, events, sample))
}

/// A Warden with the same program on an in-memory store, where `owner` has the settings they
/// have for real, the rule on, and every other rule that can be switched off, off.
fn trial_warden(warden: &Warden, info: &RuleInfo, owner: &Owner) -> Result<Warden, ApiError> {
    let failed =
        |e: &dyn std::fmt::Display| ApiError::internal(format!("the trial could not start: {e}"));
    let store = Store::in_memory().map_err(|e| failed(&e))?;
    let trial = warden.with_store(store).map_err(|e| failed(&e))?;
    let (user, project) = (owner.user.as_str(), owner.project.as_str());
    for s in warden.setting_list(user, project) {
        if s.set_by != SetBy::Default {
            trial.set_setting(user, Some(project), &s.key, &s.value.to_json())?;
        }
    }
    for r in trial.rule_list(user, project) {
        if r.key == info.key {
            trial.set_rule_enabled(user, &r.key, true)?;
        } else if !r.core {
            trial.set_rule_enabled(user, &r.key, false)?;
        }
    }
    Ok(trial)
}

/// What the outcomes say of the rule.
fn report(
    info: &RuleInfo,
    tools: &[String],
    outcomes: &[Outcome],
    events: Vec<Json>,
    sample: bool,
) -> TrialReport {
    let key = info.key.as_str();
    let mut effects = Vec::new();
    let mut errors = Vec::new();
    let mut last: Option<(String, Option<String>)> = None;
    let mut input = None;
    for (i, o) in outcomes.iter().enumerate() {
        let steps = o
            .mode_change
            .as_ref()
            .map(|c| &*c.outcome)
            .into_iter()
            .chain([o]);
        for step in steps {
            effects.extend(step.effects.iter().filter(|e| e.rule() == key).cloned());
        }
        errors.extend(
            o.errors
                .iter()
                .filter(|e| e.rule.as_deref().is_none_or(|r| r == key))
                .map(|e| format!("event {i}: {}", e.error)),
        );
        // The engine's own words for each evaluation, as `warden replay --explain` prints them.
        for line in explain_lines(i, o) {
            if line["rule"] == key && line.get("evaluation").is_some() {
                let word = line["evaluation"].as_str().unwrap_or("").to_string();
                let reason = line["reason"].as_str().map(str::to_string);
                last = Some((word, reason));
            }
        }
        if let Some(r) = o.ruling.as_ref().filter(|r| &*r.rule == key) {
            input.clone_from(&r.input);
        }
    }
    let fired = outcomes.iter().any(|o| {
        o.fired().contains(&key)
            || o.mode_change
                .as_ref()
                .is_some_and(|c| c.outcome.fired().contains(&key))
    });
    let messages = effects
        .iter()
        .filter_map(|e| match e {
            Effect::NotifySelf(n) => Some(n.clone()),
            _ => None,
        })
        .collect();
    let decision = effects.iter().find_map(|e| match e {
        Effect::Decide {
            decision, reason, ..
        } => Some(json!({"decision": decision.name(), "reason": &**reason})),
        _ => None,
    });
    let (evaluation, why) = match last {
        None => (
            "not_reached".to_string(),
            format!(
                "no event reached it: it runs at `{}`{}",
                info.hook.name(),
                match (info.hook, tools.is_empty()) {
                    (Hook::OnModeChange, _) => {
                        ", when the mode changes; give events that change the mode".to_string()
                    }
                    (_, true) => String::new(),
                    (_, false) => format!(", for the tools {}", tools.join(", ")),
                }
            ),
        ),
        Some((word, reason)) => {
            let why = match (word.as_str(), reason) {
                ("fired", _) => format!("its condition held: {}", info.condition),
                ("not_matched", _) => format!("its condition was false: {}", info.condition),
                (w, Some(r)) => format!("{}: {r}", w.replace('_', " ")),
                (w, None) => w.replace('_', " "),
            };
            (word, why)
        }
    };
    TrialReport {
        rule: key.to_string(),
        fired,
        evaluation,
        why,
        messages,
        decision,
        input,
        effects,
        errors,
        events,
        sample,
        enabled_for_user: info.enabled,
    }
}
