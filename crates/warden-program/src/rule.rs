//! A rule, compiled: its guard (decorators, tool filter), its condition (an expression, a
//! script, or a behavior's tree) and its actions; and what compiling one needs, kept for the
//! rules a program compiles on demand.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use warden_expr::{CompileOptions, Compiler, Condition};
use warden_input::Diagnostic;
use warden_load::{ConditionDef, Decision, LOCAL_PLUGIN, OnError, RuleDef, rule_key};

use crate::actions::{CompiledAction, compile_actions, compile_script, expr_diagnostic};
use warden_context::context::{NO_SETTINGS, SETTINGS_ROOT, unavailable};
use warden_context::template::Templates;

/// A rule of a program: what a tick reads before the condition (its key, its guard, its
/// definition) and its [`Body`], compiled with the program or, in a program compiled on demand,
/// the first time something asks for it.
pub struct CompiledRule {
    /// The rule's display id (`plugin/id`, or `id` outside plugins).
    pub key: Arc<str>,
    /// The decorators, copied out of `def` so a tick reads them without another pointer chase.
    pub gate: Gate,
    /// The definition as loaded.
    pub def: Arc<RuleDef>,
    /// What its failing guard decides: the rule's `on_error`, else its plugin's, where a
    /// deny means something (its trigger).
    pub on_error: OnError,
    /// Its number in the program (its scripts' keys are made from it).
    number: u64,
    body: OnceLock<Option<Body>>,
    compiler: Arc<RuleCompiler>,
}

/// What a rule does, compiled.
pub struct Body {
    /// Identifies what the rule is: its file's text and its script's. A reload keeps a
    /// running tree whose rules' fingerprints did not change.
    pub fingerprint: u64,
    /// How it decides.
    pub condition: RuleCondition,
    /// What it does when it fires.
    pub actions: Vec<CompiledAction>,
}

impl CompiledRule {
    /// A rule whose body compiles when first asked for.
    pub(crate) fn on_demand(def: Arc<RuleDef>, number: u64, compiler: Arc<RuleCompiler>) -> Self {
        Self::with(def, number, OnceLock::new(), compiler)
    }

    /// A rule whose body is compiled.
    pub(crate) fn compiled(
        def: Arc<RuleDef>,
        number: u64,
        body: Body,
        compiler: Arc<RuleCompiler>,
    ) -> Self {
        Self::with(def, number, OnceLock::from(Some(body)), compiler)
    }

    fn with(
        def: Arc<RuleDef>,
        number: u64,
        body: OnceLock<Option<Body>>,
        compiler: Arc<RuleCompiler>,
    ) -> Self {
        CompiledRule {
            key: def.key(),
            gate: Gate {
                once_per_session: def.once_per_session,
                max_fires: def.max_fires,
                cooldown_turns: def.cooldown_turns,
                tool_filter: !def.tools.is_empty(),
            },
            on_error: compiler.on_error(&def),
            def,
            number,
            body,
            compiler,
        }
    }

    /// Its body, compiled now if it was not yet; `None` when it does not compile (a rule
    /// compiled on demand: its problems are added to the program's diagnostics).
    #[inline]
    pub fn body(&self) -> Option<&Body> {
        // Compiled already (every tick after a rule's first): a load, inlined where it is read.
        if let Some(body) = self.body.get() {
            return body.as_ref();
        }
        self.compile_body()
    }

    #[cold]
    fn compile_body(&self) -> Option<&Body> {
        self.body
            .get_or_init(|| {
                let (mut diagnostics, mut scripts) = (Vec::new(), Vec::new());
                let body = compile_body(
                    &self.def,
                    self.number,
                    &self.compiler,
                    &mut diagnostics,
                    &mut scripts,
                );
                self.compiler.late(diagnostics, scripts);
                body
            })
            .as_ref()
    }

    /// Its body if it was compiled already (nothing is compiled).
    pub fn compiled_body(&self) -> Option<&Body> {
        self.body.get().and_then(Option::as_ref)
    }

    /// Its fingerprint (`None`: it does not compile).
    pub fn fingerprint(&self) -> Option<u64> {
        self.body().map(|b| b.fingerprint)
    }
}

/// What compiling a rule needs from its program: kept by the program for the rules it
/// compiles on demand.
pub struct RuleCompiler {
    /// The compiler of rules outside plugins (and of modes).
    pub base: Compiler,
    /// Each plugin's compiler, whose `settings` root has exactly its settings.
    pub plugins: HashMap<Arc<str>, Compiler>,
    /// The template environment every rule renders with.
    pub templates: Templates,
    /// Behaviors by display id, for `subtree` references.
    behaviors: HashMap<Arc<str>, Arc<RuleDef>>,
    /// Every rule loaded, for a `subtree` that names a rule that is not a behavior.
    defs: Vec<Arc<RuleDef>>,
    /// Each plugin's `on_error`.
    plugin_on_error: HashMap<Arc<str>, OnError>,
    /// Problems found compiling rules on demand, after the program was built, and the script
    /// files those rules read.
    late: Mutex<(Vec<Diagnostic>, Vec<std::path::PathBuf>)>,
}

