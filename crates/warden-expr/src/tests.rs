//! Tests of the whole pipeline (parse, check, compile, evaluate) against a small schema shaped
//! like Warden's context.

use proptest::prelude::*;
use rhai::{Array, Dynamic, Map};

use super::*;

mod properties;

const TOKEN_USAGE: ScalarId = ScalarId(0);
const TURN_NUMBER: ScalarId = ScalarId(1);
const TOOL_CALLS: ScalarId = ScalarId(2);
const MODE: ScalarId = ScalarId(3);
const FAILURES: MapId = MapId(0);

fn schema() -> Schema {
    let mut s = Schema::new();
    let turn = s.record(
        "turn",
        vec![
            FieldDef::new("number", Type::Int, "turn number").scalar(TURN_NUMBER),
            FieldDef::new("token_usage", Type::Float, "share of tokens used").scalar(TOKEN_USAGE),
        ],
    );
    let tool = s.record(
        "tool record",
        vec![
            FieldDef::new("name", Type::Str, "tool name"),
            FieldDef::new("success", Type::Bool, "whether it succeeded"),
            FieldDef::new("result", Type::Any, "what it returned"),
        ],
    );
    let history = s.record(
        "history",
        vec![
            FieldDef::new("tools", Type::list(Type::Record(tool)), "recent tool calls"),
            FieldDef::new("failures", Type::map(Type::Int), "failures per tool")
                .direct_map(FAILURES),
            FieldDef::new("tool_count", Type::Int, "tool calls so far").scalar(TOOL_CALLS),
        ],
    );
    let context = s.record(
        "context",
        vec![
            FieldDef::new("turn", Type::Record(turn), "this turn"),
            FieldDef::new("history", Type::Record(history), "what happened"),
            FieldDef::new("mode", Type::Str, "active mode").scalar(MODE),
            FieldDef::alias("token_usage", "context.turn.token_usage", "shorthand"),
            FieldDef::alias("state", "w_state", "plugin state"),
        ],
    );
    s.root("context", Type::Record(context), "the agent's situation");
    s.root("result", Type::Any, "the tool result");
    s.hidden_root("w_state", Type::map(Type::Any));
    s.root_alias("token_usage", "context.turn.token_usage", "shorthand");
    s.helper(
        "context_above_threshold",
        &["t"],
        "context.turn.token_usage >= t",
        "",
    );
    s.helper(
        "failure_count",
        &["name"],
        "get(context.history.failures, name, 0)",
        "",
    );
    s.helper(
        "tool_completed",
        &["name"],
        "any(t.name == name and t.success for t in context.history.tools)",
        "",
    );
    s
}

/// Facts backed by plain values, converted to script values on demand.
#[derive(Clone)]
struct TestFacts {
    token_usage: f64,
    turn: i64,
    mode: String,
    failures: Vec<(String, i64)>,
    tools: Vec<(String, bool, Dynamic)>,
    result: Dynamic,
    state: Map,
}

impl Default for TestFacts {
    fn default() -> Self {
        TestFacts {
            token_usage: 0.5,
            turn: 3,
            mode: "full".into(),
            failures: vec![("web_search".into(), 3)],
            tools: vec![
                ("vault_search".into(), true, Dynamic::from(7_i64)),
                ("web_search".into(), false, Dynamic::UNIT),
            ],
            result: {
                let mut m = Map::new();
                m.insert("count".into(), Dynamic::from(7_i64));
                m.insert("label".into(), Dynamic::from("seven"));
                m.into()
            },
            state: Map::new(),
        }
    }
}

