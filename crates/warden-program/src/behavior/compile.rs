//! A behavior's tree, compiled: the nodes flattened into an arena (the root first), subtrees
//! inlined, conditions and action templates compiled once, scripts found and checked.

use std::sync::Arc;
use std::time::Duration;

use warden_expr::{CompileOptions, Compiler, Condition};

use crate::actions::{CompiledAction, compile_actions, compile_script, expr_diagnostic};
use warden_context::template::Templates;
use warden_input::Diagnostic;
use warden_load::Hook;
use warden_load::{Abort, NodeDef, NodeKind, Policy};
use warden_load::{ActionDef, ConditionDef, Located, RuleDef};

/// Most nodes one tree may have once its subtrees are inlined.
pub(super) const MAX_NODES: usize = 4096;

/// Most levels a tree may nest once its subtrees are inlined. Compiling, ticking and halting
/// a tree recurse once per level; this bound keeps that far inside a 2 MiB thread stack (a
/// tokio worker's, a reload watcher's) even in a debug build, and bounds the cost of a long
/// chain of behaviors that each use the next as a subtree.
pub(super) const MAX_INLINED_DEPTH: usize = 128;

/// A compiled tree.
pub struct Tree {
    /// The nodes; the root is node 0.
    pub(crate) nodes: Vec<CNode>,
    /// Compiled expressions (conditions, guards, `skip_if`, `while`, wait filters).
    pub conditions: Vec<Condition>,
    /// Action groups: each applies together.
    pub actions: Vec<Vec<CompiledAction>>,
    /// Script leaves.
    pub scripts: Vec<ScriptLeaf>,
}

/// A script a tree runs.
pub struct ScriptLeaf {
    pub script: Arc<warden_lua::Script>,
    pub timeout: Option<Duration>,
}

/// A node of a compiled tree.
pub(crate) struct CNode {
    pub kind: CKind,
    /// How traces show it: `#3 wait_for on_tool_complete`, or its `name`.
    pub label: String,
    pub skip_if: Option<u32>,
    pub while_: Option<u32>,
    pub on_success: Option<u32>,
    pub on_failure: Option<u32>,
    pub on_halted: Option<u32>,
}

/// What a compiled node does; children and conditions are indices into the tree.
pub(crate) enum CKind {
    Sequence {
        children: Vec<u32>,
        reactive: bool,
    },
    Selector {
        children: Vec<u32>,
        reactive: bool,
    },
    Parallel {
        children: Vec<u32>,
        any: bool,
    },
    Guard {
        condition: u32,
        abort: Abort,
        child: u32,
    },
    Invert(u32),
    ForceSuccess(u32),
    ForceFailure(u32),
    Cooldown {
        turns: Option<u32>,
        seconds: Option<f64>,
        child: u32,
    },
    Once(u32),
    MaxFires {
        max: u32,
        child: u32,
    },
    Timeout {
        turns: u32,
        child: u32,
    },
    Retry {
        attempts: u32,
        child: u32,
    },
    Repeat {
        times: u32,
        child: u32,
    },
    Condition(u32),
    Action(u32),
    Script(u32),
    WaitTurns(u32),
    WaitFor {
        hook: Hook,
        tools: Vec<String>,
        condition: Option<u32>,
    },
}

/// What compiling a tree needs from the program being compiled.
pub(crate) struct TreeContext<'a> {
    pub compiler: &'a Compiler,
    pub templates: &'a Templates,
    pub diagnostics: &'a mut Vec<Diagnostic>,
    /// Finds the behavior a `subtree` node names (`id` in the same plugin, or `plugin/id`).
    pub behaviors: &'a dyn Fn(&str, &str) -> Option<Arc<RuleDef>>,
    /// Script files read from disk (to watch).
    pub script_files: &'a mut Vec<std::path::PathBuf>,
    /// Script keys for this tree start here (each script of a program has its own key).
    pub script_key: u64,
    /// Fingerprint input: the text of every file the tree was built from.
    pub hasher: &'a mut std::hash::DefaultHasher,
}

