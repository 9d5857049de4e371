//! The wire format, byte for byte: each shape written for a set of samples and compared with
//! the JSON recorded in `tests/golden/`. The recordings were written by the encoders the wire
//! crate replaced (serve's `OutcomeBody`, `RuleView`, `PluginView`, `FeedItem`, `ApiError`, and
//! the engine's own serde derives), and the wire's shapes were checked against those encoders
//! before they were removed (the commit that added this crate). A difference is a change of the public
//! format: serve's OpenAPI document, the Settings page, the Python package and the book read
//! it. Record a sample's JSON anew only on purpose (`WARDEN_BLESS=1`), for a new version.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use serde_json::{Map, Value as Json, json};

use warden_control::{RuleInfo, SetBy, SettingInfo};
use warden_knowledge::{Classification, Enrichment, Mode, Selected};
use warden_load::{
    Decision, DeliverAt, Hook, Loaded, LogLevel, PluginInfo, Priority, Scope, SettingDef,
    SettingKind, SettingValue,
};
use warden_program::outcome::{
    Effect, Evaluation, Halted, Inject, Lost, ModeChange, Notification, Outcome, Overridden,
    RuleError, Ruling, TraceEntry,
};
use warden_program::program::Program;
use warden_session::shared::BusEvent;
use warden_store::RuleState;
use warden_wire::v1;

/// Compares `written` with the recorded JSON of `name` (records it when asked to).
fn golden(name: &str, written: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(format!("{name}.json"));
    if std::env::var_os("WARDEN_BLESS").is_some() || !path.exists() {
        std::fs::write(&path, format!("{written}\n")).unwrap();
    }
    let recorded = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        recorded.strip_suffix('\n').unwrap_or(&recorded),
        written,
        "{name}: the wire format changed"
    );
}

fn program() -> Arc<Program> {
    let rule = |id: &str| {
        let text = format!(
            "[rule]\nid = \"{id}\"\nname = \"{id}\"\ndescription = \"d\"\ntrigger = \"on_tool_call\"\n\n[condition]\nexpression = \"true\"\n\n[action]\ntype = \"log\"\nmessage = \"m\"\n"
        );
        let file = warden_input::SourceFile::new(format!("{id}.toml"), text);
        warden_load::parse_rule_file(file, &Arc::from("local"))
            .rule
            .unwrap()
    };
    let loaded = Loaded {
        rules: vec![rule("guard"), rule("notes"), rule("mode-greeter")],
        ..Loaded::default()
    };
    Arc::new(Program::compile(loaded, 1))
}

fn outcome(hook: Hook) -> Outcome {
    Outcome {
        hook,
        effects: vec![],
        inject: Inject::default(),
        rendered: OnceLock::new(),
        errors: vec![],
        halted: vec![],
        enrichment: None,
        mode: Arc::from("default"),
        mode_change: None,
        ruling: None,
        overridden: vec![],
        unsaved: None,
        shadow: vec![],
        shadow_errors: vec![],
        trace: vec![],
        nodes: vec![],
        program: program(),
    }
}

fn fired(rule: u32) -> TraceEntry {
    TraceEntry {
        rule,
        evaluation: Evaluation::Fired,
        shadow: false,
    }
}

fn note(rule: &str, message: &str, priority: Priority, deliver_at: DeliverAt) -> Notification {
    Notification {
        rule: rule.into(),
        message: message.into(),
        category: "warning".into(),
        priority,
        deliver_at,
        fired_at: Hook::OnToolCall,
    }
}

fn enrichment() -> Arc<Enrichment> {
    Arc::new(Enrichment {
        mode: Mode::Full,
        context_window: 200_000,
        budget: 4000,
        tokens_used: 120,
        classification: Classification {
            tags: vec!["core".into(), "rust".into()],
            matches: vec![],
        },
        selected: vec![Selected {
            id: "style".into(),
            path: "knowledge/style.md".into(),
            tags: vec!["rust".into()],
            matched_tags: vec!["rust".into()],
            priority: 5,
            truncated: false,
            tokens: 120,
            source_tokens: 120,
        }],
        skipped: vec![],
        refused: vec![],
        section: Some("<reference_material>\nstyle\n</reference_material>".into()),
    })
}

