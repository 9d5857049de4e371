//! The service's other bodies: its health, a row of the execution log (`GET /v1/log`, and
//! `warden log --json`), a setting that does not fit (in a `422`'s `errors`), and a rule's
//! trial (`POST /v1/rules/{id}/trial`), asked and answered.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use warden_context::notification::Notification;
use warden_control::SettingProblem as EngineProblem;
use warden_load::SettingKind;
use warden_program::outcome::Effect;
use warden_store::ExecutionRow;

/// The body of `GET /v1/health`.
#[derive(Debug, Serialize)]
pub struct Health {
    /// Always `ok`: a server that answers is up.
    pub status: &'static str,
    /// Warden's version.
    pub version: &'static str,
    /// The generation of the program in force (one more at each reload).
    pub generation: u64,
    /// Rules loaded.
    pub rules: usize,
    /// Sessions in memory.
    pub sessions: usize,
    /// Seconds since the server started.
    pub uptime_seconds: f64,
}

/// A row of the execution log: one rule evaluated at one tick.
#[derive(Debug, Serialize)]
pub struct LogRow<'a> {
    /// The row's id (newest highest).
    pub id: i64,
    /// When it was written (the store's timestamp).
    pub at: &'a str,
    /// The user.
    pub user: &'a str,
    /// The project.
    pub project: &'a str,
    /// The session, when the tick had one.
    pub session: Option<&'a str>,
    /// The rule.
    pub rule: &'a str,
    /// The hook.
    pub hook: &'a str,
    /// Whether its condition held.
    pub matched: bool,
    /// Whether its action ran.
    pub acted: bool,
    /// How long it took, in milliseconds.
    pub ms: f64,
    /// Its error, if it failed.
    pub error: Option<&'a str>,
    /// What it decided, if it decides.
    pub decision: Option<&'a str>,
    /// Whether the rule was in shadow (nothing it decided applied).
    pub shadow: bool,
    /// A shadow row's tick: what the live rules decided.
    pub live_decision: Option<&'a str>,
}

impl<'a> From<&'a ExecutionRow> for LogRow<'a> {
    fn from(row: &'a ExecutionRow) -> Self {
        let r = &row.record;
        LogRow {
            id: row.id,
            at: &row.created_at,
            user: &r.user_id,
            project: &r.project_id,
            session: r.session_id.as_deref(),
            rule: &r.rule_id,
            hook: &r.trigger,
            matched: r.condition_result,
            acted: r.action_executed,
            ms: r.execution_time_ms,
            error: r.error_message.as_deref(),
            decision: r.decision.as_deref(),
            shadow: r.shadow,
            live_decision: r.live_decision.as_deref(),
        }
    }
}

/// A setting that does not fit, as the service says it: its name, why, and (when the plugin
/// declares it) its type, bounds and options.
#[derive(Debug, Serialize)]
pub struct SettingProblem<'a> {
    /// The setting's name, as given.
    pub setting: &'a str,
    /// What is wrong with it.
    pub message: &'a str,
    /// Its type, when declared.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<&'static str>,
    /// Its least value, when declared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min: Option<Value>,
    /// Its greatest value, when declared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max: Option<Value>,
    /// The values it may take, when it is a choice.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub options: Option<&'a [String]>,
}

/// A setting's bound as written: an integer setting's bounds are integers.
pub fn bound(kind: SettingKind, x: f64) -> Value {
    if kind == SettingKind::Integer && x.fract() == 0.0 && x.abs() < 9e15 {
        Value::from(x as i64)
    } else {
        serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number)
    }
}

impl<'a> From<&'a EngineProblem> for SettingProblem<'a> {
    fn from(p: &'a EngineProblem) -> Self {
        let def = p.def.as_deref();
        SettingProblem {
            setting: &p.setting,
            message: &p.message,
            kind: def.map(|d| d.kind.name()),
            min: def.and_then(|d| Some(bound(d.kind, d.min?))),
            max: def.and_then(|d| Some(bound(d.kind, d.max?))),
            options: def
                .filter(|d| !d.options.is_empty())
                .map(|d| d.options.as_slice()),
        }
    }
}

/// What the caller of a trial may send: events, one event, or nothing (`{}`: the sample).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrialRequest {
    /// Events in the trace format (`{"hook": ...}`), run in order.
    pub events: Option<Vec<Value>>,
    /// One event.
    pub event: Option<Value>,
}

/// What a trial found.
#[derive(Debug, Serialize)]
pub struct TrialReport {
    /// The rule.
    pub rule: String,
    /// Whether it fired at any event.
    pub fired: bool,
    /// What its last evaluation came to: `fired`, `not_matched`, `undetermined`, `failed`,
    /// `suppressed`, `running`, `inactive`, or `not_reached` (no event reached its hook).
    pub evaluation: String,
    /// Why, in words.
    pub why: String,
    /// What it would inject into the agent's context.
    #[serde(serialize_with = "super::outcome::notifications")]
    pub messages: Vec<Notification>,
    /// What it decided (`{"decision", "reason"}`), if it decides.
    pub decision: Option<Value>,
    /// The arguments it would rewrite the call to, if it rewrites and its rewrite applies.
    pub input: Option<Value>,
    /// Every effect it applied in the trial (none reached the real store or bus).
    #[serde(serialize_with = "super::outcome::effects")]
    pub effects: Vec<Effect>,
    /// Errors of this rule, or of the events.
    pub errors: Vec<String>,
    /// The events that ran, in the trace format (edit them and send them back to try
    /// another case).
    pub events: Vec<Value>,
    /// Whether the events were the sample.
    pub sample: bool,
    /// Whether the rule is on for the user (a trial runs it either way).
    pub enabled_for_user: bool,
}