impl RuleCompiler {
    pub(crate) fn new(
        base: Compiler,
        plugins: HashMap<Arc<str>, Compiler>,
        plugin_on_error: HashMap<Arc<str>, OnError>,
        defs: Vec<Arc<RuleDef>>,
    ) -> Self {
        let behaviors = defs
            .iter()
            .filter(|d| d.valid && matches!(d.condition, ConditionDef::Tree(_)))
            .map(|d| (rule_key(&d.plugin, &d.id), d.clone()))
            .collect();
        RuleCompiler {
            base,
            plugins,
            templates: Templates::new(),
            behaviors,
            defs,
            plugin_on_error,
            late: Mutex::default(),
        }
    }

    /// Every rule loaded, valid or not, in load order.
    pub(crate) fn defs(&self) -> &[Arc<RuleDef>] {
        &self.defs
    }

    /// What a rule's failing guard decides: its own `on_error`, else its plugin's, where a
    /// deny means something (its trigger).
    fn on_error(&self, def: &RuleDef) -> OnError {
        def.on_error
            .or_else(|| self.plugin_on_error.get(&*def.plugin).copied())
            .filter(|_| Decision::Deny.valid_at(def.trigger))
            .unwrap_or_default()
    }

    /// The behavior (or, failing that, the rule) a `subtree` names: `name` in `plugin`, or
    /// `plugin/id`.
    fn find(&self, plugin: &str, name: &str) -> Option<Arc<RuleDef>> {
        let key = if name.contains('/') {
            Arc::from(name)
        } else {
            rule_key(plugin, name)
        };
        self.behaviors.get(&key).cloned().or_else(|| {
            // A plain rule of that name: found, so the error can say it is not a behavior.
            self.defs
                .iter()
                .find(|d| rule_key(&d.plugin, &d.id) == key)
                .cloned()
        })
    }

    /// Keeps what compiling on demand found.
    pub(crate) fn late(&self, diagnostics: Vec<Diagnostic>, scripts: Vec<std::path::PathBuf>) {
        if diagnostics.is_empty() && scripts.is_empty() {
            return;
        }
        let mut late = self.late.lock().unwrap_or_else(PoisonError::into_inner);
        late.0.extend(diagnostics);
        late.1.extend(scripts);
    }

    /// The problems and the script files found compiling on demand so far, taken.
    pub(crate) fn take_late(&self) -> (Vec<Diagnostic>, Vec<std::path::PathBuf>) {
        std::mem::take(&mut *self.late.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// How a rule decides.
pub enum RuleCondition {
    /// A compiled expression.
    Expr(Condition),
    /// A Lua script, run as a coroutine, with the rule's own time limit if it sets one.
    Script {
        /// The script.
        script: Arc<warden_lua::Script>,
        /// Its own time limit, if it sets one.
        timeout: Option<std::time::Duration>,
    },
    /// A behavior's tree, run by the behavior executor.
    Tree(Box<crate::behavior::Tree>),
}

impl RuleCondition {
    /// The scripts it runs: its own, or those of its tree, in order.
    pub fn scripts(&self) -> Vec<&Arc<warden_lua::Script>> {
        match self {
            RuleCondition::Script { script, .. } => vec![script],
            RuleCondition::Tree(t) => t.scripts.iter().map(|l| &l.script).collect(),
            RuleCondition::Expr(_) => Vec::new(),
        }
    }

    /// The script a task of this rule runs: `node` is the session's `ROOT` (in `warden-core`) for the
    /// rule's own script, or a node of its tree.
    pub fn script_of(&self, node: u32) -> Option<&Arc<warden_lua::Script>> {
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
pub struct Gate {
    /// `once_per_session`.
    pub once_per_session: bool,
    /// `max_fires`.
    pub max_fires: Option<u32>,
    /// `cooldown_turns`.
    pub cooldown_turns: Option<u32>,
    /// Whether the rule names tools it applies to (`tools`).
    pub tool_filter: bool,
}

/// Compiles a rule's body; `None` (with diagnostics) when it has errors. `number` is the rule's
/// number in its program; script files read from disk are added to `scripts`.
pub(crate) fn compile_body(
    def: &Arc<RuleDef>,
    number: u64,
    cx: &RuleCompiler,
    diagnostics: &mut Vec<Diagnostic>,
    scripts: &mut Vec<std::path::PathBuf>,
) -> Option<Body> {
    let compiler = cx.plugins.get(&def.plugin).unwrap_or(&cx.base);
    let templates = &cx.templates;
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
    let behaviors = |plugin: &str, name: &str| cx.find(plugin, name);
    let condition = match &def.condition {
        ConditionDef::Expression(loc) => match compiler.compile(&loc.text, &opts) {
            Ok(c) => Some(RuleCondition::Expr(c)),
            Err(e) => {
                diagnostics.push(expr_diagnostic(file, &loc.span, &loc.text, &loc.field, &e));
                None
            }
        },
        ConditionDef::Script { path, timeout } => compile_script(def, number, path, diagnostics)
            .map(|(script, found)| {
                std::hash::Hash::hash(script.source(), &mut fingerprint);
                scripts.extend(found);
                RuleCondition::Script {
                    script: Arc::new(script),
                    timeout: *timeout,
                }
            }),
        ConditionDef::Tree(_) => {
            let mut cx = crate::behavior::TreeContext {
                compiler,
                templates,
                diagnostics,
                behaviors: &behaviors,
                script_files: scripts,
                script_key: (1u64 << 40) + (number << 16),
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
    Some(Body {
        fingerprint: std::hash::Hasher::finish(&fingerprint),
        condition: condition?,
        actions,
    })
}
