//! An agent loop supervised by Warden, end to end: a (simulated) model answers a research
//! question with tools, and the loop reports every hook to Warden and injects what Warden
//! says into the model's context.
//!
//! Run it with `cargo run --example agent_loop`.

use serde_json::json;
use warden::{Event, Hook, Outcome, SessionOptions, Store, Warden};

/// A stand-in for the model: what it does at each turn of this session.
enum Step {
    Tool(
        &'static str,
        serde_json::Value,
        Result<serde_json::Value, &'static str>,
    ),
    Answer(&'static str),
}

fn script() -> Vec<Vec<Step>> {
    vec![
        vec![Step::Tool(
            "vault_search",
            json!({"query": "sqlite wal"}),
            Ok(json!({"count": 8})),
        )],
        vec![
            Step::Tool(
                "web_search",
                json!({"query": "wal checkpoints"}),
                Err("timeout after 30s"),
            ),
            Step::Tool(
                "web_search",
                json!({"query": "wal checkpoints"}),
                Err("timeout after 30s"),
            ),
            Step::Tool(
                "web_search",
                json!({"query": "wal checkpoints"}),
                Err("HTTP 503"),
            ),
        ],
        vec![Step::Answer(
            "WAL lets readers run while one writer appends.",
        )],
    ]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The built-in rules, plus any rule folders of the deployment, and a store for plugin state
    // (a file in production: `Store::open("warden.db")?`).
    let warden = Warden::builder()
        .builtin_rules()
        .store(Store::in_memory()?)
        .build()?;
    for problem in warden.diagnostics() {
        eprintln!("{problem}");
    }
    let mut session = warden.session_with(SessionOptions {
        user: Some("ada".into()),
        project: Some("docs".into()),
        ..SessionOptions::default()
    });
    // What the model will see injected, in order.
    let mut context: Vec<String> = Vec::new();
    let mut inject = |outcome: Outcome| {
        for n in outcome.injected() {
            context.push(format!(
                "[{} {}] {}",
                n.priority.name(),
                n.category,
                n.message
            ));
        }
        for e in &outcome.errors {
            eprintln!("rule error (isolated, the loop goes on): {e:?}");
        }
    };

    inject(session.tick(
        Hook::OnQueryStart,
        Event::query("How does SQLite WAL mode work?").with_iterations(0, 10),
    ));
    let mut iteration = 0;
    for (turn, steps) in script().into_iter().enumerate() {
        let turn = turn as u32 + 1;
        let usage = [0.35, 0.6, 0.86][turn as usize - 1];
        inject(session.tick(
            Hook::OnTurnStart,
            Event::new().with_turn(turn).with_token_usage(usage),
        ));
        for step in steps {
            iteration += 1;
            match step {
                Step::Tool(name, args, result) => {
                    inject(session.tick(
                        Hook::OnToolCall,
                        Event::tool_call(name, args).with_iterations(iteration, 10),
                    ));
                    let outcome = match result {
                        Ok(value) => {
                            session.tick(Hook::OnToolComplete, Event::tool_complete(name, value))
                        }
                        Err(error) => {
                            session.tick(Hook::OnToolFailure, Event::tool_failure(name, error))
                        }
                    };
                    inject(outcome);
                }
                Step::Answer(text) => {
                    inject(session.tick(
                        Hook::OnTurnEnd,
                        Event::new().with_message("assistant", text),
                    ));
                }
            }
        }
    }
    inject(session.tick(Hook::OnSessionEnd, Event::new()));

    println!("Injected into the model's context during the session:");
    for line in &context {
        println!("  {line}");
    }
    Ok(())
}
