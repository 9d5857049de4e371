use serde_json::{Value, json};
use warden_context::event::{TOOL_FIELDS, TURN_FIELDS, TurnField};

use super::*;

fn read(v: Value) -> Result<warden_context::event::Event, String> {
    match v {
        Value::Object(m) => read_event(m).map_err(|e| e.message),
        _ => unreachable!(),
    }
}

#[test]
fn a_whole_number_written_with_a_point_is_that_number() {
    let e = read(json!({"turn": {"number": 3.0, "iteration_count": 756.0, "context_window": 2e5}}))
        .unwrap();
    let turn = e.turn.unwrap();
    assert_eq!(turn.number, Some(3));
    assert_eq!(turn.iteration_count, Some(756));
    assert_eq!(turn.context_window, Some(200_000));
    assert!(read(json!({"turn": {"number": 3.5}})).is_err());
    assert!(read(json!({"turn": {"number": -3.0}})).is_err());
}

#[test]
fn a_bad_field_is_named_by_its_path_with_what_was_expected() {
    for (event, want) in [
        (
            json!({"turn": {"number": 4294967296u64}}),
            "`turn.number` must be a whole number from 0 to 4294967295, not 4294967296",
        ),
        (
            json!({"turn": {"token_usage": "high"}}),
            "`turn.token_usage` must be a share from 0.0 to 1000000 (0.42 is 42%, 1.5 is 50% over), not \"high\"",
        ),
        (
            json!({"turn": {"token_usage": 1e308}}),
            "`turn.token_usage` must be a share from 0.0 to 1000000 (0.42 is 42%, 1.5 is 50% over), not 1e+308",
        ),
        (
            json!({"turn": {"token_usage": -5}}),
            "`turn.token_usage` must be a share from 0.0 to 1000000 (0.42 is 42%, 1.5 is 50% over), not -5",
        ),
        (
            json!({"turn": {"context_usage": 2e6}}),
            "`turn.context_usage` must be a share from 0.0 to 1000000 (0.42 is 42%, 1.5 is 50% over), not 2000000.0",
        ),
        (
            json!({"turn": {"iteration_count": -1}}),
            "`turn.iteration_count` must be a whole number from 0 to 4294967295, not -1",
        ),
        (
            json!({"turn": {"context_window": 1.5}}),
            "`turn.context_window` must be a whole number from 0 to 18446744073709551615, not 1.5",
        ),
        (
            json!({"turn": [7, 0.9]}),
            "`turn` must be an object such as",
        ),
        (json!({"user": ["bob"]}), "`user` must be an object such as"),
        (
            json!({"turn": {"tokens": 1}}),
            "unknown field `tokens` in `turn`",
        ),
        (json!({"tool": {"arguments": {}}}), "`tool` has no `name`"),
        (
            json!({"tool": {"name": ""}}),
            "`tool.name` must be the tool's name",
        ),
        (
            json!({"tool": "vault_search"}),
            "`tool` must be an object such as",
        ),
        (
            json!({"query": 5}),
            "`query` must be a string, or an object with `text`, not 5",
        ),
        (
            json!({"message": {"role": "assistant"}}),
            "`message` has no `content`",
        ),
        (
            json!({"time": "now"}),
            "`time` must be a number, not \"now\"",
        ),
        (
            json!({"reslut": {}}),
            "unknown field `reslut`; did you mean `result`?",
        ),
    ] {
        let e = read(event.clone()).unwrap_err();
        assert!(e.contains(want), "{event}: {e}");
    }
    // `null` is an absent value, as serde reads it.
    let nulls = read(json!({
        "tool": null, "error": null, "time": null, "message": null,
        "turn": {"token_usage": null, "number": 2}, "user": {"id": null, "settings": null}
    }))
    .unwrap();
    assert!(nulls.tool.is_none() && nulls.time.is_none());
    assert_eq!(nulls.turn.unwrap().token_usage, None);
    let ok = read(json!({
        "turn": {"number": 3, "token_usage": 0.5, "context_window": 128000},
        "query": {"text": "hi", "lang": "en"},
        "tool": {"name": "vault_search", "arguments": {"q": "wal"}},
        "result": [1, 2], "data": null, "time": 1.5,
        "user": {"id": "ada", "settings": {}}, "message": {"role": "user", "content": "x"}
    }))
    .unwrap();
    assert_eq!(ok.turn.unwrap().number, Some(3));
}

#[test]
fn query_is_a_string_or_an_object() {
    let e: Event = serde_json::from_value(json!({"query": "what is rust?"})).unwrap();
    assert_eq!(e.query.unwrap().text, "what is rust?");
    let e: Event = serde_json::from_value(json!({"query": {"text": "hi", "lang": "en"}})).unwrap();
    let q = e.query.unwrap();
    assert_eq!(
        (q.text.as_str(), q.extra["lang"].as_str()),
        ("hi", Some("en"))
    );
}

#[test]
fn events_read_and_write_a_turn_and_a_tool_by_the_one_list_of_their_fields() {
    let turn = json!({"number": 3, "token_usage": 0.5, "context_usage": 0.25,
        "iteration_count": 2, "max_iterations": 9, "context_window": 1000, "final": true});
    let read: Turn = serde_json::from_value(turn.clone()).unwrap();
    let written = serde_json::to_value(&read).unwrap();
    let keys: Vec<&str> = written
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, TURN_FIELDS);
    for field in TurnField::ALL {
        assert_eq!(TurnField::named(field.name()), Some(field));
        assert!(check_field("turn", &json!({ field.name(): turn[field.name()] })).is_ok());
    }
    let tool = serde_json::to_value(Tool {
        name: "search".into(),
        arguments: json!({"q": 1}),
    })
    .unwrap();
    let keys: Vec<&str> = tool
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, TOOL_FIELDS);
    assert!(check_field("tool", &tool).is_ok());
    let err = check_field("turn", &json!({"tokne_usage": 0.1})).unwrap_err();
    assert!(err.message.contains("did you mean `token_usage`"), "{err}");
}

#[test]
fn unknown_fields_are_refused() {
    let err = serde_json::from_value::<Event>(json!({"turn": {"tokens": 1}})).unwrap_err();
    assert!(err.to_string().contains("unknown field `tokens`"), "{err}");
}
