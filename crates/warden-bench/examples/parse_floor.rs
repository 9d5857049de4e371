//! The parse-only floor of a replay, as a whole process: reads a trace a line at a time and
//! parses each line into a JSON value with serde_json, and does nothing else. What
//! `benches/bench-compare.sh` measures `warden replay` against.
//!
//! ```sh
//! cargo run --release -p warden-bench --example parse_floor -- TRACE.jsonl
//! ```

use std::io::BufRead;

fn main() -> std::process::ExitCode {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: parse_floor TRACE.jsonl");
        return std::process::ExitCode::FAILURE;
    };
    let file = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("cannot read {path}: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let (mut events, mut bad) = (0usize, 0usize);
    for line in std::io::BufReader::new(file).lines() {
        let Ok(line) = line else {
            bad += 1;
            continue;
        };
        match serde_json::from_str::<serde_json::Value>(&line) {
            Ok(v) => events += usize::from(v.is_object()),
            Err(_) => bad += 1,
        }
    }
    println!("{events} events, {bad} bad lines");
    std::process::ExitCode::SUCCESS
}
