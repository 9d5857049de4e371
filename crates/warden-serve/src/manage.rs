//! The management API: rules and plugins as a user sees them, switching rules on and off,
//! plugin settings, the Test button, the execution log. Every change goes through the engine's
//! control API (`Warden::set_rule_enabled`, `set_setting`...), the one the `warden rules`
//! commands use, so a refusal reads the same here and there; changes apply from the next tick.

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value};
use warden_core::{ControlError, ExecutionFilter, PluginInfo, RuleInfo, RuleState, SettingInfo};
use warden_wire::v1;

use crate::error::{ApiError, JsonBody, PathParam, QueryParams, typed};
use crate::guard::Scope;
use crate::metrics::RuleStats;
use crate::state::{App, AppState};
use crate::trial;
use warden_wire::v1::TrialRequest;

/// The most rows `GET /v1/log` returns.
pub(crate) const MAX_LOG_ROWS: usize = 1000;

/// A rule as the management API shows it: the engine's [`RuleInfo`], with its firings on this
/// server (written as [`v1::RuleView`]).
#[derive(Debug)]
pub(crate) struct RuleView {
    /// The rule.
    pub info: RuleInfo,
    /// Why users cannot switch it off (core rules only).
    pub core_reason: Option<String>,
    /// How often it fired on this server since it started.
    pub fire_count: u64,
    /// When it last fired on this server, in seconds since the Unix epoch.
    pub last_fired: Option<f64>,
    /// How often it fired in shadow on this server (nothing it decided applied).
    pub shadow_fire_count: u64,
    /// How often, in shadow, it would have refused a call or prompt the live rules let
    /// through.
    pub shadow_refusals: u64,
}

impl RuleView {
    /// A rule with its firings.
    pub(crate) fn new(info: RuleInfo, stats: RuleStats) -> Self {
        // The engine's own refusal says why, so the page and the API never differ from it.
        let core_reason = info.core.then(|| {
            ControlError::CoreRule {
                rule: info.key.clone(),
                to: RuleState::Off,
                file: (info.plugin != warden_core::BUILTIN_PLUGIN).then(|| info.file.clone()),
            }
            .to_string()
        });
        RuleView {
            core_reason,
            fire_count: stats.fires,
            last_fired: (stats.fires > 0).then_some(stats.last_fired),
            shadow_fire_count: stats.shadow_fires,
            shadow_refusals: stats.shadow_refusals,
            info,
        }
    }
}

/// A plugin as the management API shows it: the loader's [`PluginInfo`], with its settings'
/// values for the user (written as [`v1::PluginView`]).
#[derive(Debug)]
pub(crate) struct PluginView {
    /// The plugin.
    pub info: PluginInfo,
    /// Its settings, with the user's values (`values` replaces the declarations in `settings`).
    pub values: Vec<SettingInfo>,
}

impl Serialize for RuleView {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        v1::RuleView {
            info: (&self.info).into(),
            core_reason: self.core_reason.as_deref(),
            fire_count: self.fire_count,
            last_fired: self.last_fired,
            shadow_fire_count: self.shadow_fire_count,
            shadow_refusals: self.shadow_refusals,
        }
        .serialize(s)
    }
}

impl Serialize for PluginView {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        v1::PluginView {
            info: v1::Plugin::from(&self.info),
            values: self.values.iter().map(v1::SettingInfo::from).collect(),
        }
        .serialize(s)
    }
}

/// One rule as `user` sees it in `project`, with its firings on this server.
fn rule_view(app: &App, user: &str, project: &str, id: &str) -> Result<RuleView, ApiError> {
    let info = app.warden.rule_info(user, project, id)?;
    let stats = app.metrics.rule(&info.key);
    Ok(RuleView::new(info, stats))
}

/// Every rule as the scope's user sees it, in priority order per hook.
pub(crate) fn rule_views(app: &App, user: &str, project: &str) -> Vec<RuleView> {
    app.warden
        .rule_list(user, project)
        .into_iter()
        .map(|r| {
            let stats = app.metrics.rule(&r.key);
            RuleView::new(r, stats)
        })
        .collect()
}

