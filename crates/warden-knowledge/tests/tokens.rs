//! The token estimate against real tokenizers: `tests/tokens/reference.toml` holds the counts
//! of `cl100k_base` and `o200k_base` for every example note and sample (made by
//! `tests/tokens/measure.py`). This test states the error and keeps it within bounds.
//!
//! Run with `--nocapture` to see the table.

use std::path::Path;

use serde::Deserialize;
use warden_knowledge::estimate_tokens;

#[derive(Deserialize)]
struct Reference {
    sample: Vec<Sample>,
}

#[derive(Deserialize)]
struct Sample {
    file: String,
    cl100k_base: u64,
    o200k_base: u64,
}

/// The error allowed for a sample: English Markdown is what knowledge sources mostly are.
fn bounds(file: &str) -> (f64, f64) {
    if file.contains("languages") {
        (0.0, 0.45)
    } else if file.starts_with("tests/") {
        (0.0, 0.30)
    } else {
        (0.0, 0.20)
    }
}

fn error(estimate: u64, real: u64) -> f64 {
    (estimate as f64 - real as f64) / real as f64
}

#[test]
fn the_estimate_leans_high_within_stated_bounds() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let reference: Reference =
        toml::from_str(&std::fs::read_to_string(here.join("tests/tokens/reference.toml")).unwrap())
            .unwrap();
    let mut notes = (0, 0, 0);
    let mut outside: Vec<&str> = Vec::new();
    eprintln!(
        "{:<48} {:>8} {:>8} {:>8} {:>7} {:>7}",
        "sample", "estimate", "cl100k", "o200k", "err cl", "err o2"
    );
    for s in &reference.sample {
        let path = if s.file.starts_with("examples/") {
            here.join("../..").join(&s.file)
        } else {
            here.join(&s.file)
        };
        let text = std::fs::read_to_string(&path).unwrap();
        let est = estimate_tokens(&text);
        let (e_cl, e_o2) = (error(est, s.cl100k_base), error(est, s.o200k_base));
        eprintln!(
            "{:<48} {est:>8} {:>8} {:>8} {:>+6.1}% {:>+6.1}%",
            s.file,
            s.cl100k_base,
            s.o200k_base,
            e_cl * 100.0,
            e_o2 * 100.0
        );
        let (lo, hi) = bounds(&s.file);
        if ![e_cl, e_o2].iter().all(|e| (lo..=hi).contains(e)) {
            outside.push(&s.file);
        }
        if s.file.ends_with(".md") && s.file.starts_with("examples/") {
            notes.0 += est;
            notes.1 += s.cl100k_base;
            notes.2 += s.o200k_base;
        }
    }
    let (e_cl, e_o2) = (error(notes.0, notes.1), error(notes.0, notes.2));
    eprintln!(
        "all example notes: {:+.1}% (cl100k), {:+.1}% (o200k)",
        e_cl * 100.0,
        e_o2 * 100.0
    );
    assert!(outside.is_empty(), "outside their bounds: {outside:?}");
    for e in [e_cl, e_o2] {
        assert!(
            (0.05..=0.15).contains(&e),
            "notes in total: {:+.1}%",
            e * 100.0
        );
    }
}