struct Builder<'c, 'a> {
    cx: &'c mut TreeContext<'a>,
    tree: Tree,
    /// The behaviors being inlined, outermost first (a `subtree` back to one is a cycle).
    stack: Vec<Arc<RuleDef>>,
    failed: bool,
    /// Levels of the node being compiled, below the root (subtrees inlined).
    depth: usize,
    /// The `subtree` node of the behavior being compiled (its own file) that the current
    /// node was reached through, where a problem deeper down is reported.
    entry: Option<(std::ops::Range<usize>, String)>,
}

/// Compiles the tree of behavior `def`. Problems are reported; `None` if there were any.
pub(crate) fn compile_tree(def: &Arc<RuleDef>, cx: &mut TreeContext<'_>) -> Option<Tree> {
    let ConditionDef::Tree(root) = &def.condition else {
        return None;
    };
    let mut b = Builder {
        cx,
        tree: Tree {
            nodes: Vec::new(),
            conditions: Vec::new(),
            actions: Vec::new(),
            scripts: Vec::new(),
        },
        stack: vec![def.clone()],
        failed: false,
        depth: 0,
        entry: None,
    };
    b.node(root, def);
    if b.failed {
        return None;
    }
    warn_never_passes(root, def, b.cx.diagnostics);
    Some(b.tree)
}

/// Warns about a guard or condition written as a constant `false`: it can never pass.
fn warn_never_passes(node: &NodeDef, def: &RuleDef, diagnostics: &mut Vec<Diagnostic>) {
    let never = |l: &Located| matches!(l.text.trim(), "false" | "not true");
    let expression = match &node.kind {
        NodeKind::Guard { condition, .. } | NodeKind::Condition(condition) => Some(condition),
        _ => None,
    };
    if let Some(l) = expression.filter(|l| never(l)) {
        diagnostics.push(
            Diagnostic::warning(
                &def.source,
                Some(l.span.clone()),
                Some(&l.field),
                format!("this {} can never pass", node.kind.type_name()),
            )
            .with_help("its branch never runs; remove it, or give it a real condition"),
        );
    }
    for child in children(node) {
        warn_never_passes(child, def, diagnostics);
    }
}

fn children(node: &NodeDef) -> Vec<&NodeDef> {
    match &node.kind {
        NodeKind::Sequence { children, .. }
        | NodeKind::Selector { children, .. }
        | NodeKind::Parallel { children, .. } => children.iter().collect(),
        NodeKind::Guard { child, .. }
        | NodeKind::Invert(child)
        | NodeKind::ForceSuccess(child)
        | NodeKind::ForceFailure(child)
        | NodeKind::Cooldown { child, .. }
        | NodeKind::Once(child)
        | NodeKind::MaxFires { child, .. }
        | NodeKind::Timeout { child, .. }
        | NodeKind::Retry { child, .. }
        | NodeKind::Repeat { child, .. } => vec![child],
        _ => Vec::new(),
    }
}

fn short(text: &str) -> String {
    let t: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if t.chars().count() > 48 {
        format!("{}...", t.chars().take(45).collect::<String>())
    } else {
        t
    }
}

/// How a tree's expressions compile. A node may run at any hook (after a `wait_for`, at the
/// awaited one), so no hook's roots are refused; `settings` is, outside a plugin.
fn options(owner: &RuleDef) -> CompileOptions<'static> {
    const OUTSIDE_A_PLUGIN: &[(&str, &str)] = &[(
        warden_context::context::SETTINGS_ROOT,
        warden_context::context::NO_SETTINGS,
    )];
    CompileOptions {
        unavailable: if &*owner.plugin == warden_load::LOCAL_PLUGIN {
            OUTSIDE_A_PLUGIN
        } else {
            &[]
        },
        force_script: false,
    }
}

impl Builder<'_, '_> {
    fn expression(&mut self, l: &Located, owner: &RuleDef) -> Option<u32> {
        match self.cx.compiler.compile(&l.text, &options(owner)) {
            Ok(c) => {
                self.tree.conditions.push(c);
                Some(self.tree.conditions.len() as u32 - 1)
            }
            Err(e) => {
                self.cx.diagnostics.push(expr_diagnostic(
                    &owner.source,
                    &l.span,
                    &l.text,
                    &l.field,
                    &e,
                ));
                self.failed = true;
                None
            }
        }
    }