/// Every plugin found (loaded or skipped), with the user's setting values.
pub(crate) fn plugin_views(app: &App, user: &str, project: &str) -> Vec<PluginView> {
    let settings = app.warden.setting_list(user, project);
    app.warden
        .program()
        .plugins()
        .iter()
        .map(|p| PluginView {
            values: settings
                .iter()
                .filter(|s| s.plugin == p.id)
                .cloned()
                .collect(),
            info: p.clone(),
        })
        .collect()
}

fn names(app: &App, scope: &Scope) -> Result<(String, String), ApiError> {
    scope.check()?;
    let o = app.owner(scope.user.as_deref(), scope.project.as_deref());
    Ok((o.user, o.project))
}

/// `GET /v1/rules`.
pub(crate) async fn list_rules(
    State(app): State<AppState>,
    QueryParams(scope): QueryParams<Scope>,
) -> Result<Json<Vec<RuleView>>, ApiError> {
    let (user, project) = names(&app, &scope)?;
    Ok(Json(rule_views(&app, &user, &project)))
}

/// `GET /v1/rules/{id}`.
pub(crate) async fn get_rule(
    State(app): State<AppState>,
    PathParam(id): PathParam,
    QueryParams(scope): QueryParams<Scope>,
) -> Result<Json<RuleView>, ApiError> {
    let (user, project) = names(&app, &scope)?;
    rule_view(&app, &user, &project, &id).map(Json)
}

/// `PUT /v1/rules/{id}/enabled`: switches a rule on or off for the user (toggles are per user,
/// in all their projects, as with `warden rules enable`).
pub(crate) async fn put_enabled(
    State(app): State<AppState>,
    PathParam(id): PathParam,
    QueryParams(scope): QueryParams<Scope>,
    JsonBody(body): JsonBody,
) -> Result<Json<RuleView>, ApiError> {
    let (user, project) = names(&app, &scope)?;
    no_project(&scope)?;
    let on = match &body {
        Value::Bool(b) => *b,
        Value::Object(m) if m.len() == 1 && m.get("enabled").is_some_and(Value::is_boolean) => {
            m["enabled"] == Value::Bool(true)
        }
        _ => {
            return Err(ApiError::unprocessable(
                "the body must be `{\"enabled\": true}` or `{\"enabled\": false}` (or a bare `true` or `false`), and nothing else",
            ));
        }
    };
    app.warden.set_rule_enabled(&user, &id, on)?;
    rule_view(&app, &user, &project, &id).map(Json)
}

/// `PUT /v1/rules/{id}/state`: puts a rule on, off or in shadow for the user (`{"state":
/// "shadow"}`, or a bare `"shadow"`). A rule in shadow is evaluated at every tick and what it
/// would have decided is logged, counted and streamed, marked as shadow; nothing it decides
/// applies.
pub(crate) async fn put_state(
    State(app): State<AppState>,
    PathParam(id): PathParam,
    QueryParams(scope): QueryParams<Scope>,
    JsonBody(body): JsonBody,
) -> Result<Json<RuleView>, ApiError> {
    let (user, project) = names(&app, &scope)?;
    no_project(&scope)?;
    let state = state_of(&body)?;
    app.warden.set_rule_state(&user, &id, state)?;
    rule_view(&app, &user, &project, &id).map(Json)
}

/// The state a body asks for: `{"state": "on" | "off" | "shadow"}`, or the bare string.
fn state_of(body: &Value) -> Result<RuleState, ApiError> {
    let text = match body {
        Value::String(s) => Some(s.as_str()),
        Value::Object(m) if m.len() == 1 => m.get("state").and_then(Value::as_str),
        _ => None,
    };
    text.and_then(|t| t.parse::<RuleState>().ok()).ok_or_else(|| {
        ApiError::unprocessable(
            "the body must be `{\"state\": \"on\"}`, `{\"state\": \"off\"}` or `{\"state\": \"shadow\"}` (or the bare string), and nothing else",
        )
        .with("field", "state")
    })
}

