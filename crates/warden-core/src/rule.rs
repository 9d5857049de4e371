//! A rule, compiled: its guard (decorators, tool filter), its condition (an expression, a
//! script, or a behavior's tree) and its actions.

use std::sync::Arc;

use warden_expr::{CompileOptions, Compiler, Condition};
use warden_input::Diagnostic;
use warden_load::{ConditionDef, LOCAL_PLUGIN, OnError, RuleDef};

use crate::actions::{CompiledAction, compile_actions, compile_script, expr_diagnostic};
use crate::context::{NO_SETTINGS, SETTINGS_ROOT, unavailable};
use crate::template::Templates;

/// A rule, compiled.
pub(crate) struct CompiledRule {
    pub key: Arc<str>,
    /// Identifies what the rule is: its file's text and its script's. A reload keeps a
    /// running tree whose rules' fingerprints did not change.
    pub fingerprint: u64,
    /// The decorators, copied out of `def` so a tick reads them without another pointer chase.
    pub gate: Gate,
    pub def: Arc<RuleDef>,
    pub condition: RuleCondition,
    pub actions: Vec<CompiledAction>,
    /// What its failing guard decides: the rule's `on_error`, else its plugin's, where a
    /// deny means something (its trigger).
    pub on_error: OnError,
}

/// How a rule decides.
pub(crate) enum RuleCondition {
    /// A compiled expression.
    Expr(Condition),
    /// A Lua script, run as a coroutine, with the rule's own time limit if it sets one.
    Script {
        script: Arc<warden_lua::Script>,
        timeout: Option<std::time::Duration>,
    },
    /// A behavior's tree, run by the behavior executor.
    Tree(Box<crate::behavior::Tree>),
}

impl RuleCondition {
    /// The scripts it runs: its own, or those of its tree, in order.
    pub(crate) fn scripts(&self) -> Vec<&Arc<warden_lua::Script>> {
        match self {
            RuleCondition::Script { script, .. } => vec![script],
            RuleCondition::Tree(t) => t.scripts.iter().map(|l| &l.script).collect(),
            RuleCondition::Expr(_) => Vec::new(),
        }
    }

    /// The script a task of this rule runs: `node` is [`crate::session`]'s `ROOT` for the
    /// rule's own script, or a node of its tree.
    pub(crate) fn script_of(&self, node: u32) -> Option<&Arc<warden_lua::Script>> {
        match self {
            RuleCondition::Script { script, .. } if node == u32::MAX => Some(script),
            RuleCondition::Tree(t) => match t.nodes.get(node as usize)?.kind {
                crate::behavior::CKind::Script(i) => t.scripts.get(i as usize).map(|l| &l.script),
                _ => None,
            },
            _ => None,
        }
    }

    pub(crate) fn necessary_threshold(&self) -> Option<warden_expr::Threshold> {
        match self {
            RuleCondition::Expr(c) => c.necessary_threshold(),
            RuleCondition::Script { .. } | RuleCondition::Tree(_) => None,
        }
    }
}

/// A rule's decorators and tool filter, as a tick checks them before the condition.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Gate {
    pub once_per_session: bool,
    pub max_fires: Option<u32>,
    pub cooldown_turns: Option<u32>,
    pub tool_filter: bool,
}

/// Compiles one rule; `None` (with diagnostics) when it has errors.
pub(crate) fn compile_rule(
    def: &Arc<RuleDef>,
    key: u64,
    compiler: &Compiler,
    templates: &mut Templates,
    diagnostics: &mut Vec<Diagnostic>,
    scripts: &mut Vec<std::path::PathBuf>,
    behaviors: &dyn Fn(&str, &str) -> Option<Arc<RuleDef>>,
) -> Option<CompiledRule> {
    let mut unavailable_roots = unavailable(def.trigger).to_vec();
    if &*def.plugin == LOCAL_PLUGIN {
        unavailable_roots.push((SETTINGS_ROOT, NO_SETTINGS));
    }
    let opts = CompileOptions {
        unavailable: &unavailable_roots,
        force_script: false,
    };
    let mut fingerprint = std::hash::DefaultHasher::new();
    std::hash::Hash::hash(
        &(&*def.plugin, &def.id, def.source.text()),
        &mut fingerprint,
    );
    let file = &def.source;
    let before = diagnostics.len();
    let condition = match &def.condition {
        ConditionDef::Expression(loc) => match compiler.compile(&loc.text, &opts) {
            Ok(c) => Some(RuleCondition::Expr(c)),
            Err(e) => {
                diagnostics.push(expr_diagnostic(file, &loc.span, &loc.text, &loc.field, &e));
                None
            }
        },
        ConditionDef::Script { path, timeout } => {
            compile_script(def, key, path, diagnostics).map(|(script, found)| {
                std::hash::Hash::hash(script.source(), &mut fingerprint);
                scripts.extend(found);
                RuleCondition::Script {
                    script: Arc::new(script),
                    timeout: *timeout,
                }
            })
        }
        ConditionDef::Tree(_) => {
            let mut cx = crate::behavior::TreeContext {
                compiler,
                templates,
                diagnostics,
                behaviors,
                script_files: scripts,
                script_key: (1u64 << 40) + (key << 16),
                hasher: &mut fingerprint,
            };
            crate::behavior::compile_tree(def, &mut cx).map(|t| RuleCondition::Tree(Box::new(t)))
        }
    };
    let actions = compile_actions(
        &def.actions,
        "action",
        file,
        compiler,
        &opts,
        templates,
        diagnostics,
    );
    // Warnings (a guard that can never pass...) do not stop the rule from loading.
    if diagnostics[before..].iter().any(Diagnostic::is_error) {
        return None;
    }
    Some(CompiledRule {
        key: def.key(),
        fingerprint: std::hash::Hasher::finish(&fingerprint),
        gate: Gate {
            once_per_session: def.once_per_session,
            max_fires: def.max_fires,
            cooldown_turns: def.cooldown_turns,
            tool_filter: !def.tools.is_empty(),
        },
        def: def.clone(),
        condition: condition?,
        actions,
        on_error: OnError::Ignore,
    })
}
