//! What users control without editing rule files: switching rules on and off, and setting
//! plugin settings, per user (settings also per project). The choices live in the store, so
//! they survive restarts and reach every process that shares the database.
//!
//! A session resolves the choices for its user and project once, and again only when they
//! change: through Warden's control API (`warden-core`'s `Warden`, which checks a change here
//! and writes it to the store; seen at the next tick), or in the database by another process
//! (noticed within [`POLL_INTERVAL`] of hearing of it, through the store's `data_version`:
//! SQLite's count of other connections' commits, or the notifications a PostgreSQL listener
//! heard from other nodes).
//!
//! A layer of Warden's engine above the program (`warden-program`), whose rules and settings
//! it resolves, and below the session (`warden-session`), which keeps a [`Resolved`] and
//! reads it at every tick. Hosts use it through `warden-core`, which re-exports what its
//! interface hands out.

#![warn(missing_docs)]

use std::collections::HashMap;
use std::time::Duration;

use serde_json::Value as Json;
use warden_store::{ALL_PROJECTS, RuleState, SettingOverride, StoreError};

use warden_input::closest;
use warden_load::Hook;
use warden_load::{SettingDef, SettingValue};
use warden_program::program::Program;

/// How often a running Warden looks for changes other processes made to the database (a
/// cheap check: a SQLite pragma, or a counter PostgreSQL's listener keeps).
pub const POLL_INTERVAL: Duration = Duration::from_millis(250);

/// Why a change was refused.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// No rule has that id.
    #[error("no rule `{rule}`{}", hint(.suggestion))]
    UnknownRule {
        /// What was asked for.
        rule: String,
        /// The nearest rule id, if one is close.
        suggestion: Option<String>,
    },
    /// A bare id that more than one plugin uses.
    #[error("`{rule}` is ambiguous: say which plugin's, {}", .candidates.join(" or "))]
    AmbiguousRule {
        /// What was asked for.
        rule: String,
        /// The rules it could mean.
        candidates: Vec<String>,
    },
    /// Core rules cannot be switched off, or put in shadow (where what they decide would not
    /// apply either).
    #[error("`{rule}` is a core rule and cannot be {}: {}", switched(*.to), core_why(.file.as_deref()))]
    CoreRule {
        /// The rule.
        rule: String,
        /// The state asked for.
        to: RuleState,
        /// Its file (`None`: one of Warden's built-in rules, which the user has no file of).
        file: Option<String>,
    },
    /// No plugin has that id (or none of its rules loaded).
    #[error("no plugin `{plugin}` with rules{}", hint(.suggestion))]
    UnknownPlugin {
        /// What was asked for.
        plugin: String,
        /// The nearest plugin id, if one is close.
        suggestion: Option<String>,
    },
    /// No such setting.
    #[error("no setting `{key}`{}", hint(.suggestion))]
    UnknownSetting {
        /// What was asked for (`plugin.name`).
        key: String,
        /// The nearest setting, if one is close.
        suggestion: Option<String>,
    },
    /// The value does not fit the setting.
    #[error("cannot set `{key}`: {reason}")]
    InvalidValue {
        /// The setting (`plugin.name`).
        key: String,
        /// Which rule of the manifest it breaks.
        reason: String,
    },
    /// Values for several of a plugin's settings, some of which do not fit: none was set.
    #[error("{}", settings_message(.problems))]
    Settings {
        /// The plugin.
        plugin: String,
        /// Each setting that does not fit, in the order given.
        problems: Vec<SettingProblem>,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// One setting of a change that does not fit ([`ControlError::Settings`]).
#[derive(Debug, Clone)]
pub struct SettingProblem {
    /// The setting's name, as given.
    pub setting: String,
    /// What is wrong with it.
    pub message: String,
    /// Its declaration, when the plugin has such a setting (for its type and bounds).
    pub def: Option<std::sync::Arc<SettingDef>>,
}

fn settings_message(problems: &[SettingProblem]) -> String {
    let first = problems.first().map_or("", |p| p.message.as_str());
    match problems.len() {
        1 => first.to_string(),
        n => format!("{n} settings do not fit; the first: {first}"),
    }
}

/// Why a core rule stays on, naming only a file the user has.
fn core_why(file: Option<&str>) -> String {
    match file {
        Some(file) => format!(
            "its file ({file}) marks it `core = true`, which leaves that choice to the operator who edits the file, not to users"
        ),
        None => "it is one of Warden's built-in rules, marked `core = true`, which leaves that choice to the operator (who can leave the built-in rules out with `builtin = false`), not to users".into(),
    }
}

fn switched(to: RuleState) -> &'static str {
    match to {
        RuleState::Shadow => "put in shadow (what a rule in shadow decides does not apply)",
        _ => "switched off",
    }
}