    fn actions(&mut self, defs: &[ActionDef], prefix: &str, owner: &RuleDef) -> Option<u32> {
        if defs.is_empty() {
            return None;
        }
        let before = self.cx.diagnostics.len();
        let compiled = compile_actions(
            defs,
            prefix,
            &owner.source,
            self.cx.compiler,
            &options(owner),
            self.cx.templates,
            self.cx.diagnostics,
        );
        if self.cx.diagnostics.len() > before {
            self.failed = true;
            return None;
        }
        self.tree.actions.push(compiled);
        Some(self.tree.actions.len() as u32 - 1)
    }

    fn node(&mut self, def: &NodeDef, owner: &Arc<RuleDef>) -> Option<u32> {
        // A `subtree` node counts as a level too (a chain of behaviors that are each just a
        // `subtree` of the next nests as deep as its length).
        let entering = match &def.kind {
            NodeKind::Subtree(name) if self.stack.len() == 1 => Some(name),
            _ => None,
        };
        let Some(name) = entering else {
            return self.node_in_depth(def, owner);
        };
        self.entry = Some((name.span.clone(), name.field.clone()));
        let before = self.cx.diagnostics.len();
        let id = self.node_in_depth(def, owner);
        self.entry = None;
        self.relocate(before, name, owner);
        id
    }

    /// Problems found inside subtree `name` (inlined into `root`, the behavior being compiled)
    /// that lie in another file are reported here, at the `subtree` node of `root`'s own file,
    /// naming where they are: that file's own compilation reports them there, and the author
    /// of `root` learns why `root` is refused.
    fn relocate(&mut self, before: usize, name: &Located, root: &Arc<RuleDef>) {
        if self.cx.diagnostics.len() == before {
            return;
        }
        let found: Vec<Diagnostic> = self.cx.diagnostics.drain(before..).collect();
        for d in found {
            if d.path() == root.source.path() {
                self.cx.diagnostics.push(d);
                continue;
            }
            let at = match d.location() {
                Some((line, col)) => format!("{}:{line}:{col}", d.path().display()),
                None => d.path().display().to_string(),
            };
            let message = format!("subtree `{}`: {} (at {at})", name.text, d.message());
            let moved = if d.is_error() {
                Diagnostic::error(
                    &root.source,
                    Some(name.span.clone()),
                    Some(&name.field),
                    message,
                )
            } else {
                Diagnostic::warning(
                    &root.source,
                    Some(name.span.clone()),
                    Some(&name.field),
                    message,
                )
            };
            self.cx.diagnostics.push(moved.with_help_opt(d.help()));
        }
    }

    fn node_in_depth(&mut self, def: &NodeDef, owner: &Arc<RuleDef>) -> Option<u32> {
        if self.depth >= MAX_INLINED_DEPTH {
            if !self.failed {
                let chain: Vec<&str> = self.stack.iter().map(|d| &*d.id).collect();
                let shown = if chain.len() > 6 {
                    format!(
                        "{} -> ... -> {}",
                        chain[..3].join(" -> "),
                        chain[chain.len() - 2..].join(" -> ")
                    )
                } else {
                    chain.join(" -> ")
                };
                let root = &self.stack[0];
                let (span, field) = match &self.entry {
                    Some((span, field)) => (span.clone(), field.as_str()),
                    None => (def.span.clone(), def.field.as_str()),
                };
                let source = if self.entry.is_some() {
                    &root.source
                } else {
                    &owner.source
                };
                self.cx.diagnostics.push(
                    Diagnostic::error(
                        source,
                        Some(span),
                        Some(field),
                        format!(
                            "the tree nests more than {MAX_INLINED_DEPTH} levels deep once its subtrees are inlined ({} subtrees: {shown})",
                            chain.len()
                        ),
                    )
                    .with_help("flatten the chain of subtrees: fewer behaviors that each use the next"),
                );
            }
            self.failed = true;
            return None;
        }
        self.depth += 1;
        let id = self.node_at_level(def, owner);
        self.depth -= 1;
        id
    }

