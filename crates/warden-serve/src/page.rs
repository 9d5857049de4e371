//! The Settings page (`GET /`): the rules grouped by plugin, a three-way control per rule (on,
//! in shadow, off; core rules' shadow and off disabled, with the reason) and a rule's shadow
//! figures, a pair of buttons per plugin that puts all its rules in shadow or on, a settings
//! form per plugin, a Test button per rule and the live feed. Rendered on the server by minijinja, which escapes everything it inserts into
//! HTML; the page's script (`assets/settings.js`) talks to the management API and writes
//! only text. Every asset is served by Warden itself.

use std::sync::OnceLock;

use axum::Form;
use axum::extract::State;
use axum::extract::rejection::FormRejection;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use minijinja::Environment;
use serde::Deserialize;
use serde_json::{Value, json};
use warden_core::{RuleState, SetBy, SettingInfo, SettingKind};

use crate::error::{ApiError, QueryParams};
use crate::guard::{COOKIE, Scope, sign_in_cookie};
use crate::manage::{RuleView, plugin_views, rule_views};
use crate::state::{App, AppState, SIGN_IN_TTL};

const CSS: &str = include_str!("../assets/warden.css");
const JS: &str = include_str!("../assets/settings.js");
const FAVICON: &str = include_str!("../assets/favicon.svg");

/// What the page may load and do: its own scripts, styles and requests, nothing else.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

fn templates() -> &'static Environment<'static> {
    static ENV: OnceLock<Environment<'static>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Environment::new();
        for (name, text) in [
            ("settings.html", include_str!("../assets/settings.html")),
            ("sign-in.html", include_str!("../assets/sign-in.html")),
            ("logo.svg", include_str!("../assets/logo.svg")),
        ] {
            // The templates are part of the binary; the tests render both.
            if let Err(e) = env.add_template(name, text) {
                tracing::error!("the page template {name} does not compile: {e}");
            }
        }
        env
    })
}

fn render(name: &str, context: &Value) -> Result<String, ApiError> {
    templates()
        .get_template(name)
        .and_then(|t| t.render(minijinja::value::Serde(context)))
        .map_err(|e| ApiError::internal(format!("the page could not be rendered: {e}")))
}

