//! Reading a behavior's `[tree]`: each node is a TOML table with a `type`; composites have
//! `children`, decorators a `child`. Every problem is reported at its line and field
//! (`tree.children[2].turns`), unknown keys and node types with the nearest valid one.

use std::ops::Range;
use std::time::Duration;

use serde::Serialize;
use toml::de::{DeTable, DeValue};

use crate::hook::Hook;
use crate::rule::{ActionDef, Located, read_action, read_action_fields};
use crate::suggest::closest;
use crate::toml_reader::{Doc, Table};

/// The deepest a tree may nest (subtrees included), so a hostile file cannot exhaust the stack.
pub const MAX_DEPTH: usize = 32;

/// Keys every node may have.
const COMMON: &[&str] = &[
    "type",
    "name",
    "skip_if",
    "while",
    "on_success",
    "on_failure",
    "on_halted",
];

/// Every node type, with the keys it takes besides the common ones.
pub const NODE_TYPES: &[(&str, &[&str])] = &[
    ("sequence", &["children", "reactive"]),
    ("selector", &["children", "reactive"]),
    ("parallel", &["children", "succeed"]),
    ("guard", &["condition", "abort", "child"]),
    ("invert", &["child"]),
    ("force_success", &["child"]),
    ("force_failure", &["child"]),
    ("cooldown", &["turns", "seconds", "child"]),
    ("once", &["child"]),
    ("max_fires", &["max", "child"]),
    ("timeout", &["turns", "child"]),
    ("retry", &["attempts", "child"]),
    ("repeat", &["times", "child"]),
    ("condition", &["expression"]),
    ("action", &["actions"]),
    ("script", &["script", "timeout"]),
    ("wait_turns", &["turns"]),
    ("wait_for", &["hook", "tool", "condition"]),
    ("subtree", &["behavior"]),
    // A lone action written as the node itself.
    (
        "notify_self",
        &["message", "category", "priority", "deliver_at"],
    ),
    ("log", &["message", "level"]),
    ("set_state", &["key", "value"]),
    ("emit_event", &["event_type", "payload"]),
    ("enrich_context", &["query"]),
];

/// Which children a parallel node needs to succeed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    /// Succeeds when every child succeeded; fails as soon as one fails.
    All,
    /// Succeeds as soon as one child succeeds; fails when every child failed.
    Any,
}

/// What a reactive guard aborts when its condition changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Abort {
    /// The condition is checked when the guard starts only.
    None,
    /// Re-checked at every tick while its child runs: false halts the child.
    SelfOnly,
    /// Re-checked while a later sibling (in a selector) runs: true halts that sibling and
    /// runs this guard's child instead.
    Lower,
    /// Both.
    Both,
}

impl Abort {
    pub(crate) fn aborts_self(self) -> bool {
        matches!(self, Abort::SelfOnly | Abort::Both)
    }

    pub(crate) fn aborts_lower(self) -> bool {
        matches!(self, Abort::Lower | Abort::Both)
    }
}

/// A node of a behavior tree, as the file writes it.
#[derive(Debug, Clone)]
pub struct NodeDef {
    /// What it is and does.
    pub kind: NodeKind,
    /// Its label in traces (`name = "..."`), when given.
    pub name: Option<String>,
    /// Where its table is written.
    pub span: Range<usize>,
    /// Its dotted path in the file (`tree.children[1]`).
    pub field: String,
    /// Skip the node (it succeeds without running) when this holds as it starts.
    pub skip_if: Option<Located>,
    /// Run the node only while this holds: checked at its start and at every tick it runs;
    /// false halts it and it fails.
    pub while_: Option<Located>,
    /// Actions applied when it succeeds.
    pub on_success: Vec<ActionDef>,
    /// Actions applied when it fails.
    pub on_failure: Vec<ActionDef>,
    /// Actions applied when it is halted while running.
    pub on_halted: Vec<ActionDef>,
}

