//! Reading a behavior's `[tree]`: each node is a TOML table with a `type`; composites have
//! `children`, decorators a `child`. Every problem is reported at its line and field
//! (`tree.children[2].turns`), unknown keys and node types with the nearest valid one.

use std::ops::Range;
use std::time::Duration;

use serde::Serialize;
use toml::de::{DeTable, DeValue};
use warden_input::{Doc, Located, Table, closest};

use crate::action::{ActionDef, read_action, read_action_fields};
use crate::hook::Hook;

/// The deepest a tree may nest (subtrees included), so a hostile file cannot exhaust the stack.
pub const MAX_DEPTH: usize = 32;

/// Keys every node may have.
pub const COMMON: &[&str] = &[
    "type",
    "name",
    "skip_if",
    "while",
    "on_success",
    "on_failure",
    "on_halted",
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
    /// Whether a false condition halts the running child.
    pub fn aborts_self(self) -> bool {
        matches!(self, Abort::SelfOnly | Abort::Both)
    }

    /// Whether a true condition preempts a running later sibling.
    pub fn aborts_lower(self) -> bool {
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

/// A node type: its name in files, the keys it takes besides the common ones, and how its
/// table is read. [`NODE_TYPES`] lists them all; parsing a node looks its type up there.
pub struct NodeType {
    /// The `type` written in files.
    pub name: &'static str,
    /// The keys it takes besides [`COMMON`].
    pub keys: &'static [&'static str],
    read: fn(&mut NodeReader<'_, '_>) -> Option<NodeKind>,
}

/// Every node type. A lone action may be written as the node itself (`type = "notify_self"`).
pub const NODE_TYPES: &[NodeType] = &[
    node("sequence", &["children", "reactive"], composite),
    node("selector", &["children", "reactive"], composite),
    node("parallel", &["children", "succeed"], parallel),
    node("guard", &["condition", "abort", "child"], guard),
    node("invert", &["child"], |r| Some(NodeKind::Invert(r.child()?))),
    node("force_success", &["child"], |r| {
        Some(NodeKind::ForceSuccess(r.child()?))
    }),
    node("force_failure", &["child"], |r| {
        Some(NodeKind::ForceFailure(r.child()?))
    }),
    node("cooldown", &["turns", "seconds", "child"], cooldown),
    node("once", &["child"], |r| Some(NodeKind::Once(r.child()?))),
    node("max_fires", &["max", "child"], |r| {
        let (max, child) = r.counted("max", 1_000_000)?;
        Some(NodeKind::MaxFires { max, child })
    }),
    node("timeout", &["turns", "child"], |r| {
        let (turns, child) = r.counted("turns", 10_000)?;
        Some(NodeKind::Timeout { turns, child })
    }),
    node("retry", &["attempts", "child"], |r| {
        let (attempts, child) = r.counted("attempts", 100)?;
        Some(NodeKind::Retry { attempts, child })
    }),
    node("repeat", &["times", "child"], |r| {
        let (times, child) = r.counted("times", 100)?;
        Some(NodeKind::Repeat { times, child })
    }),
    node("condition", &["expression"], |r| {
        Some(NodeKind::Condition(r.required_expression("expression")?))
    }),
    node("action", &["actions"], action_list),
    node("script", &["script", "timeout"], script),
    node("wait_turns", &["turns"], |r| {
        Some(NodeKind::WaitTurns(r.count("turns", 10_000)?))
    }),
    node("wait_for", &["hook", "tool", "condition"], wait_for),
    node("subtree", &["behavior"], |r| {
        Some(NodeKind::Subtree(r.required(
            "behavior",
            "a subtree node needs `behavior`, the id of the behavior whose tree it runs",
            None,
        )?))
    }),
    node(
        "notify_self",
        &["message", "category", "priority", "deliver_at"],
        lone_action,
    ),
    node("log", &["message", "level"], lone_action),
    node("set_state", &["key", "value", "scope"], lone_action),
    node("emit_event", &["event_type", "payload"], lone_action),
    node("enrich_context", &["query"], lone_action),
    node("decide", &["decision", "reason"], lone_action),
    node("rewrite", &["set"], lone_action),
];

const fn node(
    name: &'static str,
    keys: &'static [&'static str],
    read: fn(&mut NodeReader<'_, '_>) -> Option<NodeKind>,
) -> NodeType {
    NodeType { name, keys, read }
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
    let names = || NODE_TYPES.iter().map(|n| n.name);
    let Some(ty) = t.string(doc, "type") else {
        if !t.has("type") {
            doc.error(
                span.clone(),
                &format!("{field}.type"),
                "the node has no `type`",
                Some(format!(
                    "the node types are {}",
                    names().collect::<Vec<_>>().join(", ")
                )),
            );
        }
        return None;
    };
    let Some(node_type) = NODE_TYPES.iter().find(|n| n.name == ty.value) else {
        let help = closest(&ty.value, names())
            .map(|s| format!("did you mean `{s}`?"))
            .unwrap_or_else(|| {
                format!(
                    "the node types are {}",
                    names().collect::<Vec<_>>().join(", ")
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
    let known: Vec<&str> = COMMON.iter().chain(node_type.keys).copied().collect();
    let name = t.string(doc, "name").map(|a| a.value);
    let mut reader = NodeReader {
        doc,
        t,
        ty: node_type.name,
        span: &span,
        field: &field,
        depth,
    };
    let skip_if = reader.expression("skip_if");
    let while_ = reader.expression("while");
    let on_success = reader.actions("on_success");
    let on_failure = reader.actions("on_failure");
    let on_halted = reader.actions("on_halted");
    let kind = (node_type.read)(&mut reader);
    let NodeReader { doc, t, .. } = reader;
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

/// One node's table being read: the shared parts every node type's reader uses.
struct NodeReader<'d, 'a> {
    doc: &'d mut Doc,
    t: Table<'a>,
    ty: &'static str,
    span: &'d Range<usize>,
    field: &'d str,
    depth: usize,
}

impl NodeReader<'_, '_> {
    fn error(
        &mut self,
        span: Range<usize>,
        key: &str,
        message: impl Into<String>,
        help: Option<&str>,
    ) {
        let field = if key.is_empty() {
            self.field.to_string()
        } else {
            format!("{}.{key}", self.field)
        };
        self.doc.error(span, &field, message, help.map(Into::into));
    }

    fn child(&mut self) -> Option<Box<NodeDef>> {
        let field = format!("{}.child", self.field);
        match self.t.raw("child").map(|v| (v.get_ref(), v.span())) {
            Some((DeValue::Table(c), s)) => {
                read_node(self.doc, c, s, field, self.depth + 1).map(Box::new)
            }
            Some((_, s)) => {
                self.error(
                    s,
                    "child",
                    "`child` must be a node (a table with a `type`)",
                    None,
                );
                None
            }
            None => {
                let ty = self.ty;
                self.error(
                    self.span.clone(),
                    "child",
                    format!("a {ty} node needs a `child`"),
                    Some("add `child = { type = \"...\", ... }`"),
                );
                None
            }
        }
    }

    fn children(&mut self) -> Option<Vec<NodeDef>> {
        let ty = self.ty;
        match self.t.raw("children").map(|v| (v.get_ref(), v.span())) {
            Some((DeValue::Array(items), s)) => {
                if items.is_empty() {
                    self.error(
                        s,
                        "children",
                        format!("a {ty} needs at least one child"),
                        None,
                    );
                    return None;
                }
                let mut out = Vec::new();
                let mut ok = true;
                for (i, item) in items.iter().enumerate() {
                    let f = format!("{}.children[{i}]", self.field);
                    match item.get_ref() {
                        DeValue::Table(c) => {
                            match read_node(self.doc, c, item.span(), f, self.depth + 1) {
                                Some(n) => out.push(n),
                                None => ok = false,
                            }
                        }
                        _ => {
                            self.doc.error(
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
                self.error(s, "children", "`children` must be an array of nodes", None);
                None
            }
            None => {
                self.error(
                    self.span.clone(),
                    "children",
                    format!("a {ty} needs `children`"),
                    Some("add `children = [ { type = \"...\" }, ... ]`"),
                );
                None
            }
        }
    }

    /// A whole number from 1 to `max` under `key`, which the node needs.
    fn count(&mut self, key: &'static str, max: u32) -> Option<u32> {
        match self.t.integer(self.doc, key) {
            Some(at) => match u32::try_from(at.value) {
                Ok(n) if (1..=max).contains(&n) => Some(n),
                _ => {
                    self.error(
                        at.span,
                        key,
                        format!("`{key}` must be a whole number from 1 to {max}"),
                        None,
                    );
                    None
                }
            },
            None => {
                if !self.t.has(key) {
                    let ty = self.ty;
                    self.error(
                        self.span.clone(),
                        key,
                        format!("a {ty} node needs `{key}`"),
                        None,
                    );
                }
                None
            }
        }
    }

    /// The decorators that count something: the count, and the child.
    fn counted(&mut self, key: &'static str, max: u32) -> Option<(u32, Box<NodeDef>)> {
        let n = self.count(key, max);
        let child = self.child();
        Some((n?, child?))
    }

    /// The string under `key`, which the node needs: when it is missing, `message` is reported
    /// at the node (a value of the wrong type is reported where it is written).
    fn required(
        &mut self,
        key: &'static str,
        message: &str,
        help: Option<&str>,
    ) -> Option<Located> {
        let Some(at) = self.t.string(self.doc, key) else {
            if !self.t.has(key) {
                let (span, field) = (self.t.span.clone(), self.t.field(key));
                self.doc.error(span, &field, message, help.map(Into::into));
            }
            return None;
        };
        Some(Located::new(at, self.t.field(key)))
    }

    fn expression(&mut self, key: &'static str) -> Option<Located> {
        let at = self.t.string(self.doc, key)?;
        if at.value.trim().is_empty() {
            let field = self.t.field(key);
            self.doc
                .error(at.span, &field, format!("`{key}` is empty"), None);
            return None;
        }
        Some(Located::new(at, self.t.field(key)))
    }

    fn required_expression(&mut self, key: &'static str) -> Option<Located> {
        if !self.t.has(key) {
            let ty = self.ty;
            self.error(
                self.span.clone(),
                key,
                format!("a {ty} node needs `{key}`"),
                Some(&format!(
                    "write `{key} = \"...\"`, an expression like a rule's condition"
                )),
            );
            return None;
        }
        self.expression(key)
    }

    /// A policy-like string under `key`: `None` (reported) when it is not one of `choices`,
    /// `Some(default)` when absent.
    fn choice<T: Copy>(
        &mut self,
        key: &'static str,
        what: &str,
        choices: &[(&str, T)],
        default: T,
        help: &str,
    ) -> Option<T> {
        let Some(at) = self.t.string(self.doc, key) else {
            return Some(default);
        };
        match choices.iter().find(|(n, _)| *n == at.value) {
            Some((_, v)) => Some(*v),
            None => {
                self.error(
                    at.span,
                    key,
                    format!("unknown {what} `{}`", at.value),
                    Some(help),
                );
                None
            }
        }
    }

    /// An action table, or an array of them, under `key`.
    fn actions(&mut self, key: &'static str) -> Vec<ActionDef> {
        let field = self.t.field(key);
        let Some(raw) = self.t.raw(key) else {
            return Vec::new();
        };
        let doc = &mut *self.doc;
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
}

fn composite(r: &mut NodeReader<'_, '_>) -> Option<NodeKind> {
    let reactive = r.t.boolean(r.doc, "reactive").is_some_and(|a| a.value);
    let children = r.children()?;
    Some(if r.ty == "sequence" {
        NodeKind::Sequence { children, reactive }
    } else {
        NodeKind::Selector { children, reactive }
    })
}

fn parallel(r: &mut NodeReader<'_, '_>) -> Option<NodeKind> {
    // A bad policy is reported; the children are still read (and checked), so that they are
    // not reported as unknown keys.
    let succeed = r.choice(
        "succeed",
        "policy",
        &[("all", Policy::All), ("any", Policy::Any)],
        Policy::All,
        "`all` (every child must succeed) or `any` (one is enough)",
    );
    let children = r.children();
    let (succeed, children) = (succeed?, children?);
    if children.len() > 64 {
        r.error(
            r.span.clone(),
            "children",
            "a parallel node has at most 64 children",
            None,
        );
        return None;
    }
    Some(NodeKind::Parallel { children, succeed })
}

fn guard(r: &mut NodeReader<'_, '_>) -> Option<NodeKind> {
    let condition = r.required_expression("condition");
    let abort = r.choice(
        "abort",
        "abort mode",
        &[
            ("none", Abort::None),
            ("self", Abort::SelfOnly),
            ("lower", Abort::Lower),
            ("lower_priority", Abort::Lower),
            ("both", Abort::Both),
        ],
        Abort::None,
        "`none`, `self` (halt the child when the condition turns false), `lower` (preempt a running later sibling when it turns true) or `both`",
    );
    let child = r.child();
    Some(NodeKind::Guard {
        abort: abort?,
        condition: condition?,
        child: child?,
    })
}

fn cooldown(r: &mut NodeReader<'_, '_>) -> Option<NodeKind> {
    let turns = r.t.has("turns").then(|| r.count("turns", 10_000));
    let seconds = match r.t.json(r.doc, "seconds") {
        Some(at) => match at.value.as_f64() {
            Some(s) if s > 0.0 && s.is_finite() => Some(Some(s)),
            _ => {
                r.error(
                    at.span,
                    "seconds",
                    "`seconds` must be a number above 0",
                    None,
                );
                Some(None)
            }
        },
        // There, but refused (and reported): not missing.
        None if r.t.has("seconds") => Some(None),
        None => None,
    };
    let child = r.child();
    match (turns, seconds) {
        (Some(Some(n)), None) => Some(NodeKind::Cooldown {
            turns: Some(n),
            seconds: None,
            child: child?,
        }),
        (None, Some(Some(s))) => Some(NodeKind::Cooldown {
            turns: None,
            seconds: Some(s),
            child: child?,
        }),
        (None, None) => {
            r.error(
                r.span.clone(),
                "turns",
                "a cooldown needs `turns` or `seconds`",
                Some("write `turns = 3` (turns started since it succeeded) or `seconds = 60`"),
            );
            None
        }
        (Some(_), Some(_)) => {
            r.error(
                r.span.clone(),
                "seconds",
                "a cooldown takes `turns` or `seconds`, not both",
                None,
            );
            None
        }
        _ => None,
    }
}

fn action_list(r: &mut NodeReader<'_, '_>) -> Option<NodeKind> {
    let had_errors = r.doc.diagnostics.len();
    let list = r.actions("actions");
    if list.is_empty() {
        // Unless the actions were there and each was reported, say why: a node that vanished
        // without a word would take its behavior with it.
        if r.doc.diagnostics.len() == had_errors {
            let empty = r.t.has("actions");
            r.error(
                r.span.clone(),
                "actions",
                if empty {
                    "`actions` is empty: an action node needs at least one action"
                } else {
                    "an action node needs `actions`"
                },
                Some("write `actions = [ { type = \"notify_self\", message = \"...\" } ]`, or make the node the action itself: `{ type = \"notify_self\", message = \"...\" }`"),
            );
        }
        return None;
    }
    Some(NodeKind::Action(list))
}

fn script(r: &mut NodeReader<'_, '_>) -> Option<NodeKind> {
    let path = r.required(
        "script",
        "a script node needs `script`",
        Some("write `script = \"scripts/my-step.lua\"`"),
    )?;
    let timeout = match r.t.json(r.doc, "timeout") {
        Some(at) => match at.value.as_f64().filter(|s| (0.001..=60.0).contains(s)) {
            Some(s) => Some(Duration::from_secs_f64(s)),
            None => {
                r.error(
                    at.span,
                    "timeout",
                    "`timeout` is the time limit of one run of the script, in seconds, from 0.001 to 60",
                    None,
                );
                return None;
            }
        },
        None => None,
    };
    Some(NodeKind::Script { path, timeout })
}

fn wait_for(r: &mut NodeReader<'_, '_>) -> Option<NodeKind> {
    let hook = r.required(
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
            r.doc.error(
                at.span,
                &at.field,
                format!("unknown hook `{}`", at.text),
                Some(help),
            );
            None
        }
        None => None,
    };
    let tools = r.t.strings(r.doc, "tool");
    if let Some(at) = &tools
        && at.value.is_empty()
    {
        r.error(
            at.span.clone(),
            "tool",
            "`tool` is empty, so it would match no tool",
            Some("name the tools (`tool = [\"vault_search\"]`), or leave `tool` out to take any tool"),
        );
        return None;
    }
    if let (Some(at), Some(h)) = (&tools, hook)
        && !h.is_tool_hook()
    {
        r.error(
            at.span.clone(),
            "tool",
            format!("a tool filter only applies to tool hooks, and this waits for {h}"),
            None,
        );
        return None;
    }
    let condition = r.expression("condition");
    Some(NodeKind::WaitFor {
        hook: hook?,
        tools: tools.map(|a| a.value).unwrap_or_default(),
        condition,
    })
}

/// The node is an action itself (its unknown keys are reported with the node's).
fn lone_action(r: &mut NodeReader<'_, '_>) -> Option<NodeKind> {
    let ty = r.t.string(r.doc, "type");
    let action = read_action_fields(r.doc, &mut r.t, r.field, ty)?;
    Some(NodeKind::Action(vec![action]))
}