/// `PUT /v1/plugins/{id}/state`: puts every rule of a plugin on, off or in shadow for the user
/// (its core rules stay on). Returns its rules as the user now sees them.
pub(crate) async fn put_plugin_state(
    State(app): State<AppState>,
    PathParam(id): PathParam,
    QueryParams(scope): QueryParams<Scope>,
    JsonBody(body): JsonBody,
) -> Result<Json<Vec<RuleView>>, ApiError> {
    no_project(&scope)?;
    let (user, _) = names(&app, &scope)?;
    let state = state_of(&body)?;
    let infos = app.warden.set_plugin_state(&user, &id, Some(state))?;
    Ok(Json(plugin_rule_views(&app, infos)))
}

/// `DELETE /v1/plugins/{id}/state`: forgets the user's choices for every rule of a plugin;
/// the files apply again.
pub(crate) async fn reset_plugin_state(
    State(app): State<AppState>,
    PathParam(id): PathParam,
    QueryParams(scope): QueryParams<Scope>,
) -> Result<Json<Vec<RuleView>>, ApiError> {
    no_project(&scope)?;
    let (user, _) = names(&app, &scope)?;
    let infos = app.warden.set_plugin_state(&user, &id, None)?;
    Ok(Json(plugin_rule_views(&app, infos)))
}

fn plugin_rule_views(app: &App, infos: Vec<RuleInfo>) -> Vec<RuleView> {
    infos
        .into_iter()
        .map(|info| {
            let stats = app.metrics.rule(&info.key);
            RuleView::new(info, stats)
        })
        .collect()
}

/// `DELETE /v1/rules/{id}/enabled`: forgets the user's choice; the rule file's `enabled`
/// applies again.
pub(crate) async fn reset_enabled(
    State(app): State<AppState>,
    PathParam(id): PathParam,
    QueryParams(scope): QueryParams<Scope>,
) -> Result<Json<RuleView>, ApiError> {
    let (user, project) = names(&app, &scope)?;
    no_project(&scope)?;
    app.warden.reset_rule(&user, &id)?;
    rule_view(&app, &user, &project, &id).map(Json)
}

/// A rule toggle is per user; a `project` would be silently ignored, so it is refused.
fn no_project(scope: &Scope) -> Result<(), ApiError> {
    if scope.project.is_some() {
        return Err(ApiError::bad_request(
            "rules are switched on and off per user, in all of the user's projects: leave `project` out (settings can be set per project)",
        )
        .with("parameter", "project"));
    }
    Ok(())
}

/// `GET /v1/plugins`.
pub(crate) async fn list_plugins(
    State(app): State<AppState>,
    QueryParams(scope): QueryParams<Scope>,
) -> Result<Json<Vec<PluginView>>, ApiError> {
    let (user, project) = names(&app, &scope)?;
    Ok(Json(plugin_views(&app, &user, &project)))
}

/// `PUT /v1/plugins/{id}/settings`: a flat object, `{"setting_name": value, ...}`; `null`
/// puts a setting back to its default. Every value is checked against the manifest before
/// any is written: one that does not fit is a 422 naming it and its bounds, and nothing
/// changes. With `?project=`, the values hold in that project only; else in all the user's
/// projects.
pub(crate) async fn put_settings(
    State(app): State<AppState>,
    PathParam(plugin): PathParam,
    QueryParams(scope): QueryParams<Scope>,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let (user, project) = names(&app, &scope)?;
    let only_in = scope.project.as_deref();
    let program = app.warden.program();
    let Some(info) = program.plugins().iter().find(|p| p.id == plugin) else {
        let ids: Vec<&str> = program.plugins().iter().map(|p| p.id.as_str()).collect();
        return Err(ApiError::not_found(format!(
            "no plugin `{plugin}`; the plugins are {} (the built-in rules' plugin is `builtin`)",
            ids.join(", ")
        )));
    };
    if let Some(why) = &info.skipped {
        return Err(ApiError::new(
            axum::http::StatusCode::CONFLICT,
            format!("plugin `{plugin}` is not loaded ({why}), so its settings do nothing"),
        ));
    }
    let values: Map<String, Value> = match body {
        Value::Object(m) if !m.is_empty() => m,
        _ => {
            return Err(ApiError::unprocessable(
                "the body must be a JSON object of settings, such as {\"max_sources\": 5}",
            ));
        }
    };
    // One check of every value, then one write of all of them (the engine's rule).
    let values: Vec<(String, Value)> = values.into_iter().collect();
    app.warden.set_settings(&user, only_in, &plugin, &values)?;
    let after = app.warden.setting_list(&user, &project);
    let of_plugin: Vec<v1::SettingInfo> = after
        .iter()
        .filter(|s| s.plugin == plugin)
        .map(v1::SettingInfo::from)
        .collect();
    Ok(Json(of_plugin).into_response())
}

