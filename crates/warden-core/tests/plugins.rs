//! Plugins, settings and live control, end to end through the public API: user stories 5 and
//! 6 of the specification, hot reload, and hostile plugin folders.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::json;
use warden_core::{
    ControlError, Effect, Evaluation, Event, Hook, POLL_INTERVAL, SessionOptions, SetBy,
    SettingValue, Store, Warden,
};

/// How long a test waits for what comes within a second (a reload, a choice made elsewhere): a
/// hang detector, not a speed check. Every wait ends as soon as what it waits for comes; only
/// what never comes waits this long.
const PATIENCE: Duration = Duration::from_secs(60);

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/plugins")
}

fn research_host() -> Warden {
    Warden::builder()
        .builtin_rules()
        .plugins_dir(examples())
        .capabilities(["vault_search", "web_search"])
        .build()
        .unwrap()
}

fn messages(effects: &[Effect]) -> Vec<String> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::NotifySelf(n) => Some(n.message.to_string()),
            _ => None,
        })
        .collect()
}

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

const MANIFEST: &str =
    "[plugin]\nid = \"p\"\n[settings.limit]\ntype = \"integer\"\ndefault = 3\nmin = 1\nmax = 10\n";

fn rule(id: &str, trigger: &str, condition: &str, message: &str) -> String {
    format!(
        "[rule]\nid = \"{id}\"\ntrigger = \"{trigger}\"\n[condition]\nexpression = \"{condition}\"\n[action]\ntype = \"notify_self\"\nmessage = \"{message}\"\ndeliver_at = \"immediate\"\n"
    )
}

// User story 6, scenario 1: a plugin directory with a valid manifest is loaded at start and
// its rules registered.
#[test]
fn us6_1_a_plugin_with_a_valid_manifest_loads_and_its_rules_work() {
    let w = research_host();
    assert!(
        w.diagnostics().iter().all(|d| !d.is_error()),
        "{:?}",
        w.diagnostics()
    );
    let plugins = w.program();
    let research = plugins
        .plugins()
        .iter()
        .find(|p| p.id == "research-assistant")
        .unwrap();
    assert!(research.skipped.is_none());
    assert_eq!(
        research.rules,
        ["enough-sources", "search-first", "summarize-large-results"]
    );
    let mut s = w.session();
    let o = s.tick(
        Hook::OnQueryStart,
        Event::query("Compare three Lua sandboxes"),
    );
    assert_eq!(o.fired(), ["research-assistant/search-first"]);
}

// User story 6, scenario 2: a plugin that requires a capability the host lacks is skipped
// with a warning that says which.
#[test]
fn us6_2_a_plugin_requiring_a_missing_capability_is_skipped_with_a_warning() {
    let w = research_host();
    let program = w.program();
    let review = program
        .plugins()
        .iter()
        .find(|p| p.id == "code-review")
        .unwrap();
    assert_eq!(
        review.skipped.as_deref(),
        Some("it requires `git_diff`, which this host does not provide")
    );
    assert!(program.rules().all(|r| &*r.plugin != "code-review"));
    let warning = w
        .diagnostics()
        .into_iter()
        .find(|d| d.message().contains("code-review"))
        .unwrap();
    assert!(!warning.is_error());
    let text = warning.to_string();
    assert!(
        text.contains("code-review/manifest.toml:10:12") && text.contains("capabilities.requires"),
        "{text}"
    );
    assert!(
        text.contains("this host provides `vault_search`, `web_search`"),
        "{text}"
    );

    // With the capability declared, it loads.
    let w = Warden::builder()
        .plugins_dir(examples())
        .capabilities(["vault_search", "web_search", "git_diff"])
        .build()
        .unwrap();
    assert!(w.program().plugins().iter().all(|p| p.skipped.is_none()));
}