/// The kinds of node.
#[derive(Debug, Clone)]
pub enum NodeKind {
    /// Children in order until one fails. `reactive`: conditions before the running child are
    /// checked again at every tick.
    Sequence {
        /// The children.
        children: Vec<NodeDef>,
        /// Re-check earlier conditions at every tick.
        reactive: bool,
    },
    /// Children in order until one succeeds. `reactive`: earlier children are tried again at
    /// every tick, and one that succeeds or runs preempts the running child.
    Selector {
        /// The children.
        children: Vec<NodeDef>,
        /// Re-try earlier children at every tick.
        reactive: bool,
    },
    /// Children ticked together.
    Parallel {
        /// The children.
        children: Vec<NodeDef>,
        /// When it succeeds.
        succeed: Policy,
    },
    /// Its child runs only when the condition holds.
    Guard {
        /// The condition.
        condition: Located,
        /// Whether it is checked again while something runs.
        abort: Abort,
        /// The guarded node.
        child: Box<NodeDef>,
    },
    /// Success and failure swapped.
    Invert(Box<NodeDef>),
    /// Failure turned into success.
    ForceSuccess(Box<NodeDef>),
    /// Success turned into failure.
    ForceFailure(Box<NodeDef>),
    /// After the child succeeds, it fails without running the child for a while.
    Cooldown {
        /// For this many turns.
        turns: Option<u32>,
        /// For this many seconds.
        seconds: Option<f64>,
        /// The child.
        child: Box<NodeDef>,
    },
    /// The child succeeds at most once per session.
    Once(Box<NodeDef>),
    /// The child succeeds at most `max` times per session.
    MaxFires {
        /// How many.
        max: u32,
        /// The child.
        child: Box<NodeDef>,
    },
    /// The child is halted, and this fails, when it runs for more than `turns` turns.
    Timeout {
        /// How many turns.
        turns: u32,
        /// The child.
        child: Box<NodeDef>,
    },
    /// A failed child is run again, up to `attempts` runs in all.
    Retry {
        /// Runs in all.
        attempts: u32,
        /// The child.
        child: Box<NodeDef>,
    },
    /// A successful child is run again, `times` runs in all.
    Repeat {
        /// Runs in all.
        times: u32,
        /// The child.
        child: Box<NodeDef>,
    },
    /// Succeeds when the expression holds.
    Condition(Located),
    /// Applies its actions, all together or none; succeeds when they applied.
    Action(Vec<ActionDef>),
    /// Runs a Lua script: succeeds when it returns true, runs while it waits.
    Script {
        /// The script's path.
        path: Located,
        /// Its own time limit per run.
        timeout: Option<Duration>,
    },
    /// Runs until `n` more turns have started.
    WaitTurns(u32),
    /// Runs until a later event of `hook` (that concerns one of `tools`, and for which
    /// `condition` holds, when given).
    WaitFor {
        /// The hook.
        hook: Hook,
        /// For tool hooks: the tools that count (any when empty).
        tools: Vec<String>,
        /// An extra condition on that event.
        condition: Option<Located>,
    },
    /// Another behavior's tree, by id.
    Subtree(Located),
}

impl NodeKind {
    /// The node type's name as written in files.
    pub fn type_name(&self) -> &'static str {
        match self {
            NodeKind::Sequence { .. } => "sequence",
            NodeKind::Selector { .. } => "selector",
            NodeKind::Parallel { .. } => "parallel",
            NodeKind::Guard { .. } => "guard",
            NodeKind::Invert(_) => "invert",
            NodeKind::ForceSuccess(_) => "force_success",
            NodeKind::ForceFailure(_) => "force_failure",
            NodeKind::Cooldown { .. } => "cooldown",
            NodeKind::Once(_) => "once",
            NodeKind::MaxFires { .. } => "max_fires",
            NodeKind::Timeout { .. } => "timeout",
            NodeKind::Retry { .. } => "retry",
            NodeKind::Repeat { .. } => "repeat",
            NodeKind::Condition(_) => "condition",
            NodeKind::Action(_) => "action",
            NodeKind::Script { .. } => "script",
            NodeKind::WaitTurns(_) => "wait_turns",
            NodeKind::WaitFor { .. } => "wait_for",
            NodeKind::Subtree(_) => "subtree",
        }
    }
}