/// `POST /v1/rules/{id}/test`: the Test button (see `trial.rs`).
pub(crate) async fn test_rule(
    State(app): State<AppState>,
    PathParam(id): PathParam,
    QueryParams(scope): QueryParams<Scope>,
    JsonBody(body): JsonBody,
) -> Result<Json<v1::TrialReport>, ApiError> {
    let (user, project) = names(&app, &scope)?;
    let info = app.warden.rule_info(&user, &project, &id)?;
    let request: TrialRequest = match body {
        Value::Null => TrialRequest::default(),
        Value::Object(_) => typed(body, "the test request")?,
        // (serde would read an array as the struct's fields in order.)
        _ => {
            return Err(ApiError::unprocessable(
                "the test request must be a JSON object (`{}` for the sample session, or {\"events\": [...]})",
            ));
        }
    };
    let program = app.warden.program();
    let Some(def) = program.rules().find(|d| *d.key() == *info.key) else {
        return Err(ApiError::not_found(format!(
            "rule `{}` is gone (reloaded?)",
            info.key
        )));
    };
    let tools = def.tools.clone();
    let (events, sample) = trial::events_of(request, def)?;
    let owner = app.owner(Some(&user), Some(&project));
    let warden = app.warden.clone();
    let report = tokio::task::spawn_blocking(move || {
        trial::run(&warden, &info, &tools, &owner, events, sample)
    })
    .await
    .map_err(|_| {
        ApiError::internal("the trial panicked (a bug in Warden; the server log has it)")
    })??;
    Ok(Json(report))
}

/// The query of `GET /v1/log`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LogQuery {
    /// Only this rule (`id`, or `plugin/id`).
    pub rule: Option<String>,
    /// Only this session.
    pub session: Option<String>,
    /// Only this user.
    pub user: Option<String>,
    /// Only evaluations that ended in an error.
    #[serde(default)]
    pub failures: bool,
    /// Only evaluations of rules in shadow.
    #[serde(default)]
    pub shadow: bool,
    /// At most this many rows, newest first (default 50, at most 1000).
    pub limit: Option<usize>,
}

/// `GET /v1/log`: the execution log, newest first.
pub(crate) async fn log(
    State(app): State<AppState>,
    QueryParams(q): QueryParams<LogQuery>,
) -> Result<Json<Value>, ApiError> {
    Scope {
        user: q.user.clone(),
        project: None,
    }
    .check()?;
    let limit = q.limit.unwrap_or(50);
    if limit == 0 || limit > MAX_LOG_ROWS {
        return Err(
            ApiError::bad_request(format!("`limit` must be 1 to {MAX_LOG_ROWS}"))
                .with("parameter", "limit"),
        );
    }
    let filter = ExecutionFilter {
        rule_id: q.rule,
        session_id: q.session,
        user_id: q.user,
        failures_only: q.failures,
        shadow_only: q.shadow,
        limit: Some(limit),
    };
    let warden = app.warden.clone();
    let rows = tokio::task::spawn_blocking(move || warden.store().executions(&filter))
        .await
        .map_err(|_| ApiError::internal("reading the log panicked"))?
        .map_err(|e| ApiError::internal(format!("the execution log could not be read: {e}")))?;
    let rows: Vec<v1::LogRow> = rows.iter().map(v1::LogRow::from).collect();
    // Strings, numbers and booleans: writing them does not fail.
    Ok(Json(serde_json::to_value(rows).unwrap_or_default()))
}