fn hint(suggestion: &Option<String>) -> String {
    suggestion
        .as_ref()
        .map(|s| format!("; did you mean `{s}`?"))
        .unwrap_or_default()
}

/// Where a setting's value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetBy {
    /// The manifest's default.
    Default,
    /// The user, for every project.
    User,
    /// The user, for this project.
    Project,
}

/// A setting as one user (and project) sees it.
#[derive(Debug, Clone)]
pub struct SettingInfo {
    /// How to address it: `plugin.name`.
    pub key: String,
    /// The plugin that declares it.
    pub plugin: String,
    /// Its declaration.
    pub def: SettingDef,
    /// Its value for this user and project.
    pub value: SettingValue,
    /// Where the value comes from.
    pub set_by: SetBy,
}

/// A rule as one user sees it: what `warden rules list` shows.
#[derive(Debug, Clone)]
pub struct RuleInfo {
    /// How to address it: `id` for built-in and local rules, `plugin/id` for plugin rules.
    pub key: String,
    /// Its id within its plugin.
    pub id: String,
    /// Its plugin (`builtin`, `local`, or a plugin id).
    pub plugin: String,
    /// Its display name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// Its version (`version` in its file; 1.0.0 when it gives none).
    pub version: String,
    /// The hook that evaluates it.
    pub hook: Hook,
    /// Higher fires first.
    pub priority: i64,
    /// Whether it is evaluated for this user (on, or in shadow).
    pub enabled: bool,
    /// Whether it is on unless a user says otherwise (`enabled` in its file).
    pub enabled_by_default: bool,
    /// On, off or in shadow for this user.
    pub state: RuleState,
    /// Its state unless a user says otherwise (`enabled` and `shadow` in its file, `shadow`
    /// in its plugin's manifest).
    pub default_state: RuleState,
    /// The user's own choice, if they made one (`warden rules reset` forgets it).
    pub choice: Option<RuleState>,
    /// Whether users may not switch it off.
    pub core: bool,
    /// Its tags.
    pub tags: Vec<String>,
    /// The file it was read from.
    pub file: String,
    /// Its condition: the expression, or `script PATH`.
    pub condition: String,
    /// The settings the rule reads (`settings.NAME` in its file or script), for this user
    /// and project.
    pub settings: Vec<SettingInfo>,
}

/// The users' choices, as last read from the store.
#[derive(Debug, Default)]
pub struct Controls {
    /// Which read of the store this is; each read of changed choices makes a new one.
    pub generation: u64,
    toggles: HashMap<String, HashMap<String, RuleState>>,
    overrides: HashMap<String, Vec<SettingOverride>>,
}

impl Controls {
    /// Reads every user's choices from `store`, as read number `generation`.
    pub fn load(store: &warden_store::Store, generation: u64) -> Result<Self, StoreError> {
        let mut toggles: HashMap<String, HashMap<String, RuleState>> = HashMap::new();
        for t in store.toggles()? {
            toggles
                .entry(t.user_id)
                .or_default()
                .insert(t.rule_id, t.state);
        }
        let mut overrides: HashMap<String, Vec<SettingOverride>> = HashMap::new();
        for o in store.overrides()? {
            overrides.entry(o.user_id.clone()).or_default().push(o);
        }
        Ok(Controls {
            generation,
            toggles,
            overrides,
        })
    }

    fn choice(&self, user: &str, rule: &str) -> Option<RuleState> {
        self.toggles.get(user)?.get(rule).copied()
    }

    /// The user's value for a setting, and whether it is for this project or all.
    fn value(&self, user: &str, project: &str, plugin: &str, name: &str) -> Option<(&Json, SetBy)> {
        let list = self.overrides.get(user)?;
        let find = |p: &str| {
            list.iter()
                .find(|o| o.project_id == p && o.plugin_id == plugin && o.name == name)
        };
        find(project)
            .map(|o| (&o.value, SetBy::Project))
            .or_else(|| find(ALL_PROJECTS).map(|o| (&o.value, SetBy::User)))
    }
}