/// Every effect kind, an injected notification, errors (of a rule and of the event), a halted
/// script, each way a decision is overridden, an enrichment, an unsaved tick.
fn everything() -> Outcome {
    let mut o = outcome(Hook::OnToolCall);
    let notified = note(
        "notes",
        "9 results: summarize",
        Priority::High,
        DeliverAt::Immediate,
    );
    o.effects = vec![
        Effect::NotifySelf(notified.clone()),
        Effect::NotifySelf(note("notes", "later", Priority::Low, DeliverAt::TurnStart)),
        Effect::Log {
            rule: "notes".into(),
            level: LogLevel::Warning,
            message: "logged".into(),
        },
        Effect::SetState {
            rule: "notes".into(),
            plugin: "local".into(),
            scope: Scope::Shared,
            key: "count".into(),
            value: Box::new(json!(3)),
        },
        Effect::SetState {
            rule: "notes".into(),
            plugin: "local".into(),
            scope: Scope::Session,
            key: "seen".into(),
            value: Box::new(json!({"a": [1, null, "x"]})),
        },
        Effect::EmitEvent {
            rule: "notes".into(),
            event_type: "audit".into(),
            payload: Box::new(json!({"tool": "bash", "n": 1.5})),
        },
        Effect::EnrichContext {
            rule: "notes".into(),
            enrichment: enrichment(),
        },
        Effect::Decide {
            rule: "guard".into(),
            decision: Decision::Deny,
            reason: "no rm -rf".into(),
        },
        Effect::Decide {
            rule: "notes".into(),
            decision: Decision::Ask,
            reason: "sure?".into(),
        },
        Effect::Rewrite {
            rule: "notes".into(),
            set: vec![
                (vec!["limit".into()], json!(10)),
                (vec!["opts".into(), "dry".into()], json!(true)),
            ],
        },
    ];
    o.inject = Inject::new(vec![notified]);
    o.errors = vec![
        RuleError {
            rule: Some("notes".into()),
            error: "template failed".into(),
        },
        RuleError {
            rule: None,
            error: "the store refused the tick's writes".into(),
        },
    ];
    o.unsaved = Some("the store refused the tick's writes".into());
    o.halted = vec![Halted {
        rule: "notes".into(),
        reason: "its rule changed in a reload".into(),
    }];
    o.ruling = Some(Ruling {
        decision: Some(Decision::Deny),
        rule: "guard".into(),
        reason: "no rm -rf".into(),
        input: None,
    });
    o.overridden = vec![
        Overridden {
            rule: "notes".into(),
            lost: Lost::Decision(Decision::Ask),
            by: "guard".into(),
            won: Some(Decision::Deny),
        },
        Overridden {
            rule: "notes".into(),
            lost: Lost::Rewrite,
            by: "guard".into(),
            won: Some(Decision::Deny),
        },
        Overridden {
            rule: "notes".into(),
            lost: Lost::Path(vec!["opts".into(), "dry".into()]),
            by: "guard".into(),
            won: None,
        },
    ];
    o.enrichment = Some(enrichment());
    o.trace = vec![fired(0), fired(1)];
    o
}

/// A ruling of `decision` (none: a rewrite alone), with rewritten arguments when given.
fn ruled(hook: Hook, decision: Option<Decision>, input: Option<Json>) -> Outcome {
    let mut o = outcome(hook);
    o.ruling = Some(Ruling {
        decision,
        rule: "guard".into(),
        reason: if decision.is_some() { "because" } else { "" }.into(),
        input,
    });
    o.trace = vec![fired(0)];
    o
}

/// A mode change, with the rule `on_mode_change` fired.
fn mode_changed() -> Outcome {
    let mut inner = outcome(Hook::OnModeChange);
    inner.mode = "review".into();
    inner.trace = vec![fired(2)];
    let mut o = outcome(Hook::OnTurnStart);
    o.mode = "review".into();
    o.inject = Inject::new(vec![note(
        "mode-greeter",
        "now reviewing",
        Priority::Normal,
        DeliverAt::Immediate,
    )]);
    o.mode_change = Some(ModeChange {
        from: "default".into(),
        to: "review".into(),
        outcome: Box::new(inner),
    });
    o
}

