//! The fast way to read a trace line: straight into the engine's event, without building a JSON value of
//! the whole line first and checking it field by field. It takes only lines the checked way
//! reads the same (to the same event) and gives up on anything else: a mistake, a `null`, a
//! repeated key, a number out of range. The checked way then reads the line and names what is
//! wrong. Free-form parts (`result`, `data`, a tool's `arguments`) are JSON values either way;
//! the rare fields (`query`, `message`, `user`, `project`) are read as values and checked as the
//! checked way checks them.

use std::fmt;
use std::sync::Arc;

use serde::Deserialize;
use serde::de::{self, DeserializeOwned, Deserializer, MapAccess, Visitor};
use serde_json::Value;
use warden_load::Hook;

use super::unique::Unique;
use crate::v1::event::{self as wire, check_field};
use warden_context::event::{Event, ToolCall, ToolField, TurnField, TurnUpdate};

/// The hook and event of `line`, when it is an ordinary line; `None` to read it the checked way.
pub(crate) fn parse(line: &str) -> Option<(Hook, Arc<Event>)> {
    serde_json::from_str::<Line>(line)
        .ok()
        .map(|l| (l.hook, l.event))
}

struct Line {
    hook: Hook,
    /// Shared as soon as it is read: from here to its tick only the pointer moves.
    event: Arc<Event>,
}

/// Gives up on the fast way (the checked way will say what is wrong, if anything).
fn give_up<E: de::Error>() -> E {
    E::custom("read it the checked way")
}

/// Declares an enum of the keys of an object, read without allocating; an unknown key gives up.
macro_rules! keys {
    ($name:ident { $($variant:ident = $text:literal),* $(,)? }) => {
        #[derive(Clone, Copy, PartialEq, Eq)]
        #[repr(u8)]
        enum $name { $($variant),* }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl Visitor<'_> for V {
                    type Value = $name;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str("a known key")
                    }
                    fn visit_str<E: de::Error>(self, v: &str) -> Result<$name, E> {
                        match v {
                            $($text => Ok($name::$variant),)*
                            _ => Err(give_up()),
                        }
                    }
                }
                d.deserialize_identifier(V)
            }
        }
    };
}

keys!(LineKey {
    Hook = "hook",
    Turn = "turn",
    Query = "query",
    Tool = "tool",
    Result = "result",
    Error = "error",
    Message = "message",
    User = "user",
    Project = "project",
    Data = "data",
    Time = "time",
});

/// Declares a key read by the one list of its names (`warden_context::event`), without
/// allocating; an unknown key gives up.
macro_rules! named_key {
    ($name:ident($field:ty)) => {
        struct $name($field);

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl Visitor<'_> for V {
                    type Value = $name;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str("a known key")
                    }
                    fn visit_str<E: de::Error>(self, v: &str) -> Result<$name, E> {
                        <$field>::named(v).map($name).ok_or_else(give_up)
                    }
                }
                d.deserialize_identifier(V)
            }
        }
    };
}

named_key!(TurnKey(TurnField));
named_key!(ToolKey(ToolField));

/// Marks `key` seen; a key seen twice gives up (the checked way keeps the last one).
fn once<E: de::Error>(seen: &mut u32, key: u8) -> Result<(), E> {
    let bit = 1u32 << key;
    if *seen & bit != 0 {
        return Err(give_up());
    }
    *seen |= bit;
    Ok(())
}

/// A time, as the checked way accepts it (finite, at most `MAX_TIME` in size).
fn number<E: de::Error>(x: Option<f64>) -> Result<Option<f64>, E> {
    match x {
        Some(v) if !(v.is_finite() && v.abs() <= warden_context::event::MAX_TIME) => Err(give_up()),
        other => Ok(other),
    }
}

/// A share (the turn's usages), as the checked way accepts it: from 0 to `MAX_SHARE`.
fn share<E: de::Error>(x: Option<f64>) -> Result<Option<f64>, E> {
    match x {
        Some(v) if !(0.0..=warden_context::event::MAX_SHARE).contains(&v) => Err(give_up()),
        other => Ok(other),
    }
}

/// A free-form value, whose objects name each key once (a key given twice gives up).
fn free<'de, A: MapAccess<'de>>(map: &mut A) -> Result<Value, A::Error> {
    map.next_value::<Unique>().map(|u| u.0)
}

