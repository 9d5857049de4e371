//! Compiling rules into a [`Program`]: conditions and templates compiled once, and for each
//! hook a list of behavior trees (bonsai-bt) in priority order.
//!
//! A rule compiles into one leaf: its guard (decorators, tool filter, condition) and its
//! actions. Folding the guard into the leaf, instead of bonsai's `If` node, matters: `If`
//! clones three subtrees every time it is entered, which measured 12x slower on a tick. Rules
//! that share an `exclusive` group compile into a `Select` of their leaves: the first that
//! matches fires, the rest are not evaluated. Every other rule is its own tree, so no rule
//! can stop another (FR-7), and a tree left `Running` (a script waiting for a later hook) is
//! resumed by itself next time without holding up the rest.

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::sync::Arc;

use bonsai_bt::Behavior;
use serde_json::Value as Json;
use warden_expr::{CompileOptions, Compiler, Condition, ExprError};

use crate::context::{SETTINGS_BASE, SETTINGS_ROOT, plugin_schema, unavailable};
use crate::index::ThresholdIndex;
use crate::template::{TemplateError, Templates, Text, ValueTemplate};
use warden_input::{Diagnostic, Severity, SourceFile};
use warden_load::Hook;
use warden_load::{ActionDef, ConditionDef, DeliverAt, LogLevel, Priority, RuleDef};
use warden_load::{BUILTIN_PLUGIN, LOCAL_PLUGIN, Loaded};
use warden_load::{PluginInfo, SettingDef};

/// A leaf of a hook's trees. Small and `Copy`: bonsai clones leaves as it walks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Node {
    /// A rule: guard, then actions.
    Rule(u32),
}

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

pub(crate) enum CompiledAction {
    Notify {
        message: Text,
        category: Arc<str>,
        priority: Priority,
        deliver_at: DeliverAt,
    },
    Log {
        message: Text,
        level: LogLevel,
    },
    SetState {
        key: Text,
        value: ValueTemplate,
    },
    Emit {
        event_type: Arc<str>,
        payload: ValueTemplate,
    },
    Enrich {
        query: Option<Text>,
    },
}

impl CompiledAction {
    /// The action type's name as written in files.
    pub(crate) fn type_name(&self) -> &'static str {
        match self {
            CompiledAction::Notify { .. } => "notify_self",
            CompiledAction::Log { .. } => "log",
            CompiledAction::SetState { .. } => "set_state",
            CompiledAction::Emit { .. } => "emit_event",
            CompiledAction::Enrich { .. } => "enrich_context",
        }
    }
}

/// One tree of a hook: a rule, or an exclusive group of rules.
pub(crate) struct Entry {
    pub name: Arc<str>,
    pub behavior: Behavior<Node>,
    pub rules: Vec<u32>,
}

#[derive(Default)]
pub(crate) struct HookTree {
    pub entries: Vec<Entry>,
    /// Which entries can fire, by the thresholds their rules need (None: nothing to index).
    pub index: Option<ThresholdIndex>,
    /// For tool hooks: the entries that apply to each named tool, in priority order.
    by_tool: HashMap<String, Vec<u32>>,
    /// The entries without a tool filter (all of them, for other hooks).
    untargeted: Vec<u32>,
}

impl HookTree {
    /// The entries to tick for an event concerning `tool` (if any), in priority order.
    pub(crate) fn entries_for(&self, tool: Option<&str>) -> &[u32] {
        match tool.and_then(|t| self.by_tool.get(t)) {
            Some(list) => list,
            None => &self.untargeted,
        }
    }

    /// The entries to tick, in priority order, into `out`: those for `tool`, less those the
    /// threshold index shows cannot fire (unless `every_rule`, which evaluates them all).
    pub(crate) fn select(
        &self,
        tool: Option<&str>,
        facts: &dyn warden_expr::Facts,
        every_rule: bool,
        out: &mut Vec<u32>,
    ) {
        let base = self.entries_for(tool);
        match (&self.index, every_rule) {
            (Some(index), false) => {
                index.candidates(facts, out);
                if base.len() < self.entries.len() {
                    out.retain(|e| base.binary_search(e).is_ok());
                }
            }
            _ => {
                out.clear();
                out.extend_from_slice(base);
            }
        }
    }
}