/// Reads the `[tree]` of a behavior file.
pub(crate) fn read_tree(
    doc: &mut Doc,
    top: &mut Table<'_>,
    header: &Range<usize>,
) -> Option<NodeDef> {
    let Some(raw) = top.raw("tree") else {
        doc.error(
            header.clone(),
            "tree",
            "the behavior has no [tree]",
            Some("add [tree] with a `type` (sequence, selector, ...) and its `children`".into()),
        );
        return None;
    };
    match raw.get_ref() {
        DeValue::Table(t) => {
            let errors = doc.has_errors();
            let node = read_node(doc, t, raw.span(), "tree".into(), 0);
            // Every refusal is reported where it happens; this is the net under that rule, so
            // a behavior never disappears without a word.
            if node.is_none() && !errors && !doc.has_errors() {
                doc.error(
                    raw.span(),
                    "tree",
                    "the tree could not be read (this is a bug in Warden: please report it with this file)",
                    None,
                );
            }
            node
        }
        _ => {
            doc.error(
                raw.span(),
                "tree",
                "`tree` must be a table",
                Some("write [tree] with `type = \"sequence\"` and `children = [...]`".into()),
            );
            None
        }
    }
}

fn read_node(
    doc: &mut Doc,
    table: &DeTable<'_>,
    span: Range<usize>,
    field: String,
    depth: usize,
) -> Option<NodeDef> {
    if depth > MAX_DEPTH {
        doc.error(
            span,
            &field,
            format!("the tree nests more than {MAX_DEPTH} levels deep"),
            Some("split it into behaviors and refer to them with `subtree`".into()),
        );
        return None;
    }
    let mut t = Table::new(table, field.clone(), span.clone());
    let types = || NODE_TYPES.iter().map(|(n, _)| *n);
    let ty = match t.string(doc, "type") {
        Some(at) => at,
        None => {
            if !t.has("type") {
                doc.error(
                    span.clone(),
                    &format!("{field}.type"),
                    "the node has no `type`",
                    Some(format!(
                        "the node types are {}",
                        types().collect::<Vec<_>>().join(", ")
                    )),
                );
            }
            return None;
        }
    };
    let Some((_, keys)) = NODE_TYPES.iter().find(|(n, _)| *n == ty.value) else {
        let help = closest(&ty.value, types())
            .map(|s| format!("did you mean `{s}`?"))
            .unwrap_or_else(|| {
                format!(
                    "the node types are {}",
                    types().collect::<Vec<_>>().join(", ")
                )
            });
        doc.error(
            ty.span,
            &format!("{field}.type"),
            format!("unknown node type `{}`", ty.value),
            Some(help),
        );
        return None;
    };
    let known: Vec<&str> = COMMON.iter().chain(keys.iter()).copied().collect();
    let name = t.string(doc, "name").map(|a| a.value);
    let skip_if = expression(doc, &mut t, "skip_if");
    let while_ = expression(doc, &mut t, "while");
    let on_success = actions(doc, &mut t, "on_success");
    let on_failure = actions(doc, &mut t, "on_failure");
    let on_halted = actions(doc, &mut t, "on_halted");
    let kind = read_kind(doc, &mut t, &ty.value, &span, &field, depth);
    t.finish(doc, &known);
    Some(NodeDef {
        kind: kind?,
        name,
        span,
        field,
        skip_if,
        while_,
        on_success,
        on_failure,
        on_halted,
    })
}

