//! The `[action]` of a rule (and the action nodes of a behavior): what happens when it fires.
//! Strings are templates, compiled by the engine; here they are read and checked for shape.

use std::ops::Range;

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;
use warden_input::{At, Doc, Located, Table, closest};

use crate::hook::Hook;

/// When a notification is injected into the agent's context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliverAt {
    /// With the outcome of the hook that fired it.
    Immediate,
    /// At the next `on_turn_start` (now, if that is the hook that fired it).
    TurnStart,
    /// At the next `on_turn_end` (now, if that is the hook that fired it).
    TurnEnd,
}

impl DeliverAt {
    /// The names a rule file may use.
    pub const NAMES: &[&str] = &["immediate", "turn_start", "turn_end"];

    /// The value a file writes as `s`, if it is one of [`Self::NAMES`].
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "immediate" => DeliverAt::Immediate,
            "turn_start" => DeliverAt::TurnStart,
            "turn_end" => DeliverAt::TurnEnd,
            _ => return None,
        })
    }

    /// The name as written in rule files.
    pub fn name(self) -> &'static str {
        match self {
            DeliverAt::Immediate => "immediate",
            DeliverAt::TurnStart => "turn_start",
            DeliverAt::TurnEnd => "turn_end",
        }
    }

    /// Whether a notification for this point is due at `hook`.
    pub fn is_due_at(self, hook: Hook) -> bool {
        match self {
            DeliverAt::Immediate => true,
            DeliverAt::TurnStart => hook == Hook::OnTurnStart,
            DeliverAt::TurnEnd => hook == Hook::OnTurnEnd,
        }
    }
}

/// Where a `set_state` value lives, and so who reads it back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Shared by every session of the same user and project, and kept across them (in the
    /// store): `context.state`.
    #[default]
    Shared,
    /// This session's own: saved with the session, and gone with it. Another conversation of
    /// the same user never sees it: `context.session_state`.
    Session,
}

impl Scope {
    /// The names a rule file may use.
    pub const NAMES: &[&str] = &["shared", "session"];

    /// The value a file writes as `s`, if it is one of [`Self::NAMES`].
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "shared" => Scope::Shared,
            "session" => Scope::Session,
            _ => return None,
        })
    }

    /// The name as written in rule files.
    pub fn name(self) -> &'static str {
        match self {
            Scope::Shared => "shared",
            Scope::Session => "session",
        }
    }

    /// Whether it is the session's own.
    pub fn is_session(self) -> bool {
        self == Scope::Session
    }
}

/// How urgent a notification is. Injection order is most urgent first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Priority {
    /// Background information.
    Low,
    /// The default.
    Normal,
    /// Worth acting on soon.
    High,
    /// Act now.
    Critical,
}

impl Priority {
    /// The names a rule file may use.
    pub const NAMES: &[&str] = &["low", "normal", "high", "critical"];

    /// The value a file writes as `s`, if it is one of [`Self::NAMES`].
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "low" => Priority::Low,
            "normal" => Priority::Normal,
            "high" => Priority::High,
            "critical" => Priority::Critical,
            _ => return None,
        })
    }

    /// The name as written in rule files.
    pub fn name(self) -> &'static str {
        match self {
            Priority::Low => "low",
            Priority::Normal => "normal",
            Priority::High => "high",
            Priority::Critical => "critical",
        }
    }
}

/// The level of a `log` action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LogLevel {
    /// Debugging detail.
    Debug,
    /// Normal operation.
    Info,
    /// Something to look at.
    Warning,
    /// Something went wrong.
    Error,
}

impl LogLevel {
    /// The names a rule file may use (`warn` is accepted for `warning`).
    pub const NAMES: &[&str] = &["debug", "info", "warning", "error"];

    /// The value a file writes as `s`, if it is one of [`Self::NAMES`].
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "debug" => LogLevel::Debug,
            "info" => LogLevel::Info,
            "warning" | "warn" => LogLevel::Warning,
            "error" => LogLevel::Error,
            _ => return None,
        })
    }

    /// The name as written in rule files.
    pub fn name(self) -> &'static str {
        match self {
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Warning => "warning",
            LogLevel::Error => "error",
        }
    }
}

/// What a rule can decide about the event it sees. The host must honour it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// The tool call may run (the host's permission prompts still apply).
    Allow,
    /// Ask a person before the tool call runs.
    Ask,
    /// The tool call does not run, or the prompt is refused.
    Deny,
    /// The agent must not stop: it goes on working, with the reason as its next instruction.
    Continue,
    /// The session ends now.
    Stop,
}