/// One setting of one plugin, as a program numbers them (`ScalarId(SETTINGS_BASE + i)`).
pub(crate) struct Slot {
    pub plugin: Arc<str>,
    pub def: Arc<SettingDef>,
}

/// Every setting of a program's plugins.
#[derive(Default)]
pub(crate) struct SettingSlots {
    pub slots: Vec<Slot>,
    /// The slots of each plugin.
    pub by_plugin: HashMap<Arc<str>, Range<usize>>,
}

impl SettingSlots {
    /// The slots of `plugin` (none for rules outside a plugin).
    pub(crate) fn of(&self, plugin: &str) -> Range<usize> {
        self.by_plugin.get(plugin).cloned().unwrap_or(0..0)
    }

    /// The slot of `plugin`'s setting `name`.
    pub(crate) fn find(&self, plugin: &str, name: &str) -> Option<usize> {
        self.of(plugin).find(|&i| self.slots[i].def.name == name)
    }
}

/// Everything loaded and compiled from rule files: immutable, shared by every session.
pub struct Program {
    pub(crate) generation: u64,
    pub(crate) rules: Vec<CompiledRule>,
    pub(crate) hooks: Vec<HookTree>,
    pub(crate) templates: Templates,
    pub(crate) settings: SettingSlots,
    pub(crate) modes: Option<crate::mode::Modes>,
    plugins: Vec<PluginInfo>,
    loaded: Vec<Arc<RuleDef>>,
    diagnostics: Vec<Diagnostic>,
    folders: Vec<std::path::PathBuf>,
}

impl std::fmt::Debug for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Program")
            .field("generation", &self.generation)
            .field("rules", &self.rules.len())
            .field("diagnostics", &self.diagnostics.len())
            .finish()
    }
}

/// A rule's display id: `id` for built-in and local rules, `plugin/id` for plugin rules.
pub(crate) fn rule_key(plugin: &str, id: &str) -> Arc<str> {
    if plugin == BUILTIN_PLUGIN || plugin == LOCAL_PLUGIN {
        Arc::from(id)
    } else {
        Arc::from(format!("{plugin}/{id}"))
    }
}

