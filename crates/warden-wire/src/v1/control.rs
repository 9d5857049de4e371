//! The management API's views of rules, plugins and settings (`/v1/rules`, `/v1/plugins`,
//! `warden rules ... --json`), and the service's error body.

use serde::Serialize;
use serde_json::{Map, Value as Json};

use warden_control::{self as engine, SetBy};
use warden_load::{PluginInfo, SettingDef, SettingValue};

/// Where a setting's value comes from: `default`, `user` (for every project) or `project`.
pub fn set_by(s: SetBy) -> &'static str {
    match s {
        SetBy::Default => "default",
        SetBy::User => "user",
        SetBy::Project => "project",
    }
}

/// A setting as one user (and project) sees it: its declaration's fields, then its value.
#[derive(Debug, Serialize)]
pub struct SettingInfo<'a> {
    /// How to address it: `plugin.name`.
    pub key: &'a str,
    /// The plugin that declares it.
    pub plugin: &'a str,
    /// Its declaration (`name`, `type`, `default`, bounds, `options`, `description`).
    #[serde(flatten)]
    pub def: SettingDecl<'a>,
    /// Its value for this user and project.
    #[serde(serialize_with = "setting_value")]
    pub value: &'a SettingValue,
    /// Where the value comes from ([`set_by`]).
    pub set_by: &'static str,
}

impl<'a> From<&'a engine::SettingInfo> for SettingInfo<'a> {
    fn from(s: &'a engine::SettingInfo) -> Self {
        SettingInfo {
            key: &s.key,
            plugin: &s.plugin,
            def: SettingDecl::from(&s.def),
            value: &s.value,
            set_by: set_by(s.set_by),
        }
    }
}

/// A rule as one user sees it: what `warden rules list --json` shows.
#[derive(Debug, Serialize)]
pub struct RuleInfo<'a> {
    /// How to address it: `id`, or `plugin/id` for plugin rules.
    pub key: &'a str,
    /// Its id within its plugin.
    pub id: &'a str,
    /// Its plugin (`builtin`, `local`, or a plugin id).
    pub plugin: &'a str,
    /// Its display name.
    pub name: &'a str,
    /// What it does.
    pub description: &'a str,
    /// Its version.
    pub version: &'a str,
    /// The hook that evaluates it.
    pub hook: &'static str,
    /// Higher fires first.
    pub priority: i64,
    /// Whether it is evaluated for this user (on, or in shadow).
    pub enabled: bool,
    /// Whether it is on unless a user says otherwise.
    pub enabled_by_default: bool,
    /// `on`, `off` or `shadow` for this user.
    pub state: &'static str,
    /// Its state unless a user says otherwise.
    pub default_state: &'static str,
    /// The user's own choice, if they made one.
    pub choice: Option<&'static str>,
    /// Whether users may not switch it off.
    pub core: bool,
    /// Its tags.
    pub tags: &'a [String],
    /// The file it was read from.
    pub file: &'a str,
    /// Its condition: the expression, or `script PATH`.
    pub condition: &'a str,
    /// The settings the rule reads.
    pub settings: Vec<SettingInfo<'a>>,
}

impl<'a> From<&'a engine::RuleInfo> for RuleInfo<'a> {
    fn from(r: &'a engine::RuleInfo) -> Self {
        RuleInfo {
            key: &r.key,
            id: &r.id,
            plugin: &r.plugin,
            name: &r.name,
            description: &r.description,
            version: &r.version,
            hook: r.hook.name(),
            priority: r.priority,
            enabled: r.enabled,
            enabled_by_default: r.enabled_by_default,
            state: r.state.name(),
            default_state: r.default_state.name(),
            choice: r.choice.map(|c| c.name()),
            core: r.core,
            tags: &r.tags,
            file: &r.file,
            condition: &r.condition,
            settings: r.settings.iter().map(SettingInfo::from).collect(),
        }
    }
}