impl Decision {
    /// The names a rule file may use.
    pub const NAMES: &[&str] = &["allow", "ask", "deny", "continue", "stop"];

    /// The value a file writes as `s`, if it is one of [`Self::NAMES`].
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "allow" => Decision::Allow,
            "ask" => Decision::Ask,
            "deny" => Decision::Deny,
            "continue" => Decision::Continue,
            "stop" => Decision::Stop,
            _ => return None,
        })
    }

    /// The name as written in rule files.
    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    /// Whether the decision means something at `hook`.
    pub fn valid_at(self, hook: Hook) -> bool {
        match self {
            Decision::Allow | Decision::Ask => hook == Hook::OnToolCall,
            Decision::Deny => matches!(hook, Hook::OnToolCall | Hook::OnQueryStart),
            Decision::Continue => hook == Hook::OnTurnEnd,
            Decision::Stop => true,
        }
    }

    /// Where the decision means something, in words.
    pub fn where_valid(self) -> &'static str {
        match self {
            Decision::Allow | Decision::Ask => "on_tool_call (before the call runs)",
            Decision::Deny => {
                "on_tool_call (refuse the call) and on_query_start (refuse the prompt)"
            }
            Decision::Continue => "on_turn_end (the agent wants to stop; it must go on)",
            Decision::Stop => "every hook",
        }
    }

    /// Why the decision means nothing at `hook`, if it does not.
    pub fn misplaced_at(self, hook: Hook) -> Option<String> {
        (!self.valid_at(hook)).then(|| {
            format!(
                "`{}` means nothing at {hook}: it is made at {}",
                self.name(),
                self.where_valid()
            )
        })
    }

    /// How restrictive it is: the most restrictive decision of an event wins (`stop` over
    /// `deny` over `ask` over `allow`; `continue` is only made at `on_turn_end`, where only
    /// `stop` can beat it).
    pub fn rank(self) -> u8 {
        match self {
            Decision::Allow => 0,
            Decision::Ask => 1,
            Decision::Continue => 2,
            Decision::Deny => 3,
            Decision::Stop => 4,
        }
    }
}

/// What to do when a decision rule's guard fails (its condition errors, its script times out).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OnError {
    /// Make no decision (the error is reported; the host's default applies).
    #[default]
    Ignore,
    /// Deny, with a reason that says the guard failed (fail closed).
    Deny,
}

impl OnError {
    /// The names a rule file or manifest may use.
    pub const NAMES: &[&str] = &["ignore", "deny"];

    /// The value a file writes as `s`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "ignore" => Some(OnError::Ignore),
            "deny" => Some(OnError::Deny),
            _ => None,
        }
    }
}

/// Why a rewrite means nothing at `hook`, if it does not: it changes a tool call's arguments
/// before the call runs.
pub fn rewrite_misplaced_at(hook: Hook) -> Option<String> {
    (hook != Hook::OnToolCall).then(|| {
        format!(
            "a rewrite changes a tool call's arguments before it runs, so it is made at on_tool_call, not at {hook}"
        )
    })
}

/// One path a rewrite sets in a tool call's arguments.
#[derive(Debug, Clone)]
pub struct RewriteSet {
    /// The path below `arguments` (`["limit"]` for `arguments.limit`).
    pub path: Vec<String>,
    /// The value: strings are templates; `"{{ expr }}"` alone keeps the expression's type.
    pub value: Json,
    /// Where the entry was written.
    pub span: Range<usize>,
    /// Its field (`action.set."arguments.limit"`).
    pub field: String,
}

