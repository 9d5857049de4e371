//! Warden in a tokio agent loop: ticks run on the blocking pool through `AsyncSession`, and a
//! task listens on the event bus for what rules emit with `emit_event`.
//!
//! Run it with `cargo run --example async_agent`.

use serde_json::json;
use warden::{AsyncSession, Event, Hook, Warden};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A rule folder with one rule that publishes an event when a tool keeps failing.
    let rules = tempfile::tempdir()?;
    std::fs::write(
        rules.path().join("escalate.toml"),
        r#"
[rule]
id = "escalate-failures"
trigger = "on_tool_failure"

[condition]
expression = "failure_count(tool.name) >= 2"

[action]
type = "emit_event"
event_type = "tool.degraded"
payload = { tool = "{{ tool.name }}", failures = "{{ context.history.failures[tool.name] }}" }
"#,
    )?;
    let warden = Warden::builder()
        .builtin_rules()
        .rules_dir(rules.path())
        .build()?;

    let mut bus = warden.subscribe();
    let listener = tokio::spawn(async move {
        let mut seen = Vec::new();
        while let Ok(event) = bus.recv().await {
            println!(
                "bus: {} from {} {}",
                event.event_type, event.rule, event.payload
            );
            seen.push(event);
            if seen.len() == 2 {
                break;
            }
        }
        seen
    });

    let session = AsyncSession::new(warden.session());
    for attempt in 1..=3 {
        let outcome = session
            .tick(
                Hook::OnToolFailure,
                Event::tool_failure("web_search", format!("attempt {attempt} timed out")),
            )
            .await;
        for n in outcome.injected() {
            println!("inject: {}", n.message);
        }
    }
    session
        .tick(
            Hook::OnToolComplete,
            Event::tool_complete("vault_search", json!({"count": 2})),
        )
        .await;
    let seen = listener.await?;
    println!("{} events published", seen.len());
    Ok(())
}