fn outcomes() -> Vec<(&'static str, Outcome)> {
    let input = || Some(json!({"command": "ls", "limit": 10}));
    vec![
        ("outcome-quiet", outcome(Hook::OnTurnStart)),
        ("outcome-everything", everything()),
        (
            "outcome-allow",
            ruled(Hook::OnToolCall, Some(Decision::Allow), None),
        ),
        (
            "outcome-allow-input",
            ruled(Hook::OnToolCall, Some(Decision::Allow), input()),
        ),
        ("outcome-rewrite", ruled(Hook::OnToolCall, None, input())),
        (
            "outcome-ask",
            ruled(Hook::OnToolCall, Some(Decision::Ask), input()),
        ),
        (
            "outcome-deny",
            ruled(Hook::OnQueryStart, Some(Decision::Deny), None),
        ),
        (
            "outcome-continue",
            ruled(Hook::OnTurnEnd, Some(Decision::Continue), None),
        ),
        (
            "outcome-stop",
            ruled(Hook::OnToolCall, Some(Decision::Stop), None),
        ),
        ("outcome-mode-change", mode_changed()),
    ]
}

#[test]
fn the_outcome_as_the_agent_api_answers_it() {
    for (name, o) in outcomes() {
        let written = serde_json::to_string(&v1::Outcome::of("s-1", &o)).unwrap();
        golden(name, &written);
    }
}

fn settings() -> Vec<SettingInfo> {
    let def = |name: &str, kind, default, min, max, options: &[&str]| SettingDef {
        name: name.into(),
        kind,
        default,
        min,
        max,
        options: options.iter().map(|o| o.to_string()).collect(),
        description: format!("the {name}"),
    };
    vec![
        SettingInfo {
            key: "local.threshold".into(),
            plugin: "local".into(),
            def: def(
                "threshold",
                SettingKind::Float,
                SettingValue::Float(0.8),
                Some(0.0),
                Some(1.0),
                &[],
            ),
            value: SettingValue::Float(0.9),
            set_by: SetBy::User,
        },
        SettingInfo {
            key: "local.limit".into(),
            plugin: "local".into(),
            def: def(
                "limit",
                SettingKind::Integer,
                SettingValue::Integer(5),
                Some(1.0),
                None,
                &[],
            ),
            value: SettingValue::Integer(5),
            set_by: SetBy::Default,
        },
        SettingInfo {
            key: "local.style".into(),
            plugin: "local".into(),
            def: def(
                "style",
                SettingKind::String,
                SettingValue::String("short".into()),
                None,
                None,
                &["short", "long"],
            ),
            value: SettingValue::String("long".into()),
            set_by: SetBy::Project,
        },
        SettingInfo {
            key: "local.strict".into(),
            plugin: "local".into(),
            def: def(
                "strict",
                SettingKind::Boolean,
                SettingValue::Boolean(false),
                None,
                None,
                &[],
            ),
            value: SettingValue::Boolean(true),
            set_by: SetBy::User,
        },
    ]
}

fn rules() -> Vec<RuleInfo> {
    let rule = |key: &str, state, choice, core, settings| RuleInfo {
        key: key.into(),
        id: key.rsplit('/').next().unwrap().into(),
        plugin: "local".into(),
        name: format!("Rule {key}"),
        description: "what it does".into(),
        version: "1.0.0".into(),
        hook: Hook::OnToolCall,
        priority: 100,
        enabled: state != RuleState::Off,
        enabled_by_default: true,
        state,
        default_state: RuleState::On,
        choice,
        core,
        tags: vec!["safety".into()],
        file: format!("rules/{key}.toml"),
        condition: "tool.name == 'bash'".into(),
        settings,
    };
    vec![
        rule("guard", RuleState::On, None, true, settings()),
        rule("notes", RuleState::Off, Some(RuleState::Off), false, vec![]),
        rule(
            "shadowed",
            RuleState::Shadow,
            Some(RuleState::Shadow),
            false,
            vec![],
        ),
    ]
}