/// One action of a rule, as the file defines it. Strings are templates, compiled later.
#[derive(Debug, Clone)]
pub enum ActionDef {
    /// Inject a notification into the agent's context.
    NotifySelf {
        /// The message template.
        message: Located,
        /// A free label (`warning`, `hint`...).
        category: String,
        /// How urgent it is.
        priority: Priority,
        /// When it is injected.
        deliver_at: DeliverAt,
    },
    /// Write a line to the log.
    Log {
        /// The message template.
        message: Located,
        /// Its level.
        level: LogLevel,
    },
    /// Store a value in the plugin's state: shared by the user's sessions in the project, or
    /// the session's own.
    SetState {
        /// The key (a template).
        key: Located,
        /// Where the value lives.
        scope: Scope,
        /// The value: strings are templates; `"{{ expr }}"` alone keeps the expression's type.
        value: Json,
        /// Where the value was written.
        value_span: Range<usize>,
    },
    /// Publish an event on the bus.
    EmitEvent {
        /// The event type.
        event_type: Located,
        /// The payload: strings anywhere inside are templates.
        payload: Json,
        /// Where the payload was written.
        payload_span: Range<usize>,
    },
    /// Enrich the query with knowledge sources (see `Outcome::enrichment`).
    EnrichContext {
        /// The text to classify (a template); the session's latest query when absent.
        query: Option<Located>,
    },
    /// Decide about the event: allow, ask or deny a tool call, deny a prompt, keep the agent
    /// working, or stop the session.
    Decide {
        /// The decision.
        decision: Decision,
        /// Where it was written.
        decision_span: Range<usize>,
        /// What the agent (or the person asked) is told: a template.
        reason: Located,
    },
    /// Rewrite the tool call's arguments before it runs.
    Rewrite {
        /// The paths set, in the order written.
        set: Vec<RewriteSet>,
        /// Where the action was written.
        span: Range<usize>,
    },
}

impl ActionDef {
    /// The action's type name as written in rule files.
    pub fn type_name(&self) -> &'static str {
        match self {
            ActionDef::NotifySelf { .. } => "notify_self",
            ActionDef::Log { .. } => "log",
            ActionDef::SetState { .. } => "set_state",
            ActionDef::EmitEvent { .. } => "emit_event",
            ActionDef::EnrichContext { .. } => "enrich_context",
            ActionDef::Decide { .. } => "decide",
            ActionDef::Rewrite { .. } => "rewrite",
        }
    }

    /// Why this action means nothing at `hook`, if it does not (a decision or rewrite that
    /// has no effect there).
    pub fn misplaced_at(&self, hook: Hook) -> Option<String> {
        match self {
            ActionDef::Decide { decision, .. } => decision.misplaced_at(hook),
            ActionDef::Rewrite { .. } => rewrite_misplaced_at(hook),
            _ => None,
        }
    }
}

/// The action types, with the fields each takes.
pub const ACTION_TYPES: &[(&str, &[&str])] = &[
    (
        "notify_self",
        &["type", "message", "category", "priority", "deliver_at"],
    ),
    ("log", &["type", "message", "level"]),
    ("set_state", &["type", "key", "value", "scope"]),
    ("emit_event", &["type", "event_type", "payload"]),
    ("enrich_context", &["type", "query"]),
    ("decide", &["type", "decision", "reason"]),
    ("rewrite", &["type", "set"]),
];

pub(crate) fn read_actions(
    doc: &mut Doc,
    top: &mut Table<'_>,
    scripted: bool,
) -> Option<Vec<ActionDef>> {
    let Some(raw) = top.raw("action") else {
        if scripted {
            // A script can act by itself (notify, set_state...); [action] is then optional.
            return Some(Vec::new());
        }
        doc.error(
            doc.end(),
            "action",
            "the rule has no [action] (the file ends here)",
            Some("add [action] with `type = \"notify_self\"` and a `message`".into()),
        );
        return None;
    };
    let tables: Vec<(Table<'_>, String)> = match raw.get_ref() {
        toml::de::DeValue::Table(t) => vec![(Table::new(t, "action", raw.span()), "action".into())],
        toml::de::DeValue::Array(items) => {
            let mut out = Vec::new();
            for (i, item) in items.iter().enumerate() {
                match item.get_ref() {
                    toml::de::DeValue::Table(t) => {
                        let name = format!("action[{i}]");
                        out.push((Table::new(t, name.clone(), item.span()), name));
                    }
                    _ => doc.error(
                        item.span(),
                        "action",
                        "each [[action]] must be a table",
                        None,
                    ),
                }
            }
            if out.is_empty() {
                doc.error(raw.span(), "action", "the rule has no actions", None);
            }
            out
        }
        _ => {
            doc.error(
                raw.span(),
                "action",
                "`action` must be a table ([action]) or tables ([[action]])",
                None,
            );
            return None;
        }
    };
    let mut actions = Vec::new();
    let mut ok = true;
    for (table, name) in tables {
        match read_action(doc, table, &name) {
            Some(a) => actions.push(a),
            None => ok = false,
        }
    }
    ok.then_some(actions).filter(|a| scripted || !a.is_empty())
}

