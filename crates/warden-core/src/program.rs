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

use std::collections::HashMap;
use std::sync::Arc;

use bonsai_bt::Behavior;
use warden_expr::Compiler;
use warden_input::{Diagnostic, Severity};
use warden_load::{
    ActionDef, ConditionDef, Decision, Hook, Loaded, OnError, PluginInfo, RuleDef, rule_key,
};

use crate::context::{SETTINGS_BASE, plugin_schema};
use crate::hooks::{HookTree, build_hook};
use crate::rule::{CompiledRule, RuleCondition, compile_rule};
use crate::slots::{SettingSlots, Slot};
use crate::template::Templates;

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
        let plugin_on_error: HashMap<&str, Option<OnError>> = plugins
            .iter()
            .map(|p| (p.manifest.id.as_str(), p.manifest.on_error))
            .collect();
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
            let Some(mut rule) = compile_rule(
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
            // A plugin's default applies where a deny means something.
            rule.on_error = def
                .on_error
                .or_else(|| plugin_on_error.get(&*def.plugin).copied().flatten())
                .filter(|_| Decision::Deny.valid_at(def.trigger))
                .unwrap_or_default();
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
                rule_versions: loaded
                    .iter()
                    .filter(|r| *r.plugin == *p.manifest.id)
                    .map(|r| (r.id.clone(), r.version.clone()))
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

    /// Its generation: 0 at build, one more at each applied reload.
    pub fn generation(&self) -> u64 {
        self.generation
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
