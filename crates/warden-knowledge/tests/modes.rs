//! The mode table at its boundaries, with the default thresholds and configured ones.

mod common;

use common::Project;
use warden_knowledge::{Mode, ModeThresholds};

#[test]
fn default_thresholds_at_their_boundaries() {
    let t = ModeThresholds::default();
    for (window, mode) in [
        (0, Mode::Unavailable),
        (29_999, Mode::Unavailable),
        (30_000, Mode::Reduced),
        (99_999, Mode::Reduced),
        (100_000, Mode::Full),
        (u64::MAX, Mode::Full),
    ] {
        assert_eq!(t.mode(window), mode, "{window}");
    }
}

fn project(knowledge: &str) -> warden_knowledge::Knowledge {
    let p = Project::new();
    p.write("notes/core.md", "Core note.")
        .write("notes/topic.md", "Topic note.");
    p.write(
        "sources.toml",
        &format!(
            "[knowledge]\n{knowledge}\n\
             [[source]]\nid = \"core-note\"\npath = \"notes/core.md\"\ntags = [\"core\"]\n\
             [[source]]\nid = \"topic\"\npath = \"notes/topic.md\"\ntags = [\"core-adjacent\", \"base\"]\n"
        ),
    );
    p.load().unwrap()
}

#[test]
fn enrichment_follows_the_table() {
    let k = project("core_tag = \"core\"");
    for (window, mode, selected) in [
        (29_999, Mode::Unavailable, vec![]),
        (30_000, Mode::Reduced, vec!["core-note"]),
        (99_999, Mode::Reduced, vec!["core-note"]),
        (100_000, Mode::Full, vec!["core-note"]),
    ] {
        let e = k.enrich("anything", window);
        assert_eq!(e.mode, mode, "{window}");
        assert_eq!(e.selected_ids(), selected, "{window}");
        assert_eq!(e.section.is_some(), !selected.is_empty(), "{window}");
        assert_eq!(e.budget, window * 15 / 100);
    }
    let unavailable = k.enrich("anything", 29_999);
    assert!(unavailable.skipped.is_empty() && unavailable.tokens_used == 0);
}

#[test]
fn thresholds_and_the_core_tag_are_configuration() {
    let k =
        project("core_tag = \"base\"\n[knowledge.modes]\nreduced_from = 8_000\nfull_from = 16_000");
    for (window, mode, selected) in [
        (7_999, Mode::Unavailable, vec![]),
        (8_000, Mode::Reduced, vec!["topic"]),
        (15_999, Mode::Reduced, vec!["topic"]),
        (16_000, Mode::Full, vec!["topic"]),
    ] {
        let e = k.enrich("anything", window);
        assert_eq!((e.mode, e.selected_ids()), (mode, selected), "{window}");
    }
    assert_eq!(k.classify("x").tags, ["base"]);
}