fn enum_field<T>(
    doc: &mut Doc,
    t: &mut Table<'_>,
    key: &'static str,
    names: &[&str],
    parse: fn(&str) -> Option<T>,
    default: T,
) -> Option<T> {
    let Some(at) = t.string(doc, key) else {
        return (!t.has(key)).then_some(default);
    };
    match parse(&at.value) {
        Some(v) => Some(v),
        None => {
            let help = closest(&at.value, names.iter().copied())
                .map(|s| format!("did you mean `{s}`?"))
                .unwrap_or_else(|| format!("use one of {}", names.join(", ")));
            doc.error(
                at.span,
                &t.field(key),
                format!("unknown {key} `{}`", at.value),
                Some(help),
            );
            None
        }
    }
}

fn required(
    doc: &mut Doc,
    t: &mut Table<'_>,
    key: &'static str,
    ty: &str,
    example: &str,
) -> Option<Located> {
    match t.string(doc, key) {
        Some(at) => Some(Located::new(at, t.field(key))),
        None => {
            if !t.has(key) {
                doc.error(
                    t.span.clone(),
                    &t.field(key),
                    format!("a {ty} action needs `{key}`"),
                    Some(format!("add `{key} = {example}`")),
                );
            }
            None
        }
    }
}

pub(crate) fn read_action(doc: &mut Doc, mut t: Table<'_>, name: &str) -> Option<ActionDef> {
    let ty = t.string(doc, "type");
    let known = ty
        .as_ref()
        .and_then(|ty| ACTION_TYPES.iter().find(|(n, _)| *n == ty.value))
        .map(|(_, fields)| *fields);
    let action = read_action_fields(doc, &mut t, name, ty);
    // Unknown keys are reported even when another field is wrong.
    if let Some(fields) = known {
        t.finish(doc, fields);
    }
    action
}

pub(crate) fn read_action_fields(
    doc: &mut Doc,
    t: &mut Table<'_>,
    name: &str,
    ty: Option<At<String>>,
) -> Option<ActionDef> {
    let Some(ty) = ty else {
        if !t.has("type") {
            let types: Vec<_> = ACTION_TYPES.iter().map(|(n, _)| *n).collect();
            doc.error(
                t.span.clone(),
                &format!("{name}.type"),
                format!("[{name}] has no `type`"),
                Some(format!("the types are {}", types.join(", "))),
            );
        }
        return None;
    };
    if !ACTION_TYPES.iter().any(|(n, _)| *n == ty.value) {
        let types: Vec<_> = ACTION_TYPES.iter().map(|(n, _)| *n).collect();
        let help = closest(&ty.value, types.iter().copied())
            .map(|s| format!("did you mean `{s}`?"))
            .unwrap_or_else(|| format!("the types are {}", types.join(", ")));
        doc.error(
            ty.span,
            &format!("{name}.type"),
            format!("unknown action type `{}`", ty.value),
            Some(help),
        );
        return None;
    }
    let t = &mut *t;
    Some(match ty.value.as_str() {
        "notify_self" => {
            let message = required(doc, t, "message", "notify_self", "\"...\"");
            let category = t
                .string(doc, "category")
                .map_or_else(|| "info".to_string(), |a| a.value);
            let priority = enum_field(
                doc,
                t,
                "priority",
                Priority::NAMES,
                Priority::parse,
                Priority::Normal,
            );
            let deliver_at = enum_field(
                doc,
                t,
                "deliver_at",
                DeliverAt::NAMES,
                DeliverAt::parse,
                DeliverAt::TurnStart,
            );
            ActionDef::NotifySelf {
                message: message?,
                category,
                priority: priority?,
                deliver_at: deliver_at?,
            }
        }
        "log" => {
            let message = required(doc, t, "message", "log", "\"...\"");
            let level = enum_field(
                doc,
                t,
                "level",
                LogLevel::NAMES,
                LogLevel::parse,
                LogLevel::Info,
            );
            ActionDef::Log {
                message: message?,
                level: level?,
            }
        }
        "set_state" => {
            let key = required(doc, t, "key", "set_state", "\"my_key\"");
            let value = t.json(doc, "value");
            // (A value that is there but refused has been reported.)
            if value.is_none() && !t.has("value") {
                doc.error(
                    t.span.clone(),
                    &t.field("value"),
                    "a set_state action needs `value`",
                    Some("add `value = ...` (any TOML value; strings are templates)".into()),
                );
            }
            let scope = enum_field(doc, t, "scope", Scope::NAMES, Scope::parse, Scope::Shared);
            let value = value?;
            ActionDef::SetState {
                key: key?,
                scope: scope?,
                value: value.value,
                value_span: value.span,
            }
        }
        "decide" => {
            let decision = t.string(doc, "decision");
            let reason = required(doc, t, "reason", "decide", "\"what the agent is told\"");
            let decision = match decision {
                Some(at) => match Decision::parse(&at.value) {
                    Some(d) => Some((d, at.span)),
                    None => {
                        let help = closest(&at.value, Decision::NAMES.iter().copied())
                            .map(|s| format!("did you mean `{s}`?"))
                            .unwrap_or_else(|| {
                                format!("the decisions are {}", Decision::NAMES.join(", "))
                            });
                        doc.error(
                            at.span,
                            &t.field("decision"),
                            format!("unknown decision `{}`", at.value),
                            Some(help),
                        );
                        None
                    }
                },
                None => {
                    if !t.has("decision") {
                        doc.error(
                            t.span.clone(),
                            &t.field("decision"),
                            "a decide action needs `decision`",
                            Some(format!(
                                "add `decision = \"deny\"` ({})",
                                Decision::NAMES.join(", ")
                            )),
                        );
                    }
                    None
                }
            };
            let (decision, decision_span) = decision?;
            ActionDef::Decide {
                decision,
                decision_span,
                reason: reason?,
            }
        }
        "rewrite" => read_rewrite(doc, t)?,
        "enrich_context" => ActionDef::EnrichContext {
            query: t
                .string(doc, "query")
                .map(|at| Located::new(at, t.field("query"))),
        },
        _ => {
            let event_type = required(doc, t, "event_type", "emit_event", "\"my.event\"");
            let payload = t.json(doc, "payload");
            if let Some(p) = &payload
                && !p.value.is_object()
            {
                doc.error(
                    p.span.clone(),
                    &t.field("payload"),
                    "`payload` must be a table",
                    Some("write `payload = { key = \"value\" }`".into()),
                );
                return None;
            }
            let (payload, payload_span) = payload
                .map_or((Json::Object(Default::default()), t.span.clone()), |p| {
                    (p.value, p.span)
                });
            ActionDef::EmitEvent {
                event_type: event_type?,
                payload,
                payload_span,
            }
        }
    })
}