fn read_kind(
    doc: &mut Doc,
    t: &mut Table<'_>,
    ty: &str,
    span: &Range<usize>,
    field: &str,
    depth: usize,
) -> Option<NodeKind> {
    let child = |doc: &mut Doc, t: &mut Table<'_>| -> Option<Box<NodeDef>> {
        match t.raw("child").map(|v| (v.get_ref(), v.span())) {
            Some((DeValue::Table(c), s)) => {
                read_node(doc, c, s, format!("{field}.child"), depth + 1).map(Box::new)
            }
            Some((_, s)) => {
                doc.error(
                    s,
                    &format!("{field}.child"),
                    "`child` must be a node (a table with a `type`)",
                    None,
                );
                None
            }
            None => {
                doc.error(
                    span.clone(),
                    &format!("{field}.child"),
                    format!("a {ty} node needs a `child`"),
                    Some("add `child = { type = \"...\", ... }`".into()),
                );
                None
            }
        }
    };
    let children = |doc: &mut Doc, t: &mut Table<'_>| -> Option<Vec<NodeDef>> {
        match t.raw("children").map(|v| (v.get_ref(), v.span())) {
            Some((DeValue::Array(items), s)) => {
                if items.is_empty() {
                    doc.error(
                        s,
                        &format!("{field}.children"),
                        format!("a {ty} needs at least one child"),
                        None,
                    );
                    return None;
                }
                let mut out = Vec::new();
                let mut ok = true;
                for (i, item) in items.iter().enumerate() {
                    let f = format!("{field}.children[{i}]");
                    match item.get_ref() {
                        DeValue::Table(c) => match read_node(doc, c, item.span(), f, depth + 1) {
                            Some(n) => out.push(n),
                            None => ok = false,
                        },
                        _ => {
                            doc.error(
                                item.span(),
                                &f,
                                "each child must be a node (a table with a `type`)",
                                None,
                            );
                            ok = false;
                        }
                    }
                }
                ok.then_some(out)
            }
            Some((_, s)) => {
                doc.error(
                    s,
                    &format!("{field}.children"),
                    "`children` must be an array of nodes",
                    None,
                );
                None
            }
            None => {
                doc.error(
                    span.clone(),
                    &format!("{field}.children"),
                    format!("a {ty} needs `children`"),
                    Some("add `children = [ { type = \"...\" }, ... ]`".into()),
                );
                None
            }
        }
    };
    let count = |doc: &mut Doc, t: &mut Table<'_>, key: &'static str, max: u32| -> Option<u32> {
        let at = t.integer(doc, key);
        match at {
            Some(at) => match u32::try_from(at.value) {
                Ok(n) if (1..=max).contains(&n) => Some(n),
                _ => {
                    doc.error(
                        at.span,
                        &format!("{field}.{key}"),
                        format!("`{key}` must be a whole number from 1 to {max}"),
                        None,
                    );
                    None
                }
            },
            None => {
                if !t.has(key) {
                    doc.error(
                        span.clone(),
                        &format!("{field}.{key}"),
                        format!("a {ty} node needs `{key}`"),
                        None,
                    );
                }
                None
            }
        }
    };
    // The decorators that count something: the count, and the child.
    let counted = |doc: &mut Doc, t: &mut Table<'_>, key: &'static str, max: u32| {
        let n = count(doc, t, key, max);
        let child = child(doc, t);
        Some((n?, child?))
    };
    Some(match ty {
        "sequence" | "selector" => {
            let reactive = t.boolean(doc, "reactive").is_some_and(|a| a.value);
            let children = children(doc, t)?;
            if ty == "sequence" {
                NodeKind::Sequence { children, reactive }
            } else {
                NodeKind::Selector { children, reactive }
            }
        }
        "parallel" => {
            // A bad policy is reported; the children are still read (and checked), so that
            // they are not reported as unknown keys.
            let mut bad = false;
            let succeed = match t.string(doc, "succeed") {
                None => Policy::All,
                Some(at) => match at.value.as_str() {
                    "all" => Policy::All,
                    "any" => Policy::Any,
                    other => {
                        doc.error(
                            at.span,
                            &format!("{field}.succeed"),
                            format!("unknown policy `{other}`"),
                            Some(
                                "`all` (every child must succeed) or `any` (one is enough)".into(),
                            ),
                        );
                        bad = true;
                        Policy::All
                    }
                },
            };
            let children = children(doc, t);
            if bad {
                return None;
            }
            let children = children?;
            if children.len() > 64 {
                doc.error(
                    span.clone(),
                    &format!("{field}.children"),
                    "a parallel node has at most 64 children",
                    None,
                );
                return None;
            }
            NodeKind::Parallel { children, succeed }
        }
        "guard" => {
            let condition = required_expression(doc, t, "condition", field, span, ty);
            let mut bad = false;
            let abort = match t.string(doc, "abort") {
                None => Abort::None,
                Some(at) => match at.value.as_str() {
                    "none" => Abort::None,
                    "self" => Abort::SelfOnly,
                    "lower" | "lower_priority" => Abort::Lower,
                    "both" => Abort::Both,
                    other => {
                        doc.error(
                            at.span,
                            &format!("{field}.abort"),
                            format!("unknown abort mode `{other}`"),
                            Some("`none`, `self` (halt the child when the condition turns false), `lower` (preempt a running later sibling when it turns true) or `both`".into()),
                        );
                        bad = true;
                        Abort::None
                    }
                },
            };
            let child = child(doc, t);
            if bad {
                return None;
            }
            NodeKind::Guard {
                condition: condition?,
                abort,
                child: child?,
            }
        }
        "invert" => NodeKind::Invert(child(doc, t)?),
        "force_success" => NodeKind::ForceSuccess(child(doc, t)?),
        "force_failure" => NodeKind::ForceFailure(child(doc, t)?),
        "once" => NodeKind::Once(child(doc, t)?),
        "cooldown" => {
            let turns = t.has("turns").then(|| count(doc, t, "turns", 10_000));
            let seconds = match t.json(doc, "seconds") {
                Some(at) => match at.value.as_f64() {
                    Some(s) if s > 0.0 && s.is_finite() => Some(Some(s)),
                    _ => {
                        doc.error(
                            at.span,
                            &format!("{field}.seconds"),
                            "`seconds` must be a number above 0",
                            None,
                        );
                        Some(None)
                    }
                },
                // There, but refused (and reported): not missing.
                None if t.has("seconds") => Some(None),
                None => None,
            };
            let child = child(doc, t);
            match (turns, seconds) {
                (Some(Some(n)), None) => NodeKind::Cooldown {
                    turns: Some(n),
                    seconds: None,
                    child: child?,
                },
                (None, Some(Some(s))) => NodeKind::Cooldown {
                    turns: None,
                    seconds: Some(s),
                    child: child?,
                },
                (None, None) => {
                    doc.error(
                        span.clone(),
                        &format!("{field}.turns"),
                        "a cooldown needs `turns` or `seconds`",
                        Some("write `turns = 3` (turns started since it succeeded) or `seconds = 60`".into()),
                    );
                    return None;
                }
                (Some(_), Some(_)) => {
                    doc.error(
                        span.clone(),
                        &format!("{field}.seconds"),
                        "a cooldown takes `turns` or `seconds`, not both",
                        None,
                    );
                    return None;
                }
                _ => return None,
            }
        }
        "max_fires" => {
            let (max, child) = counted(doc, t, "max", 1_000_000)?;
            NodeKind::MaxFires { max, child }
        }
        "timeout" => {
            let (turns, child) = counted(doc, t, "turns", 10_000)?;
            NodeKind::Timeout { turns, child }
        }
        "retry" => {
            let (attempts, child) = counted(doc, t, "attempts", 100)?;
            NodeKind::Retry { attempts, child }
        }
        "repeat" => {
            let (times, child) = counted(doc, t, "times", 100)?;
            NodeKind::Repeat { times, child }
        }
        "condition" => {
            NodeKind::Condition(required_expression(doc, t, "expression", field, span, ty)?)
        }
        "action" => {
            let had_errors = doc.diagnostics.len();
            let list = actions(doc, t, "actions");
            if list.is_empty() {
                // Unless the actions were there and each was reported, say why: a node that
                // vanished without a word would take its behavior with it.
                if doc.diagnostics.len() == had_errors {
                    let empty = t.has("actions");
                    doc.error(
                        span.clone(),
                        &format!("{field}.actions"),
                        if empty {
                            "`actions` is empty: an action node needs at least one action"
                        } else {
                            "an action node needs `actions`"
                        },
                        Some("write `actions = [ { type = \"notify_self\", message = \"...\" } ]`, or make the node the action itself: `{ type = \"notify_self\", message = \"...\" }`".into()),
                    );
                }
                return None;
            }
            NodeKind::Action(list)
        }
        "script" => {
            let path = required(
                doc,
                t,
                "script",
                "a script node needs `script`",
                Some("write `script = \"scripts/my-step.lua\"`"),
            )?;
            let timeout = match t.json(doc, "timeout") {
                Some(at) => match at.value.as_f64().filter(|s| (0.001..=60.0).contains(s)) {
                    Some(s) => Some(Duration::from_secs_f64(s)),
                    None => {
                        doc.error(at.span, &format!("{field}.timeout"), "`timeout` is the time limit of one run of the script, in seconds, from 0.001 to 60", None);
                        return None;
                    }
                },
                None => None,
            };
            NodeKind::Script { path, timeout }
        }
        "wait_turns" => NodeKind::WaitTurns(count(doc, t, "turns", 10_000)?),
        "wait_for" => {
            let hook = required(
                doc,
                t,
                "hook",
                "a wait_for node needs `hook`",
                Some("write `hook = \"on_tool_complete\"`"),
            );
            let hook = match hook.map(|at| (at.text.parse::<Hook>(), at)) {
                Some((Ok(h), _)) => Some(h),
                Some((Err(e), at)) => {
                    let help = e
                        .suggestion
                        .map(|s| format!("did you mean `{s}`?"))
                        .unwrap_or_else(|| format!("the hooks are {}", Hook::NAMES.join(", ")));
                    doc.error(
                        at.span,
                        &at.field,
                        format!("unknown hook `{}`", at.text),
                        Some(help),
                    );
                    None
                }
                None => None,
            };
            let tools = t.strings(doc, "tool");
            if let Some(at) = &tools
                && at.value.is_empty()
            {
                doc.error(
                    at.span.clone(),
                    &format!("{field}.tool"),
                    "`tool` is empty, so it would match no tool",
                    Some("name the tools (`tool = [\"vault_search\"]`), or leave `tool` out to take any tool".into()),
                );
                return None;
            }
            if let (Some(at), Some(h)) = (&tools, hook)
                && !h.is_tool_hook()
            {
                doc.error(
                    at.span.clone(),
                    &format!("{field}.tool"),
                    format!("a tool filter only applies to tool hooks, and this waits for {h}"),
                    None,
                );
                return None;
            }
            let condition = expression(doc, t, "condition");
            NodeKind::WaitFor {
                hook: hook?,
                tools: tools.map(|a| a.value).unwrap_or_default(),
                condition,
            }
        }
        "subtree" => NodeKind::Subtree(required(
            doc,
            t,
            "behavior",
            "a subtree node needs `behavior`, the id of the behavior whose tree it runs",
            None,
        )?),
        // The node is an action itself (its unknown keys are reported with the node's).
        _ => {
            let ty = t.string(doc, "type");
            NodeKind::Action(vec![read_action_fields(doc, t, field, ty)?])
        }
    })
}