/// A rare field, read as a value and checked as the checked way checks it.
fn checked<T: DeserializeOwned, E: de::Error>(key: &str, v: Value) -> Result<Option<T>, E> {
    if v.is_null() {
        return Ok(None);
    }
    check_field(key, &v).map_err(|_| give_up::<E>())?;
    serde_json::from_value(v).map(Some).map_err(|_| give_up())
}

impl<'de> Deserialize<'de> for Line {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Line;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an event")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Line, A::Error> {
                let mut hook = None;
                let mut e = Event::default();
                let mut seen = 0;
                while let Some(key) = map.next_key::<LineKey>()? {
                    once(&mut seen, key as u8)?;
                    match key {
                        LineKey::Hook => {
                            let name: HookName = map.next_value()?;
                            hook = Some(name.0);
                        }
                        LineKey::Turn => e.turn = map.next_value::<Option<Turn>>()?.map(|t| t.0),
                        LineKey::Tool => e.tool = map.next_value::<Option<Tool>>()?.map(|t| t.0),
                        LineKey::Result => {
                            e.result = Some(free(&mut map)?).filter(|v| !v.is_null())
                        }
                        LineKey::Error => e.error = map.next_value()?,
                        LineKey::Data => e.data = Some(free(&mut map)?).filter(|v| !v.is_null()),
                        LineKey::Time => e.time = number(map.next_value()?)?,
                        LineKey::Query => {
                            e.query = checked::<wire::Query, _>("query", free(&mut map)?)?
                                .map(|q| Box::new(q.into_engine()))
                        }
                        LineKey::Message => {
                            e.message = checked::<wire::Message, _>("message", free(&mut map)?)?
                                .map(wire::Message::into_engine)
                        }
                        LineKey::User => {
                            e.user = checked::<wire::Party, _>("user", free(&mut map)?)?
                                .map(|p| Box::new(p.into_engine()))
                        }
                        LineKey::Project => {
                            e.project = checked::<wire::Party, _>("project", free(&mut map)?)?
                                .map(|p| Box::new(p.into_engine()))
                        }
                    }
                }
                match hook {
                    Some(hook) => Ok(Line {
                        hook,
                        event: Arc::new(e),
                    }),
                    None => Err(give_up()),
                }
            }
        }
        d.deserialize_map(V)
    }
}

/// A hook's name, read without allocating.
struct HookName(Hook);

impl<'de> Deserialize<'de> for HookName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = HookName;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a hook")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<HookName, E> {
                v.parse().map(HookName).map_err(|_| give_up())
            }
        }
        d.deserialize_str(V)
    }
}

/// `turn`, read from an object only (an array gives up, as the checked way refuses it).
struct Turn(TurnUpdate);

impl<'de> Deserialize<'de> for Turn {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Turn;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a turn")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Turn, A::Error> {
                let mut t = TurnUpdate::default();
                let mut seen = 0;
                while let Some(TurnKey(key)) = map.next_key()? {
                    once(&mut seen, key as u8)?;
                    match key {
                        TurnField::Number => t.number = map.next_value()?,
                        TurnField::TokenUsage => t.token_usage = share(map.next_value()?)?,
                        TurnField::ContextUsage => t.context_usage = share(map.next_value()?)?,
                        TurnField::IterationCount => t.iteration_count = map.next_value()?,
                        TurnField::MaxIterations => t.max_iterations = map.next_value()?,
                        TurnField::ContextWindow => t.context_window = map.next_value()?,
                        TurnField::Final => t.is_final = map.next_value()?,
                    }
                }
                Ok(Turn(t))
            }
        }
        d.deserialize_map(V)
    }
}

/// `tool`, read from an object only, with a name that is not empty.
struct Tool(ToolCall);

