//! Rule files: the TOML format of the data model, read into a [`RuleDef`] with every problem
//! reported at its file, line and field.
//!
//! ```toml
//! [rule]
//! id = "token-budget-warning"
//! trigger = "on_turn_start"
//! priority = 100
//!
//! [condition]
//! expression = "context.turn.token_usage > 0.8"
//!
//! [action]
//! type = "notify_self"
//! message = "Token budget at {{ (context.turn.token_usage * 100) | int }}%."
//! ```

use std::ops::Range;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value as Json;

use crate::diagnostic::{Diagnostic, SourceFile};
use crate::hook::Hook;
use crate::suggest::closest;
use crate::toml_reader::{At, Doc, Table};

/// The fields of `[rule]`.
pub const RULE_FIELDS: &[&str] = &[
    "id",
    "name",
    "description",
    "version",
    "trigger",
    "priority",
    "enabled",
    "core",
    "tool",
    "exclusive",
    "tags",
    "cooldown_turns",
    "once_per_session",
    "max_fires",
    "condition",
];

/// The fields of `[behavior]`: a rule's but the last, `condition` (a behavior's is the
/// `[tree]`).
pub const BEHAVIOR_FIELDS: &[&str] = RULE_FIELDS.split_last().unwrap().1;

/// The default priority of a rule (the data model's).
pub const DEFAULT_PRIORITY: i64 = 100;

/// A rule as its file defines it, validated but not yet compiled.
#[derive(Debug, Clone)]
pub struct RuleDef {
    /// Unique (within its plugin) kebab-case id.
    pub id: String,
    /// Human-readable name (the id when not given).
    pub name: String,
    /// What the rule does.
    pub description: String,
    /// The rule's version.
    pub version: String,
    /// The hook that evaluates it.
    pub trigger: Hook,
    /// For tool hooks: the tools it applies to (all when empty).
    pub tools: Vec<String>,
    /// Higher fires first; ties are broken by id.
    pub priority: i64,
    /// Whether it is active.
    pub enabled: bool,
    /// Whether users may not disable it.
    pub core: bool,
    /// Rules sharing this name form a priority selector: the first that matches fires alone.
    pub exclusive: Option<String>,
    /// Labels for selecting rule sets.
    pub tags: Vec<String>,
    /// After firing, stay quiet for this many turns.
    pub cooldown_turns: Option<u32>,
    /// Fire at most once per session.
    pub once_per_session: bool,
    /// Fire at most this many times per session.
    pub max_fires: Option<u32>,
    /// When it fires.
    pub condition: ConditionDef,
    /// What it does, applied together or not at all.
    pub actions: Vec<ActionDef>,
    /// The plugin it belongs to (`builtin` for Warden's own rules, `local` for rule folders).
    pub plugin: Arc<str>,
    /// The file it came from.
    pub source: Arc<SourceFile>,
    /// Where `[rule]` starts, for diagnostics about the rule as a whole.
    pub span: Range<usize>,
    /// False when the file had errors: such a rule is compiled only to report the errors of
    /// its condition and templates too, and is never loaded.
    pub(crate) valid: bool,
}

/// A rule's condition.
#[derive(Debug, Clone)]
pub enum ConditionDef {
    /// An inline expression (`[condition] expression = ...`).
    Expression(Located),
    /// A Lua script file (`[condition] script = ...`), with its own time limit per run
    /// (`[condition] timeout = 2.5`, seconds) when the rule sets one.
    Script {
        /// The script's path, as written.
        path: Located,
        /// The rule's time limit for one run of the script.
        timeout: Option<std::time::Duration>,
    },
    /// A behavior's tree (`[tree]` in a behavior file): the rule fires when the tree succeeds,
    /// and acts through its action nodes.
    Tree(Box<crate::behavior::NodeDef>),
}

/// A string from the file with where it was written.
#[derive(Debug, Clone)]
pub struct Located {
    /// The string value.
    pub text: String,
    /// The byte range of the value in the file, quotes included.
    pub span: Range<usize>,
    /// The dotted field name (`condition.expression`).
    pub field: String,
}

