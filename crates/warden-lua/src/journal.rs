//! Deterministic replay: how a waiting script is carried into another process.
//!
//! A coroutine's stack cannot be saved. So, as durable workflow engines do, a waiting script
//! is restored by running it again from its start against a record of everything it received
//! that could differ from one run to the next: each value it read from the host, the tool
//! result, the clock, the memory count. Its random numbers come from a generator of its own,
//! seeded when it starts, so they come out the same again. The record also holds, for every
//! run, how it ended (the hook it waited for) and a digest of the actions it took: a re-run
//! that asks for other values, waits elsewhere or acts otherwise has diverged (its rule
//! changed, or it iterated a table whose order differs between Lua states), and is refused.

use std::collections::VecDeque;

use mlua::{Lua, Table, Value};
use serde::{Deserialize, Serialize};

use crate::Effect;

/// A Lua value as the record keeps it: exactly (integers stay integers; a table is its pairs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Recorded {
    /// `nil`.
    Nil,
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A float that JSON can hold.
    Num(f64),
    /// A string of UTF-8 text.
    Str(String),
    /// A table, as its key-value pairs.
    Table(Vec<(Recorded, Recorded)>),
    /// A record handed out by the host: its field names and values.
    Record {
        /// The field names.
        record: Vec<String>,
        /// The values, in the same order.
        values: Vec<Recorded>,
    },
    /// A float JSON cannot hold (`nan`, `inf`, `-inf`).
    Float {
        /// Its name.
        float: String,
    },
    /// A string that is not UTF-8 text, as bytes.
    Bytes {
        /// The bytes.
        bytes: Vec<u8>,
    },
}

/// Makes a record from its field names and values (a replayed record).
pub(crate) type MakeRecord<'a> = dyn FnMut(&[String], Vec<Value>) -> mlua::Result<Value> + 'a;

/// How deep a recorded value may nest.
const MAX_DEPTH: usize = 200;

impl Recorded {
    /// Records a Lua value; an error names what cannot be recorded (a function, a coroutine).
    pub(crate) fn of(v: &Value) -> Result<Recorded, String> {
        Self::of_at(v, 0)
    }

    fn of_at(v: &Value, depth: usize) -> Result<Recorded, String> {
        if depth > MAX_DEPTH {
            return Err(format!("a value nested more than {MAX_DEPTH} levels deep"));
        }
        Ok(match v {
            Value::Nil => Recorded::Nil,
            Value::Boolean(b) => Recorded::Bool(*b),
            Value::Integer(n) => Recorded::Int(*n),
            Value::Number(x) if x.is_finite() => Recorded::Num(*x),
            Value::Number(x) => Recorded::Float {
                float: x.to_string(),
            },
            Value::String(s) => match s.to_str() {
                Ok(text) => Recorded::Str(text.to_string()),
                Err(_) => Recorded::Bytes {
                    bytes: s.as_bytes().to_vec(),
                },
            },
            Value::Table(t) => {
                let mut pairs = Vec::new();
                for pair in t.clone().pairs::<Value, Value>() {
                    let (k, x) = pair.map_err(|e| e.to_string())?;
                    pairs.push((Self::of_at(&k, depth + 1)?, Self::of_at(&x, depth + 1)?));
                }
                Recorded::Table(pairs)
            }
            other => return Err(format!("a {}", other.type_name())),
        })
    }

    /// The Lua value again (a record is made by `record`, from its names and values).
    pub(crate) fn to_lua(&self, lua: &Lua, record: &mut MakeRecord<'_>) -> mlua::Result<Value> {
        Ok(match self {
            Recorded::Nil => Value::Nil,
            Recorded::Bool(b) => Value::Boolean(*b),
            Recorded::Int(n) => Value::Integer(*n),
            Recorded::Num(x) => Value::Number(*x),
            Recorded::Float { float } => Value::Number(float.parse().unwrap_or(f64::NAN)),
            Recorded::Str(s) => Value::String(lua.create_string(s)?),
            Recorded::Bytes { bytes } => Value::String(lua.create_string(bytes)?),
            Recorded::Table(pairs) => {
                let t = lua.create_table()?;
                for (k, v) in pairs {
                    t.raw_set(k.to_lua(lua, record)?, v.to_lua(lua, record)?)?;
                }
                Value::Table(t)
            }
            Recorded::Record {
                record: keys,
                values,
            } => {
                let values = values
                    .iter()
                    .map(|v| v.to_lua(lua, record))
                    .collect::<mlua::Result<Vec<_>>>()?;
                record(keys, values)?
            }
        })
    }