impl<'de> Deserialize<'de> for Tool {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Tool;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a tool")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Tool, A::Error> {
                let mut name: Option<String> = None;
                let mut arguments = Value::Null;
                let mut seen = 0;
                while let Some(ToolKey(key)) = map.next_key()? {
                    once(&mut seen, key as u8)?;
                    match key {
                        ToolField::Name => name = Some(map.next_value()?),
                        ToolField::Arguments => arguments = free(&mut map)?,
                    }
                }
                match name {
                    Some(name) if !name.is_empty() => Ok(Tool(ToolCall { name, arguments })),
                    _ => Err(give_up()),
                }
            }
        }
        d.deserialize_map(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::v1::line::{parse_line, parse_line_checked};

    /// Lines of every kind the checked way reads, and many it refuses or reads oddly.
    const LINES: &[&str] = &[
        r#"{"hook": "on_turn_start", "turn": {"number": 3, "token_usage": 0.42, "context_usage": 0.1, "iteration_count": 2, "max_iterations": 10, "context_window": 200000, "final": true}}"#,
        r#"{"hook":"on_tool_call","tool":{"name":"web","arguments":{"q":"x","n":[1,2.5,null]}}}"#,
        r#"{"hook":"on_tool_complete","tool":{"name":"web"},"result":{"count":8,"text":"\u00e9\n"}}"#,
        r#"{"tool":{"arguments":null,"name":"web"},"hook":"on_tool_failure","error":"timeout after 30s","time":1700000000.25}"#,
        r#"{"hook":"on_query_start","query":{"text":"hi","lang":"en"},"user":{"id":"ada","settings":{"a":1}},"project":{"id":"p","root":"/src","settings":null}}"#,
        r#"{"hook":"on_query_start","query":"plain text","message":{"role":"user","content":"hi"}}"#,
        r#"{"hook":"on_turn_end","data":{"x":[true]},"result":[1,2],"turn":{"token_usage":1}}"#,
        // Over budget and past the window: facts, read either way.
        r#"{"hook":"on_turn_start","turn":{"token_usage":1.706,"context_usage":1.5}}"#,
        r#"{"hook":"on_session_end"}"#,
        r#"{"hook":"on_turn_start","turn":null,"tool":null,"result":null,"error":null,"time":null,"data":null}"#,
        r#"{"hook":"on_turn_start","turn":{"number":null,"token_usage":null}}"#,
        // Refused, or read in a way only the checked way knows.
        r#"{"hook":"on_turn_start","turn":[3,0.5]}"#,
        r#"{"hook":"on_tool_call","tool":["web",{}]}"#,
        r#"{"hook":"on_tool_call","tool":{"name":""}}"#,
        r#"{"hook":"on_tool_call","tool":{"name":"web","extra":1}}"#,
        r#"{"hook":"on_turn_start","turn":{"number":-1}}"#,
        r#"{"hook":"on_turn_start","turn":{"number":4294967296}}"#,
        r#"{"hook":"on_turn_start","turn":{"number":3.0}}"#,
        r#"{"hook":"on_turn_start","turn":{"token_usage":1e20}}"#,
        r#"{"hook":"on_turn_start","turn":{"tokens":1}}"#,
        r#"{"hook":"on_turn_start","turn":{"number":1,"number":2}}"#,
        r#"{"hook":"on_turn_start","hook":"on_turn_end"}"#,
        r#"{"hook":"on_turn_start","time":1e16}"#,
        r#"{"hook":"on_turn_start","user":{"id":"a","root":"/x"}}"#,
        r#"{"hook":"on_turn_start","query":{"lang":"en"}}"#,
        r#"{"hook":"on_turn_start","message":{"role":"user"}}"#,
        r#"{"hook":"on_turn_strat"}"#,
        r#"{"hook":3}"#,
        r#"{"turn":{}}"#,
        r#"{"hook":"on_turn_start","bogus":1}"#,
        r#"{"hook":"on_turn_start","error":3}"#,
        r#"[1,2]"#,
        r#"{"hook":"on_turn_start"} trailing"#,
        r#"{"hook":"on_tool_complete","tool":{"name":"web"},"result":{"a":1,"a":2}}"#,
        r#"{"hook":"on_tool_call","tool":{"name":"web","arguments":{"q":1,"q":2}}}"#,
        r#"{"hook":"on_turn_start","turn":{"token_usage":-5}}"#,
        r#"{"hook":"on_turn_start","turn":{"context_usage":2e6}}"#,
    ];

    #[test]
    fn the_fast_way_reads_what_the_checked_way_reads_or_gives_up() {
        let mut fast = 0;
        for line in LINES {
            let checked = parse_line_checked(0, line);
            match parse(line) {
                Some((hook, event)) => {
                    fast += 1;
                    let checked = checked.unwrap_or_else(|e| panic!("{line}: fast but {e}"));
                    assert_eq!((hook, &event), (checked.hook, &checked.event), "{line}");
                }
                None => {
                    // Nothing to compare: the checked way reads it, or says why not.
                }
            }
        }
        assert_eq!(fast, 11, "the eleven ordinary lines take the fast way");
        // A key given twice, even inside free-form data, and a usage below 0 or past a million
        // times its budget are refused.
        for line in &LINES[LINES.len() - 4..] {
            assert!(parse_line(0, line).is_err(), "{line} is refused");
        }
    }

    #[test]
    fn every_trace_of_the_repository_reads_the_same_both_ways() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
        let mut dirs = vec![
            std::path::PathBuf::from(root).join("tests"),
            std::path::PathBuf::from(root).join("examples"),
        ];
        let (mut lines, mut fast) = (0, 0);
        while let Some(dir) = dirs.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                if path.is_dir() {
                    dirs.push(path);
                    continue;
                }
                let name = path.to_string_lossy();
                if !name.ends_with(".jsonl")
                    || name.contains(".expected.")
                    || name.contains(".explain.")
                    || name.contains(".nodes.")
                {
                    continue;
                }
                for line in std::fs::read_to_string(&path).unwrap_or_default().lines() {
                    if line.trim().is_empty() || line.trim_start().starts_with("//") {
                        continue;
                    }
                    // Files of other formats (hook payloads, transcripts) sit beside traces.
                    if parse_line_checked(0, line).is_err() {
                        assert!(parse(line).is_none(), "{name}: {line}: fast but refused");
                        continue;
                    }
                    lines += 1;
                    if let Some((hook, event)) = parse(line) {
                        fast += 1;
                        let checked = parse_line_checked(0, line)
                            .unwrap_or_else(|e| panic!("{name}: {line}: fast but {e}"));
                        assert_eq!(
                            (hook, &event),
                            (checked.hook, &checked.event),
                            "{name}: {line}"
                        );
                    }
                }
            }
        }
        assert!(lines > 200, "{lines}");
        assert!(
            fast * 10 > lines * 9,
            "{fast} of {lines} lines took the fast way"
        );
    }

    fn json_value() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just("null".to_string()),
            Just("true".to_string()),
            Just("3".to_string()),
            Just("-1".to_string()),
            Just("0.42".to_string()),
            Just("1e20".to_string()),
            Just("4294967296".to_string()),
            Just("\"\"".to_string()),
            Just("\"on_turn_end\"".to_string()),
            Just("\"web\"".to_string()),
        ];
        leaf.prop_recursive(2, 12, 4, |inner| {
            let key = prop_oneof![
                Just("name"),
                Just("arguments"),
                Just("number"),
                Just("token_usage"),
                Just("text"),
                Just("id"),
                Just("root"),
                Just("role"),
                Just("content"),
                Just("x"),
            ];
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..3)
                    .prop_map(|items| format!("[{}]", items.join(","))),
                proptest::collection::vec((key, inner), 0..4).prop_map(|fields| {
                    let fields: Vec<String> =
                        fields.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
                    format!("{{{}}}", fields.join(","))
                }),
            ]
        })
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 2000, ..Default::default() })]

        /// Whatever a line holds, the fast way reads it as the checked way does, or gives up.
        #[test]
        fn any_line_reads_the_same_both_ways(
            fields in proptest::collection::vec(
                (
                    proptest::prop_oneof![
                        proptest::strategy::Just("hook"), proptest::strategy::Just("turn"),
                        proptest::strategy::Just("query"), proptest::strategy::Just("tool"),
                        proptest::strategy::Just("result"), proptest::strategy::Just("error"),
                        proptest::strategy::Just("message"), proptest::strategy::Just("user"),
                        proptest::strategy::Just("project"), proptest::strategy::Just("data"),
                        proptest::strategy::Just("time"), proptest::strategy::Just("other"),
                    ],
                    json_value(),
                ),
                0..5,
            ),
            hook in proptest::prop_oneof![
                proptest::strategy::Just(Some("\"on_tool_call\"")),
                proptest::strategy::Just(Some("\"on_turn_start\"")),
                proptest::strategy::Just(None),
            ],
        ) {
            let mut parts: Vec<String> = fields.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
            if let Some(h) = hook {
                parts.insert(0, format!("\"hook\":{h}"));
            }
            let line = format!("{{{}}}", parts.join(","));
            if let Some((hook, event)) = parse(&line) {
                let checked = parse_line_checked(0, &line);
                proptest::prop_assert!(checked.is_ok(), "{}: fast but {:?}", line, checked);
                let checked = checked.unwrap();
                proptest::prop_assert_eq!((hook, &event), (checked.hook, &checked.event), "{}", line);
            }
        }
    }
}