// User story 6, scenario 3: a plugin's settings are offered with their types, bounds and
// defaults.
#[test]
fn us6_3_plugin_settings_appear_with_their_declaration() {
    let w = research_host();
    let settings = w.setting_list("ann", "default");
    let keys: Vec<&str> = settings.iter().map(|s| s.key.as_str()).collect();
    assert!(keys.contains(&"research-assistant.max_sources"), "{keys:?}");
    assert!(keys.contains(&"builtin.token_budget_threshold"), "{keys:?}");
    let max = settings
        .iter()
        .find(|s| s.key == "research-assistant.max_sources")
        .unwrap();
    assert_eq!(
        (max.value.clone(), max.def.min, max.def.max, max.set_by),
        (
            SettingValue::Integer(10),
            Some(1.0),
            Some(50.0),
            SetBy::Default
        )
    );
    assert_eq!(
        max.def.description,
        "Maximum sources to gather before synthesizing"
    );
}

// User story 5, scenario 1: a list of all rules with their enabled status.
#[test]
fn us5_1_every_rule_is_listed_with_its_state() {
    let w = research_host();
    let list = w.rule_list("ann", "default");
    let keys: Vec<&str> = list.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(
        list.len(),
        20,
        "{keys:?}: 5 built-in, 3 research-assistant, 12 guardrails"
    );
    for r in &list {
        // The built-in behavior is off unless switched on.
        assert_eq!(r.enabled, r.key != "research-then-synthesize", "{}", r.key);
    }
    let token = list
        .iter()
        .find(|r| r.key == "token-budget-warning")
        .unwrap();
    assert!(token.core);
    assert_eq!(token.plugin, "builtin");
    assert_eq!(token.settings.len(), 1);
    assert_eq!(token.settings[0].def.name, "token_budget_threshold");
}

// User story 5, scenario 2: a parameter edited while the agent runs is used at the next
// trigger.
#[test]
fn us5_2_an_edited_parameter_is_used_on_the_next_trigger() {
    let w = research_host();
    let mut s = w.session_with(SessionOptions {
        user: Some("ann".into()),
        ..Default::default()
    });
    let at = |usage: f64| Event::new().with_token_usage(usage);
    assert_eq!(
        s.tick(Hook::OnTurnStart, at(0.85)).fired(),
        ["token-budget-warning"]
    );
    w.set_setting("ann", None, "builtin.token_budget_threshold", &json!(0.9))
        .unwrap();
    assert!(s.tick(Hook::OnTurnStart, at(0.85)).fired().is_empty());
    assert_eq!(
        s.tick(Hook::OnTurnStart, at(0.92)).fired(),
        ["token-budget-warning"]
    );
    // Only ann's: another user keeps the default.
    let mut bob = w.session_with(SessionOptions {
        user: Some("bob".into()),
        ..Default::default()
    });
    assert_eq!(
        bob.tick(Hook::OnTurnStart, at(0.85)).fired(),
        ["token-budget-warning"]
    );

    // A value outside the manifest's bounds is refused, naming the bound.
    let err = w
        .set_setting("ann", None, "research-assistant.max_sources", &json!(80))
        .unwrap_err();
    assert!(matches!(err, ControlError::InvalidValue { .. }));
    assert_eq!(
        err.to_string(),
        "cannot set `research-assistant.max_sources`: `max_sources` must be at most 50 (the manifest's max), not 80"
    );
    let err = w
        .set_setting_text("ann", None, "research-assistant.max_source", "5")
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("did you mean `research-assistant.max_sources`?"),
        "{err}"
    );

    // A template shows the setting's value too.
    w.set_setting_text("ann", None, "max_sources", "4").unwrap();
    let o = s.tick(Hook::OnQueryStart, Event::query("research Lua"));
    assert_eq!(
        messages(&o.effects),
        [
            "This is a research question: search the vault (vault_search) before the web, and keep to 4 sources."
        ]
    );
}