#[test]
fn rules_and_settings_as_the_management_api_shows_them() {
    let rules = rules();
    let infos: Vec<v1::RuleInfo> = rules.iter().map(v1::RuleInfo::from).collect();
    let written = serde_json::to_string(&infos).unwrap();
    golden("rule-infos", &written);

    let settings = settings();
    let infos: Vec<v1::SettingInfo> = settings.iter().map(v1::SettingInfo::from).collect();
    let written = serde_json::to_string(&infos).unwrap();
    golden("setting-infos", &written);

    let views: Vec<v1::RuleView> = rules
        .iter()
        .enumerate()
        .map(|(i, r)| v1::RuleView {
            info: r.into(),
            core_reason: r.core.then_some("it is a core rule"),
            fire_count: i as u64 * 3,
            last_fired: (i > 0).then_some(1_700_000_000.5),
            shadow_fire_count: i as u64,
            shadow_refusals: 0,
        })
        .collect();
    let written = serde_json::to_string(&views).unwrap();
    golden("rule-views", &written);

    let plugin = PluginInfo {
        id: "local".into(),
        name: "Local rules".into(),
        version: "1.0.0".into(),
        description: "the project's".into(),
        dir: Some("rules".into()),
        requires: vec!["shell".into()],
        settings: settings.iter().map(|s| Arc::new(s.def.clone())).collect(),
        rules: vec!["guard".into(), "notes".into()],
        rule_versions: [("guard".to_string(), "1.0.0".to_string())].into(),
        skipped: None,
    };
    let view = v1::PluginView {
        info: v1::Plugin::from(&plugin),
        values: settings.iter().map(v1::SettingInfo::from).collect(),
    };
    let written = serde_json::to_string(&view).unwrap();
    golden("plugin-view", &written);
}

#[test]
fn the_error_body() {
    for (name, fields) in [
        ("error-plain", Map::new()),
        (
            "error-fields",
            Map::from_iter([
                ("setting".to_string(), json!("local.limit")),
                ("suggestion".to_string(), json!("local.limits")),
                (
                    "errors".to_string(),
                    json!([{"setting": "limit", "min": 1}]),
                ),
            ]),
        ),
    ] {
        let written = serde_json::to_string(&v1::ErrorBody {
            error: "cannot set `local.limit`",
            fields: &fields,
        })
        .unwrap();
        golden(name, &written);
    }
}

#[test]
fn the_live_feed() {
    let o = everything();
    let mut items: Vec<v1::FeedItem> = o
        .effects
        .iter()
        .map(|e| v1::FeedItem::Fired {
            session: "s-1".into(),
            hook: o.hook.name(),
            rule: e.rule().into(),
            action: e.action(),
            message: v1::FeedItem::message_of(e),
            shadow: false,
            at: 1_700_000_000.25,
        })
        .collect();
    let r = o.ruling.as_ref().unwrap();
    items.push(v1::FeedItem::Decision {
        session: "s-1".into(),
        hook: o.hook.name(),
        decision: r.name(),
        rule: r.rule.clone(),
        reason: r.reason.clone(),
        at: 1_700_000_000.25,
    });
    for (e, shadow) in o.errors.iter().zip([false, true]) {
        items.push(v1::FeedItem::RuleError {
            session: "s-1".into(),
            rule: e.rule.clone(),
            error: e.error.clone(),
            shadow,
            at: 1_700_000_000.25,
        });
    }
    let bus = BusEvent {
        event_type: "audit".into(),
        payload: json!({"tool": "bash"}),
        rule: "notes".into(),
        plugin: "local".into(),
        session: "s-1".into(),
        hook: Hook::OnToolComplete,
    };
    items.push(v1::FeedItem::emitted(bus.clone()));
    items.push(v1::FeedItem::Reload {
        applied: false,
        generation: 4,
        errors: vec!["rules/x.toml:3: bad".into()],
    });
    let mut written: Vec<String> = items
        .iter()
        .map(|i| format!("{} {}", i.name(), serde_json::to_string(i).unwrap()))
        .collect();
    // The two events the service writes itself: `ready` first, `lagged` when a client fell
    // behind.
    written.push(format!(
        "ready {}",
        serde_json::to_string(&v1::FeedReady { generation: 4 }).unwrap()
    ));
    written.push(format!(
        "lagged {}",
        serde_json::to_string(&v1::FeedLagged { missed: 12 }).unwrap()
    ));
    golden("feed", &written.join("\n"));
}