impl Facts for TestFacts {
    fn scalar(&self, id: ScalarId) -> Scalar<'_> {
        match id {
            TOKEN_USAGE => Scalar::Float(self.token_usage),
            TURN_NUMBER => Scalar::Int(self.turn),
            TOOL_CALLS => Scalar::Int(self.tools.len() as i64),
            MODE => Scalar::Str(&self.mode),
            _ => Scalar::Null,
        }
    }

    fn map_get(&self, _id: MapId, key: &str) -> Option<Scalar<'_>> {
        self.failures
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| Scalar::Int(*v))
    }

    fn root(&self, name: &str) -> Dynamic {
        match name {
            "context" => {
                let mut turn = Map::new();
                turn.insert("number".into(), self.turn.into());
                turn.insert("token_usage".into(), self.token_usage.into());
                let mut failures = Map::new();
                for (k, v) in &self.failures {
                    failures.insert(k.as_str().into(), (*v).into());
                }
                let tools: Array = self
                    .tools
                    .iter()
                    .map(|(n, ok, r)| {
                        let mut m = Map::new();
                        m.insert("name".into(), n.as_str().into());
                        m.insert("success".into(), (*ok).into());
                        m.insert("result".into(), r.clone());
                        m.into()
                    })
                    .collect();
                let mut history = Map::new();
                history.insert("tools".into(), tools.into());
                history.insert("failures".into(), failures.into());
                history.insert("tool_count".into(), (self.tools.len() as i64).into());
                let mut ctx = Map::new();
                ctx.insert("turn".into(), turn.into());
                ctx.insert("history".into(), history.into());
                ctx.insert("mode".into(), self.mode.as_str().into());
                ctx.into()
            }
            "result" => self.result.clone(),
            "w_state" => self.state.clone().into(),
            _ => Dynamic::UNIT,
        }
    }
}

fn compiler() -> Compiler {
    Compiler::new(schema())
}

fn eval_with(src: &str, facts: &TestFacts) -> Verdict {
    let c = compiler()
        .compile(src, &CompileOptions::default())
        .unwrap_or_else(|e| panic!("{src}: {e}"));
    c.eval(&mut Frame::new(facts))
}

fn eval(src: &str) -> Verdict {
    eval_with(src, &TestFacts::default())
}

fn compile_err(src: &str) -> ExprError {
    compiler()
        .compile(src, &CompileOptions::default())
        .expect_err(src)
}

#[test]
fn every_condition_the_seeds_write_compiles_as_written() {
    // Each of these appears verbatim in the specification.
    for src in [
        "context.turn.token_usage > 0.8",
        "context.token_usage > 0.8",
        "context.turn.token_usage > 0.8 and context.history.tool_count > 5",
        "context_above_threshold(0.8) or tool_completed('vault_search')",
        "result.count > 6",
    ] {
        compiler()
            .compile(src, &CompileOptions::default())
            .unwrap_or_else(|e| panic!("{src}: {e}"));
    }
    assert_eq!(eval("context.token_usage > 0.8"), Verdict::False);
    assert_eq!(eval("token_usage < 0.8"), Verdict::True);
    assert_eq!(eval("tool_completed('vault_search')"), Verdict::True);
    assert_eq!(eval("tool_completed('web_search')"), Verdict::False);
    assert_eq!(eval("result.count > 6"), Verdict::True);
}

#[test]
fn threshold_conditions_take_the_fast_path() {
    let c = compiler();
    let opts = CompileOptions::default();
    for src in [
        "context.turn.token_usage > 0.8",
        "context_above_threshold(0.8)",
        "context.token_usage > 0.8 and not (context.turn.number < 3)",
        "failure_count('web_search') >= 3",
        "context.mode == 'full' or context.turn.number * 2 > 10",
        "context.turn.number / 4 > 0.5",
    ] {
        assert!(c.compile(src, &opts).unwrap().is_native(), "{src}");
    }
    for src in [
        "result.count > 6",
        "tool_completed('x')",
        "context.state.get('k') == 1",
    ] {
        assert!(!c.compile(src, &opts).unwrap().is_native(), "{src}");
    }
    assert_eq!(eval("failure_count('web_search') >= 3"), Verdict::True);
    assert_eq!(eval("failure_count('nothing') == 0"), Verdict::True);
}

#[test]
fn missing_free_form_data_is_undetermined_not_false() {
    let mut facts = TestFacts {
        result: Map::new().into(),
        ..TestFacts::default()
    };
    let v = eval_with("result.count > 6", &facts);
    assert_eq!(v, Verdict::Undetermined("`result.count` is missing".into()));
    // The author can say what a missing key means.
    assert_eq!(
        eval_with("get(result, 'count', 0) > 6", &facts),
        Verdict::False
    );
    assert_eq!(
        eval_with("has(result, 'count') and result.count > 6", &facts),
        Verdict::False
    );
    assert_eq!(
        eval_with("'count' in result and result.count > 6", &facts),
        Verdict::False
    );
    // A null result, or one of the wrong kind, is undetermined too.
    facts.result = Dynamic::UNIT;
    assert!(matches!(
        eval_with("result.count > 6", &facts),
        Verdict::Undetermined(_)
    ));
    facts.result = {
        let mut m = Map::new();
        m.insert("count".into(), "many".into());
        m.into()
    };
    let v = eval_with("result.count > 6", &facts);
    assert_eq!(
        v,
        Verdict::Undetermined("`result.count > 6` cannot compare a string with an integer".into())
    );
    // Out-of-range list items are missing data.
    assert!(matches!(
        eval("context.history.tools[5].success"),
        Verdict::Undetermined(_)
    ));
    assert_eq!(
        eval("context.history.tools[-1].name == 'web_search'"),
        Verdict::True
    );
}