#[test]
fn a_project_value_wins_over_the_users_and_reset_restores_the_default() {
    let w = research_host();
    w.set_setting("ann", None, "max_sources", &json!(20))
        .unwrap();
    w.set_setting("ann", Some("thesis"), "max_sources", &json!(40))
        .unwrap();
    let value = |project: &str| {
        w.setting_list("ann", project)
            .into_iter()
            .find(|s| s.key == "research-assistant.max_sources")
            .map(|s| (s.value, s.set_by))
            .unwrap()
    };
    assert_eq!(value("thesis"), (SettingValue::Integer(40), SetBy::Project));
    assert_eq!(value("other"), (SettingValue::Integer(20), SetBy::User));
    w.reset_setting("ann", Some("thesis"), "max_sources")
        .unwrap();
    assert_eq!(value("thesis"), (SettingValue::Integer(20), SetBy::User));
    w.reset_setting("ann", None, "max_sources").unwrap();
    assert_eq!(value("thesis"), (SettingValue::Integer(10), SetBy::Default));
}

// User story 5, scenario 3: a core rule cannot be disabled, and says why; other rules can,
// effective on the next tick.
#[test]
fn us5_3_core_rules_refuse_and_others_switch_off_at_the_next_tick() {
    let w = research_host();
    let err = w
        .set_rule_enabled("ann", "token-budget-warning", false)
        .unwrap_err();
    assert!(matches!(err, ControlError::CoreRule { .. }));
    assert!(
        err.to_string()
            .contains("is a core rule and cannot be switched off: it is one of Warden's built-in rules, marked `core = true`"),
        "{err}"
    );

    let mut s = w.session_with(SessionOptions {
        user: Some("ann".into()),
        explain: true,
        ..Default::default()
    });
    let found = Event::tool_complete("vault_search", json!({"count": 9}));
    assert!(
        s.tick(Hook::OnToolComplete, found.clone())
            .fired()
            .contains(&"large-result-summary")
    );
    let info = w
        .set_rule_enabled("ann", "large-result-summary", false)
        .unwrap();
    assert!(!info.enabled && info.enabled_by_default);
    let o = s.tick(Hook::OnToolComplete, found.clone());
    assert!(!o.fired().contains(&"large-result-summary"));
    assert!(
        o.trace()
            .any(|(r, e)| r == "large-result-summary" && *e == Evaluation::Disabled)
    );
    w.reset_rule("ann", "large-result-summary").unwrap();
    assert!(
        s.tick(Hook::OnToolComplete, found)
            .fired()
            .contains(&"large-result-summary")
    );

    let err = w
        .set_rule_enabled("ann", "large-result", false)
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("did you mean `large-result-summary`?"),
        "{err}"
    );
}

#[test]
fn a_rule_off_by_default_can_be_switched_on_for_one_user() {
    let dir = tempfile::tempdir().unwrap();
    write(
        &dir.path().join("quiet.toml"),
        &rule("quiet", "on_turn_start", "true", "hello").replace(
            "trigger = \"on_turn_start\"",
            "trigger = \"on_turn_start\"\nenabled = false",
        ),
    );
    let w = Warden::builder().rules_dir(dir.path()).build().unwrap();
    let tick = |user: &str| {
        w.session_with(SessionOptions {
            user: Some(user.into()),
            ..Default::default()
        })
        .tick(Hook::OnTurnStart, Event::new())
        .fired()
        .len()
    };
    assert_eq!(tick("ann"), 0);
    w.set_rule_enabled("ann", "quiet", true).unwrap();
    assert_eq!((tick("ann"), tick("bob")), (1, 0));
}

// SC-4: a change made by another process (the CLI, on the same database) reaches a running
// agent without a restart, within the poll interval.
#[test]
fn choices_made_by_another_process_reach_a_running_session() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("warden.db");
    let agent = Warden::builder()
        .builtin_rules()
        .store(Store::open(&db).unwrap())
        .build()
        .unwrap();
    let cli = Warden::builder()
        .builtin_rules()
        .store(Store::open(&db).unwrap())
        .build()
        .unwrap();
    let mut s = agent.session();
    let found = || Event::tool_complete("vault_search", json!({"count": 9}));
    assert_eq!(s.tick(Hook::OnToolComplete, found()).fired().len(), 1);
    let changed = Instant::now();
    cli.set_rule_enabled("default", "large-result-summary", false)
        .unwrap();
    // The agent polls the database at most every POLL_INTERVAL; wait for it (a liveness
    // bound, not a timing claim).
    while !s.tick(Hook::OnToolComplete, found()).fired().is_empty() {
        assert!(
            changed.elapsed() < PATIENCE,
            "the change never reached the session"
        );
        std::thread::sleep(POLL_INTERVAL / 5);
    }
}