    fn node_at_level(&mut self, def: &NodeDef, owner: &Arc<RuleDef>) -> Option<u32> {
        if self.tree.nodes.len() >= MAX_NODES {
            if !self.failed {
                self.cx.diagnostics.push(Diagnostic::error(
                    &owner.source,
                    Some(def.span.clone()),
                    Some(&def.field),
                    format!(
                        "the tree has more than {MAX_NODES} nodes once its subtrees are inlined"
                    ),
                ));
            }
            self.failed = true;
            return None;
        }
        // Subtrees are inlined: their nodes belong to this tree (each behavior that uses
        // one has its own copy, and its own state).
        if let NodeKind::Subtree(name) = &def.kind {
            return self.subtree(name, def, owner);
        }
        // The node's place is taken before its children's; its kind and label come last.
        let id = self.tree.nodes.len() as u32;
        let node = self.attributes(def, owner);
        self.tree.nodes.push(node);
        let kids = |b: &mut Self, list: &[NodeDef]| -> Vec<u32> {
            list.iter().filter_map(|c| b.node(c, owner)).collect()
        };
        let (kind, detail) = match &def.kind {
            NodeKind::Sequence { children, reactive }
            | NodeKind::Selector { children, reactive } => {
                let (children, reactive) = (kids(self, children), *reactive);
                (
                    if let NodeKind::Sequence { .. } = def.kind {
                        CKind::Sequence { children, reactive }
                    } else {
                        CKind::Selector { children, reactive }
                    },
                    if reactive { "reactive" } else { "" }.to_string(),
                )
            }
            NodeKind::Parallel { children, succeed } => (
                CKind::Parallel {
                    children: kids(self, children),
                    any: *succeed == Policy::Any,
                },
                format!(
                    "succeed {}",
                    if *succeed == Policy::Any {
                        "any"
                    } else {
                        "all"
                    }
                ),
            ),
            NodeKind::Guard {
                condition,
                abort,
                child,
            } => {
                let c = self.expression(condition, owner);
                let ch = self.node(child, owner);
                let abort_text = match abort {
                    Abort::None => "",
                    Abort::SelfOnly => " abort self",
                    Abort::Lower => " abort lower",
                    Abort::Both => " abort both",
                };
                (
                    CKind::Guard {
                        condition: c.unwrap_or(0),
                        abort: *abort,
                        child: ch.unwrap_or(0),
                    },
                    format!("{}{abort_text}", short(&condition.text)),
                )
            }
            NodeKind::Invert(c) => (
                CKind::Invert(self.node(c, owner).unwrap_or(0)),
                String::new(),
            ),
            NodeKind::ForceSuccess(c) => (
                CKind::ForceSuccess(self.node(c, owner).unwrap_or(0)),
                String::new(),
            ),
            NodeKind::ForceFailure(c) => (
                CKind::ForceFailure(self.node(c, owner).unwrap_or(0)),
                String::new(),
            ),
            NodeKind::Cooldown {
                turns,
                seconds,
                child,
            } => (
                CKind::Cooldown {
                    turns: *turns,
                    seconds: *seconds,
                    child: self.node(child, owner).unwrap_or(0),
                },
                match (turns, seconds) {
                    (Some(t), _) => turns_label(u64::from(*t)),
                    (_, Some(s)) => format!("{s} s"),
                    _ => String::new(),
                },
            ),
            NodeKind::Once(c) => (CKind::Once(self.node(c, owner).unwrap_or(0)), String::new()),
            NodeKind::MaxFires { max, child } => (
                CKind::MaxFires {
                    max: *max,
                    child: self.node(child, owner).unwrap_or(0),
                },
                max.to_string(),
            ),
            NodeKind::Timeout { turns, child } => (
                CKind::Timeout {
                    turns: *turns,
                    child: self.node(child, owner).unwrap_or(0),
                },
                turns_label(u64::from(*turns)),
            ),
            NodeKind::Retry { attempts, child } => (
                CKind::Retry {
                    attempts: *attempts,
                    child: self.node(child, owner).unwrap_or(0),
                },
                format!("{attempts} attempts"),
            ),
            NodeKind::Repeat { times, child } => (
                CKind::Repeat {
                    times: *times,
                    child: self.node(child, owner).unwrap_or(0),
                },
                format!("{times} times"),
            ),
            NodeKind::Condition(l) => (
                CKind::Condition(self.expression(l, owner).unwrap_or(0)),
                short(&l.text),
            ),
            NodeKind::Action(list) => {
                let names: Vec<&str> = list.iter().map(ActionDef::type_name).collect();
                (
                    CKind::Action(self.actions(list, &def.field, owner).unwrap_or(0)),
                    names.join(" + "),
                )
            }
            NodeKind::Script { path, timeout } => {
                let key = self.cx.script_key + self.tree.scripts.len() as u64;
                match compile_script(owner, key, path, self.cx.diagnostics) {
                    Some((script, file)) => {
                        std::hash::Hash::hash(script.source(), self.cx.hasher);
                        self.cx.script_files.extend(file);
                        self.tree.scripts.push(ScriptLeaf {
                            script: Arc::new(script),
                            timeout: *timeout,
                        });
                    }
                    None => self.failed = true,
                }
                (
                    CKind::Script(self.tree.scripts.len().saturating_sub(1) as u32),
                    path.text.clone(),
                )
            }
            NodeKind::WaitTurns(n) => (CKind::WaitTurns(*n), turns_label(u64::from(*n))),
            NodeKind::WaitFor {
                hook,
                tools,
                condition,
            } => {
                let c = condition.as_ref().and_then(|l| self.expression(l, owner));
                (
                    CKind::WaitFor {
                        hook: *hook,
                        tools: tools.clone(),
                        condition: c,
                    },
                    if tools.is_empty() {
                        hook.name().to_string()
                    } else {
                        format!("{} {}", hook.name(), tools.join("|"))
                    },
                )
            }
            NodeKind::Subtree(_) => unreachable!("inlined above"),
        };
        let label = match &def.name {
            Some(n) => format!("#{id} {n} ({})", def.kind.type_name()),
            None if detail.is_empty() => format!("#{id} {}", def.kind.type_name()),
            None => format!("#{id} {} {detail}", def.kind.type_name()),
        };
        let node = &mut self.tree.nodes[id as usize];
        node.kind = kind;
        node.label = label;
        Some(id)
    }

