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
use std::sync::{Arc, OnceLock};

use bonsai_bt::Behavior;
use warden_expr::Compiler;
use warden_input::{Diagnostic, Severity};
use warden_load::{ActionDef, Hook, Loaded, OnError, PluginInfo, RuleDef};

use crate::hooks::{HookTree, build_hook};
use crate::rule::{CompiledRule, RuleCompiler, RuleCondition, compile_body};
use warden_context::context::{SETTINGS_BASE, plugin_schema};
use warden_context::slots::{SettingSlots, Slot};

/// How a program compiles its rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compilation {
    /// Every rule when the program is built: its problems are known at once, and a tick never
    /// compiles. For anything that runs more than one event.
    #[default]
    Eager,
    /// A rule when something first needs it (a tick of its hook, a saved session that names
    /// it), and a hook's trees at its first tick: for a process that handles one event (a
    /// Claude Code hook), which then compiles only the rules of the hooks it ticks. What a tick
    /// decides is the same; [`Program::diagnostics`] (and what lists rules) compiles every rule
    /// first, so it still reports every problem.
    OnDemand,
}

/// Everything loaded and compiled from rule files: immutable, shared by every session.
pub struct Program {
    /// Which compilation of the rules this is; a reload makes a new one.
    pub generation: u64,
    /// Every rule that takes part (a program compiled on demand also holds those whose body
    /// turns out not to compile: they never fire).
    pub rules: Vec<CompiledRule>,
    /// The key of each rule, in order: shared by every session's decorator memory.
    pub rule_keys: Arc<[Arc<str>]>,
    hooks: Vec<OnceLock<HookTree>>,
    /// The compilers of conditions and templates, for rules compiled on demand and for modes.
    pub compiler: Arc<RuleCompiler>,
    /// Every setting of the program's plugins, numbered.
    pub settings: SettingSlots,
    /// The compiled modes, if the program has any.
    pub modes: Option<crate::mode::Modes>,
    /// What loading found (compiled on demand: before any rule is compiled).
    found: Settled,
    /// What the program is once every rule is compiled.
    settled: OnceLock<Settled>,
}

/// What a program says of itself that depends on every rule being compiled.
#[derive(Default)]
struct Settled {
    /// Every problem.
    diagnostics: Vec<Diagnostic>,
    /// Every folder to watch (script files are found when their rules compile).
    folders: Vec<std::path::PathBuf>,
    /// The plugins, and each one's rules that compile.
    plugins: Vec<PluginInfo>,
}

impl std::fmt::Debug for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Program")
            .field("generation", &self.generation)
            .field("rules", &self.rules.len())
            .field("settled", &self.settled.get().is_some())
            .finish()
    }
}

impl Program {
    /// Compiles what was loaded. Rules with errors are left out and reported; the rest
    /// compile, enabled or not (a user may switch a rule that is off by default on).
    pub fn compile(loaded: Loaded, generation: u64) -> Program {
        Self::compile_with(loaded, generation, Compilation::Eager)
    }