    /// Records the data of a table of globals: what a script keeps between runs. Functions,
    /// coroutines and what else is not data are left out (a script's functions are defined
    /// again by its next run), and so are the entries `skip` names (key, value).
    pub(crate) fn data_of(t: &Table, skip: impl Fn(&Value, &Value) -> bool) -> Recorded {
        let mut pairs = Vec::new();
        for (k, v) in t.clone().pairs::<Value, Value>().flatten() {
            if skip(&k, &v) {
                continue;
            }
            if let (Ok(k), Ok(v)) = (Self::of(&k), Self::of(&v)) {
                pairs.push((k, v));
            }
        }
        Recorded::Table(pairs)
    }
}

/// One value a run received from outside the script.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "input", rename_all = "snake_case")]
pub enum Input {
    /// `root.key` of the frame (`context.turn`, `event.hook`...).
    Field {
        /// The root.
        root: String,
        /// The field.
        key: String,
        /// Its value.
        value: Recorded,
    },
    /// The tool result, when it is not read field by field.
    Result {
        /// Whether it is read field by field.
        lazy: bool,
        /// Its value otherwise.
        value: Recorded,
    },
    /// Whether the tick concerns a tool.
    Tool {
        /// Whether it does.
        value: bool,
    },
    /// A value of the machine: `time`, `clock`, `memory`.
    Machine {
        /// Which.
        what: String,
        /// Its value.
        value: Recorded,
    },
}

impl Input {
    fn describe(&self) -> String {
        match self {
            Input::Field { root, key, .. } => format!("`{root}.{key}`"),
            Input::Result { .. } => "`result`".into(),
            Input::Tool { .. } => "`tool`".into(),
            Input::Machine { what, .. } => format!("the {what}"),
        }
    }
}

/// One run of a waiting script: what it received, and how it ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// What it received, in order.
    pub inputs: Vec<Input>,
    /// The hook it then waited for (`None`: its own tree's).
    pub wake: Option<String>,
    /// A digest of the actions it took.
    pub actions: u64,
}

/// The record of a waiting script: enough to run it again to where it waits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Journal {
    /// The seed of its random numbers.
    pub seed: u64,
    /// Its globals when it started.
    pub globals: Recorded,
    /// Its runs so far, each of which ended waiting.
    pub runs: Vec<RunRecord>,
}

impl Journal {
    /// How many values it holds (what its length is capped by).
    pub fn len(&self) -> usize {
        self.runs.iter().map(|r| r.inputs.len() + 1).sum()
    }

    /// Whether it holds nothing yet.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }
}

/// What a run does with the values it receives.
#[derive(Debug, Default)]
pub(crate) enum Tape {
    /// Nothing (a session that is not saved).
    #[default]
    Off,
    /// Records them.
    Record(Vec<Input>),
    /// Answers them from a record; `diverged` once the run asked for something else.
    Replay {
        inputs: VecDeque<Input>,
        diverged: Option<String>,
    },
}

impl Tape {
    /// Whether values are answered from a record.
    pub(crate) fn replaying(&self) -> bool {
        matches!(self, Tape::Replay { .. })
    }

    /// Whether values are recorded.
    pub(crate) fn recording(&self) -> bool {
        matches!(self, Tape::Record(_))
    }

    /// Keeps `input` when recording.
    pub(crate) fn record(&mut self, input: impl FnOnce() -> Result<Input, String>) {
        if let Tape::Record(inputs) = self {
            match input() {
                Ok(i) => inputs.push(i),
                // A value that cannot be recorded: the run cannot be replayed; a later save
                // finds out (its replay diverges) and halts it cleanly.
                Err(e) => inputs.push(Input::Machine {
                    what: format!("unrecordable value ({e})"),
                    value: Recorded::Nil,
                }),
            }
        }
    }