/// An HTML response with the page's security headers.
fn html(status: StatusCode, body: String) -> Response {
    let mut r = (status, body).into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // Not `no-referrer`: under it a browser sends the page's own forms with `Origin: null`,
    // and on plain HTTP away from loopback without `Sec-Fetch-Site` either, so the cross-site
    // check (which compares `Origin` with `Host`) refused the sign-in form of a server on a
    // network address. `same-origin` gives the page's requests their origin and other sites
    // nothing.
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// `GET /`: the page, or the sign-in form when the server has a token and the browser has
/// not signed in.
pub(crate) async fn settings(
    State(app): State<AppState>,
    headers: HeaderMap,
    QueryParams(scope): QueryParams<Scope>,
) -> Result<Response, ApiError> {
    scope.check()?;
    let signed_in = sign_in_cookie(&headers).is_some_and(|c| app.signed_in(c));
    if app.options.tokens.required() && !signed_in {
        return Ok(html(StatusCode::OK, render("sign-in.html", &json!({}))?));
    }
    let owner = app.owner(scope.user.as_deref(), scope.project.as_deref());
    let context = page_context(&app, &owner.user, &owner.project, signed_in);
    Ok(html(StatusCode::OK, render("settings.html", &context)?))
}

/// What the template shows.
fn page_context(app: &App, user: &str, project: &str, signed_in: bool) -> Value {
    let rules = rule_views(app, user, project);
    let plugins = plugin_views(app, user, project);
    let mut groups = Vec::new();
    let mut skipped = Vec::new();
    for (gi, p) in plugins.iter().enumerate() {
        if p.info.skipped.is_some() {
            skipped.push(json!({"id": p.info.id, "name": p.info.name, "skipped": p.info.skipped}));
            continue;
        }
        let of_plugin: Vec<&RuleView> = rules
            .iter()
            .filter(|r| r.info.plugin == p.info.id)
            .collect();
        groups.push(group(
            gi,
            &p.info.id,
            &p.info.name,
            &p.info.version,
            &p.info.description,
            &p.info.requires,
            &p.values,
            &of_plugin,
        ));
    }
    // Rules of plain rule folders (`local`), and any whose plugin is not listed.
    let mut rest: Vec<&RuleView> = rules
        .iter()
        .filter(|r| {
            !plugins
                .iter()
                .any(|p| p.info.id == r.info.plugin && p.info.skipped.is_none())
        })
        .collect();
    rest.sort_by(|a, b| a.info.plugin.cmp(&b.info.plugin));
    let mut start = 0;
    while start < rest.len() {
        let plugin = rest[start].info.plugin.clone();
        let end = rest[start..]
            .iter()
            .position(|r| r.info.plugin != plugin)
            .map_or(rest.len(), |n| start + n);
        let (name, description) = if plugin == "local" {
            (
                "Local rules".to_string(),
                "Rules from this installation's rule folders".to_string(),
            )
        } else {
            (plugin.clone(), String::new())
        };
        groups.push(group(
            plugins.len() + groups.len(),
            &plugin,
            &name,
            "",
            &description,
            &[],
            &[],
            &rest[start..end],
        ));
        start = end;
    }
    // What an operator must know before trusting the page: rules that did not load, and a
    // change of the files that was not applied.
    let broken: Vec<String> = app
        .warden
        .diagnostics()
        .iter()
        .filter(|d| d.is_error())
        .map(ToString::to_string)
        .collect();
    let not_reloaded = app
        .not_reloaded
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    json!({
        "user": user,
        "project": project,
        "signed_in": signed_in,
        "rule_count": rules.len(),
        "groups": groups,
        "skipped": skipped,
        "broken": broken,
        "not_reloaded": not_reloaded,
    })
}

#[allow(clippy::too_many_arguments)]
fn group(
    index: usize,
    id: &str,
    name: &str,
    version: &str,
    description: &str,
    requires: &[String],
    settings: &[SettingInfo],
    rules: &[&RuleView],
) -> Value {
    let anchor = format!("plugin-{}", dom_id(id));
    json!({
        "id": id,
        "anchor": anchor,
        "name": name,
        "version": version,
        "description": description,
        "requires": requires,
        "settings": settings.iter().map(|s| setting(&anchor, s)).collect::<Vec<_>>(),
        "rules": rules.iter().enumerate().map(|(i, r)| rule(index, i, r)).collect::<Vec<_>>(),
    })
}

fn setting(anchor: &str, s: &SettingInfo) -> Value {
    let d = &s.def;
    let number = |x: f64| {
        if d.kind == SettingKind::Integer && x.fract() == 0.0 {
            json!(x as i64)
        } else {
            json!(x)
        }
    };
    let what = match d.kind {
        SettingKind::Integer => "A whole number",
        SettingKind::Float => "A number",
        SettingKind::Boolean => "On or off",
        SettingKind::String if d.options.is_empty() => "Text",
        SettingKind::String => "One of",
    };
    let range = match (d.min, d.max) {
        (Some(lo), Some(hi)) => format!(" from {} to {}", plain(lo), plain(hi)),
        (Some(lo), None) => format!(" of at least {}", plain(lo)),
        (None, Some(hi)) => format!(" of at most {}", plain(hi)),
        (None, None) if !d.options.is_empty() => format!(" {}", d.options.join(", ")),
        (None, None) => String::new(),
    };
    let default = match d.default.to_json() {
        Value::Bool(b) => if b { "on" } else { "off" }.to_string(),
        Value::String(t) => t,
        Value::Number(n) => n.as_f64().map_or(n.to_string(), plain),
        other => other.to_string(),
    };
    json!({
        "name": d.name,
        "label": label(&d.name),
        "dom": format!("{anchor}-{}", dom_id(&d.name)),
        "type": d.kind.name(),
        "value": s.value.to_json(),
        "min": d.min.map(number),
        "max": d.max.map(number),
        "options": d.options,
        "description": d.description.trim_end_matches('.'),
        "bounds": format!("{what}{range} · default {default}"),
        "changed": s.set_by != SetBy::Default,
    })
}

/// A number as people write it: `1`, not `1.0`.
fn plain(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}

fn rule(group: usize, index: usize, r: &RuleView) -> Value {
    let i = &r.info;
    // The three choices, in the order a user meets them; a core rule can only be on.
    let states: Vec<Value> = RuleState::ALL
        .iter()
        .map(|&s| {
            json!({
                "value": s.name(),
                "label": state_label(s),
                "checked": s == i.state,
                "disabled": i.core && s != RuleState::On,
            })
        })
        .collect();
    json!({
        "key": i.key,
        "dom": format!("rule-{group}-{index}"),
        "name": i.name,
        "description": i.description,
        "hook": i.hook.name(),
        "priority": i.priority,
        "state": i.state.name(),
        "state_label": state_label(i.state),
        "states": states,
        "core": i.core,
        "core_reason": r.core_reason,
        "shadow_fire_count": r.shadow_fire_count,
        "shadow_refusals": r.shadow_refusals,
        "shadow_text": shadow_text(r.shadow_fire_count, r.shadow_refusals),
        "fire_count": r.fire_count,
        "last_fired": r.last_fired,
        "last_fired_iso": r.last_fired.map(|t| utc(t, 'T') + "Z"),
        "last_fired_text": r.last_fired.map(|t| utc(t, ' ') + " UTC"),
    })
}

/// What the page calls a state.
fn state_label(state: RuleState) -> &'static str {
    match state {
        RuleState::On => "On",
        RuleState::Shadow => "Shadow",
        RuleState::Off => "Off",
    }
}

