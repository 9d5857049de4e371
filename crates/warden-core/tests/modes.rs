//! Modes: which rule sets are active, chosen per event by the first mode whose condition
//! holds; changes are reported, tick `on_mode_change`, and can be held back by `min_turns`.

use std::fs;

use warden_core::{Evaluation, Event, Hook, SessionOptions, Warden};

fn write(dir: &std::path::Path, name: &str, text: &str) {
    fs::write(dir.join(name), text).unwrap();
}

fn rule(id: &str, trigger: &str, tags: &str, extra: &str) -> String {
    format!(
        "[rule]\nid = \"{id}\"\ntrigger = \"{trigger}\"\ntags = [{tags}]\n{extra}condition = \"true\"\n[action]\ntype = \"log\"\nmessage = \"{id} in {{{{ context.mode }}}}\"\n"
    )
}

/// Rules: `core-only` (core), `tagged` (tag core), `plain`; and the context-window modes.
fn setup() -> (Warden, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "core.toml",
        &rule("core-only", "on_turn_start", "", "core = true\n"),
    );
    write(
        dir.path(),
        "tagged.toml",
        &rule("tagged", "on_turn_start", "\"core\"", ""),
    );
    write(
        dir.path(),
        "plain.toml",
        &rule("plain", "on_turn_start", "", ""),
    );
    write(
        dir.path(),
        "changed.toml",
        "[rule]\nid = \"changed\"\ntrigger = \"on_mode_change\"\ncore = true\ncondition = \"true\"\n[action]\ntype = \"log\"\nmessage = \"{{ event.data.from }} -> {{ event.data.to }} ({{ context.mode }})\"\n",
    );
    let w = Warden::builder()
        .rules_dir(dir.path())
        .builtin_modes("context-window")
        .build()
        .unwrap();
    // `unavailable` activates the `builtin` plugin, which this setup does not load: a warning.
    assert!(
        w.diagnostics().iter().all(|d| !d.is_error()),
        "{:#?}",
        w.diagnostics()
    );
    (w, dir)
}

fn at(window: u64) -> Event {
    Event::new().with_context_window(window)
}