    /// Compiles what was loaded, each rule at once or when first needed ([`Compilation`]).
    pub fn compile_with(loaded: Loaded, generation: u64, compilation: Compilation) -> Program {
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
        let plugin_on_error: HashMap<Arc<str>, OnError> = plugins
            .iter()
            .filter_map(|p| Some((Arc::from(p.manifest.id.as_str()), p.manifest.on_error?)))
            .collect();
        let defs: Vec<Arc<RuleDef>> = defs.into_iter().map(Arc::new).collect();
        let cx = Arc::new(RuleCompiler::new(
            base.clone(),
            compilers,
            plugin_on_error,
            defs.clone(),
        ));
        let mut rules = Vec::new();
        let mut scripts = Vec::new();
        for def in defs {
            if compilation == Compilation::OnDemand {
                // Rules with load errors are compiled only for their diagnostics (`settle`).
                if def.valid {
                    let number = rules.len() as u64;
                    rules.push(CompiledRule::on_demand(def, number, cx.clone()));
                }
                continue;
            }
            // Every rule is compiled, so that `warden check` reports all of its problems; only
            // valid rules that compile take part.
            let number = rules.len() as u64;
            let Some(body) = compile_body(&def, number, &cx, &mut diagnostics, &mut scripts) else {
                continue;
            };
            if def.valid {
                rules.push(CompiledRule::compiled(def, number, body, cx.clone()));
            }
        }
        add_script_folders(&mut folders, scripts);
        let hooks: Vec<OnceLock<HookTree>> = match compilation {
            Compilation::Eager => Hook::ALL
                .iter()
                .map(|h| OnceLock::from(build_hook(*h, &rules, &mut diagnostics)))
                .collect(),
            Compilation::OnDemand => Hook::ALL.iter().map(|_| OnceLock::new()).collect(),
        };
        let modes =
            modes_file.and_then(|f| crate::mode::compile_modes(f, &base, &rules, &mut diagnostics));
        let plugins = plugins
            .into_iter()
            .map(|p| {
                let mut info = PluginInfo {
                    rules: Vec::new(),
                    rule_versions: Default::default(),
                    id: p.manifest.id,
                    name: p.manifest.name,
                    version: p.manifest.version,
                    description: p.manifest.description,
                    dir: p.dir,
                    requires: p.manifest.requires,
                    settings: p.manifest.settings,
                    skipped: p.skipped,
                };
                list_rules(&mut info, &rules);
                info
            })
            .collect();
        let rule_keys = rules.iter().map(|r| r.key.clone()).collect();
        let mut found = Settled {
            diagnostics,
            folders,
            plugins,
        };
        let settled = match compilation {
            Compilation::Eager => {
                warden_input::sort_and_cap(&mut found.diagnostics);
                OnceLock::from(std::mem::take(&mut found))
            }
            Compilation::OnDemand => OnceLock::new(),
        };
        Program {
            generation,
            rules,
            rule_keys,
            hooks,
            compiler: cx,
            settings,
            modes,
            found,
            settled,
        }
    }

    /// The trees of `hook`, built (and its rules compiled) at the first call in a program
    /// compiled on demand.
    pub fn hook(&self, hook: Hook) -> &HookTree {
        self.hooks[hook.index()].get_or_init(|| {
            let mut diagnostics = Vec::new();
            let tree = build_hook(hook, &self.rules, &mut diagnostics);
            if !diagnostics.is_empty() {
                self.compiler.late(diagnostics, Vec::new());
            }
            tree
        })
    }

    /// Compiles every rule and builds every hook's trees (a program compiled on demand), and
    /// gathers what that finds.
    fn settle(&self) -> &Settled {
        self.settled.get_or_init(|| {
            for hook in Hook::ALL {
                self.hook(hook);
            }
            for rule in &self.rules {
                rule.body();
            }
            let mut diagnostics = self.found.diagnostics.clone();
            let mut scripts = Vec::new();
            // Rules with load errors are compiled for what else they would report.
            for def in self.compiler.defs().iter().filter(|d| !d.valid) {
                compile_body(def, 0, &self.compiler, &mut diagnostics, &mut scripts);
            }
            let (late, found) = self.compiler.take_late();
            diagnostics.extend(late);
            warden_input::sort_and_cap(&mut diagnostics);
            let mut folders = self.found.folders.clone();
            add_script_folders(&mut folders, found);
            let compiled: Vec<&CompiledRule> = self.compiled_rules().collect();
            let plugins = self
                .found
                .plugins
                .iter()
                .map(|p| {
                    let mut p = p.clone();
                    p.rules.clear();
                    p.rule_versions.clear();
                    list_rules(&mut p, compiled.iter().copied());
                    p
                })
                .collect();
            Settled {
                diagnostics,
                folders,
                plugins,
            }
        })
    }

    /// The rules that take part and compile (all of them, but in a program compiled on
    /// demand: those it compiles now).
    fn compiled_rules(&self) -> impl Iterator<Item = &CompiledRule> {
        self.rules.iter().filter(|r| r.body().is_some())
    }

    /// The plugins found, loaded or skipped (Warden's built-in rules are the `builtin` plugin).
    pub fn plugins(&self) -> &[PluginInfo] {
        &self.settle().plugins
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
        &self.settle().folders
    }

