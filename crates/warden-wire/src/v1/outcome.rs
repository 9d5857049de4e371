//! The outcome of a tick as the agent API answers it (`POST /v1/sessions/{id}/events`), and
//! its parts: effects, the ruling, notifications, rule errors, halted scripts, overridden
//! decisions, the mode change.

use serde::Serialize;
use serde_json::Value as Json;

use super::knowledge::Enrichment;
use warden_load::Scope;
use warden_program::outcome as engine;
use warden_program::outcome::Proceed;

/// An outcome as the agent API answers it: what the host must do (`proceed`), what to inject,
/// and what every rule did.
#[derive(Debug, Serialize)]
pub struct Outcome<'a> {
    /// The session's id.
    pub session: &'a str,
    /// The hook that was handled.
    pub hook: &'static str,
    /// The mode the hook ran in.
    pub mode: &'a str,
    /// What the host must do, in one word ([`proceed_word`]).
    pub proceed: &'static str,
    /// Whether everything the tick wrote (the session, plugin state, the log) was committed.
    pub saved: bool,
    /// Why not, when it was not.
    pub unsaved: Option<&'a str>,
    /// The rules' decisions, merged.
    pub ruling: Option<Ruling<'a>>,
    /// The notifications due now.
    pub inject: Vec<Notification<'a>>,
    /// Those notifications written as one block for the agent's context.
    pub rendered: Option<&'a str>,
    /// The rules that fired, in order.
    pub fired: Vec<&'a str>,
    /// The effects applied, in order.
    pub effects: Vec<Effect<'a>>,
    /// Failures isolated to a rule.
    pub errors: Vec<RuleError<'a>>,
    /// Scripts and behaviors stopped before they finished.
    pub halted: Vec<Halted<'a>>,
    /// Decisions and rewrites the ruling overrode.
    pub overridden: Vec<Overridden<'a>>,
    /// The change of mode this event made, if any.
    pub mode_change: Option<ModeChange<'a>>,
    /// Knowledge for the agent's system prompt, when the tick enriched the query.
    pub enrichment: Option<Enrichment<'a>>,
}

impl<'a> Outcome<'a> {
    /// The answer to an event of `session`.
    pub fn of(session: &'a str, o: &'a engine::Outcome) -> Self {
        Outcome {
            session,
            hook: o.hook.name(),
            mode: &o.mode,
            proceed: proceed_word(o.proceed()),
            saved: o.unsaved.is_none(),
            unsaved: o.unsaved.as_deref(),
            ruling: o.ruling.as_ref().map(Ruling::from),
            inject: o.injected().iter().map(Notification::from).collect(),
            rendered: o.rendered(),
            fired: o.fired(),
            effects: o.effects.iter().map(Effect::from).collect(),
            errors: o.errors.iter().map(RuleError::from).collect(),
            halted: o.halted.iter().map(Halted::from).collect(),
            overridden: o.overridden.iter().map(Overridden::from).collect(),
            mode_change: o.mode_change.as_ref().map(ModeChange::from),
            enrichment: o.enrichment.as_deref().map(Enrichment::from),
        }
    }
}

/// Writes engine notifications as [`Notification`]s, for a `#[serde(serialize_with)]` field
/// of a body that keeps the engine's values (serve's trial report and session view).
pub fn notifications<S: serde::Serializer>(
    n: &[engine::Notification],
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_seq(n.iter().map(Notification::from))
}

/// Writes engine effects as [`Effect`]s, for a `#[serde(serialize_with)]` field.
pub fn effects<S: serde::Serializer>(e: &[engine::Effect], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(e.iter().map(Effect::from))
}

