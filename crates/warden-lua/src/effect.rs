//! What a script does: the actions it calls ([`Effect`]), checked against the embedder's
//! [`Vocabulary`], and Lua values turned into JSON the same way on every run.

use mlua::{Lua, Table, Value};

use crate::Vocabulary;

/// An action a script took. Names were checked against the [`Vocabulary`] when it was taken.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// `notify(message, { category =, priority =, deliver_at = })`
    Notify {
        /// The message.
        message: String,
        /// Its category, if given.
        category: Option<String>,
        /// Its priority, if given.
        priority: Option<String>,
        /// Its delivery point, if given.
        deliver_at: Option<String>,
    },
    /// `log(message, level)` (and `print(...)`, at `debug`).
    Log {
        /// The level, if given.
        level: Option<String>,
        /// The message.
        message: String,
    },
    /// `set_state(key, value)`, or `set_state(key, value, "session")`.
    SetState {
        /// The key.
        key: String,
        /// The value.
        value: serde_json::Value,
        /// Set for the session's own state (`"session"`), not the state its sessions share.
        session: bool,
    },
    /// `decide(decision, reason)` (or `allow`, `ask`, `deny`, `stop`).
    Decide {
        /// The decision, one of the vocabulary's.
        decision: String,
        /// What the agent (or the person asked) is told.
        reason: String,
    },
    /// `rewrite({ limit = 50 })`: set arguments of the tool call (a key may be a dotted path,
    /// `["options.dry_run"] = true`).
    Rewrite {
        /// The arguments to set, by path below `arguments`.
        set: serde_json::Map<String, serde_json::Value>,
    },
    /// `emit_event(type, payload)`
    EmitEvent {
        /// The event type.
        event_type: String,
        /// The payload (an empty object when not given).
        payload: serde_json::Value,
    },
}

fn check_name(what: &str, value: &Option<String>, allowed: &[&str]) -> mlua::Result<()> {
    match value {
        Some(v) if !allowed.contains(&v.as_str()) => Err(mlua::Error::RuntimeError(format!(
            "{what}: unknown value '{v}'; use one of {}",
            allowed.join(", ")
        ))),
        _ => Ok(()),
    }
}

/// A Lua value as JSON, the same on every run: a table whose keys are exactly 1..n is a list;
/// any other table is an object whose keys (strings, or numbers written as text) are sorted.
/// Nothing is dropped silently: a value JSON cannot hold is an error that says what it is.
pub(crate) fn to_json(v: &Value, depth: usize) -> Result<serde_json::Value, String> {
    use serde_json::Value as J;
    if depth > 32 {
        return Err("it is nested more than 32 levels deep".into());
    }
    Ok(match v {
        Value::Nil => J::Null,
        Value::Boolean(b) => J::Bool(*b),
        Value::Integer(n) => J::from(*n),
        Value::Number(x) => serde_json::Number::from_f64(*x)
            .map(J::Number)
            .ok_or_else(|| format!("{x} is not a number JSON can hold"))?,
        Value::String(s) => J::String(
            s.to_str()
                .map_err(|_| "a string that is not UTF-8 text".to_string())?
                .to_string(),
        ),
        Value::Table(t) => {
            let mut entries: Vec<(Value, Value)> = Vec::new();
            for pair in t.clone().pairs::<Value, Value>() {
                entries.push(pair.map_err(|e| e.to_string())?);
            }
            let n = entries.len();
            let is_list = n > 0
                && entries
                    .iter()
                    .all(|(k, _)| matches!(k, Value::Integer(i) if *i >= 1 && *i as usize <= n));
            if is_list {
                let mut items = vec![J::Null; n];
                for (k, x) in &entries {
                    if let Value::Integer(i) = k {
                        items[*i as usize - 1] = to_json(x, depth + 1)?;
                    }
                }
                J::Array(items)
            } else {
                let mut keyed = std::collections::BTreeMap::new();
                for (k, x) in &entries {
                    let key = match k {
                        Value::String(s) => s
                            .to_str()
                            .map_err(|_| "a key that is not UTF-8 text".to_string())?
                            .to_string(),
                        Value::Integer(i) => i.to_string(),
                        Value::Number(f) => f.to_string(),
                        other => {
                            return Err(format!(
                                "a table key must be a string or a number, not a {}",
                                other.type_name()
                            ));
                        }
                    };
                    keyed.insert(key, to_json(x, depth + 1)?);
                }
                J::Object(keyed.into_iter().collect())
            }
        }
        other => return Err(format!("a {} cannot be stored", other.type_name())),
    })
}

/// Turns an action call from the prelude into an [`Effect`], checking its arguments.
pub(crate) fn effect(
    lua: &Lua,
    vocab: &Vocabulary,
    kind: &str,
    first: String,
    second: Value,
) -> mlua::Result<Effect> {
    Ok(match kind {
        "notify" => {
            let opts: Option<Table> = lua.unpack(second)?;
            let get = |k: &str| -> mlua::Result<Option<String>> {
                match &opts {
                    Some(t) => t.get::<Option<String>>(k),
                    None => Ok(None),
                }
            };
            if let Some(t) = &opts {
                for pair in t.pairs::<String, Value>() {
                    let (k, _) = pair?;
                    if !["category", "priority", "deliver_at"].contains(&k.as_str()) {
                        return Err(mlua::Error::RuntimeError(format!(
                            "notify: unknown option `{k}`; the options are category, priority and deliver_at"
                        )));
                    }
                }
            }
            let (category, priority, deliver_at) =
                (get("category")?, get("priority")?, get("deliver_at")?);
            check_name("notify: priority", &priority, vocab.priorities)?;
            check_name("notify: deliver_at", &deliver_at, vocab.delivery_points)?;
            Effect::Notify {
                message: first,
                category,
                priority,
                deliver_at,
            }
        }
        "log" => {
            let level: Option<String> = lua.unpack(second)?;
            check_name("log: level", &level, vocab.log_levels)?;
            Effect::Log {
                level,
                message: first,
            }
        }
        "decide" => {
            let reason: String = lua.unpack(second)?;
            check_name(
                "decide: the decision",
                &Some(first.clone()),
                vocab.decisions,
            )?;
            Effect::Decide {
                decision: first,
                reason,
            }
        }
        "rewrite" => match to_json(&second, 0) {
            Ok(serde_json::Value::Object(set)) if !set.is_empty() => Effect::Rewrite { set },
            Ok(_) => {
                return Err(mlua::Error::RuntimeError(
                    "rewrite(arguments): give the arguments to set by name, such as { limit = 50 }"
                        .into(),
                ));
            }
            Err(e) => {
                return Err(mlua::Error::RuntimeError(format!(
                    "rewrite: the arguments cannot be used: {e}"
                )));
            }
        },
        "set_state" | "set_session_state" => Effect::SetState {
            key: first,
            value: to_json(&second, 0).map_err(|e| {
                mlua::Error::RuntimeError(format!("set_state: the value cannot be stored: {e}"))
            })?,
            session: kind == "set_session_state",
        },
        _ => Effect::EmitEvent {
            event_type: first,
            payload: match second {
                Value::Nil => serde_json::Value::Object(Default::default()),
                v => to_json(&v, 0).map_err(|e| {
                    mlua::Error::RuntimeError(format!(
                        "emit_event: the payload cannot be sent: {e}"
                    ))
                })?,
            },
        },
    })
}
