//! The shipped example (`examples/knowledge`): a dozen sources, a classification file, and
//! queries of each mode with the exact section each must give (`queries.toml`, `expected/`).
//!
//! To accept new output after editing the notes: `WARDEN_UPDATE_EXPECTED=1 cargo test -p
//! warden-knowledge --test example`, then review the diff of `examples/knowledge/expected/`.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use warden_knowledge::{Check, Knowledge, Mode};

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/knowledge")
}

fn load() -> Knowledge {
    let dir = example();
    Knowledge::load(dir.join("sources.toml"), &dir).unwrap()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Cases {
    case: Vec<Case>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    name: String,
    query: String,
    context_window: u64,
    mode: String,
    tags: Vec<String>,
    selected: Vec<String>,
    truncated: Vec<String>,
    section: Option<String>,
}

#[test]
fn the_example_loads_with_one_refusal_and_one_advisory() {
    let k = load();
    assert_eq!(k.sources().len(), 12);
    assert_eq!(k.refused().len(), 1);
    let r = &k.refused()[0];
    assert_eq!(
        (r.source.as_str(), r.check),
        ("community-tips", Check::Injection)
    );
    assert!(
        r.to_string().starts_with(
            "source `community-tips` (notes/community-tips.md) refused by the injection gate \
             (gate 5): line 12 matches `ignore-previous-instructions`"
        ),
        "{r}"
    );
    let advisories: Vec<_> = k
        .advisories()
        .iter()
        .map(|a| (a.source.as_str(), a.pattern.as_str()))
        .collect();
    assert_eq!(advisories, [("security", "ignore-previous-instructions")]);
    let h = k.health();
    assert!(h.registered, "{:?}", h.reasons);
    assert_eq!(h.required_loaded, 3);
    assert_eq!(k.classifier().counts(), (82, 8));
}

#[test]
fn each_query_gives_the_expected_section() {
    let dir = example();
    let cases: Cases =
        toml::from_str(&std::fs::read_to_string(dir.join("queries.toml")).unwrap()).unwrap();
    let update = std::env::var_os("WARDEN_UPDATE_EXPECTED").is_some();
    let k = load();
    let mut modes = Vec::new();
    for case in &cases.case {
        let e = k.enrich(&case.query, case.context_window);
        let name = &case.name;
        assert_eq!(e.mode.to_string(), case.mode, "{name}");
        modes.push(e.mode);
        assert_eq!(e.classification.tags, case.tags, "{name}");
        assert_eq!(e.selected_ids(), case.selected, "{name}");
        let truncated: Vec<_> = e
            .selected
            .iter()
            .filter(|s| s.truncated)
            .map(|s| &s.id)
            .collect();
        assert_eq!(
            truncated,
            case.truncated.iter().collect::<Vec<_>>(),
            "{name}"
        );
        assert!(e.tokens_used <= e.budget, "{name}");
        assert_eq!(
            e,
            k.enrich(&case.query, case.context_window),
            "{name}: not deterministic"
        );
        match (&case.section, &e.section) {
            (None, None) => {}
            (Some(file), Some(section)) => {
                let path = dir.join(file);
                if update {
                    std::fs::write(&path, format!("{section}\n")).unwrap();
                }
                let expected = std::fs::read_to_string(&path).unwrap_or_default();
                // The file ends with a newline, as editors like; the section does not.
                assert!(
                    format!("{section}\n") == expected,
                    "{name}: the section differs from {file}:\n{section}"
                );
            }
            (want, got) => panic!("{name}: expected section {want:?}, got {got:?}"),
        }
    }
    for mode in [Mode::Unavailable, Mode::Reduced, Mode::Full] {
        assert!(modes.contains(&mode), "no case of mode {mode}");
    }
}