impl Program {
    /// Compiles what was loaded. Rules with errors are left out and reported; the rest
    /// compile, enabled or not (a user may switch a rule that is off by default on).
    pub fn compile(loaded: Loaded, generation: u64) -> Program {
        let Loaded {
            rules: defs,
            plugins,
            mut diagnostics,
            mut folders,
            modes: modes_file,
        } = loaded;
        // Number every setting of the loaded plugins, and give each plugin a compiler whose
        // `settings` root has exactly its settings.
        let mut settings = SettingSlots::default();
        let base = Compiler::new(plugin_schema(&[]));
        let mut compilers: HashMap<Arc<str>, Compiler> = HashMap::new();
        for p in plugins.iter().filter(|p| p.skipped.is_none()) {
            let id: Arc<str> = Arc::from(p.manifest.id.as_str());
            let start = settings.slots.len();
            let mut typed = Vec::new();
            for def in &p.manifest.settings {
                let Some(sid) = u16::try_from(settings.slots.len())
                    .ok()
                    .and_then(|i| SETTINGS_BASE.checked_add(i))
                else {
                    diagnostics.push(Diagnostic::error(
                        &p.manifest.source,
                        Some(p.manifest.span.clone()),
                        Some("settings"),
                        "too many settings across all plugins (the limit is 64,000)",
                    ));
                    break;
                };
                typed.push((warden_expr::ScalarId(sid), def.as_ref()));
                settings.slots.push(Slot {
                    plugin: id.clone(),
                    def: def.clone(),
                });
            }
            settings
                .by_plugin
                .insert(id.clone(), start..settings.slots.len());
            compilers.insert(id, base.with_schema(plugin_schema(&typed)));
        }
        let mut templates = Templates::new();
        let mut rules = Vec::new();
        let mut loaded = Vec::new();
        let mut scripts = Vec::new();
        let defs: Vec<Arc<RuleDef>> = defs.into_iter().map(Arc::new).collect();
        // Behaviors by display id, for `subtree` references.
        let behaviors: HashMap<Arc<str>, Arc<RuleDef>> = defs
            .iter()
            .filter(|d| d.valid && matches!(d.condition, ConditionDef::Tree(_)))
            .map(|d| (rule_key(&d.plugin, &d.id), d.clone()))
            .collect();
        let find = |plugin: &str, name: &str| -> Option<Arc<RuleDef>> {
            let key = if name.contains('/') {
                Arc::from(name)
            } else {
                rule_key(plugin, name)
            };
            behaviors.get(&key).cloned().or_else(|| {
                // A plain rule of that name: found, so the error can say it is not a behavior.
                defs.iter()
                    .find(|d| rule_key(&d.plugin, &d.id) == key)
                    .cloned()
            })
        };
        for def in defs.iter().cloned() {
            // Every rule is compiled, so that `warden check` reports all of its problems; only
            // valid rules that compile take part.
            let key = rules.len() as u64;
            let compiler = compilers.get(&def.plugin).unwrap_or(&base);
            let Some(rule) = compile_rule(
                &def,
                key,
                compiler,
                &mut templates,
                &mut diagnostics,
                &mut scripts,
                &find,
            ) else {
                continue;
            };
            if !def.valid {
                continue;
            }
            loaded.push(def.clone());
            rules.push(rule);
        }
        for script in scripts {
            if let Some(dir) = script.parent()
                && !folders.iter().any(|f| dir.starts_with(f))
            {
                folders.push(dir.to_path_buf());
            }
        }
        let hooks = Hook::ALL
            .iter()
            .map(|h| build_hook(*h, &rules, &mut diagnostics))
            .collect();
        let modes =
            modes_file.and_then(|f| crate::mode::compile_modes(f, &base, &rules, &mut diagnostics));
        warden_input::sort_and_cap(&mut diagnostics);
        let plugins = plugins
            .into_iter()
            .map(|p| PluginInfo {
                rules: loaded
                    .iter()
                    .filter(|r| *r.plugin == *p.manifest.id)
                    .map(|r| r.id.clone())
                    .collect(),
                id: p.manifest.id,
                name: p.manifest.name,
                version: p.manifest.version,
                description: p.manifest.description,
                dir: p.dir,
                requires: p.manifest.requires,
                settings: p.manifest.settings,
                skipped: p.skipped,
            })
            .collect();
        Program {
            generation,
            rules,
            hooks,
            templates,
            settings,
            modes,
            plugins,
            loaded,
            diagnostics,
            folders,
        }
    }

    /// The plugins found, loaded or skipped (Warden's built-in rules are the `builtin` plugin).
    pub fn plugins(&self) -> &[PluginInfo] {
        &self.plugins
    }

    /// The modes, in priority order (empty without a modes file).
    pub fn modes(&self) -> Vec<&warden_load::ModeDef> {
        self.modes
            .iter()
            .flat_map(|m| m.modes.iter().map(|x| &x.def))
            .collect()
    }

    /// Whether the mode `mode` activates the rule `rule` (true without modes, and for the
    /// default mode).
    pub fn active_in(&self, mode: &str, rule: &str) -> bool {
        let Some(modes) = &self.modes else {
            return true;
        };
        let Some(m) = modes.modes.iter().find(|m| &*m.id == mode) else {
            return true;
        };
        self.rules
            .iter()
            .position(|r| &*r.key == rule)
            .is_none_or(|i| m.active[i])
    }

    /// The folders rules, manifests and scripts were read from: what to watch for changes.
    pub fn folders(&self) -> &[std::path::PathBuf] {
        &self.folders
    }

    /// Problems found while loading and compiling, errors and warnings.
    pub fn diagnostics(&self) -> &[Diagnostic] {
        &self.diagnostics
    }

    /// Whether any diagnostic is an error (some rule did not load).
    pub fn has_errors(&self) -> bool {
        self.diagnostics
            .iter()
            .any(|d| d.severity() == Severity::Error)
    }