/// Several settings at once: every value is checked first, and one that does not fit (or a
/// name the plugin does not declare) leaves all of them as they were.
#[test]
fn several_settings_are_set_together_or_not_at_all() {
    let w = research_host();
    let value = |name: &str| {
        w.setting_list("ann", "default")
            .into_iter()
            .find(|s| s.key == format!("research-assistant.{name}"))
            .unwrap()
            .value
            .to_string()
    };
    let before = value("max_sources");
    let err = w
        .set_settings(
            "ann",
            None,
            "research-assistant",
            &[
                ("max_sources".into(), json!(5)),
                ("max_sources_typo".into(), json!(1)),
                ("auto_summarize".into(), json!("yes")),
            ],
        )
        .unwrap_err();
    let ControlError::Settings { problems, .. } = &err else {
        panic!("{err}");
    };
    let named: Vec<&str> = problems.iter().map(|p| p.setting.as_str()).collect();
    assert_eq!(named, ["max_sources_typo", "auto_summarize"], "{err}");
    assert!(
        err.to_string().starts_with("2 settings do not fit"),
        "{err}"
    );
    assert_eq!(value("max_sources"), before, "nothing was written");

    let after = w
        .set_settings(
            "ann",
            None,
            "research-assistant",
            &[
                ("max_sources".into(), json!(5)),
                ("auto_summarize".into(), json!(false)),
            ],
        )
        .unwrap();
    assert!(
        after
            .iter()
            .any(|s| s.def.name == "max_sources" && s.value.to_string() == "5")
    );
    assert_eq!(value("auto_summarize"), "false");
    // `null` forgets the user's value.
    w.set_settings(
        "ann",
        None,
        "research-assistant",
        &[("max_sources".into(), json!(null))],
    )
    .unwrap();
    assert_eq!(value("max_sources"), before);
}

#[test]
fn settings_reach_lua_scripts() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = dir.path().join("p");
    write(&plugin.join("manifest.toml"), MANIFEST);
    write(
        &plugin.join("rules/scripted.toml"),
        "[rule]\nid = \"scripted\"\ntrigger = \"on_turn_start\"\n[condition]\nscript = \"scripts/limit.lua\"\n",
    );
    write(
        &plugin.join("scripts/limit.lua"),
        "notify('limit is ' .. settings.limit)\nreturn settings.limit > 2",
    );
    let w = Warden::builder().plugins_dir(dir.path()).build().unwrap();
    assert!(w.diagnostics().is_empty(), "{:?}", w.diagnostics());
    let mut s = w.session();
    let o = s.tick(Hook::OnTurnStart, Event::new());
    assert_eq!(messages(&o.effects), ["limit is 3"]);
    assert_eq!(o.fired(), ["p/scripted"]);
    w.set_setting("default", None, "p.limit", &json!(2))
        .unwrap();
    let o = s.tick(Hook::OnTurnStart, Event::new());
    assert_eq!(messages(&o.effects), ["limit is 2"]);
    assert!(o.fired().is_empty());
}

