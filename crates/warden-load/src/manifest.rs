//! Plugins: a folder with a `manifest.toml` (the data model's format) and the rules it
//! includes, and the typed settings a manifest declares.
//!
//! ```toml
//! [plugin]
//! id = "research-assistant"
//! name = "Research Assistant"
//! version = "1.0.0"
//! description = "Enhanced research workflow with multi-step guidance"
//!
//! [capabilities]
//! requires = ["vault_search", "web_search"]
//!
//! [rules]
//! include = ["rules/*.toml"]
//!
//! [settings.max_sources]
//! type = "integer"
//! default = 10
//! min = 1
//! max = 50
//! description = "Maximum sources to gather before synthesizing"
//! ```
//!
//! A setting is read in the plugin's conditions and templates as `settings.NAME`; its value is
//! the manifest's default unless the user (or the user, for one project) set another, within
//! the declared bounds.

use std::fmt;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value as Json;
use toml::de::DeValue;

use warden_input::{Diagnostic, Doc, SourceFile, Table, closest, to_json};

use crate::action::OnError;
use crate::ids::{BUILTIN_PLUGIN, LOCAL_PLUGIN, kebab_id, to_kebab};

/// The name of a plugin's manifest file.
pub const MANIFEST_FILE: &str = "manifest.toml";

/// The fields of `[plugin]`.
pub const PLUGIN_FIELDS: &[&str] = &["id", "name", "version", "description", "on_error", "shadow"];

/// The fields of a `[settings.NAME]` table.
pub const SETTING_FIELDS: &[&str] = &["type", "default", "min", "max", "options", "description"];

/// What `[rules] include` is when a manifest does not say.
pub const DEFAULT_INCLUDE: &str = "rules/*.toml";

/// The type of a setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SettingKind {
    /// A whole number.
    Integer,
    /// A number.
    Float,
    /// Text, optionally one of a list of `options`.
    String,
    /// `true` or `false`.
    Boolean,
}

impl SettingKind {
    /// Whether values of this kind are numbers.
    pub fn is_numeric(self) -> bool {
        matches!(self, SettingKind::Integer | SettingKind::Float)
    }

    /// Every kind, by its name in a manifest.
    pub const ALL: [(&'static str, SettingKind); 4] = [
        ("integer", SettingKind::Integer),
        ("float", SettingKind::Float),
        ("string", SettingKind::String),
        ("boolean", SettingKind::Boolean),
    ];

    /// The kind's name in a manifest.
    pub fn name(self) -> &'static str {
        match self {
            SettingKind::Integer => "integer",
            SettingKind::Float => "float",
            SettingKind::String => "string",
            SettingKind::Boolean => "boolean",
        }
    }

    fn parse(s: &str) -> Option<SettingKind> {
        Self::ALL.iter().find(|(n, _)| *n == s).map(|(_, k)| *k)
    }

    fn article(self) -> &'static str {
        match self {
            SettingKind::Integer => "an integer",
            SettingKind::Float => "a number",
            SettingKind::String => "a string",
            SettingKind::Boolean => "true or false",
        }
    }
}

/// A setting's value. Its `Serialize` is the value rules read as `settings.<name>`; the wire
/// writes it with `to_json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum SettingValue {
    /// For an `integer` setting.
    Integer(i64),
    /// For a `float` setting.
    Float(f64),
    /// For a `string` setting.
    String(Arc<str>),
    /// For a `boolean` setting.
    Boolean(bool),
}

impl SettingValue {
    /// The value as JSON.
    pub fn to_json(&self) -> Json {
        match self {
            SettingValue::Integer(n) => Json::from(*n),
            SettingValue::Float(f) => {
                serde_json::Number::from_f64(*f).map_or(Json::Null, Json::Number)
            }
            SettingValue::String(s) => Json::from(&**s),
            SettingValue::Boolean(b) => Json::Bool(*b),
        }
    }
}