/// What the host must do, in one word: `yes`, `with_input`, `ask`, `no`, `keep_working` or
/// `stop` (see `Outcome::proceed`).
pub fn proceed_word(p: Proceed<'_>) -> &'static str {
    match p {
        Proceed::Yes => "yes",
        Proceed::WithInput(_) => "with_input",
        Proceed::Ask { .. } => "ask",
        Proceed::No { .. } => "no",
        Proceed::KeepWorking { .. } => "keep_working",
        Proceed::Stop { .. } => "stop",
    }
}

/// A change of mode: from what, to what, and the rules Warden's own `on_mode_change` fired.
#[derive(Debug, Serialize)]
pub struct ModeChange<'a> {
    /// The mode before.
    pub from: &'a str,
    /// The mode now.
    pub to: &'a str,
    /// The rules that fired at `on_mode_change`.
    pub fired: Vec<&'a str>,
}

impl<'a> From<&'a engine::ModeChange> for ModeChange<'a> {
    fn from(c: &'a engine::ModeChange) -> Self {
        ModeChange {
            from: &c.from,
            to: &c.to,
            fired: c.outcome.fired(),
        }
    }
}

/// A notification for the agent's context.
#[derive(Debug, Serialize)]
pub struct Notification<'a> {
    /// The rule that fired it.
    pub rule: &'a str,
    /// The rendered message.
    pub message: &'a str,
    /// Its category (`warning`, `hint`...).
    pub category: &'a str,
    /// How urgent it is (`low`, `normal`, `high`, `critical`).
    pub priority: &'static str,
    /// When it is to be injected.
    pub deliver_at: &'static str,
    /// The hook it was fired at.
    pub fired_at: &'static str,
}

impl<'a> From<&'a engine::Notification> for Notification<'a> {
    fn from(n: &'a engine::Notification) -> Self {
        Notification {
            rule: &n.rule,
            message: &n.message,
            category: &n.category,
            priority: n.priority.name(),
            deliver_at: n.deliver_at.name(),
            fired_at: n.fired_at.name(),
        }
    }
}

/// One applied effect of a fired rule, tagged by its `action`.
#[derive(Debug, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Effect<'a> {
    /// `notify_self`: a notification was queued.
    NotifySelf(Notification<'a>),
    /// `log`: a line was written to the log.
    Log {
        /// The rule.
        rule: &'a str,
        /// Its level.
        level: &'static str,
        /// The rendered message.
        message: &'a str,
    },
    /// `set_state`: a value was stored in the rule's plugin state.
    SetState {
        /// The rule.
        rule: &'a str,
        /// The plugin whose state it is.
        plugin: &'a str,
        /// `session` for the session's own state; absent for the shared state (the default).
        #[serde(skip_serializing_if = "Option::is_none")]
        scope: Option<&'static str>,
        /// The key.
        key: &'a str,
        /// The value.
        value: &'a Json,
    },
    /// `emit_event`: an event was published on the bus.
    EmitEvent {
        /// The rule.
        rule: &'a str,
        /// The event type.
        event_type: &'a str,
        /// The rendered payload.
        payload: &'a Json,
    },
    /// `enrich_context`: the query was enriched with knowledge.
    EnrichContext {
        /// The rule.
        rule: &'a str,
        /// The result: mode, selected sources, the `<reference_material>` section.
        enrichment: Enrichment<'a>,
    },
    /// `decide`: the rule decided about the event.
    Decide {
        /// The rule.
        rule: &'a str,
        /// What it decided.
        decision: &'static str,
        /// The rendered reason.
        reason: &'a str,
    },
    /// `rewrite`: the rule set paths of the tool call's arguments: each path (below
    /// `arguments`) and its value, as a pair.
    Rewrite {
        /// The rule.
        rule: &'a str,
        /// The paths and their values, in order.
        set: Vec<(&'a [String], &'a Json)>,
    },
}

