//! Today's encoders, as they were before the wire crate (serve's `OutcomeBody`, `RuleView`,
//! `PluginView`, `FeedItem`, `ApiError`'s body), to prove the wire's shapes write the same
//! bytes. Removed once the engine's types stop deriving `Serialize`.

use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value as Json};

use warden_knowledge::Enrichment;
use warden_load::{Hook, PluginInfo};
use warden_program::outcome::{
    Effect, Halted, Notification, Outcome, Overridden, Proceed, RuleError, Ruling,
};
use warden_session::control::{RuleInfo, SettingInfo};
use warden_session::shared::BusEvent;

fn proceed_word(o: &Outcome) -> &'static str {
    match o.proceed() {
        Proceed::Yes => "yes",
        Proceed::WithInput(_) => "with_input",
        Proceed::Ask { .. } => "ask",
        Proceed::No { .. } => "no",
        Proceed::KeepWorking { .. } => "keep_working",
        Proceed::Stop { .. } => "stop",
    }
}

#[derive(Serialize)]
struct ModeChangeBody<'a> {
    from: &'a str,
    to: &'a str,
    fired: Vec<&'a str>,
}

#[derive(Serialize)]
struct OutcomeBody<'a> {
    session: &'a str,
    hook: Hook,
    mode: &'a str,
    proceed: &'static str,
    saved: bool,
    unsaved: Option<&'a str>,
    ruling: &'a Option<Ruling>,
    inject: &'a [Notification],
    rendered: Option<&'a str>,
    fired: Vec<&'a str>,
    effects: &'a [Effect],
    errors: &'a [RuleError],
    halted: &'a [Halted],
    overridden: &'a [Overridden],
    mode_change: Option<ModeChangeBody<'a>>,
    enrichment: &'a Option<Arc<Enrichment>>,
}

pub fn today_outcome(session: &str, o: &Outcome, written: &str) {
    let body = OutcomeBody {
        session,
        hook: o.hook,
        mode: &o.mode,
        proceed: proceed_word(o),
        saved: o.unsaved.is_none(),
        unsaved: o.unsaved.as_deref(),
        ruling: &o.ruling,
        inject: &o.inject,
        rendered: o.rendered(),
        fired: o.fired(),
        effects: &o.effects,
        errors: &o.errors,
        halted: &o.halted,
        overridden: &o.overridden,
        mode_change: o.mode_change.as_ref().map(|c| ModeChangeBody {
            from: &c.from,
            to: &c.to,
            fired: c.outcome.fired(),
        }),
        enrichment: &o.enrichment,
    };
    assert_eq!(serde_json::to_string(&body).unwrap(), written);
}

#[derive(Serialize)]
struct RuleView<'a> {
    #[serde(flatten)]
    info: &'a RuleInfo,
    core_reason: Option<String>,
    fire_count: u64,
    last_fired: Option<f64>,
    shadow_fire_count: u64,
    shadow_refusals: u64,
}

pub fn today_rule_views(rules: &[RuleInfo], written: &str) {
    let views: Vec<RuleView> = rules
        .iter()
        .enumerate()
        .map(|(i, r)| RuleView {
            info: r,
            core_reason: r.core.then(|| "it is a core rule".to_string()),
            fire_count: i as u64 * 3,
            last_fired: (i > 0).then_some(1_700_000_000.5),
            shadow_fire_count: i as u64,
            shadow_refusals: 0,
        })
        .collect();
    assert_eq!(serde_json::to_string(&views).unwrap(), written);
}

#[derive(Serialize)]
struct PluginView<'a> {
    #[serde(flatten)]
    info: &'a PluginInfo,
    values: &'a [SettingInfo],
}

pub fn today_plugin_view(info: &PluginInfo, values: &[SettingInfo], written: &str) {
    let view = PluginView { info, values };
    assert_eq!(serde_json::to_string(&view).unwrap(), written);
}

pub fn today_error(message: &str, fields: &Map<String, Json>, written: &str) {
    let mut body = Map::new();
    body.insert("error".into(), Json::String(message.into()));
    body.extend(fields.clone());
    assert_eq!(serde_json::to_string(&Json::Object(body)).unwrap(), written);
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum FeedItem {
    Fired {
        session: String,
        hook: Hook,
        rule: Arc<str>,
        action: &'static str,
        message: Option<String>,
        shadow: bool,
        at: f64,
    },
    Decision {
        session: String,
        hook: Hook,
        decision: &'static str,
        rule: Arc<str>,
        reason: Arc<str>,
        at: f64,
    },
    RuleError {
        session: String,
        rule: Option<Arc<str>>,
        error: String,
        shadow: bool,
        at: f64,
    },
    Emitted {
        #[serde(flatten)]
        event: BusEvent,
    },
    Reload {
        applied: bool,
        generation: u64,
        errors: Vec<String>,
    },
}

fn effect_message(effect: &Effect) -> Option<String> {
    match effect {
        Effect::NotifySelf(n) => Some(n.message.to_string()),
        Effect::Log { message, .. } => Some(message.clone()),
        Effect::Decide {
            decision, reason, ..
        } => Some(format!("{}: {reason}", decision.name())),
        Effect::SetState { key, value, .. } => Some(format!("{key} = {value}")),
        Effect::EmitEvent { event_type, .. } => Some(event_type.to_string()),
        Effect::Rewrite { set, .. } => Some(
            set.iter()
                .map(|(path, v)| format!("arguments.{} = {v}", path.join(".")))
                .collect::<Vec<_>>()
                .join(", "),
        ),
        Effect::EnrichContext { .. } => None,
    }
}

pub fn today_feed(o: &Outcome, bus: &BusEvent, written: &[String]) {
    let mut items: Vec<(&str, FeedItem)> = o
        .effects
        .iter()
        .map(|e| {
            (
                "fired",
                FeedItem::Fired {
                    session: "s-1".into(),
                    hook: o.hook,
                    rule: e.rule().into(),
                    action: e.action(),
                    message: effect_message(e),
                    shadow: false,
                    at: 1_700_000_000.25,
                },
            )
        })
        .collect();
    let r = o.ruling.as_ref().unwrap();
    items.push((
        "decision",
        FeedItem::Decision {
            session: "s-1".into(),
            hook: o.hook,
            decision: r.name(),
            rule: r.rule.clone(),
            reason: r.reason.clone(),
            at: 1_700_000_000.25,
        },
    ));
    for (e, shadow) in o.errors.iter().zip([false, true]) {
        items.push((
            "rule_error",
            FeedItem::RuleError {
                session: "s-1".into(),
                rule: e.rule.clone(),
                error: e.error.clone(),
                shadow,
                at: 1_700_000_000.25,
            },
        ));
    }
    items.push(("emitted", FeedItem::Emitted { event: bus.clone() }));
    items.push((
        "reload",
        FeedItem::Reload {
            applied: false,
            generation: 4,
            errors: vec!["rules/x.toml:3: bad".into()],
        },
    ));
    let today: Vec<String> = items
        .iter()
        .map(|(name, i)| format!("{name} {}", serde_json::to_string(i).unwrap()))
        .collect();
    assert_eq!(today, written);
}