/// When a notification is injected into the agent's context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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

    pub(crate) fn parse(s: &str) -> Option<Self> {
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

/// How urgent a notification is. Injection order is most urgent first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
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

    pub(crate) fn parse(s: &str) -> Option<Self> {
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

    pub(crate) fn parse(s: &str) -> Option<Self> {
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
    /// Store a value in the plugin's persistent state.
    SetState {
        /// The key (a template).
        key: Located,
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
    ("set_state", &["type", "key", "value"]),
    ("emit_event", &["type", "event_type", "payload"]),
    ("enrich_context", &["type", "query"]),
];

/// What reading one rule file produced.
pub(crate) struct Parsed {
    pub rule: Option<RuleDef>,
    pub diagnostics: Vec<Diagnostic>,
}

/// Reads one rule file, reporting every error. The rule is `None` if its essentials (id,
/// trigger, condition, actions) could not be read; otherwise it is returned even with other
/// errors, marked invalid, so that compiling it can report the errors of its condition and
/// templates as well.
pub(crate) fn parse_rule_file(file: Arc<SourceFile>, plugin: &Arc<str>) -> Parsed {
    let mut doc = Doc::new(file.clone());
    let mut rule = doc
        .parse(file.text())
        .and_then(|table| read_rule(&mut doc, table.get_ref(), plugin));
    if doc.has_errors()
        && let Some(r) = &mut rule
    {
        r.valid = false;
    }
    Parsed {
        rule,
        diagnostics: doc.diagnostics,
    }
}

fn located(at: At<String>, field: String) -> Located {
    Located {
        text: at.value,
        span: at.span,
        field,
    }
}

fn read_rule(doc: &mut Doc, root: &toml::de::DeTable<'_>, plugin: &Arc<str>) -> Option<RuleDef> {
    let mut top = Table::new(root, "", 0..0);
    // A behavior file is a rule whose condition is a tree: the same [header], then [tree].
    let kind = if top.has("behavior") && !top.has("rule") {
        "behavior"
    } else {
        "rule"
    };
    let Some(mut rule) = top.table(doc, kind) else {
        if !top.has("rule") {
            doc.error(
                0..0,
                "rule",
                "this file has no [rule] table (nor [behavior])",
                Some("a rule file starts with [rule] and gives at least `id` and `trigger`; a behavior file starts with [behavior] and has a [tree]".into()),
            );
        }
        return None;
    };
    let rule_span = rule.span.clone();

    let id = rule.string(doc, "id");
    let id = match id {
        None => {
            if !rule.has("id") {
                doc.error(
                    rule_span.clone(),
                    &format!("{kind}.id"),
                    format!("[{kind}] has no `id`"),
                    Some("add `id = \"my-rule\"` (kebab-case)".into()),
                );
            }
            None
        }
        Some(at) => kebab_id(doc, at, &format!("{kind}.id"), "rule"),
    };

    let trigger = match rule.string(doc, "trigger") {
        None => {
            if !rule.has("trigger") {
                doc.error(
                    rule_span.clone(),
                    &format!("{kind}.trigger"),
                    format!("[{kind}] has no `trigger`"),
                    Some(format!(
                        "say which hook evaluates the rule: {}",
                        Hook::NAMES.join(", ")
                    )),
                );
            }
            None
        }
        Some(at) => match at.value.parse::<Hook>() {
            Ok(h) => Some(h),
            Err(e) => {
                let help = e
                    .suggestion
                    .map(|s| format!("did you mean `{s}`?"))
                    .unwrap_or_else(|| format!("the hooks are {}", Hook::NAMES.join(", ")));
                doc.error(
                    at.span,
                    &format!("{kind}.trigger"),
                    format!("unknown hook `{}`", at.value),
                    Some(help),
                );
                None
            }
        },
    };

    let name = rule.string(doc, "name").map(|a| a.value);
    let description = rule
        .string(doc, "description")
        .map(|a| a.value)
        .unwrap_or_default();
    let version = rule
        .string(doc, "version")
        .map(|a| a.value)
        .unwrap_or_else(|| "1.0.0".into());
    let priority = match rule.integer(doc, "priority") {
        Some(at) => {
            if !(1..=1000).contains(&at.value) {
                doc.warning(
                    at.span,
                    &format!("{kind}.priority"),
                    format!(
                        "priority {} is outside the recommended range 1 to 1000",
                        at.value
                    ),
                    None,
                );
            }
            at.value
        }
        None => DEFAULT_PRIORITY,
    };
    let enabled = rule.boolean(doc, "enabled").is_none_or(|a| a.value);
    let core = rule.boolean(doc, "core").is_some_and(|a| a.value);
    let tools = rule.strings(doc, "tool");
    if let (Some(at), Some(h)) = (&tools, trigger)
        && !h.is_tool_hook()
    {
        doc.error(
            at.span.clone(),
            &format!("{kind}.tool"),
            format!("a tool filter only applies to tool hooks, and this rule runs at {h}"),
            Some("use on_tool_call, on_tool_complete or on_tool_failure, or remove `tool`".into()),
        );
    }
    if let Some(at) = &tools
        && (at.value.is_empty() || at.value.iter().any(|t| t.trim().is_empty()))
    {
        doc.error(
            at.span.clone(),
            &format!("{kind}.tool"),
            "a tool filter needs tool names",
            Some("write `tool = \"vault_search\"` or `tool = [\"a\", \"b\"]`".into()),
        );
    }
    let exclusive = rule.string(doc, "exclusive").and_then(|at| {
        if at.value.trim().is_empty() {
            doc.error(
                at.span,
                &format!("{kind}.exclusive"),
                "the exclusive group needs a name",
                None,
            );
            None
        } else {
            Some(at.value)
        }
    });
    let tags = rule
        .strings(doc, "tags")
        .map(|a| a.value)
        .unwrap_or_default();
    let positive = |doc: &mut Doc, at: Option<At<i64>>, field: &str| -> Option<u32> {
        let at = at?;
        match u32::try_from(at.value) {
            Ok(n) if n >= 1 => Some(n),
            _ => {
                doc.error(
                    at.span,
                    field,
                    format!(
                        "`{}` must be a whole number from 1",
                        field.trim_start_matches(&format!("{kind}."))
                    ),
                    None,
                );
                None
            }
        }
    };
    let cooldown_turns = {
        let at = rule.integer(doc, "cooldown_turns");
        positive(doc, at, &format!("{kind}.cooldown_turns"))
    };
    let max_fires = {
        let at = rule.integer(doc, "max_fires");
        positive(doc, at, &format!("{kind}.max_fires"))
    };
    let once_per_session = rule
        .boolean(doc, "once_per_session")
        .is_some_and(|a| a.value);
    let (condition, actions) = if kind == "behavior" {
        rule.finish(doc, BEHAVIOR_FIELDS);
        let tree = crate::behavior::read_tree(doc, &mut top, &rule_span);
        top.finish(doc, &["behavior", "tree"]);
        (
            tree.map(|t| ConditionDef::Tree(Box::new(t))),
            Some(Vec::new()),
        )
    } else {
        let shorthand = rule.string(doc, "condition");
        rule.finish(doc, RULE_FIELDS);
        let condition = read_condition(doc, &mut top, &rule_span, shorthand);
        let scripted = matches!(condition, Some(ConditionDef::Script { .. }));
        let actions = read_actions(doc, &mut top, &rule_span, scripted);
        top.finish(doc, &["rule", "condition", "action"]);
        (condition, actions)
    };

    Some(RuleDef {
        name: name.unwrap_or_else(|| id.clone().unwrap_or_default()),
        id: id?,
        description,
        version,
        trigger: trigger?,
        tools: tools.map(|a| a.value).unwrap_or_default(),
        priority,
        enabled,
        core,
        exclusive,
        tags,
        cooldown_turns,
        once_per_session,
        max_fires,
        condition: condition?,
        actions: actions?,
        plugin: plugin.clone(),
        source: doc.file.clone(),
        span: rule_span,
        valid: true,
    })
}

fn read_condition(
    doc: &mut Doc,
    top: &mut Table<'_>,
    rule_span: &Range<usize>,
    shorthand: Option<At<String>>,
) -> Option<ConditionDef> {
    // `condition = "expr"` (in [rule], or before it) is shorthand for
    // `[condition] expression = "expr"`.
    let top_level = match top.raw("condition") {
        Some(raw) => match raw.get_ref() {
            toml::de::DeValue::String(s) => Some(At {
                value: s.to_string(),
                span: raw.span(),
            }),
            _ => None,
        },
        None => None,
    };
    if let (Some(inner), Some(outer)) = (&shorthand, &top_level) {
        doc.error(
            outer.span.clone(),
            "condition",
            format!(
                "the condition is given twice, before [rule] and in it (`{}`)",
                inner.value
            ),
            Some("keep one of them".into()),
        );
        return None;
    }
    if let Some(at) = shorthand.or(top_level) {
        if top.has("condition")
            && !matches!(
                top.raw("condition").map(|r| r.get_ref()),
                Some(toml::de::DeValue::String(_))
            )
        {
            doc.error(
                at.span,
                "condition",
                "the condition is given twice, as `condition = ...` and as [condition]",
                Some("keep one of them".into()),
            );
            return None;
        }
        if at.value.trim().is_empty() {
            doc.error(
                at.span,
                "condition",
                "the expression is empty",
                Some("write `condition = \"true\"` for a rule that always fires".into()),
            );
            return None;
        }
        return Some(ConditionDef::Expression(located(at, "condition".into())));
    }
    let Some(mut cond) = top.table(doc, "condition") else {
        if !top.has("condition") {
            doc.error(
                rule_span.clone(),
                "condition",
                "the rule has no [condition]",
                Some("add [condition] with `expression = \"...\"` (or `script = \"...\"`); `expression = \"true\"` always fires".into()),
            );
        }
        return None;
    };
    let expression = cond.string(doc, "expression");
    let script = cond.string(doc, "script");
    let timeout = read_timeout(doc, &mut cond);
    let span = cond.span.clone();
    cond.finish(doc, &["expression", "script", "timeout"]);
    if let (Some(t), Some(_)) = (&timeout, &expression) {
        doc.error(
            t.span.clone(),
            "condition.timeout",
            "`timeout` limits a script; an expression has an operation limit instead",
            Some("remove `timeout`, or use `script`".into()),
        );
        return None;
    }
    match (expression, script) {
        (Some(e), None) => {
            if e.value.trim().is_empty() {
                doc.error(
                    e.span,
                    "condition.expression",
                    "the expression is empty",
                    Some("write `expression = \"true\"` for a rule that always fires".into()),
                );
                return None;
            }
            Some(ConditionDef::Expression(located(
                e,
                "condition.expression".into(),
            )))
        }
        (None, Some(s)) => Some(ConditionDef::Script {
            path: located(s, "condition.script".into()),
            timeout: timeout.map(|t| t.value),
        }),
        (Some(_), Some(s)) => {
            doc.error(
                s.span,
                "condition",
                "a rule cannot have both an expression and a script",
                Some("keep one: simple checks as `expression`, complex logic as `script`".into()),
            );
            None
        }
        (None, None) => {
            doc.error(
                span,
                "condition",
                "[condition] needs `expression` or `script`",
                None,
            );
            None
        }
    }
}

/// `timeout = 2.5` (seconds, from 1 ms to 60 s).
fn read_timeout(doc: &mut Doc, t: &mut Table<'_>) -> Option<At<std::time::Duration>> {
    let raw = t.json(doc, "timeout")?;
    let seconds = raw.value.as_f64().filter(|s| (0.001..=60.0).contains(s));
    match seconds {
        Some(s) => Some(At {
            value: std::time::Duration::from_secs_f64(s),
            span: raw.span,
        }),
        None => {
            doc.error(
                raw.span,
                "condition.timeout",
                "`timeout` is the time limit of one run of the script, in seconds, from 0.001 to 60",
                Some("write `timeout = 2` or `timeout = 0.5`".into()),
            );
            None
        }
    }
}

fn read_actions(
    doc: &mut Doc,
    top: &mut Table<'_>,
    rule_span: &Range<usize>,
    scripted: bool,
) -> Option<Vec<ActionDef>> {
    let Some(raw) = top.raw("action") else {
        if scripted {
            // A script can act by itself (notify, set_state...); [action] is then optional.
            return Some(Vec::new());
        }
        doc.error(
            rule_span.clone(),
            "action",
            "the rule has no [action]",
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
        Some(at) => Some(located(at, t.field(key))),
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
            let value = value?;
            ActionDef::SetState {
                key: key?,
                value: value.value,
                value_span: value.span,
            }
        }
        "enrich_context" => ActionDef::EnrichContext {
            query: t
                .string(doc, "query")
                .map(|at| located(at, t.field("query"))),
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

/// The id `at` holds (of a `what`: "rule", "plugin"), or `None` with an error if it is not
/// kebab-case.
pub(crate) fn kebab_id(doc: &mut Doc, at: At<String>, field: &str, what: &str) -> Option<String> {
    if is_kebab(&at.value) {
        return Some(at.value);
    }
    doc.error(
        at.span,
        field,
        format!("{what} id `{}` is not kebab-case", at.value),
        Some(format!(
            "use lowercase letters, digits and single hyphens, such as `{}`",
            to_kebab(&at.value)
        )),
    );
    None
}

pub(crate) fn is_kebab(id: &str) -> bool {
    !id.is_empty()
        && !id.starts_with('-')
        && !id.ends_with('-')
        && !id.contains("--")
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

pub(crate) fn to_kebab(id: &str) -> String {
    let mut out = String::new();
    for c in id.trim().chars() {
        if c.is_ascii_alphanumeric() {
            if c.is_ascii_uppercase() && !out.is_empty() && !out.ends_with('-') {
                out.push('-');
            }
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    let out = out.trim_end_matches('-').to_string();
    if out.is_empty() {
        "my-rule".into()
    } else {
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Parsed {
        parse_rule_file(
            SourceFile::new("rules/test.toml", text),
            &Arc::from("local"),
        )
    }

    fn errors(text: &str) -> Vec<String> {
        let p = parse(text);
        let has_errors = p.diagnostics.iter().any(|d| d.is_error());
        assert!(!has_errors || p.rule.as_ref().is_none_or(|r| !r.valid));
        p.diagnostics.iter().map(|d| d.to_string()).collect()
    }

    const SEED: &str = r#"# rules/token-budget-warning.toml

[rule]
id = "token-budget-warning"
name = "Token Budget Warning"
description = "Warn when token usage exceeds 80%"
version = "1.0.0"
trigger = "on_turn_start"
priority = 100
enabled = true
core = true

[condition]
expression = "context.turn.token_usage > 0.8"
# OR: script = "scripts/check_token_budget.lua"

[action]
type = "notify_self"
message = "Token budget at {{ (context.turn.token_usage * 100) | int }}%. Consider wrapping up or summarizing."
category = "warning"
priority = "high"
deliver_at = "turn_start"
"#;

    #[test]
    fn the_data_model_example_loads_unchanged() {
        let p = parse(SEED);
        assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);
        let r = p.rule.unwrap();
        assert_eq!(r.id, "token-budget-warning");
        assert_eq!(r.trigger, Hook::OnTurnStart);
        assert!(r.core && r.enabled);
        assert_eq!(r.priority, 100);
        assert!(
            matches!(&r.condition, ConditionDef::Expression(l) if l.text == "context.turn.token_usage > 0.8")
        );
        assert!(matches!(
            &r.actions[..],
            [ActionDef::NotifySelf {
                priority: Priority::High,
                deliver_at: DeliverAt::TurnStart,
                ..
            }]
        ));
    }

    #[test]
    fn a_typo_in_a_key_suggests_the_right_one() {
        let errs = errors(&SEED.replace("priority = 100", "priorty = 100"));
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(
            errs[0],
            "rules/test.toml:9:1: error: rule.priorty: unknown field `priorty` in [rule]\n  help: did you mean `priority`?"
        );
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let text = r#"
[rule]
id = "Bad_Id"
trigger = "on_tool_compelte"
cooldown_turns = 0

[condition]
expression = "true"
script = "x.lua"

[action]
type = "notify_selff"
"#;
        let errs = errors(text);
        let joined = errs.join("\n");
        assert!(
            joined.contains("rule id `Bad_Id` is not kebab-case"),
            "{joined}"
        );
        assert!(joined.contains("`bad-id`"), "{joined}");
        assert!(
            joined.contains("did you mean `on_tool_complete`?"),
            "{joined}"
        );
        assert!(joined.contains("cooldown_turns"), "{joined}");
        assert!(
            joined.contains("both an expression and a script"),
            "{joined}"
        );
        assert!(joined.contains("did you mean `notify_self`?"), "{joined}");
        assert_eq!(errs.len(), 5, "{joined}");
    }

    #[test]
    fn missing_parts_are_named() {
        let joined = errors("[rule]\nid = \"x\"\n").join("\n");
        assert!(joined.contains("no `trigger`"), "{joined}");
        assert!(joined.contains("no [condition]"), "{joined}");
        assert!(joined.contains("no [action]"), "{joined}");
        let joined = errors("id = \"x\"").join("\n");
        assert!(joined.contains("no [rule] table"), "{joined}");
        let joined = errors("[rule\nid=").join("\n");
        assert!(joined.contains("not valid TOML"), "{joined}");
        assert!(joined.starts_with("rules/test.toml:1:"), "{joined}");
    }

    #[test]
    fn tool_filters_belong_to_tool_hooks() {
        let text = SEED.replace("core = true", "core = true\ntool = \"vault_search\"");
        let joined = errors(&text).join("\n");
        assert!(joined.contains("only applies to tool hooks"), "{joined}");
        let text = text.replace("on_turn_start", "on_tool_complete");
        let p = parse(&text);
        assert!(p.diagnostics.is_empty());
        assert_eq!(p.rule.unwrap().tools, vec!["vault_search"]);
    }

    #[test]
    fn several_actions_and_shorthand_condition() {
        let text = r#"
[rule]
id = "remember"
trigger = "on_session_end"
condition = "true"

[[action]]
type = "set_state"
key = "last_turn"
value = "{{ context.turn.number }}"

[[action]]
type = "log"
message = "saved"
level = "warn"
"#;
        let p = parse(text);
        assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);
        let r = p.rule.unwrap();
        assert_eq!(r.actions.len(), 2);
        assert!(matches!(
            r.actions[1],
            ActionDef::Log {
                level: LogLevel::Warning,
                ..
            }
        ));
    }

    #[test]
    fn action_fields_are_checked_per_type() {
        let joined = errors(&SEED.replace(
            "deliver_at = \"turn_start\"",
            "deliver_at = \"turn_strat\"\nlevel = \"info\"",
        ))
        .join("\n");
        assert!(joined.contains("did you mean `turn_start`?"), "{joined}");
        assert!(
            joined.contains("unknown field `level` in [action]"),
            "{joined}"
        );
    }

    #[test]
    fn kebab_suggestions() {
        assert_eq!(to_kebab("TokenBudget"), "token-budget");
        assert_eq!(to_kebab("token_budget warning"), "token-budget-warning");
        assert!(is_kebab("a-1-b") && !is_kebab("a--b") && !is_kebab("-a") && !is_kebab(""));
    }

    #[test]
    fn a_condition_before_rule_and_in_it_is_refused_not_one_silently_ignored() {
        let e = errors(
            "condition = \"false\"\n[rule]\nid = \"r\"\ntrigger = \"on_turn_start\"\ncondition = \"true\"\n[action]\ntype = \"log\"\nmessage = \"x\"\n",
        );
        assert_eq!(e.len(), 1, "{e:#?}");
        assert!(
            e[0].contains("the condition is given twice, before [rule] and in it"),
            "{}",
            e[0]
        );
        assert!(e[0].contains("test.toml:1:"), "{}", e[0]);
    }

    #[test]
    fn numbers_json_cannot_hold_are_refused_where_they_are_written() {
        let e = errors(
            "[rule]\nid = \"r\"\ntrigger = \"on_turn_start\"\ncondition = \"true\"\n[action]\ntype = \"set_state\"\nkey = \"k\"\nvalue = { a = [1, inf] }\n",
        );
        assert!(
            e.len() == 1
                && e[0].contains("test.toml:8:")
                && e[0].contains("action.value: `value` holds `inf`, which JSON"),
            "one error, where the number is: {e:#?}"
        );
        let e = errors(
            "[rule]\nid = \"r\"\ntrigger = \"on_turn_start\"\ncondition = \"true\"\n[action]\ntype = \"emit_event\"\nevent_type = \"x\"\npayload = { n = nan }\n",
        );
        assert!(
            e.iter().any(|e| e.contains("`payload` holds `nan`")),
            "{e:#?}"
        );
    }
}