impl<'a> From<&'a engine::Effect> for Effect<'a> {
    fn from(e: &'a engine::Effect) -> Self {
        match e {
            engine::Effect::NotifySelf(n) => Effect::NotifySelf(n.into()),
            engine::Effect::Log {
                rule,
                level,
                message,
            } => Effect::Log {
                rule,
                level: level.name(),
                message,
            },
            engine::Effect::SetState {
                rule,
                plugin,
                scope,
                key,
                value,
            } => Effect::SetState {
                rule,
                plugin,
                scope: (*scope != Scope::Shared).then(|| scope.name()),
                key,
                value,
            },
            engine::Effect::EmitEvent {
                rule,
                event_type,
                payload,
            } => Effect::EmitEvent {
                rule,
                event_type,
                payload,
            },
            engine::Effect::EnrichContext { rule, enrichment } => Effect::EnrichContext {
                rule,
                enrichment: Enrichment::from(&**enrichment),
            },
            engine::Effect::Decide {
                rule,
                decision,
                reason,
            } => Effect::Decide {
                rule,
                decision: decision.name(),
                reason,
            },
            engine::Effect::Rewrite { rule, set } => Effect::Rewrite {
                rule,
                set: set.iter().map(|(path, v)| (path.as_slice(), v)).collect(),
            },
        }
    }
}

/// What the rules decided about an event, merged.
#[derive(Debug, Serialize)]
pub struct Ruling<'a> {
    /// The decision; null when the rules only rewrote the call's arguments.
    pub decision: Option<&'static str>,
    /// The rule that decided.
    pub rule: &'a str,
    /// What the agent (or the person asked) is told.
    pub reason: &'a str,
    /// The whole rewritten arguments, when a rewrite applies.
    pub input: Option<&'a Json>,
}

impl<'a> From<&'a engine::Ruling> for Ruling<'a> {
    fn from(r: &'a engine::Ruling) -> Self {
        Ruling {
            decision: r.decision.map(|d| d.name()),
            rule: &r.rule,
            reason: &r.reason,
            input: r.input.as_ref(),
        }
    }
}

/// A decision or rewrite that did not make it into the ruling.
#[derive(Debug, Serialize)]
pub struct Overridden<'a> {
    /// The rule whose decision or rewrite was overridden.
    pub rule: &'a str,
    /// What it lost.
    pub lost: Lost<'a>,
    /// The rule that won.
    pub by: &'a str,
    /// The decision that won (null when a rewrite won a path).
    pub won: Option<&'static str>,
}

impl<'a> From<&'a engine::Overridden> for Overridden<'a> {
    fn from(o: &'a engine::Overridden) -> Self {
        Overridden {
            rule: &o.rule,
            lost: match &o.lost {
                engine::Lost::Decision(d) => Lost::Decision(d.name()),
                engine::Lost::Rewrite => Lost::Rewrite,
                engine::Lost::Path(p) => Lost::Path(p),
            },
            by: &o.by,
            won: o.won.map(|d| d.name()),
        }
    }
}

/// What an overridden rule had decided: `{"decision": "deny"}`, `"rewrite"`, or
/// `{"path": ["limit"]}` (a path below `arguments`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Lost<'a> {
    /// Its decision.
    Decision(&'static str),
    /// Its rewrite: the call does not run.
    Rewrite,
    /// Its rewrite of this path: a rule of higher priority set it first.
    Path(&'a [String]),
}

/// A failure isolated to one rule (or to the event itself, when `rule` is null).
#[derive(Debug, Serialize)]
pub struct RuleError<'a> {
    /// The rule concerned, if any.
    pub rule: Option<&'a str>,
    /// What went wrong.
    pub error: &'a str,
}

impl<'a> From<&'a engine::RuleError> for RuleError<'a> {
    fn from(e: &'a engine::RuleError) -> Self {
        RuleError {
            rule: e.rule.as_deref(),
            error: &e.error,
        }
    }
}

/// A script or a behavior stopped before it finished.
#[derive(Debug, Serialize)]
pub struct Halted<'a> {
    /// The rule whose script was stopped.
    pub rule: &'a str,
    /// Why.
    pub reason: &'a str,
}

impl<'a> From<&'a engine::Halted> for Halted<'a> {
    fn from(h: &'a engine::Halted) -> Self {
        Halted {
            rule: &h.rule,
            reason: &h.reason,
        }
    }
}
