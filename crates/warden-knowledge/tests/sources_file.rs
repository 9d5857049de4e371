//! Mistakes in a sources file: each names the file, line and field, and suggests a fix; all
//! of a file's mistakes are reported at once.

mod common;

use common::Project;

fn errors(p: &Project, text: &str) -> Vec<String> {
    p.write("sources.toml", text);
    p.load()
        .unwrap_err()
        .diagnostics
        .iter()
        .map(|d| d.to_string())
        .collect()
}

fn assert_one(p: &Project, text: &str, want: &[&str]) {
    let errs = errors(p, text);
    assert_eq!(errs.len(), 1, "{errs:#?}");
    for w in want {
        assert!(errs[0].contains(w), "missing {w:?} in:\n{}", errs[0]);
    }
}

const SOURCE: &str = "[[source]]\nid = \"a\"\npath = \"notes/a.md\"\ntags = [\"core\"]\n";

#[test]
fn unknown_keys_suggest_the_nearest() {
    let p = Project::new();
    assert_one(
        &p,
        &format!("[knowledge]\nbudget_capp = 5\n{SOURCE}"),
        &[
            "sources.toml:2:1: error: knowledge.budget_capp: unknown field `budget_capp` in [knowledge]",
            "help: did you mean `budget_cap`?",
        ],
    );
    assert_one(
        &p,
        &format!("{SOURCE}priorty = 3\n"),
        &[
            "sources.toml:5:1: error: source[0].priorty",
            "did you mean `priority`?",
        ],
    );
    assert_one(
        &p,
        &format!("[knowledge.modes]\nfull = 1\n{SOURCE}"),
        &["knowledge.modes.full", "did you mean `full_from`?"],
    );
    assert_one(
        &p,
        &format!("[sources]\n{SOURCE}"),
        &[
            "sources.toml:1:2: error: sources: unknown field `sources`",
            "did you mean `source`?",
        ],
    );
}

#[test]
fn wrong_types_and_values() {
    let p = Project::new();
    assert_one(
        &p,
        &format!("[knowledge]\nenabled = \"yes\"\n{SOURCE}"),
        &[
            "sources.toml:2:11: error: knowledge.enabled: `enabled` must be true or false, not a string",
        ],
    );
    assert_one(
        &p,
        &format!("[knowledge]\nbudget_cap = -1\n{SOURCE}"),
        &["knowledge.budget_cap: `budget_cap` must not be negative"],
    );
    assert_one(
        &p,
        &format!("[knowledge]\nbudget_percent = 0\n{SOURCE}"),
        &["knowledge.budget_percent: `budget_percent` is 0; it must be from 1 to 100"],
    );
    assert_one(
        &p,
        &format!("[knowledge.modes]\nreduced_from = 100_000\nfull_from = 30_000\n{SOURCE}"),
        &[
            "sources.toml:3:13: error: knowledge.modes.full_from",
            "make `full_from` at least",
        ],
    );
    assert_one(
        &p,
        &format!("[knowledge]\ncore_tag = \"core tag\"\n{SOURCE}"),
        &["knowledge.core_tag: the tag `core tag` may only have letters"],
    );
    assert_one(
        &p,
        "source = 3\n",
        &["`source` must be an array of tables, not an integer"],
    );
}

#[test]
fn source_entries() {
    let p = Project::new();
    assert_one(
        &p,
        "[[source]]\npath = \"notes/a.md\"\ntags = [\"core\"]\n",
        &[
            "sources.toml:1:1: error: source[0].id: this source has no `id`",
            "add id = ",
        ],
    );
    assert_one(
        &p,
        "[[source]]\nid = \"a\"\ntags = [\"core\"]\n",
        &["source[0].path: this source has no `path`"],
    );
    assert_one(
        &p,
        "[[source]]\nid = \"a\"\npath = \"a.md\"\ntags = []\n",
        &["sources.toml:4:8: error: source[0].tags: a source without tags is never chosen"],
    );
    assert_one(
        &p,
        "[[source]]\nid = \"a b\"\npath = \"a.md\"\ntags = [\"core\"]\n",
        &["sources.toml:2:6: error: source[0].id: the id `a b` may only have letters"],
    );
    let errs = errors(
        &p,
        "[[source]]\nid = \"a\"\npath = \"a.md\"\ntags = [\"core\", \"core\", \"x,y\"]\n",
    );
    assert_eq!(errs.len(), 2, "{errs:#?}");
    assert!(errs[0].contains("the tag `core` is listed twice"));
    assert!(errs[1].contains("the tag `x,y` may only have"));
    assert_one(
        &p,
        &format!("{SOURCE}\n{SOURCE}"),
        &[
            "sources.toml:7:6: error: source[1].id: the id `a` is already used",
            "the source on line 1 has it",
        ],
    );
    assert_one(
        &p,
        "[knowledge]\n",
        &["the sources file lists no sources", "[[source]]"],
    );
}

#[test]
fn every_mistake_at_once() {
    let p = Project::new();
    let errs = errors(
        &p,
        "[knowledge]\nenabeld = true\nbudget_cap = \"lots\"\n[[source]]\nid = \"a\"\ntags = [\"core\"]\n",
    );
    assert_eq!(errs.len(), 3, "{errs:#?}");
}

#[test]
fn syntax_errors_and_unreadable_files() {
    let p = Project::new();
    assert_one(
        &p,
        "[knowledge\n",
        &[
            "sources.toml:1:",
            "this is not valid TOML",
            "https://toml.io",
        ],
    );
    std::fs::write(p.path("sources.toml"), [0xff, 0xfe]).unwrap();
    let err = p.load().unwrap_err().to_string();
    assert!(
        err.contains("sources.toml: error: the file is not UTF-8 text"),
        "{err}"
    );
    let err = warden_knowledge::Knowledge::load(p.path("none.toml"), p.root())
        .unwrap_err()
        .to_string();
    assert!(err.contains("none.toml: error: cannot read"), "{err}");
    p.write("sources.toml", SOURCE);
    let err = warden_knowledge::Knowledge::load(p.path("sources.toml"), p.path("no-such-root"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("the project root cannot be used"), "{err}");
}

#[test]
fn defaults_where_the_file_is_silent() {
    let p = Project::new();
    p.write("notes/a.md", "A.");
    p.write("sources.toml", SOURCE);
    let k = p.load().unwrap();
    assert_eq!(k.settings(), &warden_knowledge::Settings::default());
    assert!(!k.settings().enabled);
    let d = &k.sources()[0].def;
    assert_eq!(
        (d.priority, d.curated, d.required, d.line),
        (0, false, false, 1)
    );
}