#[test]
fn broken_conditions_are_errors() {
    assert!(
        matches!(eval("context.turn.number / 0 > 1"), Verdict::Error(m) if m.contains("divides by zero"))
    );
    assert!(
        matches!(eval("result.count / 0 > 1"), Verdict::Error(m) if m.contains("divides by zero"))
    );
    assert!(matches!(
        eval("context.turn.number * 9223372036854775807 > 0"),
        Verdict::Error(_)
    ));
    // A runaway condition is stopped by the operation limit, not left to spin.
    let facts = TestFacts {
        tools: (0..400)
            .map(|i| (format!("t{i}"), true, Dynamic::UNIT))
            .collect(),
        ..TestFacts::default()
    };
    let v = eval_with(
        "count(any(a.name == b.name and a.name == 'zz' for b in context.history.tools) for a in context.history.tools) > 0",
        &facts,
    );
    assert!(
        matches!(&v, Verdict::Error(m) if m.contains("operations")),
        "{v:?}"
    );
}

#[test]
fn state_reads_through_get() {
    let mut facts = TestFacts::default();
    facts.state.insert("seen".into(), 2_i64.into());
    assert_eq!(
        eval_with("context.state.get('seen') == 2", &facts),
        Verdict::True
    );
    assert_eq!(
        eval_with("context.state.get('other') == null", &facts),
        Verdict::True
    );
    assert_eq!(
        eval_with("context.state.get('other', 0) + 1 == 1", &facts),
        Verdict::True
    );
    // A key of a value that may be null: undetermined when it is null.
    assert!(matches!(
        eval_with("context.state.get('other').y > 1", &facts),
        Verdict::Undetermined(m) if m.contains("null")
    ));
}

#[test]
fn generators_lists_and_functions() {
    assert_eq!(
        eval("any(t.name == 'web_search' for t in context.history.tools)"),
        Verdict::True
    );
    assert_eq!(
        eval("all(t.success for t in context.history.tools)"),
        Verdict::False
    );
    assert_eq!(
        eval("count(t.success for t in context.history.tools) == 1"),
        Verdict::True
    );
    assert_eq!(
        eval("count(true for t in context.history.tools if t.name != 'x') == 2"),
        Verdict::True
    );
    assert_eq!(eval("len(context.history.tools) == 2"), Verdict::True);
    assert_eq!(eval("context.history.tools.len() == 2"), Verdict::True);
    assert_eq!(
        eval("any([false, true]) and not all([false, true])"),
        Verdict::True
    );
    assert_eq!(eval("sum([1, 2, 3.5]) == 6.5"), Verdict::True);
    assert_eq!(
        eval("max(1, 5, 3) == 5 and min([4, 2]) == 2"),
        Verdict::True
    );
    assert_eq!(
        eval("lower('ABC') == 'abc' and 'b' in 'abc'"),
        Verdict::True
    );
    assert_eq!(eval("starts_with(context.mode, 'fu')"), Verdict::True);
    assert_eq!(eval("int('42') + float(1) == 43"), Verdict::True);
    assert_eq!(eval("str(result.count) == '7'"), Verdict::True);
    assert_eq!(
        eval("'vault_search' not in context.history.failures"),
        Verdict::True
    );
    assert_eq!(eval("abs(-3) == 3"), Verdict::True);
    assert_eq!(eval("result.label == 'seven'"), Verdict::True);
}