/// The rules and settings in force for one session, resolved once per change. Read-only to
/// the session: only [`Resolved::refresh`] changes it, and then bumps [`Resolved::version`],
/// the key of what the session derives from it (the rules active in a mode).
#[derive(Debug, Default)]
pub struct Resolved {
    key: Option<(u64, u64, String, String)>,
    version: u64,
    enabled: Vec<bool>,
    shadow: Vec<bool>,
    settings: Vec<SettingValue>,
}

impl Resolved {
    /// Bumped at every change, so what is derived from it can be cached.
    #[inline]
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Per compiled rule: evaluated (on, or in shadow) or not.
    #[inline]
    pub fn enabled(&self) -> &[bool] {
        &self.enabled
    }

    /// Per compiled rule: in shadow (evaluated, nothing it decides applied); empty when no
    /// rule is, so that a tick without one asks nothing per rule.
    #[inline]
    pub fn shadow(&self) -> &[bool] {
        &self.shadow
    }

    /// Per setting slot: the value.
    #[inline]
    pub fn settings(&self) -> &[SettingValue] {
        &self.settings
    }

    /// Brings the resolution up to date for `program`, `controls`, `user` and `project`
    /// (checked inline: at almost every tick it is up to date already).
    #[inline]
    pub fn refresh(&mut self, program: &Program, controls: &Controls, user: &str, project: &str) {
        if let Some((g, c, u, p)) = &self.key
            && *g == program.generation
            && *c == controls.generation
            && u == user
            && p == project
        {
            return;
        }
        self.resolve(program, controls, user, project);
    }

    #[cold]
    fn resolve(&mut self, program: &Program, controls: &Controls, user: &str, project: &str) {
        let states = program.rules.iter().map(|r| {
            effective_state(
                r.def.core,
                default_state(&r.def),
                controls.choice(user, &r.key),
            )
        });
        (self.enabled, self.shadow) = states.map(|s| (s.runs(), s == RuleState::Shadow)).unzip();
        if !self.shadow.contains(&true) {
            self.shadow.clear();
        }
        self.settings = program
            .settings
            .slots
            .iter()
            .map(|slot| resolve_setting(controls, user, project, &slot.plugin, &slot.def).0)
            .collect();
        self.version += 1;
        self.key = Some((
            program.generation,
            controls.generation,
            user.to_string(),
            project.to_string(),
        ));
    }
}

/// A rule's state unless a user says otherwise, from its file (and its plugin's manifest).
fn default_state(def: &warden_load::RuleDef) -> RuleState {
    match (def.enabled, def.shadow) {
        (false, _) => RuleState::Off,
        (true, false) => RuleState::On,
        (true, true) => RuleState::Shadow,
    }
}

/// A rule's state for a user: their choice, else its default.
fn effective_state(core: bool, default: RuleState, choice: Option<RuleState>) -> RuleState {
    match choice {
        // A core rule cannot be switched off or put in shadow, whatever the store says.
        Some(RuleState::Off | RuleState::Shadow) if core => RuleState::On,
        Some(state) => state,
        None => default,
    }
}

/// A setting's value for a user and project: their override if it still fits the setting
/// (a manifest may have narrowed its bounds since), else the default.
fn resolve_setting(
    controls: &Controls,
    user: &str,
    project: &str,
    plugin: &str,
    def: &SettingDef,
) -> (SettingValue, SetBy) {
    match controls.value(user, project, plugin, &def.name) {
        Some((raw, by)) => match def.check(raw) {
            Ok(v) => (v, by),
            Err(why) => {
                tracing::warn!(user, plugin, setting = %def.name, "a stored value no longer fits the setting, so the default is used: {why}");
                (def.default.clone(), SetBy::Default)
            }
        },
        None => (def.default.clone(), SetBy::Default),
    }
}