/// A rule as the management API shows it (`/v1/rules`): its [`RuleInfo`], with its firings on
/// the server.
#[derive(Debug, Serialize)]
pub struct RuleView<'a> {
    /// The rule.
    #[serde(flatten)]
    pub info: RuleInfo<'a>,
    /// Why users cannot switch it off (core rules only).
    pub core_reason: Option<&'a str>,
    /// How often it fired on the server since it started.
    pub fire_count: u64,
    /// When it last fired on the server, in seconds since the Unix epoch.
    pub last_fired: Option<f64>,
    /// How often it fired in shadow on the server.
    pub shadow_fire_count: u64,
    /// How often, in shadow, it would have refused a call or prompt the live rules let
    /// through.
    pub shadow_refusals: u64,
}

/// A plugin as the management API shows it (`/v1/plugins`): the loader's [`PluginInfo`], with
/// its settings' values for the user.
#[derive(Debug, Serialize)]
pub struct PluginView<'a> {
    /// The plugin.
    #[serde(flatten)]
    pub info: Plugin<'a>,
    /// Its settings, with the user's values.
    pub values: Vec<SettingInfo<'a>>,
}

/// The body of every error the service answers: `{"error": "..."}`, then the fields that name
/// what was wrong (`suggestion`, `setting`, `candidates`, `errors`...).
#[derive(Debug, Serialize)]
pub struct ErrorBody<'a> {
    /// What went wrong, for a person.
    pub error: &'a str,
    /// More fields, in the order they were added.
    #[serde(flatten)]
    pub fields: &'a Map<String, Json>,
}

/// Writes a setting's value as JSON (a number, text or a boolean).
pub fn setting_value<S: serde::Serializer>(v: &&SettingValue, s: S) -> Result<S::Ok, S::Error> {
    v.to_json().serialize(s)
}

/// A setting as its plugin declares it: `name`, `type`, `default`, the bounds and options it
/// has, `description`.
#[derive(Debug, Serialize)]
pub struct SettingDecl<'a> {
    /// Its name, within the plugin.
    pub name: &'a str,
    /// `integer`, `float`, `string` or `boolean`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Its default value.
    #[serde(serialize_with = "setting_value")]
    pub default: &'a SettingValue,
    /// Its least value (an integer setting's is an integer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min: Option<Json>,
    /// Its greatest value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max: Option<Json>,
    /// The values a choice may take.
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub options: &'a [String],
    /// What it is for.
    pub description: &'a str,
}

impl<'a> From<&'a SettingDef> for SettingDecl<'a> {
    fn from(d: &'a SettingDef) -> Self {
        SettingDecl {
            name: &d.name,
            kind: d.kind.name(),
            default: &d.default,
            min: d.min.map(|x| super::service::bound(d.kind, x)),
            max: d.max.map(|x| super::service::bound(d.kind, x)),
            options: &d.options,
            description: &d.description,
        }
    }
}

/// A plugin, as loaded: its manifest's fields, its rules and what was skipped.
#[derive(Debug, Serialize)]
pub struct Plugin<'a> {
    /// Its id.
    pub id: &'a str,
    /// Its name.
    pub name: &'a str,
    /// Its version.
    pub version: &'a str,
    /// What it does.
    pub description: &'a str,
    /// Its folder (none for a built-in plugin).
    pub dir: Option<&'a std::path::Path>,
    /// The plugins it needs.
    pub requires: &'a [String],
    /// Its settings, as declared.
    #[serde(serialize_with = "setting_decls")]
    pub settings: &'a [std::sync::Arc<SettingDef>],
    /// Its rules' ids.
    pub rules: &'a [String],
    /// Each rule's version, by id.
    pub rule_versions: &'a std::collections::BTreeMap<String, String>,
    /// Why it was not loaded, when it was not.
    pub skipped: Option<&'a str>,
}

fn setting_decls<S: serde::Serializer>(
    list: &&[std::sync::Arc<SettingDef>],
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_seq(list.iter().map(|d| SettingDecl::from(&**d)))
}

impl<'a> From<&'a PluginInfo> for Plugin<'a> {
    fn from(p: &'a PluginInfo) -> Self {
        Plugin {
            id: &p.id,
            name: &p.name,
            version: &p.version,
            description: &p.description,
            dir: p.dir.as_deref(),
            requires: &p.requires,
            settings: &p.settings,
            rules: &p.rules,
            rule_versions: &p.rule_versions,
            skipped: p.skipped.as_deref(),
        }
    }
}