/// The string under `key`, which the node needs: when it is missing, `message` is reported at
/// the node (a value of the wrong type is reported where it is written).
fn required(
    doc: &mut Doc,
    t: &mut Table<'_>,
    key: &'static str,
    message: &str,
    help: Option<&str>,
) -> Option<Located> {
    let Some(at) = t.string(doc, key) else {
        if !t.has(key) {
            doc.error(t.span.clone(), &t.field(key), message, help.map(Into::into));
        }
        return None;
    };
    Some(Located {
        text: at.value,
        span: at.span,
        field: t.field(key),
    })
}

fn expression(doc: &mut Doc, t: &mut Table<'_>, key: &'static str) -> Option<Located> {
    let at = t.string(doc, key)?;
    if at.value.trim().is_empty() {
        doc.error(at.span, &t.field(key), format!("`{key}` is empty"), None);
        return None;
    }
    Some(Located {
        text: at.value,
        span: at.span,
        field: t.field(key),
    })
}

fn required_expression(
    doc: &mut Doc,
    t: &mut Table<'_>,
    key: &'static str,
    field: &str,
    span: &Range<usize>,
    ty: &str,
) -> Option<Located> {
    if !t.has(key) {
        doc.error(
            span.clone(),
            &format!("{field}.{key}"),
            format!("a {ty} node needs `{key}`"),
            Some(format!(
                "write `{key} = \"...\"`, an expression like a rule's condition"
            )),
        );
        return None;
    }
    expression(doc, t, key)
}

/// An action table, or an array of them, under `key`.
fn actions(doc: &mut Doc, t: &mut Table<'_>, key: &'static str) -> Vec<ActionDef> {
    let field = t.field(key);
    let Some(raw) = t.raw(key) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    match raw.get_ref() {
        DeValue::Table(a) => out.extend(read_action(
            doc,
            Table::new(a, field.clone(), raw.span()),
            &field,
        )),
        DeValue::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let f = format!("{field}[{i}]");
                match item.get_ref() {
                    DeValue::Table(a) => {
                        out.extend(read_action(doc, Table::new(a, f.clone(), item.span()), &f))
                    }
                    _ => doc.error(
                        item.span(),
                        &f,
                        "each action is a table with a `type`",
                        None,
                    ),
                }
            }
        }
        _ => doc.error(
            raw.span(),
            &field,
            format!("`{key}` must be an action table or an array of them"),
            Some("write `{ type = \"log\", message = \"...\" }`".into()),
        ),
    }
    out
}