/// `[action.set]`: paths inside the tool's arguments (`"arguments.limit"`), each to a value.
fn read_rewrite(doc: &mut Doc, t: &mut Table<'_>) -> Option<ActionDef> {
    let field = t.field("set");
    let Some(mut set) = t.table(doc, "set") else {
        if !t.has("set") {
            doc.error(
                t.span.clone(),
                &field,
                "a rewrite action needs `set`, the arguments to change",
                Some("add `set = { \"arguments.limit\" = 50 }` (or an [action.set] table)".into()),
            );
        }
        return None;
    };
    let mut out = Vec::new();
    let mut ok = true;
    let entries: Vec<_> = set.entries().collect();
    for (key, value) in entries {
        let entry = format!("{field}.\"{}\"", key.value);
        let path: Vec<&str> = key.value.split('.').collect();
        let inside =
            path.len() >= 2 && path[0] == "arguments" && path.iter().all(|p| !p.trim().is_empty());
        if !inside {
            doc.error(
                key.span.clone(),
                &entry,
                format!(
                    "`{}` is not a path inside the tool's arguments",
                    key.value
                ),
                Some("a rewrite sets paths that start with `arguments.`, such as \"arguments.limit\" or \"arguments.options.dry_run\"".into()),
            );
            // Marked as read: reported here, not again as an unknown key.
            set.raw(key.value);
            ok = false;
            continue;
        }
        let Some(json) = set.json(doc, key.value) else {
            ok = false;
            continue;
        };
        out.push(RewriteSet {
            path: path[1..].iter().map(|p| p.to_string()).collect(),
            value: json.value,
            span: key.span.start..value.span().end,
            field: entry,
        });
    }
    let set_span = set.span.clone();
    // Every key was read above (or reported): nothing is left for `finish` to report.
    set.finish(doc, &[]);
    if out.is_empty() && ok {
        doc.error(
            set_span,
            &field,
            "`set` is empty: a rewrite needs at least one argument to change",
            Some("write `set = { \"arguments.limit\" = 50 }`".into()),
        );
        return None;
    }
    ok.then_some(ActionDef::Rewrite {
        set: out,
        span: t.span.clone(),
    })
}
