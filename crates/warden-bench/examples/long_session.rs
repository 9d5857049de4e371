//! Writes the long realistic session of `warden bench` (the one `long_session.py` writes, byte
//! for byte) to standard output: `long_session TURNS` (3,000 turns: 23,872 events).
//!
//! ```sh
//! cargo run --release -p warden-bench --example long_session -- 3000 > long3000.jsonl
//! ```

use std::io::Write;

fn main() -> std::process::ExitCode {
    let turns = match std::env::args().nth(1).map(|a| a.parse::<u32>()) {
        None => 200,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("usage: long_session [TURNS]  (a whole number above 0; 200 by default)");
            return std::process::ExitCode::FAILURE;
        }
    };
    let mut out = std::io::stdout().lock();
    match out.write_all(warden_bench::long_session(turns).as_bytes()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cannot write the session: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
