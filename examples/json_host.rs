//! A host that gets its agent's events as JSON text (from another process, a queue, a socket)
//! and answers each with JSON: the shapes are the wire's (`warden::wire::v1`), the same the
//! service reads and writes, so a mistake in an event is named by its field, as the service
//! names it.
//!
//! Run it with `cargo run --example json_host`.

use warden::wire::v1;
use warden::{SessionOptions, Warden};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let warden = Warden::builder().builtin_rules().build()?;
    let mut session = warden.session_with(SessionOptions::default());

    // What the agent's process sent: one event a line, each with its hook.
    let lines = [
        r#"{"hook": "on_query_start", "query": "what is the WAL?", "user": {"id": "ada"}}"#,
        r#"{"hook": "on_tool_failure", "tool": {"name": "web_search"}, "error": "timeout"}"#,
        r#"{"hook": "on_tool_failure", "tool": {"name": "web_search"}, "error": "timeout"}"#,
        r#"{"hook": "on_tool_failure", "tool": {"name": "web_search"}, "error": "timeout"}"#,
        r#"{"hook": "on_turn_start", "turn": {"number": 2, "token_usage": 0.91}}"#,
        // A mistake: the error names the field and what it must be.
        r#"{"hook": "on_turn_start", "turn": {"number": "two"}}"#,
    ];
    for (i, line) in lines.iter().enumerate() {
        match v1::line::parse_line(i, line) {
            Ok(read) => {
                let outcome = session.tick_shared(read.hook, read.event);
                // The answer, as `POST /v1/sessions/{id}/events` writes it.
                println!(
                    "{}",
                    serde_json::to_string(&v1::Outcome::of("demo", &outcome))?
                );
            }
            Err(e) => {
                // The service's error body: `{"error": ...}`.
                let fields = serde_json::Map::new();
                let body = v1::ErrorBody {
                    error: &e.message,
                    fields: &fields,
                };
                println!("{}", serde_json::to_string(&body)?);
            }
        }
    }
    Ok(())
}