fn logs(o: &warden_core::Outcome) -> Vec<String> {
    o.effects
        .iter()
        .filter_map(|e| match e {
            warden_core::Effect::Log { message, .. } => Some(message.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn the_first_mode_whose_condition_holds_chooses_the_rules() {
    let (w, _d) = setup();
    let mut s = w.session_with(SessionOptions {
        explain: true,
        ..Default::default()
    });
    let o = s.tick(Hook::OnTurnStart, at(200_000));
    assert_eq!(&*o.mode, "full");
    assert_eq!(o.fired(), ["core-only", "plain", "tagged"]);
    let change = o.mode_change.as_ref().unwrap();
    assert_eq!((&*change.from, &*change.to), ("default", "full"));
    assert_eq!(logs(&change.outcome), ["default -> full (full)"]);

    let mut s = w.session();
    let o = s.tick(Hook::OnTurnStart, at(64_000));
    assert_eq!(&*o.mode, "reduced");
    assert_eq!(o.fired(), ["core-only", "tagged"]);
    assert_eq!(logs(&o), ["core-only in reduced", "tagged in reduced"]);

    let mut s = w.session_with(SessionOptions {
        explain: true,
        ..Default::default()
    });
    let o = s.tick(Hook::OnTurnStart, at(16_000));
    assert_eq!(&*o.mode, "unavailable");
    assert_eq!(
        o.fired(),
        ["core-only"],
        "core rules are active in every mode"
    );
    assert!(
        o.trace()
            .any(|(r, e)| r == "plain" && *e == Evaluation::Inactive("unavailable".into()))
    );
}

#[test]
fn a_mode_stays_for_min_turns_before_switching_back() {
    let (w, _d) = setup();
    let mut s = w.session();
    let modes: Vec<(String, bool)> = [200_000, 64_000, 200_000, 200_000, 200_000]
        .into_iter()
        .enumerate()
        .map(|(i, window)| {
            let o = s.tick(Hook::OnTurnStart, at(window).with_turn(i as u32 + 1));
            (o.mode.to_string(), o.mode_change.is_some())
        })
        .collect();
    assert_eq!(
        modes,
        [
            ("full".to_string(), true),
            ("reduced".to_string(), true),
            ("reduced".to_string(), false),
            ("full".to_string(), true),
            ("full".to_string(), false),
        ],
        "reduced has min_turns = 2: entered at turn 2, it holds through turn 3"
    );
}

#[test]
fn modes_by_query_and_context_mode_in_conditions() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "research.toml",
        &rule("research-hint", "on_turn_start", "\"research\"", ""),
    );
    write(
        dir.path(),
        "coding.toml",
        &rule("coding-hint", "on_turn_start", "\"coding\"", ""),
    );
    write(
        dir.path(),
        "mode-aware.toml",
        "[rule]\nid = \"mode-aware\"\ntrigger = \"on_turn_start\"\ntags = [\"coding\"]\ncondition = \"context.mode == 'coding'\"\n[action]\ntype = \"log\"\nmessage = \"coding!\"\n",
    );
    let w = Warden::builder()
        .rules_dir(dir.path())
        .builtin_modes("research-or-coding")
        .build()
        .unwrap();
    let mut s = w.session();
    s.tick(Hook::OnQueryStart, Event::query("Research Lua sandboxes"));
    assert_eq!(
        s.tick(Hook::OnTurnStart, Event::new()).fired(),
        ["research-hint"]
    );
    let mut s = w.session();
    s.tick(Hook::OnQueryStart, Event::query("Fix the failing build"));
    assert_eq!(
        s.tick(Hook::OnTurnStart, Event::new()).fired(),
        ["coding-hint", "mode-aware"]
    );
}

#[test]
fn mistakes_in_modes_files_name_their_field() {
    for (text, want) in [
        ("[[mode]]\nid = \"a\"\n", "the mode has no `rules`"),
        (
            "[[mode]]\nid = \"a\"\nrules = \"all\"\nwhen = \"context.turn.nubmer > 1\"\n",
            "did you mean `context.turn.number`?",
        ),
        (
            "[[mode]]\nid = \"a\"\nrules = \"all\"\nwhen = \"result.count > 1\"\n",
            "modes are checked at every hook",
        ),
        (
            "[[mode]]\nid = \"a\"\nrules = \"all\"\n[[mode]]\nid = \"a\"\nrules = \"all\"\n",
            "duplicate mode `a`",
        ),
        (
            "[[mode]]\nid = \"a\"\nrules = { tag = [\"x\"] }\n",
            "did you mean `tags`?",
        ),
        (
            "[[mode]]\nid = \"A B\"\nrules = \"all\"\n",
            "not kebab-case",
        ),
        (
            "[[mode]]\nid = \"default\"\nrules = \"all\"\n",
            "the mode id `default` is reserved",
        ),
        (
            "[[mode]]\nid = \"a\"\nrules = { tags = [\"x\", 3] }\n",
            "each item of `tags` must be a string; item 2 is an integer",
        ),
        (
            "[[mode]]\nid = \"a\"\nrules = \"all\"\nmin_turn = 2\n",
            "did you mean `min_turns`?",
        ),
        ("title = \"x\"\n", "no [[mode]]"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "modes.toml", text);
        let w = Warden::builder()
            .builtin_rules()
            .modes_file(dir.path().join("modes.toml"))
            .build()
            .unwrap();
        let d: Vec<String> = w.diagnostics().iter().map(ToString::to_string).collect();
        assert!(
            d.iter()
                .any(|d| d.contains(want) && d.contains("modes.toml")),
            "{text}\nwant {want}\n{d:#?}"
        );
    }
    let w = Warden::builder().builtin_modes("nope").build().unwrap();
    assert!(
        w.diagnostics()[0]
            .to_string()
            .contains("the built-in modes are `context-window`, `research-or-coding`")
    );
}

#[test]
fn a_mode_that_activates_nothing_is_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "modes.toml",
        "[[mode]]\nid = \"a\"\nrules = { plugins = [\"no-such-plugin\"] }\n",
    );
    let w = Warden::builder()
        .builtin_rules()
        .modes_file(dir.path().join("modes.toml"))
        .build()
        .unwrap();
    let d = w.diagnostics();
    assert_eq!(d.len(), 1);
    assert!(!d[0].is_error());
    assert!(d[0].message().contains("activates no rule"));
}

#[test]
fn an_agent_loop_cannot_send_on_mode_change() {
    let (w, _d) = setup();
    let o = w.session().tick(Hook::OnModeChange, Event::new());
    assert!(
        o.errors[0].error.contains("raised by Warden itself"),
        "{:?}",
        o.errors
    );
}