    /// A node with `def`'s attributes (`skip_if`, `while`, `on_*`) compiled, its kind and
    /// label still to come.
    fn attributes(&mut self, def: &NodeDef, owner: &RuleDef) -> CNode {
        let field = &def.field;
        CNode {
            kind: CKind::Condition(0),
            label: String::new(),
            skip_if: def.skip_if.as_ref().and_then(|l| self.expression(l, owner)),
            while_: def.while_.as_ref().and_then(|l| self.expression(l, owner)),
            on_success: self.actions(&def.on_success, &format!("{field}.on_success"), owner),
            on_failure: self.actions(&def.on_failure, &format!("{field}.on_failure"), owner),
            on_halted: self.actions(&def.on_halted, &format!("{field}.on_halted"), owner),
        }
    }

    fn subtree(&mut self, name: &Located, def: &NodeDef, owner: &Arc<RuleDef>) -> Option<u32> {
        let Some(target) = (self.cx.behaviors)(&owner.plugin, &name.text) else {
            self.cx.diagnostics.push(
                Diagnostic::error(
                    &owner.source,
                    Some(name.span.clone()),
                    Some(&name.field),
                    format!("no behavior `{}` to use as a subtree", name.text),
                )
                .with_help("name a behavior of the same plugin by its id, or another plugin's as `plugin/id`"),
            );
            self.failed = true;
            return None;
        };
        if let Some(at) = self.stack.iter().position(|b| Arc::ptr_eq(b, &target)) {
            let cycle: Vec<&str> = self.stack[at..]
                .iter()
                .map(|b| b.id.as_str())
                .chain(std::iter::once(target.id.as_str()))
                .collect();
            self.cx.diagnostics.push(
                Diagnostic::error(
                    &owner.source,
                    Some(name.span.clone()),
                    Some(&name.field),
                    format!("subtrees form a cycle: {}", cycle.join(" -> ")),
                )
                .with_help("a tree cannot contain itself; break the cycle"),
            );
            self.failed = true;
            return None;
        }
        let ConditionDef::Tree(root) = &target.condition else {
            self.cx.diagnostics.push(Diagnostic::error(
                &owner.source,
                Some(name.span.clone()),
                Some(&name.field),
                format!(
                    "`{}` is a rule, not a behavior; only behaviors have a tree",
                    name.text
                ),
            ));
            self.failed = true;
            return None;
        };
        std::hash::Hash::hash(target.source.text(), self.cx.hasher);
        self.stack.push(target.clone());
        // The subtree's root takes this node's attributes.
        let mut inlined = (**root).clone();
        if def.name.is_some() {
            inlined.name.clone_from(&def.name);
        }
        let id = self.node(&inlined, &target);
        self.stack.pop();
        let id = id?;
        // Attributes written on the `subtree` node itself apply to the inlined root, where it
        // has none of its own.
        let own = self.attributes(def, owner);
        let n = &mut self.tree.nodes[id as usize];
        n.skip_if = n.skip_if.or(own.skip_if);
        n.while_ = n.while_.or(own.while_);
        n.on_success = n.on_success.or(own.on_success);
        n.on_failure = n.on_failure.or(own.on_failure);
        n.on_halted = n.on_halted.or(own.on_halted);
        Some(id)
    }
}

