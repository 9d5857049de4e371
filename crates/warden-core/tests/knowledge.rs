//! Knowledge enrichment wired into sessions: at `on_query_start`, through the
//! `enrich_context` action, behind the health gate, and reloaded when its files change.

use std::fs;
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use warden_core::{Event, Hook, Warden};

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

/// A small project: two notes, a classification, a sources file.
fn project(enabled: bool) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    write(
        &p.join("notes/glossary.md"),
        "# Glossary\n\nA hook is a point where the agent loop reports to Warden.\n",
    );
    write(
        &p.join("notes/lua.md"),
        "# Lua\n\nScripts run in a sandbox with a time limit.\n",
    );
    write(
        &p.join("classification.toml"),
        "[keywords]\nscripts = [\"lua\", \"script\"]\n",
    );
    write(
        &p.join("sources.toml"),
        &format!(
            "[knowledge]\nenabled = {enabled}\nclassification = \"classification.toml\"\n[knowledge.health]\nrequired_sources = 1\nmin_tokens = 10\n\n[[source]]\nid = \"glossary\"\npath = \"notes/glossary.md\"\ntags = [\"core\"]\nrequired = true\n\n[[source]]\nid = \"lua\"\npath = \"notes/lua.md\"\ntags = [\"scripts\"]\n"
        ),
    );
    dir
}

fn warden(dir: &Path, rules: Option<&Path>) -> Warden {
    let mut b = Warden::builder().knowledge(dir.join("sources.toml"), dir);
    if let Some(r) = rules {
        b = b.rules_dir(r);
    }
    b.build().unwrap()
}

const ENRICH_RULE: &str = "[rule]\nid = \"enrich\"\ntrigger = \"on_turn_start\"\ncondition = \"true\"\n[action]\ntype = \"enrich_context\"\nquery = \"{{ context.query }} lua\"\n";

#[test]
fn each_query_is_enriched_at_query_start_by_its_context_window() {
    let dir = project(true);
    let w = warden(dir.path(), None);
    assert!(w.diagnostics().is_empty(), "{:?}", w.diagnostics());
    let mut s = w.session();
    let o = s.tick(
        Hook::OnQueryStart,
        Event::query("Can a Lua script loop forever?").with_context_window(200_000),
    );
    let e = o.enrichment.expect("enriched");
    assert_eq!(
        e.selected_ids(),
        ["glossary", "lua"],
        "one matching tag each: by id"
    );
    let prompt = e.integrate("You are a careful assistant.");
    assert!(prompt.starts_with("You are a careful assistant.\n\n<reference_material>"));
    assert!(prompt.contains("<!-- source: lua tags: scripts -->\n# Lua"));
    // A small window: no section, said so.
    let o = s.tick(
        Hook::OnQueryStart,
        Event::query("Can a Lua script loop forever?").with_context_window(8_000),
    );
    let e = o.enrichment.expect("reported");
    assert_eq!(e.section, None);
    assert_eq!(e.mode.to_string(), "unavailable");
    // Other hooks are not enriched.
    assert!(s.tick(Hook::OnTurnStart, Event::new()).enrichment.is_none());
}

#[test]
fn a_rule_can_enrich_with_its_own_query() {
    let dir = project(true);
    let rules = tempfile::tempdir().unwrap();
    write(&rules.path().join("enrich.toml"), ENRICH_RULE);
    let w = Warden::builder()
        .knowledge(dir.path().join("sources.toml"), dir.path())
        .knowledge_at_query_start(false)
        .rules_dir(rules.path())
        .build()
        .unwrap();
    let mut s = w.session();
    let o = s.tick(
        Hook::OnQueryStart,
        Event::query("what is a hook").with_context_window(200_000),
    );
    assert!(
        o.enrichment.is_none(),
        "at_query_start is off: only rules enrich"
    );
    let o = s.tick(Hook::OnTurnStart, Event::new());
    assert_eq!(o.fired(), ["enrich"]);
    let e = o.enrichment.unwrap();
    assert_eq!(e.classification.tags, ["core", "scripts"]);
    assert_eq!(
        e.selected_ids(),
        ["glossary", "lua"],
        "one matching tag each: by id"
    );
}