/// A rule's shadow figures, as the page says them (`settings.js` writes the same words when
/// they change).
fn shadow_text(fires: u64, refusals: u64) -> String {
    let times = if fires == 1 { "time" } else { "times" };
    let calls = if refusals == 1 { "call" } else { "calls" };
    format!(
        "In shadow, it would have fired {fires} {times}; it would have refused {refusals} {calls} the live rules let through."
    )
}

/// `token_budget_threshold` -> `Token budget threshold`.
fn label(name: &str) -> String {
    let words = name.replace(['_', '-'], " ");
    let mut chars = words.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// A name usable in an HTML id.
fn dom_id(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect()
}

/// `YYYY-MM-DD HH:MM:SS` (UTC) from seconds since the Unix epoch.
fn utc(seconds: f64, sep: char) -> String {
    let secs = seconds.max(0.0) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}{sep}{:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The sign-in form's body.
#[derive(Deserialize)]
pub(crate) struct SignIn {
    token: String,
}

/// `POST /sign-in`: the management token, from the sign-in form; a cookie on success.
pub(crate) async fn sign_in(
    State(app): State<AppState>,
    form: Result<Form<SignIn>, FormRejection>,
) -> Result<Response, ApiError> {
    // Not the page's form: JSON that says what is wrong, as every other error.
    let Form(form) = form.map_err(|e| {
        ApiError::new(
            e.status(),
            format!(
                "the sign-in takes the page's form, `token=...` as application/x-www-form-urlencoded: {}",
                e.body_text()
            ),
        )
    })?;
    if !app
        .options
        .tokens
        .is_management(form.token.trim().as_bytes())
    {
        let page = render(
            "sign-in.html",
            &json!({"error": "That is not this server's management token."}),
        )?;
        return Ok(html(StatusCode::UNAUTHORIZED, page));
    }
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| ApiError::internal(format!("no randomness for a sign-in: {e}")))?;
    let value: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    app.sign_ins
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(value.clone(), std::time::Instant::now() + SIGN_IN_TTL);
    let cookie = format!(
        "{COOKIE}={value}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}{}",
        SIGN_IN_TTL.as_secs(),
        secure(&app)
    );
    let mut r = Redirect::to("/").into_response();
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    Ok(r)
}

/// The cookie attribute that keeps the sign-in off plain HTTP, on a server that serves TLS.
fn secure(app: &AppState) -> &'static str {
    if app.options.tls.is_some() {
        "; Secure"
    } else {
        ""
    }
}

/// `POST /sign-out`.
pub(crate) async fn sign_out(State(app): State<AppState>, headers: HeaderMap) -> Response {
    if let Some(c) = sign_in_cookie(&headers) {
        app.sign_ins
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(c);
    }
    let mut r = Redirect::to("/").into_response();
    let clear = format!(
        "{COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0{}",
        secure(&app)
    );
    if let Ok(v) = HeaderValue::from_str(&clear) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    r
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body,
    )
        .into_response()
}

/// `GET /assets/warden.css`.
pub(crate) async fn css() -> Response {
    asset("text/css; charset=utf-8", CSS)
}

/// `GET /assets/settings.js`.
pub(crate) async fn js() -> Response {
    asset("text/javascript; charset=utf-8", JS)
}

/// `GET /assets/favicon.svg`.
pub(crate) async fn favicon() -> Response {
    asset("image/svg+xml", FAVICON)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_labels() {
        assert_eq!(utc(0.0, ' '), "1970-01-01 00:00:00");
        assert_eq!(utc(1_700_000_000.0, 'T'), "2023-11-14T22:13:20");
        assert_eq!(utc(951_782_400.0, ' '), "2000-02-29 00:00:00");
        assert_eq!(label("token_budget_threshold"), "Token budget threshold");
        assert_eq!(dom_id("research-assistant/x"), "research-assistant-x");
        assert_eq!(
            shadow_text(1, 0),
            "In shadow, it would have fired 1 time; it would have refused 0 calls the live rules let through."
        );
        assert_eq!(
            shadow_text(3, 1),
            "In shadow, it would have fired 3 times; it would have refused 1 call the live rules let through."
        );
    }

    #[test]
    fn the_templates_compile() {
        for name in ["settings.html", "sign-in.html"] {
            assert!(templates().get_template(name).is_ok(), "{name}");
        }
    }
}
