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

use warden_input::{At, Diagnostic, Doc, Located, SourceFile, Table};

use crate::action::{ActionDef, Decision, OnError, read_actions};
use crate::hook::Hook;
use crate::ids::{kebab_id, rule_key};
use crate::tree::{NodeDef, read_tree};

/// The fields of `[rule]`.
pub const RULE_FIELDS: &[&str] = &[
    "id",
    "name",
    "description",
    "version",
    "trigger",
    "priority",
    "enabled",
    "shadow",
    "core",
    "tool",
    "exclusive",
    "tags",
    "cooldown_turns",
    "once_per_session",
    "max_fires",
    "on_error",
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
    /// Whether it runs in shadow unless a user says otherwise: evaluated, what it would have
    /// decided recorded, nothing it decides applied (`shadow = true` in its file, or in its
    /// plugin's manifest).
    pub shadow: bool,
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
    /// What its failing guard decides (`None`: the plugin's default, else nothing).
    pub on_error: Option<OnError>,
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
    pub valid: bool,
}

impl RuleDef {
    /// Its display id: `id` for built-in and local rules, `plugin/id` for plugin rules.
    pub fn key(&self) -> std::sync::Arc<str> {
        rule_key(&self.plugin, &self.id)
    }
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
    Tree(Box<NodeDef>),
}

/// What reading one rule file produced.
pub struct Parsed {
    /// The rule, unless its essentials could not be read (see [`parse_rule_file`]).
    pub rule: Option<RuleDef>,
    /// Every problem found.
    pub diagnostics: Vec<Diagnostic>,
}

/// Reads one rule file, reporting every error. The rule is `None` if its essentials (id,
/// trigger, condition, actions) could not be read; otherwise it is returned even with other
/// errors, marked invalid, so that compiling it can report the errors of its condition and
/// templates as well.
pub fn parse_rule_file(file: Arc<SourceFile>, plugin: &Arc<str>) -> Parsed {
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
    let shadow = match rule.boolean(doc, "shadow") {
        Some(at) if at.value && !enabled => {
            doc.warning(
                at.span,
                &format!("{kind}.shadow"),
                "`shadow = true` means nothing while `enabled = false`: the rule is off, so it is not evaluated at all",
                Some("remove `enabled = false` to run the rule in shadow, or remove `shadow = true`".into()),
            );
            false
        }
        Some(at) if at.value && core => {
            doc.warning(
                at.span,
                &format!("{kind}.shadow"),
                "a core rule in shadow decides nothing: `core = true` keeps users from switching it off, and `shadow = true` switches off what it decides",
                Some("remove `shadow = true` once you have seen what the rule would decide, or remove `core = true` while it is in shadow".into()),
            );
            true
        }
        Some(at) => at.value,
        None => false,
    };
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
    let on_error = match rule.string(doc, "on_error") {
        Some(at) => match OnError::parse(&at.value) {
            Some(OnError::Deny) if trigger.is_some_and(|h| !Decision::Deny.valid_at(h)) => {
                doc.error(
                    at.span,
                    &format!("{kind}.on_error"),
                    format!(
                        "`on_error = \"deny\"` means nothing at {}: a deny is made at {}",
                        trigger.map_or("this hook", Hook::name),
                        Decision::Deny.where_valid()
                    ),
                    Some("remove `on_error`, or trigger the rule at on_tool_call".into()),
                );
                None
            }
            Some(v) => Some(v),
            None => {
                doc.error(
                    at.span,
                    &format!("{kind}.on_error"),
                    format!("unknown `on_error` value `{}`", at.value),
                    Some(
                        "`deny` (a failing guard denies: fail closed) or `ignore` (it decides nothing, the default)"
                            .into(),
                    ),
                );
                None
            }
        },
        None => None,
    };
    let (condition, actions) = if kind == "behavior" {
        rule.finish(doc, BEHAVIOR_FIELDS);
        let tree = read_tree(doc, &mut top, &rule_span);
        top.finish(doc, &["behavior", "tree"]);
        (
            tree.map(|t| ConditionDef::Tree(Box::new(t))),
            Some(Vec::new()),
        )
    } else {
        let shorthand = rule.string(doc, "condition");
        rule.finish(doc, RULE_FIELDS);
        let condition = read_condition(doc, &mut top, shorthand);
        let scripted = matches!(condition, Some(ConditionDef::Script { .. }));
        let actions = read_actions(doc, &mut top, scripted);
        top.finish(doc, &["rule", "condition", "action"]);
        if let (Some(hook), Some(list)) = (trigger, &actions) {
            check_placement(doc, hook, list);
        }
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
        shadow,
        core,
        exclusive,
        tags,
        cooldown_turns,
        once_per_session,
        max_fires,
        on_error,
        condition: condition?,
        actions: actions?,
        plugin: plugin.clone(),
        source: doc.file.clone(),
        span: rule_span,
        valid: true,
    })
}

/// Reports every decision or rewrite that means nothing at the rule's hook.
fn check_placement(doc: &mut Doc, hook: Hook, actions: &[ActionDef]) {
    for (i, action) in actions.iter().enumerate() {
        let Some(why) = action.misplaced_at(hook) else {
            continue;
        };
        let name = if actions.len() == 1 {
            "action".to_string()
        } else {
            format!("action[{i}]")
        };
        let (span, field) = match action {
            ActionDef::Decide { decision_span, .. } => (decision_span.clone(), "decision"),
            ActionDef::Rewrite { span, .. } => (span.clone(), "type"),
            _ => continue,
        };
        let valid: Vec<&str> = Decision::NAMES
            .iter()
            .copied()
            .filter(|d| Decision::parse(d).is_some_and(|d| d.valid_at(hook)))
            .collect();
        doc.error(
            span,
            &format!("{name}.{field}"),
            why,
            Some(format!(
                "at {hook} a rule can decide {}; or give the rule the trigger where the decision means something",
                valid.join(" or ")
            )),
        );
    }
}

fn read_condition(
    doc: &mut Doc,
    top: &mut Table<'_>,
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
        return Some(ConditionDef::Expression(Located::new(at, "condition")));
    }
    let Some(mut cond) = top.table(doc, "condition") else {
        if !top.has("condition") {
            doc.error(
                doc.end(),
                "condition",
                "the rule has no [condition] (the file ends here)",
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
            Some(ConditionDef::Expression(Located::new(
                e,
                "condition.expression",
            )))
        }
        (None, Some(s)) => Some(ConditionDef::Script {
            path: Located::new(s, "condition.script"),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::{DeliverAt, LogLevel, Priority};

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
    fn a_file_cut_short_is_reported_where_it_ends() {
        // What an editor's save caught halfway leaves: the tables still to come are missing,
        // and the error points at the end of what was written, not at 1:1.
        let cut = "[rule]\nid = \"x\"\ntrigger = \"on_turn_start\"\n\n[condition]\nexpression = \"true\"\n\n";
        let errs = errors(cut);
        assert_eq!(
            errs,
            [
                "rules/test.toml:6:20: error: action: the rule has no [action] (the file ends here)\n  help: add [action] with `type = \"notify_self\"` and a `message`"
            ]
        );
        let errs = errors("[rule]\nid = \"x\"\ntrigger = \"on_turn_start\"");
        assert!(
            errs.iter().any(|e| e.starts_with("rules/test.toml:3:26: error: condition: the rule has no [condition] (the file ends here)")),
            "{errs:#?}"
        );
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