#[test]
fn names_are_what_the_vocabulary_serializes() {
    // The wire writes each enum of the vocabulary by its name; the names are the ones the
    // vocabulary's own serde writes (the JSON recorded above depends on it).
    let same = |name: &str, value: Json| assert_eq!(json!(name), value);
    for h in Hook::ALL {
        same(h.name(), serde_json::to_value(h).unwrap());
    }
    for s in RuleState::ALL {
        same(s.name(), serde_json::to_value(s).unwrap());
    }
}

fn session_facts() -> warden_context::facts::SessionFacts {
    use warden_context::event::Event;
    let mut f = warden_context::facts::SessionFacts::new("ada", "warden", 50);
    let events = [
        (
            Hook::OnQueryStart,
            Event::query("what is the WAL?")
                .with_user("ada")
                .with_project_root("/src/warden"),
        ),
        (
            Hook::OnTurnStart,
            Event::new()
                .with_turn(1)
                .with_token_usage(0.25)
                .with_context_window(200_000)
                .with_iterations(1, 10),
        ),
        (
            Hook::OnToolCall,
            Event::tool_call("web", json!({"q": "wal"})),
        ),
        (Hook::OnToolFailure, Event::tool_failure("web", "timeout")),
        (Hook::OnToolCall, Event::tool_call("vault", json!({}))),
        (
            Hook::OnToolComplete,
            Event::tool_complete("vault", json!({"count": 3})),
        ),
        (
            Hook::OnToolCall,
            Event::tool_call("vault", json!({"page": 2})),
        ),
        (
            Hook::OnTurnEnd,
            Event::new()
                .with_message("assistant", "It is a log.")
                .final_turn(),
        ),
    ];
    for (i, (hook, event)) in events.iter().enumerate() {
        f.update(*hook, event, 1_700_000_000.0 + i as f64);
    }
    let mut notes = Map::new();
    notes.insert("n".into(), json!(2));
    f.session_state.insert("research".into(), notes);
    f
}

#[test]
fn a_session_as_the_service_shows_it() {
    let view = v1::SessionView {
        id: "s-1".into(),
        mode: "default".into(),
        ended: false,
        events: 8,
        facts: session_facts(),
        running: vec!["waiter".into()],
        pending: vec![note("notes", "Later.", Priority::Low, DeliverAt::TurnStart)],
    };
    golden("session-view", &serde_json::to_string(&view).unwrap());
    // With no session state, `session_state` is left out.
    let mut bare = session_facts();
    bare.session_state.clear();
    golden(
        "session-facts-bare",
        &serde_json::to_string(&v1::Facts::from(&bare)).unwrap(),
    );
}

#[test]
fn the_execution_log_and_the_service_health() {
    use warden_store::{ExecutionRecord, ExecutionRow};
    let row = |id: i64, shadow: bool| ExecutionRow {
        id,
        created_at: "2026-11-29 05:20:00".into(),
        record: ExecutionRecord {
            user_id: "ada".into(),
            project_id: "warden".into(),
            session_id: (id == 1).then(|| "s-1".into()),
            rule_id: "guard".into(),
            trigger: "on_tool_call".into(),
            condition_result: true,
            action_executed: !shadow,
            execution_time_ms: 0.125,
            error_message: (id == 2).then(|| "no such field".into()),
            decision: Some("deny".into()),
            shadow,
            live_decision: shadow.then(|| "allow".into()),
        },
    };
    let rows = [row(1, false), row(2, false), row(3, true)];
    let written: Vec<v1::LogRow> = rows.iter().map(v1::LogRow::from).collect();
    golden("log-rows", &serde_json::to_string(&written).unwrap());
    let health = v1::Health {
        status: "ok",
        version: "0.1.0",
        generation: 3,
        rules: 42,
        sessions: 7,
        uptime_seconds: 12.5,
    };
    golden("health", &serde_json::to_string(&health).unwrap());
}