#[test]
fn setting_mistakes_in_rules_are_load_errors_with_a_hint() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = dir.path().join("plugins/p");
    write(&plugin.join("manifest.toml"), MANIFEST);
    write(
        &plugin.join("rules/typo.toml"),
        &rule(
            "typo",
            "on_turn_start",
            "context.turn.number > settings.limt",
            "x",
        ),
    );
    write(
        &plugin.join("rules/wrong-type.toml"),
        &rule("wrong-type", "on_turn_start", "settings.limit", "x"),
    );
    let local = dir.path().join("rules");
    write(
        &local.join("loose.toml"),
        &rule("loose", "on_turn_start", "settings.limit > 1", "x"),
    );
    let w = Warden::builder()
        .plugins_dir(dir.path().join("plugins"))
        .rules_dir(&local)
        .build()
        .unwrap();
    let d: Vec<String> = w.diagnostics().iter().map(ToString::to_string).collect();
    assert_eq!(d.len(), 3, "{d:#?}");
    assert!(
        d.iter()
            .any(|d| d.contains("loose.toml") && d.contains("not part of a plugin")),
        "{d:#?}"
    );
    assert!(
        d.iter()
            .any(|d| d.contains("typo.toml") && d.contains("did you mean `settings.limit`?")),
        "{d:#?}"
    );
    assert!(
        d.iter()
            .any(|d| d.contains("wrong-type.toml") && d.contains("true or false")),
        "{d:#?}"
    );
}

#[test]
fn rule_ids_are_unique_within_a_plugin_and_addressed_by_plugin_across_them() {
    let dir = tempfile::tempdir().unwrap();
    for p in ["alpha", "beta"] {
        write(
            &dir.path().join(p).join("manifest.toml"),
            &format!("[plugin]\nid = \"{p}\"\n"),
        );
        write(
            &dir.path().join(p).join("rules/hello.toml"),
            &rule("hello", "on_turn_start", "true", p),
        );
    }
    write(
        &dir.path().join("beta/rules/again.toml"),
        &rule("hello", "on_turn_start", "true", "again"),
    );
    let w = Warden::builder().plugins_dir(dir.path()).build().unwrap();
    let d: Vec<String> = w.diagnostics().iter().map(ToString::to_string).collect();
    assert_eq!(d.len(), 1, "{d:#?}");
    assert!(
        d[0].contains("again.toml") && d[0].contains("unique within a plugin"),
        "{}",
        d[0]
    );
    let o = w.session().tick(Hook::OnTurnStart, Event::new());
    assert_eq!(o.fired(), ["alpha/hello", "beta/hello"]);
    let err = w.set_rule_enabled("ann", "hello", false).unwrap_err();
    assert!(
        err.to_string().contains("`alpha/hello` or `beta/hello`"),
        "{err}"
    );
    w.set_rule_enabled("ann", "beta/hello", false).unwrap();
}

#[cfg(unix)]
#[test]
fn hostile_plugin_folders_are_refused() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    write(
        &outside.path().join("evil.toml"),
        &rule("evil", "on_turn_start", "true", "pwned"),
    );
    write(
        &outside.path().join("manifest.toml"),
        "[plugin]\nid = \"evil\"\n",
    );
    // A rule file that is a link out of the plugin.
    let p = dir.path().join("p");
    write(&p.join("manifest.toml"), "[plugin]\nid = \"p\"\n");
    fs::create_dir_all(p.join("rules")).unwrap();
    symlink(outside.path().join("evil.toml"), p.join("rules/evil.toml")).unwrap();
    // A rules folder that is a link out of the plugin.
    let q = dir.path().join("q");
    write(&q.join("manifest.toml"), "[plugin]\nid = \"q\"\n");
    symlink(outside.path(), q.join("rules")).unwrap();
    // A manifest that is a link out of the plugin.
    let r = dir.path().join("r");
    fs::create_dir_all(&r).unwrap();
    symlink(
        outside.path().join("manifest.toml"),
        r.join("manifest.toml"),
    )
    .unwrap();
    // Patterns that try to leave.
    let s = dir.path().join("s");
    write(
        &s.join("manifest.toml"),
        "[plugin]\nid = \"s\"\n[rules]\ninclude = [\"../p/rules/*.toml\", \"/etc/*.toml\"]\n",
    );
    let w = Warden::builder().plugins_dir(dir.path()).build().unwrap();
    assert!(
        w.program().rules().next().is_none(),
        "nothing from outside loads"
    );
    let d: Vec<String> = w.diagnostics().iter().map(ToString::to_string).collect();
    assert!(
        d.iter()
            .any(|d| d.contains("p/rules/evil.toml") && d.contains("outside")),
        "{d:#?}"
    );
    assert!(
        d.iter()
            .any(|d| d.contains("q/rules/evil.toml") && d.contains("outside")),
        "{d:#?}"
    );
    assert!(
        d.iter()
            .any(|d| d.contains("r/manifest.toml") && d.contains("outside")),
        "{d:#?}"
    );
    assert!(
        d.iter().any(|d| d.contains("leaves the plugin folder")),
        "{d:#?}"
    );
    assert!(d.iter().any(|d| d.contains("is absolute")), "{d:#?}");
    assert!(d.iter().all(|d| !d.contains("pwned")));
}

