//! Replays the fuzz corpus (`fuzz/corpus/<target>/`) through the fuzz targets' own entry
//! functions, without libFuzzer: every input that once crashed a target (kept under a name that
//! says what it was) and the minimized corpus that covers the rest, checked at every
//! `cargo test`. The targets themselves run with cargo-fuzz (`fuzz/fuzz.sh`).

#[path = "../fuzz/src/lib.rs"]
mod entries;

use std::path::Path;

#[test]
fn every_corpus_input_passes_its_target() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
    let mut total = 0;
    for (target, entry) in entries::TARGETS {
        let dir = corpus.join(target);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "no corpus for the fuzz target {target}");
        for file in &files {
            let data = std::fs::read(file).unwrap();
            // A failure names the input, so it can be run again on its own.
            let outcome = std::panic::catch_unwind(|| entry(&data));
            assert!(
                outcome.is_ok(),
                "fuzz target {target} fails on {}",
                file.display()
            );
        }
        total += files.len();
    }
    println!("replayed {total} corpus inputs");
}

#[test]
fn every_target_has_its_file_and_its_corpus() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut on_disk: Vec<String> = std::fs::read_dir(root.join("fuzz_targets"))
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().ok()?;
            Some(name.strip_suffix(".rs")?.to_string())
        })
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = entries::TARGETS
        .iter()
        .map(|(n, _)| n.to_string())
        .collect();
    listed.sort();
    assert_eq!(
        on_disk, listed,
        "fuzz/src/lib.rs TARGETS and fuzz/fuzz_targets/ differ"
    );
    let size: u64 = walk(&root.join("corpus"));
    assert!(
        size < 2 << 20,
        "the fuzz corpus is {size} bytes: minimize it (fuzz/fuzz.sh merges and keeps small files)"
    );
}

fn walk(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let meta = e.metadata().unwrap();
            if meta.is_dir() {
                walk(&e.path())
            } else {
                meta.len()
            }
        })
        .sum()
}