/// Finds a rule by `plugin/id`, or by bare id when only one rule has it.
/// Only rules that compile are found (all of them, unless the program compiles on demand).
pub fn find_rule(program: &Program, rule: &str) -> Result<usize, ControlError> {
    let compiles = |i: usize| program.rules[i].body().is_some();
    if let Some(i) = program.rules.iter().position(|r| &*r.key == rule)
        && compiles(i)
    {
        return Ok(i);
    }
    let by_id: Vec<usize> = (0..program.rules.len())
        .filter(|&i| program.rules[i].def.id == rule && compiles(i))
        .collect();
    match by_id.as_slice() {
        [i] => Ok(*i),
        [] => {
            // The nearest display id, or bare id (then shown as the rule's display id).
            let names = program
                .rules
                .iter()
                .flat_map(|r| [(&*r.key, &*r.key), (r.def.id.as_str(), &*r.key)]);
            let names: Vec<(&str, &str)> = names.collect();
            let suggestion = closest(rule, names.iter().map(|(n, _)| *n))
                .and_then(|n| names.iter().find(|(x, _)| *x == n))
                .map(|(_, key)| key.to_string());
            Err(ControlError::UnknownRule {
                rule: rule.to_string(),
                suggestion,
            })
        }
        many => Err(ControlError::AmbiguousRule {
            rule: rule.to_string(),
            candidates: many
                .iter()
                .map(|&i| format!("`{}`", program.rules[i].key))
                .collect(),
        }),
    }
}

/// Finds a setting by `plugin.name` (or by bare name when only one plugin declares it).
pub fn find_setting(program: &Program, key: &str) -> Result<usize, ControlError> {
    let slots = &program.settings.slots;
    let full = |i: usize| format!("{}.{}", slots[i].plugin, slots[i].def.name);
    if let Some((plugin, name)) = key.split_once('.')
        && let Some(i) = program.settings.find(plugin, name)
    {
        return Ok(i);
    }
    let by_name: Vec<usize> = (0..slots.len())
        .filter(|&i| slots[i].def.name == key)
        .collect();
    if let [i] = by_name.as_slice() {
        return Ok(*i);
    }
    let all: Vec<String> = (0..slots.len()).map(full).collect();
    Err(ControlError::UnknownSetting {
        key: key.to_string(),
        suggestion: closest(key, all.iter().map(String::as_str)).map(str::to_string),
    })
}

/// What `user` in `project` sees of setting `slot`: its value and who set it.
pub fn setting_info(
    program: &Program,
    controls: &Controls,
    slot: usize,
    user: &str,
    project: &str,
) -> SettingInfo {
    let s = &program.settings.slots[slot];
    let (value, set_by) = resolve_setting(controls, user, project, &s.plugin, &s.def);
    SettingInfo {
        key: format!("{}.{}", s.plugin, s.def.name),
        plugin: s.plugin.to_string(),
        def: (*s.def).clone(),
        value,
        set_by,
    }
}

/// What `user` in `project` sees of a rule: on, off or in shadow, and by whose choice.
pub fn rule_info(
    program: &Program,
    controls: &Controls,
    i: usize,
    user: &str,
    project: &str,
) -> RuleInfo {
    let r = &program.rules[i];
    let d = &r.def;
    let choice = controls.choice(user, &r.key);
    let state = effective_state(d.core, default_state(d), choice);
    RuleInfo {
        key: r.key.to_string(),
        id: d.id.clone(),
        plugin: d.plugin.to_string(),
        name: d.name.clone(),
        description: d.description.clone(),
        version: d.version.clone(),
        hook: d.trigger,
        priority: d.priority,
        enabled: state.runs(),
        enabled_by_default: d.enabled,
        state,
        default_state: default_state(d),
        choice,
        core: d.core,
        tags: d.tags.clone(),
        file: d.source.path().display().to_string(),
        condition: match &d.condition {
            warden_load::ConditionDef::Expression(e) => e.text.clone(),
            warden_load::ConditionDef::Script { path, .. } => format!("script {}", path.text),
            warden_load::ConditionDef::Tree(root) => {
                format!("behavior tree ({})", root.kind.type_name())
            }
        },
        settings: program
            .settings
            .of(&d.plugin)
            .filter(|&slot| reads_setting(r, &program.settings.slots[slot].def.name))
            .map(|slot| setting_info(program, controls, slot, user, project))
            .collect(),
    }
}

/// Whether a rule's file or script mentions `settings.NAME`.
fn reads_setting(rule: &warden_program::rule::CompiledRule, name: &str) -> bool {
    let needle = format!("settings.{name}");
    let mentions = |text: &str| {
        text.match_indices(&needle).any(|(at, _)| {
            let after = text[at + needle.len()..].chars().next();
            let before = text[..at].chars().next_back();
            !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
                && !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.')
        })
    };
    mentions(rule.def.source.text())
        || matches!(rule.body().map(|b| &b.condition), Some(warden_program::rule::RuleCondition::Script { script, .. }) if mentions(script.source()))
}