#[test]
fn regular_expressions_are_checked_at_load_and_match_in_linear_time() {
    assert_eq!(eval("matches(context.mode, '^fu(ll)?$')"), Verdict::True);
    // A backslash the language does not use is kept, so patterns read as written.
    assert_eq!(
        eval(r"matches('rm  -r -f /', 'rm\s+(-\w+\s+)*-\w*f')"),
        Verdict::True
    );
    assert_eq!(eval(r"'\d' == '\\d'"), Verdict::True);
    assert_eq!(eval("matches(result.label, 'six')"), Verdict::False);
    // Free-form data that is not a string: undetermined, as for other string functions.
    assert!(matches!(
        eval("matches(result.count, 'x')"),
        Verdict::Undetermined(_)
    ));
    let e = compile_err("matches(context.mode, '(unclosed')");
    assert!(e.message().contains("not a regular expression"), "{e}");
    assert_eq!(e.span().start, 22, "the error points at the pattern");
    let e = compile_err("matches(context.mode, context.mode)");
    assert!(
        e.message().contains("must be written in the condition"),
        "{e}"
    );
    let e = compile_err("matches(context.mode, '(?=look)ahead')");
    assert!(e.message().contains("not a regular expression"), "{e}");
    // A pattern made to backtrack catastrophically in other engines is linear here (in a
    // backtracking engine this would not finish).
    let facts = TestFacts {
        mode: "a".repeat(10_000),
        ..TestFacts::default()
    };
    assert_eq!(
        eval_with("matches(context.mode, '^(a+)+$')", &facts),
        Verdict::True
    );
}

#[test]
fn unknown_fields_name_the_nearest_valid_one() {
    let e = compile_err("context.turn.tokn_usage > 0.8");
    assert_eq!(e.kind(), ErrorKind::UnknownField);
    assert_eq!(e.message(), "`context.turn` has no field `tokn_usage`");
    assert_eq!(e.help(), Some("did you mean `context.turn.token_usage`?"));
    assert_eq!(e.span(), Span::new(13, 23));

    let e = compile_err("contxt.turn.number > 1");
    assert_eq!(e.kind(), ErrorKind::UnknownName);
    assert_eq!(e.help(), Some("did you mean `context`?"));

    let e = compile_err("context.hist.tools");
    assert_eq!(e.help(), Some("did you mean `context.history`?"));

    let e = compile_err("tool_complted('x')");
    assert_eq!(e.help(), Some("did you mean `tool_completed`?"));

    // A field written without its root.
    let e = compile_err("mode == 'research'");
    assert_eq!(e.kind(), ErrorKind::UnknownName);
    assert_eq!(e.help(), Some("did you mean `context.mode`?"));

    let e = compile_err("w_state.x == 1");
    assert_eq!(
        e.kind(),
        ErrorKind::UnknownName,
        "hidden roots cannot be named"
    );
}

#[test]
fn types_are_checked_at_load() {
    assert_eq!(
        compile_err("context.turn.number > 'high'").kind(),
        ErrorKind::Type
    );
    assert_eq!(compile_err("context.turn.number").kind(), ErrorKind::Type);
    assert!(
        compile_err("context.turn.number")
            .help()
            .unwrap()
            .contains("> 0")
    );
    assert_eq!(
        compile_err("context.history.tools.name == 'x'").kind(),
        ErrorKind::Type
    );
    assert_eq!(
        compile_err("context.turn.number and true").kind(),
        ErrorKind::Type
    );
    let e = compile_err("any(context.history.tools)");
    assert_eq!(e.kind(), ErrorKind::Type);
    assert!(e.help().unwrap().contains("x.success for x in"), "{e}");
    assert_eq!(
        compile_err("context.turn.number").message(),
        "a condition must be true or false, but this is an integer"
    );
    assert_eq!(
        compile_err("context_above_threshold(1, 2)").kind(),
        ErrorKind::UnknownFunction
    );
    assert_eq!(
        compile_err("any(t for context in context.history.tools)").kind(),
        ErrorKind::UnknownName
    );
}

#[test]
fn unavailable_roots_say_why() {
    let opts = CompileOptions {
        unavailable: &[("result", "on_turn_start has no tool result")],
        force_script: false,
    };
    let e = compiler().compile("result.count > 6", &opts).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unavailable);
    assert_eq!(
        e.message(),
        "`result` is not available here: on_turn_start has no tool result"
    );
}

#[test]
fn errors_in_helpers_point_at_the_call() {
    let e = compile_err("context.mode == 'x' or context_above_threshold('high')");
    assert_eq!(e.span(), Span::new(23, 54));
}