    /// Every rule that loaded without errors (enabled or not), in load order.
    pub fn rules(&self) -> impl Iterator<Item = &RuleDef> {
        self.loaded.iter().map(|r| &**r)
    }

    /// How many rules are active by default (loaded, compiled, not `enabled = false`).
    pub fn active_rules(&self) -> usize {
        self.rules.iter().filter(|r| r.def.enabled).count()
    }

    /// The display ids of the loaded rules (`id`, or `plugin/id` for plugin rules), in load
    /// order.
    pub fn rule_keys(&self) -> impl Iterator<Item = &str> {
        self.rules.iter().map(|r| &*r.key)
    }

    /// The display id of an active rule by index.
    pub(crate) fn rule_key(&self, ix: u32) -> &str {
        self.rules.get(ix as usize).map_or("?", |r| &r.key)
    }

    pub(crate) fn hook(&self, hook: Hook) -> &HookTree {
        &self.hooks[hook.index()]
    }

    /// The compiled trees of `hook`, one line per node, indented (for `warden tree` and tests).
    pub fn describe_hook(&self, hook: Hook) -> String {
        self.describe_hook_in(hook, None)
    }

    /// Like [`Program::describe_hook`], for the rules active in `mode` only (those it leaves
    /// out are listed as such).
    pub fn describe_hook_in(&self, hook: Hook, mode: Option<&str>) -> String {
        let active = |ix: u32| mode.is_none_or(|m| self.active_in(m, &self.rules[ix as usize].key));
        let mut out = String::new();
        let tree = self.hook(hook);
        out.push_str(&format!(
            "{hook} (every matching rule fires, in this order)\n"
        ));
        for entry in &tree.entries {
            match &entry.behavior {
                Behavior::Select(_) => {
                    out.push_str(&format!(
                        "  exclusive `{}` (first match wins)\n",
                        entry.name
                    ));
                    for r in &entry.rules {
                        if !active(*r) {
                            out.push_str(&format!(
                                "    {} (not active in this mode)\n",
                                self.rules[*r as usize].key
                            ));
                            continue;
                        }
                        out.push_str(&format!("    {}\n", self.describe_rule(*r)));
                        self.describe_nodes(*r, "      ", &mut out);
                    }
                }
                _ => {
                    for r in &entry.rules {
                        if !active(*r) {
                            out.push_str(&format!(
                                "  {} (not active in this mode)\n",
                                self.rules[*r as usize].key
                            ));
                            continue;
                        }
                        out.push_str(&format!("  {}\n", self.describe_rule(*r)));
                        self.describe_nodes(*r, "    ", &mut out);
                    }
                }
            }
        }
        out
    }

    /// The nodes of a behavior's tree, indented under it.
    fn describe_nodes(&self, ix: u32, indent: &str, out: &mut String) {
        if let RuleCondition::Tree(tree) = &self.rules[ix as usize].condition {
            out.push_str(&tree.describe(indent));
        }
    }

    /// A behavior's tree as a Mermaid flowchart (for the book, and `warden tree --mermaid`);
    /// `None` if `rule` is not a behavior.
    pub fn mermaid(&self, rule: &str) -> Option<String> {
        let r = self.rules.iter().find(|r| &*r.key == rule)?;
        match &r.condition {
            RuleCondition::Tree(tree) => Some(tree.mermaid()),
            _ => None,
        }
    }

    fn describe_rule(&self, ix: u32) -> String {
        let r = &self.rules[ix as usize];
        let mut guards = Vec::new();
        if !r.def.tools.is_empty() {
            guards.push(format!("tool in [{}]", r.def.tools.join(", ")));
        }
        if let Some(n) = r.def.cooldown_turns {
            guards.push(format!("cooldown {n} turns"));
        }
        if r.def.once_per_session {
            guards.push("once per session".into());
        }
        if let Some(n) = r.def.max_fires {
            guards.push(format!("max {n} fires"));
        }
        let mut actions: Vec<_> = r.def.actions.iter().map(ActionDef::type_name).collect();
        let condition = match &r.condition {
            RuleCondition::Expr(c) => format!(
                "{} ({})",
                c.source(),
                if c.is_native() { "native" } else { "rhai" }
            ),
            RuleCondition::Script { script, .. } => {
                actions.insert(0, "its own actions");
                format!("script {} (lua)", script.name())
            }
            RuleCondition::Tree(tree) => {
                actions.insert(0, "its action nodes");
                format!("behavior tree, {} nodes", tree.nodes.len())
            }
        };
        let off = if r.def.enabled {
            ""
        } else {
            " (off unless a user switches it on)"
        };
        format!(
            "{} [priority {}] guard({}{condition}) -> {}{off}",
            r.key,
            r.def.priority,
            guards.iter().map(|g| format!("{g}, ")).collect::<String>(),
            actions.join(" + ")
        )
    }
}

