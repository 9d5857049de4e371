//! A program compiled on demand (`compile_on_demand`) is the program compiled eagerly: the
//! same rules, plugins and folders, compiled when a hook first ticks them.

use warden_core::{Event, Hook, Warden};

/// A rule folder with a rule on each of three hooks; the one on `on_turn_end` does not
/// compile (its message reads a field that does not exist).
fn rules() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let rule = |id: &str, trigger: &str, condition: &str, message: &str| {
        let text = format!(
            "[rule]\nid = \"{id}\"\ntrigger = \"{trigger}\"\n\n[condition]\nexpression = \"{condition}\"\n\n\
             [action]\ntype = \"notify_self\"\nmessage = \"{message}\"\ndeliver_at = \"immediate\"\n"
        );
        std::fs::write(dir.path().join(format!("{id}.toml")), text).unwrap();
    };
    rule(
        "shell-call",
        "on_tool_call",
        "tool.name == 'shell'",
        "shell at turn {{ context.turn.number }}",
    );
    rule("turn-start", "on_turn_start", "true", "a turn starts");
    rule(
        "turn-end",
        "on_turn_end",
        "true",
        "{{ context.turn.nubmer }}",
    );
    dir
}

#[test]
fn a_program_compiled_on_demand_compiles_the_rules_of_the_hooks_it_ticks() {
    let dir = rules();
    let eager = Warden::builder().rules_dir(dir.path()).build().unwrap();
    let lazy = Warden::builder()
        .rules_dir(dir.path())
        .compile_on_demand(true)
        .build()
        .unwrap();
    let program = lazy.program();
    let compiled = || {
        program
            .rules
            .iter()
            .filter(|r| r.compiled_body().is_some())
            .map(|r| &*r.key)
            .collect::<Vec<_>>()
    };
    assert!(compiled().is_empty(), "nothing is compiled at build");
    let mut session = lazy.session();
    let o = session.tick(
        Hook::OnToolCall,
        Event::tool_call("shell", serde_json::json!({"command": "ls"})),
    );
    assert_eq!(o.injected().len(), 1, "{:?}", o.errors);
    assert_eq!(&*o.injected().get(0).unwrap().message, "shell at turn 0");
    assert_eq!(compiled(), ["shell-call"], "only the ticked hook's rule");
    // The broken rule's problem is found when every rule is compiled to report them all,
    // as a program compiled at once reports it.
    let messages = |w: &Warden| {
        w.diagnostics()
            .iter()
            .map(|d| (d.path().to_path_buf(), d.line(), d.message().to_string()))
            .collect::<Vec<_>>()
    };
    assert_eq!(messages(&lazy), messages(&eager));
    assert!(
        messages(&lazy)[0].2.contains("nubmer"),
        "{:?}",
        messages(&lazy)
    );
    assert_eq!(
        program.rule_keys().collect::<Vec<_>>(),
        eager.program().rule_keys().collect::<Vec<_>>()
    );
    // It never fires; the rules of other hooks do.
    let o = session.tick(Hook::OnTurnEnd, Event::new());
    assert!(o.injected().is_empty() && o.errors.is_empty(), "{o:?}");
    let o = session.tick(Hook::OnTurnStart, Event::new());
    assert_eq!(o.injected().len(), 1);
}

/// The same rules as a plugin: its listing names the rules that compile, and the folders
/// to watch are the same, whichever way the program compiles.
#[test]
fn a_plugin_is_listed_alike_whichever_way_its_rules_compile() {
    let rules = rules();
    let plugins = tempfile::tempdir().unwrap();
    let dir = plugins.path().join("spread");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(
        dir.join("manifest.toml"),
        "[plugin]\nid = \"spread\"\nname = \"Spread\"\nversion = \"0.1.0\"\ndescription = \"rules on three hooks\"\n\n[rules]\ninclude = [\"*.toml\"]\n",
    )
    .unwrap();
    for f in std::fs::read_dir(rules.path()).unwrap() {
        let f = f.unwrap();
        std::fs::copy(f.path(), dir.join(f.file_name())).unwrap();
    }
    let build = |on_demand: bool| {
        Warden::builder()
            .plugins_dir(plugins.path())
            .compile_on_demand(on_demand)
            .build()
            .unwrap()
    };
    let (eager, lazy) = (build(false), build(true));
    let listed = |w: &Warden| format!("{:?}", w.program().plugins());
    assert_eq!(listed(&lazy), listed(&eager));
    assert_eq!(
        lazy.program().plugins()[0].rules,
        ["shell-call", "turn-start"]
    );
    assert_eq!(lazy.program().folders(), eager.program().folders());
}

#[test]
fn a_strict_build_compiled_on_demand_fails_on_a_rule_that_does_not_compile() {
    let dir = rules();
    let err = Warden::builder()
        .rules_dir(dir.path())
        .compile_on_demand(true)
        .strict(true)
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("nubmer"), "{err}");
}