#[test]
fn without_registered_knowledge_the_action_fails_with_the_reason() {
    let rules = tempfile::tempdir().unwrap();
    write(&rules.path().join("enrich.toml"), ENRICH_RULE);
    // Not configured at all.
    let w = Warden::builder().rules_dir(rules.path()).build().unwrap();
    let o = w.session().tick(Hook::OnTurnStart, Event::new());
    assert!(
        o.errors[0]
            .error
            .contains("knowledge enrichment is not configured"),
        "{:?}",
        o.errors
    );
    // Configured but switched off: the health gate says why, at load and at the action.
    let dir = project(false);
    let w = warden(dir.path(), Some(rules.path()));
    let d: Vec<String> = w.diagnostics().iter().map(ToString::to_string).collect();
    assert!(
        d.iter()
            .any(|d| d.contains("knowledge enrichment is not registered")),
        "{d:#?}"
    );
    let mut s = w.session();
    let o = s.tick(
        Hook::OnQueryStart,
        Event::query("lua").with_context_window(200_000),
    );
    assert!(o.enrichment.is_none());
    let o = s.tick(Hook::OnTurnStart, Event::new());
    assert!(
        o.errors[0].error.contains("not registered"),
        "{:?}",
        o.errors
    );
}

#[test]
fn a_broken_sources_file_is_a_diagnostic_with_line_and_field() {
    let dir = project(true);
    write(
        &dir.path().join("sources.toml"),
        "[knowledge]\nenabled = true\nbudget_cpa = 100\n",
    );
    let rules = tempfile::tempdir().unwrap();
    write(&rules.path().join("enrich.toml"), ENRICH_RULE);
    let w = warden(dir.path(), Some(rules.path()));
    let d: Vec<String> = w.diagnostics().iter().map(ToString::to_string).collect();
    assert!(
        d.iter().any(|d| d.contains("sources.toml:3:1")
            && d.contains("knowledge.budget_cpa")
            && d.contains("budget_cap")),
        "{d:#?}"
    );
    assert!(w.knowledge().is_none());
    let o = w.session().tick(
        Hook::OnQueryStart,
        Event::query("lua").with_context_window(200_000),
    );
    assert!(o.enrichment.is_none() && o.errors.is_empty());
    // A rule that asks for enrichment is told why there is none.
    let o = w.session().tick(Hook::OnTurnStart, Event::new());
    assert!(
        o.errors[0]
            .error
            .contains("the knowledge sources file did not load"),
        "{:?}",
        o.errors
    );
}

#[test]
fn sources_reload_when_their_files_change() {
    let dir = project(true);
    let w = warden(dir.path(), None);
    let (tx, rx) = mpsc::channel();
    let _watch = w
        .watch_with(move |r| {
            let _ = tx.send(r.applied);
        })
        .unwrap();
    let section = |w: &Warden| {
        w.session()
            .tick(
                Hook::OnQueryStart,
                Event::query("lua").with_context_window(200_000),
            )
            .enrichment
            .and_then(|e| e.section.clone())
            .unwrap_or_default()
    };
    assert!(section(&w).contains("time limit."));
    write(
        &dir.path().join("notes/lua.md"),
        "# Lua\n\nScripts run in a sandbox with a time limit and a memory limit.\n",
    );
    // A hang detector: the reload comes as soon as the watcher sees the change.
    let patience = Duration::from_secs(60);
    let deadline = Instant::now() + patience;
    loop {
        let applied = rx
            .recv_timeout(patience)
            .expect("no reload after the note changed");
        if applied && section(&w).contains("and a memory limit.") {
            break;
        }
        assert!(Instant::now() < deadline, "the new text never arrived");
    }
}