/// Why a rule outside a plugin cannot read `settings`.
pub(crate) const NO_SETTINGS: &str = "this rule is not part of a plugin, so it has no settings; settings are declared in a plugin's manifest.toml ([settings.NAME])";

fn compile_rule(
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
        key: rule_key(&def.plugin, &def.id),
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
    })
}

/// Compiles the templates of `defs` (a rule's actions, or a behavior node's); problems are
/// reported with `prefix` as the field (`action`, `tree.children[2].on_success`).
pub(crate) fn compile_actions(
    defs: &[ActionDef],
    prefix: &str,
    file: &Arc<SourceFile>,
    compiler: &Compiler,
    opts: &CompileOptions<'_>,
    templates: &mut Templates,
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<CompiledAction> {
    let mut actions = Vec::new();
    for (i, action) in defs.iter().enumerate() {
        let field = |name: &str| {
            if defs.len() == 1 {
                format!("{prefix}.{name}")
            } else {
                format!("{prefix}[{i}].{name}")
            }
        };
        let mut text = |loc: &warden_load::Located| match templates.text(&loc.text, compiler, opts)
        {
            Ok(t) => Some(t),
            Err(e) => {
                diagnostics.push(template_diagnostic(
                    file, &loc.span, &loc.text, &loc.field, e,
                ));
                None
            }
        };
        let compiled = match action {
            ActionDef::NotifySelf {
                message,
                category,
                priority,
                deliver_at,
            } => text(message).map(|message| CompiledAction::Notify {
                message,
                category: Arc::from(category.as_str()),
                priority: *priority,
                deliver_at: *deliver_at,
            }),
            ActionDef::Log { message, level } => text(message).map(|message| CompiledAction::Log {
                message,
                level: *level,
            }),
            ActionDef::SetState {
                key,
                value,
                value_span,
            } => {
                let key = text(key);
                let value = value_template(
                    templates,
                    compiler,
                    opts,
                    value,
                    file,
                    value_span,
                    &field("value"),
                    diagnostics,
                );
                key.zip(value)
                    .map(|(key, value)| CompiledAction::SetState { key, value })
            }
            ActionDef::EmitEvent {
                event_type,
                payload,
                payload_span,
            } => value_template(
                templates,
                compiler,
                opts,
                payload,
                file,
                payload_span,
                &field("payload"),
                diagnostics,
            )
            .map(|payload| CompiledAction::Emit {
                event_type: Arc::from(event_type.text.as_str()),
                payload,
            }),
            ActionDef::EnrichContext { query } => match query {
                Some(q) => text(q).map(|t| CompiledAction::Enrich { query: Some(t) }),
                None => Some(CompiledAction::Enrich { query: None }),
            },
        };
        actions.extend(compiled);
    }
    actions
}

/// Finds and checks the script of a rule; problems are reported against the rule file (not
/// found, not allowed) or against the script itself (syntax, at its line).
pub(crate) fn compile_script(
    def: &RuleDef,
    key: u64,
    path: &warden_load::Located,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<(warden_lua::Script, Option<std::path::PathBuf>)> {
    let rule_file = (&*def.plugin != BUILTIN_PLUGIN).then(|| def.source.path());
    let found = match warden_load::scripts::find(rule_file, &path.text) {
        Ok(f) => f,
        Err(why) => {
            diagnostics.push(Diagnostic::error(
                &def.source,
                Some(path.span.clone()),
                Some(&path.field),
                why.to_string(),
            ));
            return None;
        }
    };
    if let Err(e) = warden_lua::check_syntax(&path.text, &found.text) {
        let script_file = SourceFile::new(found.path.clone(), found.text.clone());
        let span = e.line.map(|line| {
            let start: usize = found
                .text
                .split_inclusive('\n')
                .take(line.saturating_sub(1))
                .map(str::len)
                .sum();
            let len = found.text[start..]
                .find('\n')
                .unwrap_or(found.text.len() - start);
            start..start + len
        });
        diagnostics.push(
            Diagnostic::error(
                &script_file,
                span,
                Some("script"),
                format!("Lua syntax error: {}", e.message),
            )
            .with_help(format!(
                "used by rule `{}` in {}",
                def.id,
                def.source.path().display()
            )),
        );
        return None;
    }
    // Messages name the script as the rule does (short and the same on every machine).
    Some((
        warden_lua::Script::new(key, &path.text, &found.text),
        found.on_disk.then_some(found.path),
    ))
}

#[allow(clippy::too_many_arguments)]
fn value_template(
    templates: &mut Templates,
    compiler: &Compiler,
    opts: &CompileOptions<'_>,
    value: &Json,
    file: &Arc<SourceFile>,
    span: &Range<usize>,
    field: &str,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<ValueTemplate> {
    match templates.value(value, compiler, opts) {
        Ok(v) => Some(v),
        Err(e) => {
            diagnostics.push(template_diagnostic(file, span, "", field, e));
            None
        }
    }
}

/// Where the text of a string value starts in the file, if it can be mapped exactly (no
/// escapes changed its length).
fn text_start(file: &SourceFile, span: &Range<usize>, text: &str) -> Option<usize> {
    let raw = file.text().get(span.clone())?;
    for quote in ["\"\"\"", "'''", "\"", "'"] {
        if let Some(inner) = raw.strip_prefix(quote).and_then(|r| r.strip_suffix(quote)) {
            return (inner == text).then_some(span.start + quote.len());
        }
    }
    None
}

pub(crate) fn expr_diagnostic(
    file: &Arc<SourceFile>,
    span: &Range<usize>,
    text: &str,
    field: &str,
    e: &ExprError,
) -> Diagnostic {
    let at = match text_start(file, span, text) {
        Some(start) => start + e.span().start..start + e.span().end.max(e.span().start),
        None => span.clone(),
    };
    Diagnostic::error(file, Some(at), Some(field), e.message().to_string()).with_help_opt(e.help())
}

fn template_diagnostic(
    file: &Arc<SourceFile>,
    span: &Range<usize>,
    text: &str,
    field: &str,
    e: TemplateError,
) -> Diagnostic {
    match e {
        TemplateError::Path(e) => Diagnostic::error(
            file,
            Some(span.clone()),
            Some(field),
            format!("in the template: {}", e.message()),
        )
        .with_help_opt(e.help()),
        TemplateError::Syntax(message, line) => {
            let at = match (text_start(file, span, text), line) {
                (Some(start), Some(line)) if line > 1 => {
                    let offset: usize = text
                        .split_inclusive('\n')
                        .take(line - 1)
                        .map(str::len)
                        .sum();
                    start + offset..start + offset
                }
                _ => span.clone(),
            };
            Diagnostic::error(file, Some(at), Some(field), message).with_help(
                "templates use minijinja (Jinja2) syntax: {{ value }}, {% if ... %}...{% endif %}",
            )
        }
    }
}

fn build_hook(hook: Hook, rules: &[CompiledRule], diagnostics: &mut Vec<Diagnostic>) -> HookTree {
    let mut members: Vec<u32> = (0..rules.len() as u32)
        .filter(|&i| rules[i as usize].def.trigger == hook)
        .collect();
    members.sort_by(|&a, &b| {
        let (ra, rb) = (&rules[a as usize].def, &rules[b as usize].def);
        rb.priority
            .cmp(&ra.priority)
            .then_with(|| ra.id.cmp(&rb.id))
            .then_with(|| ra.plugin.cmp(&rb.plugin))
    });
    let mut entries: Vec<Entry> = Vec::new();
    let mut groups: BTreeMap<String, usize> = BTreeMap::new();
    for ix in members {
        let def = &rules[ix as usize].def;
        match &def.exclusive {
            Some(group) => {
                if let Some(&e) = groups.get(group) {
                    entries[e].rules.push(ix);
                } else {
                    groups.insert(group.clone(), entries.len());
                    entries.push(Entry {
                        name: Arc::from(group.as_str()),
                        behavior: Behavior::Action(Node::Rule(ix)),
                        rules: vec![ix],
                    });
                }
            }
            None => entries.push(Entry {
                name: rules[ix as usize].key.clone(),
                behavior: Behavior::Action(Node::Rule(ix)),
                rules: vec![ix],
            }),
        }
    }
    for entry in &mut entries {
        if entry.rules.len() > 1 {
            entry.behavior = Behavior::Select(
                entry
                    .rules
                    .iter()
                    .map(|&r| Behavior::Action(Node::Rule(r)))
                    .collect(),
            );
        }
    }
    // In an exclusive group, a rule after one that always matches is never evaluated.
    for entry in &entries {
        let always = entry.rules.iter().position(|&r| {
            let c = &rules[r as usize];
            let unconditional =
                matches!(&c.condition, RuleCondition::Expr(e) if e.source().trim() == "true");
            let gated = c.def.cooldown_turns.is_some()
                || c.def.once_per_session
                || c.def.max_fires.is_some()
                || !c.def.tools.is_empty();
            unconditional && !gated
        });
        if let Some(at) = always {
            let first = &rules[entry.rules[at] as usize];
            for &r in &entry.rules[at + 1..] {
                let d = &rules[r as usize].def;
                diagnostics.push(
                    Diagnostic::warning(
                        &d.source,
                        Some(d.span.clone()),
                        Some("rule.exclusive"),
                        format!(
                            "`{}` is never evaluated: `{}`, before it in exclusive group `{}`, always matches",
                            rules[r as usize].key, first.key, entry.name
                        ),
                    )
                    .with_help(format!(
                        "give `{}` a real condition or a lower priority, or take one of them out of the group",
                        first.key
                    )),
                );
            }
        }
    }
    // Exclusive groups only exclude within one hook; say so if a group spans hooks.
    for (group, &e) in &groups {
        let first = &rules[entries[e].rules[0] as usize].def;
        if let Some(other) = rules.iter().find(|r| {
            r.def.exclusive.as_deref() == Some(group)
                && r.def.trigger != hook
                && r.def.trigger < hook
        }) {
            diagnostics.push(Diagnostic::warning(
                &first.source,
                Some(first.span.clone()),
                Some("rule.exclusive"),
                format!(
                    "exclusive group `{group}` has rules on {hook} and on {}; exclusivity applies within one hook only",
                    other.def.trigger
                ),
            ));
        }
    }
    let mut tree = HookTree {
        entries,
        ..HookTree::default()
    };
    let filters: Vec<Option<Vec<&str>>> = tree
        .entries
        .iter()
        .map(|e| {
            let mut tools = Vec::new();
            for &r in &e.rules {
                let def = &rules[r as usize].def;
                if def.tools.is_empty() {
                    return None;
                }
                tools.extend(def.tools.iter().map(String::as_str));
            }
            Some(tools)
        })
        .collect();
    let names: Vec<&str> = filters.iter().flatten().flatten().copied().collect();
    for name in names {
        let list: Vec<u32> = (0..tree.entries.len() as u32)
            .filter(|&e| {
                filters[e as usize]
                    .as_ref()
                    .is_none_or(|f| f.contains(&name))
            })
            .collect();
        tree.by_tool.insert(name.to_string(), list);
    }
    tree.untargeted = (0..tree.entries.len() as u32)
        .filter(|&e| filters[e as usize].is_none())
        .collect();
    let thresholds: Vec<Vec<_>> = tree
        .entries
        .iter()
        .map(|e| {
            e.rules
                .iter()
                .map(|&r| rules[r as usize].condition.necessary_threshold())
                .collect()
        })
        .collect();
    tree.index = ThresholdIndex::build(&thresholds);
    tree
}