#[test]
fn a_stored_value_that_no_longer_fits_falls_back_to_the_default() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("w.db");
    let plugin = dir.path().join("plugins/p");
    write(&plugin.join("manifest.toml"), MANIFEST);
    write(
        &plugin.join("rules/at-limit.toml"),
        &rule(
            "at-limit",
            "on_turn_start",
            "context.turn.number >= settings.limit",
            "limit {{ settings.limit }}",
        ),
    );
    let build = || {
        Warden::builder()
            .plugins_dir(dir.path().join("plugins"))
            .store(Store::open(&db).unwrap())
            .build()
            .unwrap()
    };
    build()
        .set_setting("ann", None, "p.limit", &json!(9))
        .unwrap();
    // The operator narrows the setting; ann's 9 no longer fits.
    write(
        &plugin.join("manifest.toml"),
        &MANIFEST.replace("max = 10", "max = 5"),
    );
    let w = build();
    let info = w
        .setting_list("ann", "default")
        .into_iter()
        .find(|s| s.key == "p.limit")
        .unwrap();
    assert_eq!(
        (info.value, info.set_by),
        (SettingValue::Integer(3), SetBy::Default)
    );
}

fn wait_for_reload(rx: &mpsc::Receiver<warden_core::Reload>) -> warden_core::Reload {
    rx.recv_timeout(PATIENCE)
        .expect("no reload after the change")
}

// SC-5 and hot reload: files dropped in or edited while a session runs take effect without
// a restart; a broken edit keeps the last good rules and says what is wrong.
#[test]
fn watched_files_reload_and_a_broken_edit_keeps_the_last_good_rules() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules");
    write(
        &rules.join("a.toml"),
        &rule("a", "on_turn_start", "true", "a one"),
    );
    let w = Warden::builder().rules_dir(&rules).build().unwrap();
    let (tx, rx) = mpsc::channel();
    let _watch = w
        .watch_with(move |r| {
            let _ = tx.send(r.clone());
        })
        .unwrap();
    let mut s = w.session();
    let tick =
        |s: &mut warden_core::Session| messages(&s.tick(Hook::OnTurnStart, Event::new()).effects);
    assert_eq!(tick(&mut s), ["a one"]);

    // A new file dropped in.
    write(
        &rules.join("b.toml"),
        &rule("b", "on_turn_start", "true", "b one"),
    );
    assert!(wait_for_reload(&rx).applied);
    assert_eq!(tick(&mut s), ["a one", "b one"]);

    // A broken edit: the previous rules stay in force, the error names file and line.
    fs::write(
        rules.join("a.toml"),
        "[rule]\nid = \"a\"\ntrigger = \"on_turn_strat\"\n",
    )
    .unwrap();
    let report = wait_for_reload(&rx);
    assert!(!report.applied);
    let text: Vec<String> = report.introduced.iter().map(ToString::to_string).collect();
    assert!(
        text.iter()
            .any(|t| t.contains("a.toml:3:11") && t.contains("did you mean `on_turn_start`?")),
        "{text:#?}"
    );
    assert_eq!(tick(&mut s), ["a one", "b one"]);

    // Fixed: the edit applies.
    write(
        &rules.join("a.toml"),
        &rule("a", "on_turn_start", "true", "a two"),
    );
    loop {
        // Editors may save in several steps; wait for the reload that applied.
        if wait_for_reload(&rx).applied && tick(&mut s) == ["a two", "b one"] {
            break;
        }
    }
}