#[test]
fn frames_convert_each_root_once_and_can_forget_one() {
    struct Counting(std::cell::Cell<u32>);
    impl Facts for Counting {
        fn scalar(&self, _: ScalarId) -> Scalar<'_> {
            Scalar::Null
        }
        fn map_get(&self, _: MapId, _: &str) -> Option<Scalar<'_>> {
            None
        }
        fn root(&self, _: &str) -> Dynamic {
            self.0.set(self.0.get() + 1);
            let mut m = Map::new();
            m.insert("count".into(), 7_i64.into());
            m.into()
        }
    }
    let facts = Counting(Default::default());
    let c = compiler()
        .compile("result.count > 6", &CompileOptions::default())
        .unwrap();
    let mut frame = Frame::new(&facts);
    for _ in 0..3 {
        assert_eq!(c.eval(&mut frame), Verdict::True);
    }
    assert_eq!(facts.0.get(), 1);
    frame.invalidate("result");
    assert_eq!(c.eval(&mut frame), Verdict::True);
    assert_eq!(facts.0.get(), 2);
}

// The property tests: `tests/properties.rs`.

#[test]
fn thresholds_are_found_in_and_chains() {
    let c = compiler();
    let t = c
        .compile(
            "context.mode == 'x' and 0.8 < context.turn.token_usage",
            &CompileOptions::default(),
        )
        .unwrap()
        .necessary_threshold()
        .unwrap();
    assert_eq!(
        (t.fact, t.comparison, t.bound),
        (TOKEN_USAGE, Comparison::Gt, Bound::Float(0.8))
    );
    for src in [
        "context.turn.number > 1 or context.turn.number < 0",
        "context.turn.number != 3",
        "result.count > 6",
    ] {
        assert!(
            c.compile(src, &CompileOptions::default())
                .unwrap()
                .necessary_threshold()
                .is_none(),
            "{src}"
        );
    }
}

// ---- free-form data on the fast path, and partial reads ----

/// A free-form value, as JSON holds it.
#[derive(Debug, Clone)]
enum V {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    List(Vec<V>),
    Map(Vec<(String, V)>),
}

impl V {
    fn dynamic(&self) -> Dynamic {
        match self {
            V::Null => Dynamic::UNIT,
            V::Bool(b) => (*b).into(),
            V::Int(n) => (*n).into(),
            V::Float(f) => (*f).into(),
            V::Str(s) => s.as_str().into(),
            V::List(items) => items.iter().map(V::dynamic).collect::<Array>().into(),
            V::Map(entries) => {
                let mut m = Map::new();
                for (k, v) in entries {
                    m.insert(k.as_str().into(), v.dynamic());
                }
                m.into()
            }
        }
    }

    fn get(&self, key: &str) -> Option<&V> {
        match self {
            V::Map(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
}

/// Facts whose `result` is free-form, read by key on both paths; records what the script
/// engine asked for.
struct DataFacts {
    base: TestFacts,
    result: V,
    asked: std::cell::RefCell<Vec<String>>,
}

impl Facts for DataFacts {
    fn scalar(&self, id: ScalarId) -> Scalar<'_> {
        self.base.scalar(id)
    }

    fn map_get(&self, id: MapId, key: &str) -> Option<Scalar<'_>> {
        self.base.map_get(id, key)
    }

    fn root(&self, name: &str) -> Dynamic {
        match name {
            "result" => self.result.dynamic(),
            other => self.base.root(other),
        }
    }

    fn value(&self, path: &[&str], keys: Option<&[&str]>) -> Dynamic {
        self.asked.borrow_mut().push(format!(
            "{}{}",
            path.join("."),
            keys.map(|k| format!("{k:?}")).unwrap_or_default()
        ));
        if path == ["result"]
            && let (Some(keys), V::Map(_)) = (keys, &self.result)
        {
            let mut m = Map::new();
            for k in keys {
                if let Some(v) = self.result.get(k) {
                    m.insert((*k).into(), v.dynamic());
                }
            }
            return m.into();
        }
        let mut v = self.root(path[0]);
        for f in &path[1..] {
            let next = v
                .read_lock::<Map>()
                .and_then(|m| m.get(*f).cloned())
                .unwrap_or(Dynamic::UNIT);
            v = next;
        }
        v
    }

    fn data(&self, path: &[&str], keys: &[&str]) -> Data<'_> {
        if path != ["result"] {
            return Data::Other;
        }
        let mut at = &self.result;
        for (i, k) in keys.iter().enumerate() {
            match (at, at.get(k)) {
                (_, Some(v)) => at = v,
                (V::Map(_), None) if i + 1 == keys.len() => return Data::Missing,
                _ => return Data::Other,
            }
        }
        Data::Scalar(match at {
            V::Null => Scalar::Null,
            V::Bool(b) => Scalar::Bool(*b),
            V::Int(n) => Scalar::Int(*n),
            V::Float(f) => Scalar::Float(*f),
            V::Str(s) => Scalar::Str(s),
            V::List(_) | V::Map(_) => return Data::Other,
        })
    }
}