impl fmt::Display for SettingValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SettingValue::Integer(n) => write!(f, "{n}"),
            SettingValue::Float(x) => write!(f, "{x:?}"),
            SettingValue::String(s) => write!(f, "{s:?}"),
            SettingValue::Boolean(b) => write!(f, "{b}"),
        }
    }
}

/// A setting a manifest declares.
#[derive(Debug, Clone, PartialEq)]
pub struct SettingDef {
    /// Its name: `settings.NAME` in conditions and templates.
    pub name: String,
    /// Its type.
    pub kind: SettingKind,
    /// Its value unless a user sets another.
    pub default: SettingValue,
    /// The smallest value allowed (numeric settings).
    pub min: Option<f64>,
    /// The largest value allowed (numeric settings).
    pub max: Option<f64>,
    /// The values allowed (string settings); any when empty.
    pub options: Vec<String>,
    /// What it changes.
    pub description: String,
}

/// A value that does not fit a setting: which rule of the manifest it breaks (its type, its
/// bounds, its options), in a sentence that names the setting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidSetting(pub String);

impl SettingDef {
    /// Checks that `value` is a valid value of this setting; the error names the rule it
    /// breaks (`must be at most 50 (the manifest's max)`).
    pub fn check(&self, value: &Json) -> Result<SettingValue, InvalidSetting> {
        self.fits(value).map_err(InvalidSetting)
    }

    /// Reads a value written as text (from a command line): `12`, `0.75`, `true`, `brief`.
    pub fn parse_text(&self, text: &str) -> Result<SettingValue, InvalidSetting> {
        self.read_text(text).map_err(InvalidSetting)
    }

    fn fits(&self, value: &Json) -> Result<SettingValue, String> {
        let wrong = || {
            format!(
                "`{}` is {} {} setting, and {value} is not {}",
                self.name,
                if self.kind == SettingKind::Integer {
                    "an"
                } else {
                    "a"
                },
                self.kind.name(),
                self.kind.article()
            )
        };
        let v = match (self.kind, value) {
            (SettingKind::Integer, Json::Number(n)) => SettingValue::Integer(
                n.as_i64()
                    .ok_or_else(|| format!("`{}` must be a whole number, not {n}", self.name))?,
            ),
            (SettingKind::Float, Json::Number(n)) => {
                SettingValue::Float(n.as_f64().ok_or_else(wrong)?)
            }
            (SettingKind::String, Json::String(s)) => SettingValue::String(Arc::from(s.as_str())),
            (SettingKind::Boolean, Json::Bool(b)) => SettingValue::Boolean(*b),
            _ => return Err(wrong()),
        };
        self.check_bounds(&v)?;
        Ok(v)
    }

    fn read_text(&self, text: &str) -> Result<SettingValue, String> {
        let t = text.trim();
        let json = match self.kind {
            SettingKind::Integer => t.parse::<i64>().map(Json::from).map_err(|_| {
                format!(
                    "`{}` is an integer setting; `{text}` is not a whole number",
                    self.name
                )
            })?,
            SettingKind::Float => t
                .parse::<f64>()
                .ok()
                .filter(|f| f.is_finite())
                .and_then(serde_json::Number::from_f64)
                .map(Json::Number)
                .ok_or_else(|| {
                    format!(
                        "`{}` is a float setting; `{text}` is not a number",
                        self.name
                    )
                })?,
            SettingKind::Boolean => match t {
                "true" => Json::Bool(true),
                "false" => Json::Bool(false),
                _ => {
                    return Err(format!(
                        "`{}` is a boolean setting; write true or false, not `{text}`",
                        self.name
                    ));
                }
            },
            SettingKind::String => Json::from(text),
        };
        self.fits(&json)
    }