    /// The next recorded value, which must be `want`; otherwise the replay has diverged.
    pub(crate) fn replay(&mut self, want: &Input) -> Result<Input, String> {
        let Tape::Replay { inputs, diverged } = self else {
            return Err("internal: not replaying".into());
        };
        if let Some(d) = diverged {
            return Err(d.clone());
        }
        let next = inputs.pop_front();
        let same = match (&next, want) {
            (
                Some(Input::Field {
                    root: a, key: b, ..
                }),
                Input::Field {
                    root: c, key: d, ..
                },
            ) => a == c && b == d,
            (Some(Input::Machine { what: a, .. }), Input::Machine { what: b, .. }) => a == b,
            (Some(Input::Result { .. }), Input::Result { .. })
            | (Some(Input::Tool { .. }), Input::Tool { .. }) => true,
            _ => false,
        };
        match next {
            Some(input) if same => Ok(input),
            other => {
                let why = format!(
                    "its re-run read {} where the record has {}",
                    want.describe(),
                    other.map_or_else(|| "nothing more".into(), |i| i.describe())
                );
                *diverged = Some(why.clone());
                Err(why)
            }
        }
    }
}

/// A digest of a run's actions, the same in every process of one build.
pub(crate) fn digest(effects: &[Effect]) -> u64 {
    // FNV-1a over the actions' debug text: stable, and cheap next to running a script.
    let text = format!("{effects:?}");
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The random numbers of one script: SplitMix64, seeded when the script starts, so that a
/// replay draws the same ones.
pub(crate) fn next_random(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// `math.random(m, n)` as Lua 5.4 defines it, drawing from `state`.
pub(crate) fn random(state: &mut u64, args: &[i64], float: bool) -> Result<Value, String> {
    let r = next_random(state);
    if float {
        return Ok(Value::Number(
            (r >> 11) as f64 * (1.0 / (1u64 << 53) as f64),
        ));
    }
    let (low, up) = match *args {
        [0] => return Ok(Value::Integer(r as i64)),
        [m] => (1, m),
        [m, n] => (m, n),
        _ => return Err("wrong number of arguments".into()),
    };
    if low > up {
        return Err(format!(
            "bad argument #{} to 'random' (interval is empty)",
            args.len()
        ));
    }
    // Uniform in [low, up] by rejection, as Lua's `project` does.
    let span = (up as u64).wrapping_sub(low as u64);
    let mut r = r;
    if span & span.wrapping_add(1) == 0 {
        r &= span;
    } else {
        let mut lim = span;
        lim |= lim >> 1;
        lim |= lim >> 2;
        lim |= lim >> 4;
        lim |= lim >> 8;
        lim |= lim >> 16;
        lim |= lim >> 32;
        loop {
            r &= lim;
            if r <= span {
                break;
            }
            r = next_random(state);
        }
    }
    Ok(Value::Integer((low as u64).wrapping_add(r) as i64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_values_keep_integers_floats_and_tables_apart() {
        let values = vec![
            Recorded::Int(1),
            Recorded::Num(1.0),
            Recorded::Num(0.5),
            Recorded::Str("x".into()),
            Recorded::Nil,
            Recorded::Table(vec![(Recorded::Int(1), Recorded::Bool(true))]),
            Recorded::Record {
                record: vec!["a".into()],
                values: vec![Recorded::Int(2)],
            },
            Recorded::Float {
                float: "inf".into(),
            },
            Recorded::Bytes {
                bytes: vec![0xff, 0],
            },
        ];
        let text = serde_json::to_string(&values).unwrap();
        let back: Vec<Recorded> = serde_json::from_str(&text).unwrap();
        assert_eq!(back, values, "{text}");
    }

    #[test]
    fn random_stays_in_its_interval_and_repeats_from_its_seed() {
        let mut a = 7;
        let mut b = 7;
        for _ in 0..1000 {
            let x = random(&mut a, &[3, 9], false).unwrap();
            assert!(matches!(x, Value::Integer(n) if (3..=9).contains(&n)));
            assert_eq!(random(&mut b, &[3, 9], false).unwrap(), x);
        }
        assert!(random(&mut a, &[5, 1], false).is_err());
        assert!(
            matches!(random(&mut a, &[], true).unwrap(), Value::Number(f) if (0.0..1.0).contains(&f))
        );
        assert!(matches!(
            random(&mut a, &[i64::MIN, i64::MAX], false).unwrap(),
            Value::Integer(_)
        ));
    }
}