#[test]
fn an_enrichment_with_every_part() {
    use warden_knowledge::{Check, Refusal, SkipReason, Skipped, TermKind, TermMatch};
    let mut e = (*enrichment()).clone();
    e.classification.matches = vec![
        TermMatch {
            term: "borrow checker".into(),
            kind: TermKind::Glossary,
            tags: vec!["rust".into()],
        },
        TermMatch {
            term: "cargo".into(),
            kind: TermKind::Keyword,
            tags: vec!["rust".into(), "build".into()],
        },
    ];
    e.skipped = vec![
        Skipped {
            id: "a".into(),
            reason: SkipReason::NoMatchingTag,
        },
        Skipped {
            id: "b".into(),
            reason: SkipReason::NotCore,
        },
        Skipped {
            id: "c".into(),
            reason: SkipReason::NoRoom {
                needed: 900,
                remaining: 40,
            },
        },
        Skipped {
            id: "d".into(),
            reason: SkipReason::FirstBlockTooLarge { remaining: 40 },
        },
    ];
    let checks = [
        Check::MalformedPath,
        Check::AbsolutePath,
        Check::Traversal,
        Check::Symlink,
        Check::RealPathEscape,
        Check::Injection,
        Check::Missing,
        Check::Unreadable,
    ];
    e.refused = checks
        .iter()
        .enumerate()
        .map(|(i, &check)| Refusal {
            source: format!("s{i}"),
            path: format!("knowledge/s{i}.md"),
            check,
            required: i % 2 == 0,
            message: "refused".into(),
        })
        .collect();
    let written = serde_json::to_string(&v1::knowledge::Enrichment::from(&e)).unwrap();
    golden("enrichment", &written);
}

#[test]
fn what_the_command_line_prints_for_scripts() {
    let file = warden_input::SourceFile::new(
        "rules/guard.toml",
        "[rule]\nid = \"guard\"\ntriger = \"on_tool_call\"\n",
    );
    let problems = warden_load::parse_rule_file(file, &Arc::from("local")).diagnostics;
    assert!(!problems.is_empty());
    golden(
        "diagnostics",
        &serde_json::to_string(&v1::diagnostics(&problems)).unwrap(),
    );
    let saved = warden_store::SessionSummary {
        id: "s-1".into(),
        user: "ada".into(),
        project: "warden".into(),
        version: 3,
        events: 12,
        ended: false,
        created_at: "2026-11-29 05:20:00".into(),
        updated_at: 1_700_000_000.5,
        size: 2048,
    };
    golden(
        "saved-session",
        &serde_json::to_string(&v1::SavedSession::from(&saved)).unwrap(),
    );
    let copied = warden_store::CopyReport {
        state: 1,
        toggles: 2,
        overrides: 3,
        sessions: 4,
        executions: 5,
    };
    golden(
        "copied",
        &serde_json::to_string(&v1::Copied::from(&copied)).unwrap(),
    );
    let failures = ["expected `deny`, got `allow`".to_string()];
    let run = v1::TestRun {
        files: vec![v1::TestFile {
            file: std::path::Path::new("rules/guard.test.toml"),
            cases: vec![
                v1::TestCase {
                    name: "denies rm -rf",
                    passed: true,
                    failures: &[],
                },
                v1::TestCase {
                    name: "allows ls",
                    passed: false,
                    failures: &failures,
                },
            ],
        }],
    };
    golden("test-run", &serde_json::to_string(&run).unwrap());
    let watch = [
        serde_json::to_string(&v1::Watching {
            watching: vec!["rules".into()],
            rules: 3,
            diagnostics: vec![],
        })
        .unwrap(),
        serde_json::to_string(&v1::Reload {
            reloaded: false,
            generation: 2,
            rules: 3,
            diagnostics: v1::diagnostics(&problems),
            introduced: v1::diagnostics(&problems[..1]),
        })
        .unwrap(),
    ];
    golden("watch", &watch.join("\n"));
}