    /// Problems found while loading and compiling, errors and warnings (a program compiled on
    /// demand compiles every rule first).
    pub fn diagnostics(&self) -> &[Diagnostic] {
        &self.settle().diagnostics
    }

    /// Whether any diagnostic is an error (some rule did not load).
    pub fn has_errors(&self) -> bool {
        self.diagnostics()
            .iter()
            .any(|d| d.severity() == Severity::Error)
    }

    /// Every rule that loaded without errors (enabled or not), in load order.
    pub fn rules(&self) -> impl Iterator<Item = &RuleDef> {
        self.compiled_rules().map(|r| &*r.def)
    }

    /// How many rules are active by default (loaded, compiled, not `enabled = false`).
    pub fn active_rules(&self) -> usize {
        self.compiled_rules().filter(|r| r.def.enabled).count()
    }

    /// The display ids of the loaded rules written `enabled = false` (loaded, but off until
    /// someone switches them on), in load order.
    pub fn rules_off_in_their_files(&self) -> impl Iterator<Item = &str> {
        self.compiled_rules()
            .filter(|r| !r.def.enabled)
            .map(|r| &*r.key)
    }

    /// The display ids of the loaded rules in shadow by their files (`shadow = true`, or their
    /// plugin's manifest), in load order.
    pub fn rules_in_shadow_in_their_files(&self) -> impl Iterator<Item = &str> {
        self.compiled_rules()
            .filter(|r| r.def.enabled && r.def.shadow)
            .map(|r| &*r.key)
    }

    /// The display ids of the loaded rules (`id`, or `plugin/id` for plugin rules), in load
    /// order.
    pub fn rule_keys(&self) -> impl Iterator<Item = &str> {
        self.compiled_rules().map(|r| &*r.key)
    }

    /// The index of the rule whose display id is `key`.
    pub fn rule_index(&self, key: &str) -> Option<usize> {
        self.rules.iter().position(|r| &*r.key == key)
    }

    /// The display id of an active rule by index.
    pub fn rule_key(&self, ix: u32) -> &str {
        self.rules.get(ix as usize).map_or("?", |r| &r.key)
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
        if let Some(RuleCondition::Tree(tree)) =
            self.rules[ix as usize].body().map(|b| &b.condition)
        {
            out.push_str(&tree.describe(indent));
        }
    }

    /// A behavior's tree as a Mermaid flowchart (for the book, and `warden tree --mermaid`);
    /// `None` if `rule` is not a behavior.
    pub fn mermaid(&self, rule: &str) -> Option<String> {
        let r = self.rules.iter().find(|r| &*r.key == rule)?;
        match &r.body()?.condition {
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
            guards.push(format!(
                "cooldown {}",
                crate::behavior::turns_label(u64::from(n))
            ));
        }
        if r.def.once_per_session {
            guards.push("once per session".into());
        }
        if let Some(n) = r.def.max_fires {
            guards.push(format!("max {n} fires"));
        }
        let mut actions: Vec<_> = r.def.actions.iter().map(ActionDef::type_name).collect();
        let Some(body) = r.body() else {
            return format!("{} (does not compile)", r.key);
        };
        let condition = match &body.condition {
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
        let off = match (r.def.enabled, r.def.shadow) {
            (false, _) => " (off unless a user switches it on)",
            (true, true) => " (in shadow: evaluated, nothing it decides applies)",
            (true, false) => "",
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

/// Lists in `info` its plugin's rules among `rules`, with their versions.
fn list_rules<'r>(info: &mut PluginInfo, rules: impl IntoIterator<Item = &'r CompiledRule>) {
    for r in rules.into_iter().filter(|r| *r.def.plugin == *info.id) {
        info.rules.push(r.def.id.clone());
        info.rule_versions
            .insert(r.def.id.clone(), r.def.version.clone());
    }
}

/// Adds the folders of `scripts` not already within one of `folders`.
fn add_script_folders(folders: &mut Vec<std::path::PathBuf>, scripts: Vec<std::path::PathBuf>) {
    for script in scripts {
        if let Some(dir) = script.parent()
            && !folders.iter().any(|f| dir.starts_with(f))
        {
            folders.push(dir.to_path_buf());
        }
    }
}