    fn check_bounds(&self, v: &SettingValue) -> Result<(), String> {
        let x = match v {
            SettingValue::Integer(n) => *n as f64,
            SettingValue::Float(f) => *f,
            SettingValue::String(s) => {
                if !self.options.is_empty() && !self.options.iter().any(|o| **o == **s) {
                    let hint = closest(s, self.options.iter().map(String::as_str))
                        .map(|c| format!("; did you mean {c:?}?"))
                        .unwrap_or_default();
                    return Err(format!(
                        "`{}` must be one of {} (the manifest's options), not {s:?}{hint}",
                        self.name,
                        quoted(&self.options)
                    ));
                }
                return Ok(());
            }
            SettingValue::Boolean(_) => return Ok(()),
        };
        if !x.is_finite() {
            return Err(format!("`{}` must be a finite number", self.name));
        }
        if let Some(min) = self.min
            && x < min
        {
            return Err(format!(
                "`{}` must be at least {} (the manifest's min), not {v}",
                self.name,
                number(min)
            ));
        }
        if let Some(max) = self.max
            && x > max
        {
            return Err(format!(
                "`{}` must be at most {} (the manifest's max), not {v}",
                self.name,
                number(max)
            ));
        }
        Ok(())
    }
}

fn number(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}

fn quoted(items: &[String]) -> String {
    items
        .iter()
        .map(|o| format!("{o:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A plugin manifest, validated.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// The plugin's id (kebab-case); its rules are addressed as `id/rule`.
    pub id: String,
    /// Its display name (the id when not given).
    pub name: String,
    /// Its version.
    pub version: String,
    /// What it provides.
    pub description: String,
    /// Capabilities the host must have (tools, usually); without them the plugin is skipped.
    pub requires: Vec<String>,
    /// Where `requires` is written, to point at it.
    pub requires_span: Range<usize>,
    /// Which files hold its rules, relative to its folder (`rules/*.toml`).
    pub include: Vec<String>,
    /// Where `include` is written.
    pub include_span: Range<usize>,
    /// Its settings, in the order declared.
    pub settings: Vec<Arc<SettingDef>>,
    /// What a failing guard of its rules decides, unless a rule says (`[plugin] on_error`).
    pub on_error: Option<OnError>,
    /// Its rules run in shadow unless a user says otherwise (`[plugin] shadow = true`).
    pub shadow: bool,
    /// The manifest file.
    pub source: Arc<SourceFile>,
    /// Where `[plugin]` starts.
    pub span: Range<usize>,
}

/// Reads a manifest. Every problem is reported at its line and field; `None` when the
/// manifest has errors (the plugin is then not loaded).
pub fn parse_manifest(file: Arc<SourceFile>) -> (Option<Manifest>, Vec<Diagnostic>) {
    parse_manifest_as(file, false)
}

/// Reads the manifest of Warden's built-in rules, the one plugin whose id is `builtin`.
pub(crate) fn parse_builtin_manifest(file: Arc<SourceFile>) -> (Option<Manifest>, Vec<Diagnostic>) {
    parse_manifest_as(file, true)
}

fn parse_manifest_as(file: Arc<SourceFile>, builtin: bool) -> (Option<Manifest>, Vec<Diagnostic>) {
    let mut doc = Doc::new(file.clone());
    let manifest = doc
        .parse(file.text())
        .and_then(|t| read_manifest(&mut doc, t.get_ref(), builtin));
    let ok = !doc.has_errors();
    (manifest.filter(|_| ok), doc.diagnostics)
}

fn read_manifest(doc: &mut Doc, root: &toml::de::DeTable<'_>, builtin: bool) -> Option<Manifest> {
    let mut top = Table::new(root, "", 0..0);
    let Some(mut plugin) = top.table(doc, "plugin") else {
        if !top.has("plugin") {
            doc.error(
                0..0,
                "plugin",
                "this manifest has no [plugin] table",
                Some("a manifest starts with [plugin] and gives at least `id`".into()),
            );
        }
        return None;
    };
    let span = plugin.span.clone();
    let id = match plugin.string(doc, "id") {
        None => {
            if !plugin.has("id") {
                doc.error(
                    span.clone(),
                    "plugin.id",
                    "[plugin] has no `id`",
                    Some("add `id = \"my-plugin\"` (kebab-case)".into()),
                );
            }
            None
        }
        Some(at) if at.value == LOCAL_PLUGIN => {
            doc.error(
                at.span,
                "plugin.id",
                "the plugin id `local` is reserved for the rules of plain rule folders",
                Some("choose another id".into()),
            );
            None
        }
        // Reserved whether or not the built-in rules are loaded: `builtin/...` names Warden's
        // own rules, in users' choices, settings and modes.
        Some(at) if at.value == BUILTIN_PLUGIN && !builtin => {
            doc.error(
                at.span,
                "plugin.id",
                "the plugin id `builtin` is reserved for Warden's built-in rules",
                Some("choose another id".into()),
            );
            None
        }
        Some(at) => kebab_id(doc, at, "plugin.id", "plugin"),
    };
    let name = plugin.string(doc, "name").map(|a| a.value);
    let version = plugin
        .string(doc, "version")
        .map(|a| a.value)
        .unwrap_or_else(|| "1.0.0".into());
    let description = plugin
        .string(doc, "description")
        .map(|a| a.value)
        .unwrap_or_default();
    let on_error = plugin.string(doc, "on_error").and_then(|at| {
        let parsed = OnError::parse(&at.value);
        if parsed.is_none() {
            doc.error(
                at.span,
                "plugin.on_error",
                format!("unknown `on_error` value `{}`", at.value),
                Some(
                    "`deny` (a failing guard of a rule at on_tool_call or on_query_start denies) or `ignore` (the default)"
                        .into(),
                ),
            );
        }
        parsed
    });
    let shadow = plugin.boolean(doc, "shadow").is_some_and(|a| a.value);
    plugin.finish(doc, PLUGIN_FIELDS);

    let (requires, requires_span) = match top.table(doc, "capabilities") {
        Some(mut caps) => {
            let at = caps.strings(doc, "requires");
            let caps_span = caps.span.clone();
            caps.finish(doc, &["requires"]);
            match at {
                Some(at) => {
                    if let Some(bad) = at.value.iter().find(|c| c.trim().is_empty()) {
                        doc.error(
                            at.span.clone(),
                            "capabilities.requires",
                            format!("capability names cannot be empty ({bad:?})"),
                            None,
                        );
                    }
                    (at.value, at.span)
                }
                None => (Vec::new(), caps_span),
            }
        }
        None => (Vec::new(), 0..0),
    };

    let (include, include_span) = match top.table(doc, "rules") {
        Some(mut rules) => {
            let at = rules.strings(doc, "include");
            let rules_span = rules.span.clone();
            rules.finish(doc, &["include"]);
            match at {
                Some(at) => {
                    for pattern in &at.value {
                        if let Err(why) = check_pattern(pattern) {
                            doc.error(
                                at.span.clone(),
                                "rules.include",
                                why,
                                Some(format!("write patterns relative to the plugin folder, such as `{DEFAULT_INCLUDE}`")),
                            );
                        }
                    }
                    (at.value, at.span)
                }
                None => (vec![DEFAULT_INCLUDE.to_string()], rules_span),
            }
        }
        None => (vec![DEFAULT_INCLUDE.to_string()], span.clone()),
    };

    let mut settings = Vec::new();
    if let Some(table) = top.table(doc, "settings") {
        for (key, value) in table.entries() {
            let key = key.value;
            let field = format!("settings.{key}");
            let DeValue::Table(t) = value.get_ref() else {
                doc.error(
                    value.span(),
                    &field,
                    format!("`settings.{key}` must be a table"),
                    Some(format!("write [settings.{key}] with `type` and `default`")),
                );
                continue;
            };
            if let Some(s) = read_setting(doc, key, t, value.span()) {
                settings.push(Arc::new(s));
            }
        }
    }
    top.finish(doc, &["plugin", "capabilities", "rules", "settings"]);
    Some(Manifest {
        name: name.unwrap_or_else(|| id.clone().unwrap_or_default()),
        id: id?,
        version,
        description,
        requires,
        requires_span,
        include,
        include_span,
        settings,
        on_error,
        shadow,
        source: doc.file.clone(),
        span,
    })
}

/// Whether `name` can be written as `settings.NAME` in a condition.
fn is_setting_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !matches!(
            name,
            "and" | "or" | "not" | "in" | "true" | "false" | "null" | "if" | "else" | "for" | "get"
        )
}

fn read_setting(
    doc: &mut Doc,
    name: &str,
    table: &toml::de::DeTable<'_>,
    span: Range<usize>,
) -> Option<SettingDef> {
    let field = format!("settings.{name}");
    let mut t = Table::new(table, field.clone(), span.clone());
    let mut ok = true;
    if !is_setting_name(name) {
        doc.error(
            span.clone(),
            &field,
            format!("setting name `{name}` cannot be read as `settings.{name}` in a condition"),
            Some({
                let suggestion = to_kebab(name).replace('-', "_");
                if is_setting_name(&suggestion) {
                    format!("use lowercase letters, digits and underscores, starting with a letter, such as `{suggestion}`")
                } else {
                    format!("use lowercase letters, digits and underscores, starting with a letter; `{name}` is a word of the condition language, so choose another name")
                }
            }),
        );
        ok = false;
    }
    let kind = match t.string(doc, "type") {
        None => {
            if !t.has("type") {
                doc.error(
                    span.clone(),
                    &format!("{field}.type"),
                    format!("setting `{name}` has no `type`"),
                    Some("add `type = \"integer\"`, \"float\", \"string\" or \"boolean\"".into()),
                );
            }
            None
        }
        Some(at) => match SettingKind::parse(&at.value) {
            Some(k) => Some(k),
            None => {
                let names = SettingKind::ALL.map(|(n, _)| n);
                let help = closest(&at.value, names)
                    .map(|c| format!("did you mean `{c}`?"))
                    .unwrap_or_else(|| format!("the types are {}", names.join(", ")));
                doc.error(
                    at.span,
                    &format!("{field}.type"),
                    format!("unknown setting type `{}`", at.value),
                    Some(help),
                );
                None
            }
        },
    };
    let read_bound =
        |doc: &mut Doc, t: &mut Table<'_>, key: &'static str| -> Option<(f64, Range<usize>)> {
            let raw = t.raw(key)?;
            let v = to_json(raw.get_ref());
            match v.as_f64() {
                Some(x) if x.is_finite() => Some((x, raw.span())),
                _ => {
                    doc.error(
                        raw.span(),
                        &format!("{field}.{key}"),
                        format!("`{key}` must be a number"),
                        None,
                    );
                    None
                }
            }
        };
    let min = read_bound(doc, &mut t, "min");
    let max = read_bound(doc, &mut t, "max");
    let options = t.strings(doc, "options");
    let description = t
        .string(doc, "description")
        .map(|a| a.value)
        .unwrap_or_default();
    let default = t.json(doc, "default");
    // (A default that is there but refused has been reported.)
    let default_written = t.has("default");
    t.finish(doc, SETTING_FIELDS);
    let kind = kind?;

    let numeric = matches!(kind, SettingKind::Integer | SettingKind::Float);
    for (bound, key) in [(&min, "min"), (&max, "max")] {
        if let Some((_, s)) = bound
            && !numeric
        {
            doc.error(
                s.clone(),
                &format!("{field}.{key}"),
                format!(
                    "`{key}` applies to integer and float settings, and `{name}` is {}",
                    kind.name()
                ),
                Some(format!("remove `{key}`")),
            );
            ok = false;
        }
    }
    if let (Some((lo, _)), Some((hi, s))) = (&min, &max)
        && lo > hi
    {
        doc.error(
            s.clone(),
            &format!("{field}.max"),
            format!("`max` ({}) is below `min` ({})", number(*hi), number(*lo)),
            Some("swap them".into()),
        );
        ok = false;
    }
    if let Some(at) = &options
        && at.value.is_empty()
    {
        doc.error(
            at.span.clone(),
            &format!("{field}.options"),
            "`options` is empty, so no value would be allowed",
            Some("list the values a user may choose, or leave `options` out to allow any".into()),
        );
        ok = false;
    }
    if let Some(at) = &options
        && kind != SettingKind::String
    {
        doc.error(
            at.span.clone(),
            &format!("{field}.options"),
            format!(
                "`options` applies to string settings, and `{name}` is {}",
                kind.name()
            ),
            Some("remove `options`, or make the setting `type = \"string\"`".into()),
        );
        ok = false;
    }
    let def = |value| SettingDef {
        name: name.to_string(),
        kind,
        default: value,
        min: min.as_ref().map(|m| m.0),
        max: max.as_ref().map(|m| m.0),
        options: options
            .as_ref()
            .map(|o| o.value.clone())
            .unwrap_or_default(),
        description: description.clone(),
    };
    let Some(default) = default else {
        if default_written {
            return None;
        }
        doc.error(
            span,
            &format!("{field}.default"),
            format!("setting `{name}` has no `default`"),
            Some(
                "rules read the default until a user sets another value: add `default = ...`"
                    .into(),
            ),
        );
        return None;
    };
    // Check the default against the declared type and bounds.
    let probe = def(SettingValue::Boolean(false));
    match probe.check(&default.value) {
        Ok(v) if ok => Some(def(v)),
        Ok(_) => None,
        Err(why) => {
            doc.error(
                default.span,
                &format!("{field}.default"),
                format!("the default does not fit the setting: {why}"),
                None,
            );
            None
        }
    }
}

/// Checks the shape of an include pattern: relative, `/`-separated, no `..`, ending in
/// `.toml`; `*` and `?` match within one path segment.
pub(crate) fn check_pattern(pattern: &str) -> Result<(), String> {
    if pattern.trim().is_empty() {
        return Err("an include pattern is empty".into());
    }
    if pattern.contains('\\') {
        return Err(format!("`{pattern}`: write paths with `/`, not `\\`"));
    }
    if pattern.starts_with('/') || std::path::Path::new(pattern).is_absolute() {
        return Err(format!(
            "`{pattern}` is absolute; rules must live inside the plugin folder"
        ));
    }
    if pattern.split('/').any(|s| s == "..") {
        return Err(format!("`{pattern}` leaves the plugin folder (`..`)"));
    }
    if pattern.contains("**") {
        return Err(format!(
            "`{pattern}`: `**` is not supported; list each folder (`rules/*.toml`, `more/*.toml`)"
        ));
    }
    if !pattern.ends_with(".toml") {
        return Err(format!(
            "`{pattern}` does not end in `.toml`; rule files are TOML"
        ));
    }
    Ok(())
}

/// Whether `name` matches `pattern` (`*`: any run of characters, `?`: one character).
pub(crate) fn glob_match(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    let (mut pi, mut ni) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ni;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ni = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// A plugin as the program knows it: loaded, or skipped and why.
#[derive(Debug, Clone)]
pub struct PluginInfo {
    /// Its id.
    pub id: String,
    /// Its display name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// What it provides.
    pub description: String,
    /// Its folder (none for Warden's built-in rules).
    pub dir: Option<PathBuf>,
    /// The capabilities it requires.
    pub requires: Vec<String>,
    /// Its settings.
    pub settings: Vec<Arc<SettingDef>>,
    /// The ids of its rules that loaded.
    pub rules: Vec<String>,
    /// The version of each of its rules that loaded, by id.
    pub rule_versions: std::collections::BTreeMap<String, String>,
    /// Why it was not loaded, if it was not.
    pub skipped: Option<String>,
}

#[cfg(test)]
mod tests;