fn data_facts(result: V) -> DataFacts {
    DataFacts {
        base: TestFacts::default(),
        result,
        asked: Default::default(),
    }
}

fn leaf() -> impl Strategy<Value = V> {
    prop_oneof![
        Just(V::Null),
        any::<bool>().prop_map(V::Bool),
        prop_oneof![Just(0i64), Just(6), Just(7), Just(-3), Just(i64::MAX)].prop_map(V::Int),
        prop_oneof![Just(0.5f64), Just(6.0), Just(7.25), Just(-1e300)].prop_map(V::Float),
        prop_oneof![Just(""), Just("seven"), Just("z")].prop_map(|s| V::Str(s.into())),
        Just(V::List(vec![V::Int(1)])),
        Just(V::Map(vec![("count".into(), V::Int(9))])),
    ]
}

fn free_result() -> impl Strategy<Value = V> {
    prop_oneof![
        4 => proptest::collection::vec(
            (prop_oneof![Just("count"), Just("label"), Just("items"), Just("n")], leaf()),
            0..4,
        )
        .prop_map(|entries| {
            let mut seen = Vec::new();
            V::Map(
                entries
                    .into_iter()
                    .filter(|(k, _)| {
                        let new = !seen.contains(k);
                        seen.push(*k);
                        new
                    })
                    .map(|(k, v)| (k.to_string(), v))
                    .collect(),
            )
        }),
        1 => leaf(),
    ]
}

const DATA_CONDITIONS: &[&str] = &[
    "result.count > 6",
    "6 < result.count",
    "result.count == 'seven'",
    "result.label < 'z'",
    "result.count != None",
    "result.count == result.n",
    "result['count'] >= 0.5",
    "get(result, 'count', 0) >= 3",
    "get(result, 'count', 'none') == 'none'",
    "result.items.count > 1",
    "result.count > 6 and context.turn.number > 1",
    "not (result.count > 6)",
    "result.count >= 0.5 or result.label == 'x'",
    "result.count == true",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// A condition on free-form data answers exactly as the script engine does, messages
    /// included: the fast path answers only what it mirrors and hands the rest over.
    #[test]
    fn free_form_data_answers_as_the_script_engine(
        which in 0..DATA_CONDITIONS.len(),
        result in free_result(),
    ) {
        let src = DATA_CONDITIONS[which];
        let c = compiler();
        let facts = data_facts(result);
        let fast = c.compile(src, &CompileOptions::default()).unwrap();
        let slow = c.compile(src, &CompileOptions { force_script: true, ..Default::default() }).unwrap();
        let (a, b) = (fast.eval(&mut Frame::new(&facts)), slow.eval(&mut Frame::new(&facts)));
        prop_assert_eq!(a, b, "{} on {:?}", src, facts.result);
    }
}

#[test]
fn free_form_comparisons_take_the_fast_path_when_they_can() {
    let c = compiler();
    let cond = c
        .compile("result.count > 6", &CompileOptions::default())
        .unwrap();
    assert!(!cond.is_native(), "it may need the script engine");
    let facts = data_facts(V::Map(vec![("count".into(), V::Int(8))]));
    assert_eq!(cond.eval(&mut Frame::new(&facts)), Verdict::True);
    assert!(facts.asked.borrow().is_empty(), "answered on the fast path");
    let facts = data_facts(V::Map(vec![("label".into(), V::Int(8))]));
    assert!(
        matches!(cond.eval(&mut Frame::new(&facts)), Verdict::Undetermined(m) if m.contains("is missing"))
    );
    assert_eq!(
        *facts.asked.borrow(),
        ["result[\"count\"]"],
        "the script reads one key"
    );
}