impl CKind {
    /// The child of a decorator.
    pub(crate) fn child(&self) -> Option<u32> {
        match self {
            CKind::Guard { child, .. }
            | CKind::Invert(child)
            | CKind::ForceSuccess(child)
            | CKind::ForceFailure(child)
            | CKind::Cooldown { child, .. }
            | CKind::Once(child)
            | CKind::MaxFires { child, .. }
            | CKind::Timeout { child, .. }
            | CKind::Retry { child, .. }
            | CKind::Repeat { child, .. } => Some(*child),
            _ => None,
        }
    }
}

impl Tree {
    fn children_of(&self, n: u32) -> Vec<u32> {
        match &self.nodes[n as usize].kind {
            CKind::Sequence { children, .. }
            | CKind::Selector { children, .. }
            | CKind::Parallel { children, .. } => children.clone(),
            kind => kind.child().into_iter().collect(),
        }
    }

    /// The label of a node (`#3 wait_for on_tool_complete`).
    pub(crate) fn label(&self, n: u32) -> &str {
        self.nodes.get(n as usize).map_or("?", |c| c.label.as_str())
    }

    /// The tree, one node per line, indented by depth.
    pub(crate) fn describe(&self, indent: &str) -> String {
        fn walk(t: &Tree, n: u32, depth: usize, indent: &str, out: &mut String) {
            let node = &t.nodes[n as usize];
            let mut extra = Vec::new();
            if node.skip_if.is_some() {
                extra.push("skip_if");
            }
            if node.while_.is_some() {
                extra.push("while");
            }
            if node.on_success.is_some() {
                extra.push("on_success");
            }
            if node.on_failure.is_some() {
                extra.push("on_failure");
            }
            if node.on_halted.is_some() {
                extra.push("on_halted");
            }
            out.push_str(&format!(
                "{indent}{}{}{}\n",
                "  ".repeat(depth),
                node.label,
                if extra.is_empty() {
                    String::new()
                } else {
                    format!(" [{}]", extra.join(", "))
                }
            ));
            for c in t.children_of(n) {
                walk(t, c, depth + 1, indent, out);
            }
        }
        let mut out = String::new();
        walk(self, 0, 0, indent, &mut out);
        out
    }

    /// The tree as a Mermaid flowchart.
    pub(crate) fn mermaid(&self) -> String {
        let mut out = String::from("flowchart TD\n");
        for (i, node) in self.nodes.iter().enumerate() {
            let text = node.label.replace('"', "'");
            out.push_str(&format!("    n{i}[\"{text}\"]\n"));
        }
        for i in 0..self.nodes.len() as u32 {
            for c in self.children_of(i) {
                out.push_str(&format!("    n{i} --> n{c}\n"));
            }
        }
        out
    }
}

/// `1 turn`, `2 turns`: how a node's label says a number of turns.
pub(crate) fn turns_label(n: u64) -> String {
    if n == 1 {
        "1 turn".into()
    } else {
        format!("{n} turns")
    }
}