// Issue 17: a file whose writer paused halfway is not applied half-written, even when the half
// parses; the reload waits for the writer to close it (Linux says when; elsewhere the watcher
// waits for quiet alone, so this is checked where the close is reported).
#[cfg(target_os = "linux")]
#[test]
fn a_file_still_being_written_is_not_applied_half_written() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules");
    write(
        &rules.join("a.toml"),
        &rule("a", "on_turn_start", "true", "a"),
    );
    let w = Warden::builder().rules_dir(&rules).build().unwrap();
    let (tx, rx) = mpsc::channel();
    let seen = w.clone();
    let _watch = w
        .watch_with(move |r| {
            let priorities: Vec<i64> = seen.program().rules().map(|d| d.priority).collect();
            let _ = tx.send((r.applied, priorities));
        })
        .unwrap();
    // Tables may come in any order, so the first half is a whole rule of priority 1, and the
    // second makes it 100.
    let whole = "[condition]\nexpression = \"true\"\n[action]\ntype = \"notify_self\"\nmessage = \"b\"\n\
         [rule]\nid = \"b\"\ntrigger = \"on_turn_start\"\npriority = 100\n";
    let (first, rest) = whole.split_at(whole.find("00\n").unwrap());
    let opened = Instant::now();
    let mut file = fs::File::create(rules.join("b.toml")).unwrap();
    file.write_all(first.as_bytes()).unwrap();
    file.flush().unwrap();
    // The writer pauses four times the watcher's quiet period (`SETTLE`, 100 ms), when a reload
    // that waited for quiet alone would read the half, and well within the longest a reload
    // waits for a writer (`MAX_SETTLE`, 2 s).
    std::thread::sleep(Duration::from_millis(400));
    file.write_all(rest.as_bytes()).unwrap();
    drop(file);
    // The watcher stops waiting for a writer that holds a file open `MAX_SETTLE`, counted from
    // when it hears of the write (which a loaded machine delays too): where this one held it
    // open half that, the machine was loaded enough that the half may rightly be applied.
    let held = opened.elapsed();
    let deadline = Instant::now() + PATIENCE;
    loop {
        let (applied, priorities) = rx
            .recv_timeout(PATIENCE)
            .expect("no reload after the change");
        assert!(
            !priorities.contains(&1) || held >= Duration::from_secs(1),
            "the half-written file was applied: {priorities:?} (held open {held:?})"
        );
        if applied && priorities.contains(&100) {
            break;
        }
        assert!(Instant::now() < deadline, "the whole file never applied");
    }
}

#[test]
fn a_plugin_folder_dropped_in_goes_live() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    fs::create_dir_all(&plugins).unwrap();
    let w = Warden::builder().plugins_dir(&plugins).build().unwrap();
    let (tx, rx) = mpsc::channel();
    let _watch = w
        .watch_with(move |r| {
            let _ = tx.send(r.clone());
        })
        .unwrap();
    // Written elsewhere and moved in, as a copy tool would.
    let staging = dir.path().join("staging/p");
    write(&staging.join("manifest.toml"), MANIFEST);
    write(
        &staging.join("rules/hi.toml"),
        &rule("hi", "on_turn_start", "true", "limit {{ settings.limit }}"),
    );
    fs::rename(&staging, plugins.join("p")).unwrap();
    let deadline = Instant::now() + PATIENCE;
    loop {
        let r = wait_for_reload(&rx);
        let fired = w.session().tick(Hook::OnTurnStart, Event::new());
        if r.applied && messages(&fired.effects) == ["limit 3"] {
            break;
        }
        assert!(Instant::now() < deadline, "the plugin never went live");
    }
}