#[test]
fn the_script_engine_gets_only_what_a_condition_reads() {
    let c = compiler();
    let facts = data_facts(V::Null);
    let cond = c
        .compile(
            "len(context.history.tools) > 1 and context.turn.number > 0 and get(context.history.failures, 'web_search', 0) > 1 and result == None",
            &CompileOptions::default(),
        )
        .unwrap();
    let mut frame = Frame::new(&facts);
    assert_eq!(cond.eval(&mut frame), Verdict::True);
    assert_eq!(
        *facts.asked.borrow(),
        [
            "context.history.tools",
            "context.history.failures[\"web_search\"]",
            "context.turn.number",
            "result"
        ]
    );
    // A second condition that reads the same reuses what was built; one that reads more of
    // `context` rebuilds it.
    assert_eq!(cond.eval(&mut frame), Verdict::True);
    assert_eq!(facts.asked.borrow().len(), 4);
    let other = c
        .compile(
            "context.mode == 'full' and len(context.history.tools) > 1",
            &CompileOptions::default(),
        )
        .unwrap();
    assert_eq!(other.eval(&mut frame), Verdict::True);
    assert_eq!(
        facts.asked.borrow()[4..],
        ["context.mode", "context.history.tools"]
    );
    // A key computed from scalar facts is read as that key.
    let facts = data_facts(V::Null);
    let cond = c
        .compile(
            "context.history.failures[context.mode] == 0 or len(context.history.tools) > 0",
            &CompileOptions::default(),
        )
        .unwrap();
    cond.eval(&mut Frame::new(&facts));
    assert_eq!(
        facts.asked.borrow()[0],
        "context.history.failures[\"full\"]"
    );
}

/// A kind of nesting, and the condition nesting it `n` times.
type Shape = (&'static str, fn(usize) -> String);

/// A condition's rhai text is compiled when first run in release builds (at once in debug
/// builds, where this runs): whatever the parser accepts, up to its nesting limit, must compile
/// in the engine, or a rule would load and then fail at every evaluation.
#[test]
fn the_deepest_conditions_the_parser_accepts_compile_in_the_script_engine() {
    let shapes: [Shape; 6] = [
        ("not", |n| {
            format!("{}context.turn.number > 1", "not ".repeat(n))
        }),
        ("brackets", |n| {
            format!("{}context.turn.number > 1{}", "(".repeat(n), ")".repeat(n))
        }),
        ("calls", |n| {
            format!("{}'X'{} == 'x'", "lower(".repeat(n), ")".repeat(n))
        }),
        ("operators", |n| {
            format!("context.turn.number{} > 0", " + 1".repeat(n))
        }),
        ("generators", |n| {
            let mut e = "true".to_string();
            for i in 0..n {
                e = format!("any(({e}) and t{i}.success for t{i} in context.history.tools)");
            }
            e
        }),
        ("and-or", |n| {
            let mut e = "context.turn.number > 1".to_string();
            for i in 0..n {
                let op = if i % 2 == 0 { "and" } else { "or" };
                e = format!("({e}) {op} context.turn.token_usage > 0.{i}");
            }
            e
        }),
    ];
    let c = compiler();
    let opts = CompileOptions {
        force_script: true,
        ..CompileOptions::default()
    };
    for (name, make) in &shapes {
        let mut deepest = 0;
        for n in 1..=80 {
            let src = make(n);
            match c.compile(&src, &opts) {
                Ok(_) => deepest = n,
                Err(e) => assert!(
                    !e.to_string().contains("could not be compiled"),
                    "{name} x{n}: the parser accepted what the engine refuses: {e}"
                ),
            }
        }
        assert!(deepest >= 20, "{name}: only {deepest} levels compiled");
    }
}

/// Should the engine refuse a condition's text when it is first run (a fault in Warden's
/// emitter), the condition is an error at each evaluation, never a panic or a silent false.
#[test]
fn a_script_the_engine_refuses_when_first_run_is_an_error_at_each_evaluation() {
    let condition = Condition {
        source: "a broken emission".into(),
        program: Program::Script(Script {
            ast: OnceLock::new(),
            text: "w_key((".into(),
            reads: Vec::new(),
            roots: Vec::new(),
        }),
        engine: SharedEngine::default(),
    };
    for _ in 0..2 {
        match condition.eval(&mut Frame::new(&TestFacts::default())) {
            Verdict::Error(m) => assert!(m.contains("could not be compiled"), "{m}"),
            other => panic!("{other:?}"),
        }
    }
}
