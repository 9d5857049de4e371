//! Property tests: random boolean, numeric and comparison expressions agree with Rust, and the
//! two evaluation paths agree with each other.

use super::*;

/// A random boolean expression over literals, with its value computed by Rust.
fn bool_expr() -> impl Strategy<Value = (String, bool)> {
    let leaf = prop_oneof![
        any::<bool>().prop_map(|b| (b.to_string(), b)),
        (-5i64..5, -5i64..5).prop_map(|(a, b)| (format!("{a} < {b}"), a < b)),
        (-5i64..5, -5i64..5).prop_map(|(a, b)| (format!("{a} == {b}"), a == b)),
    ];
    leaf.prop_recursive(6, 64, 2, |inner| {
        prop_oneof![
            inner.clone().prop_map(|(s, v)| (format!("not ({s})"), !v)),
            inner.clone().prop_map(|(s, v)| (format!("!({s})"), !v)),
            (inner.clone(), inner.clone())
                .prop_map(|((a, x), (b, y))| (format!("({a}) and ({b})"), x && y)),
            (inner.clone(), inner.clone())
                .prop_map(|((a, x), (b, y))| (format!("({a}) or ({b})"), x || y)),
            (inner.clone(), inner.clone())
                .prop_map(|((a, x), (b, y))| (format!("({a}) && ({b})"), x && y)),
            (inner.clone(), inner).prop_map(|((a, x), (b, y))| (format!("({a}) || ({b})"), x || y)),
        ]
    })
}

/// A random numeric expression over the scalar facts and constants.
fn num_expr() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("context.turn.number".to_string()),
        Just("context.turn.token_usage".to_string()),
        Just("failure_count('web_search')".to_string()),
        Just("failure_count('none')".to_string()),
        (-4i64..4).prop_map(|n| n.to_string()),
        prop_oneof![Just(0.0f64), Just(0.5), Just(-1.25), Just(1e18)]
            .prop_map(|f| format!("{f:?}")),
        Just("9223372036854775807".to_string()),
    ];
    leaf.prop_recursive(4, 32, 2, |inner| {
        (
            inner.clone(),
            prop_oneof![Just("+"), Just("-"), Just("*"), Just("/")],
            inner,
        )
            .prop_map(|(a, op, b)| format!("({a} {op} {b})"))
            .boxed()
            .prop_union(
                any::<bool>()
                    .prop_map(|_| "-context.turn.number".to_string())
                    .boxed(),
            )
    })
}

fn cmp_expr() -> impl Strategy<Value = String> {
    let cmp = (
        num_expr(),
        prop_oneof![
            Just("<"),
            Just("<="),
            Just(">"),
            Just(">="),
            Just("=="),
            Just("!=")
        ],
        num_expr(),
    )
        .prop_map(|(a, op, b)| format!("{a} {op} {b}"))
        .boxed();
    let mode = prop_oneof![Just("context.mode == 'full'"), Just("context.mode < 'b'")]
        .prop_map(str::to_string);
    prop_oneof![cmp.clone(), mode].prop_recursive(3, 16, 2, |inner| {
        prop_oneof![
            inner.clone().prop_map(|s| format!("not ({s})")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a}) and ({b})")),
            (inner.clone(), inner).prop_map(|(a, b)| format!("({a}) or ({b})")),
        ]
    })
}

fn same_kind(a: &Verdict, b: &Verdict) -> bool {
    match (a, b) {
        (Verdict::Error(_), Verdict::Error(_)) => true,
        (Verdict::Undetermined(_), Verdict::Undetermined(_)) => true,
        _ => a == b,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn any_text_is_handled_without_panicking(src in "\\PC{0,80}") {
        let c = compiler();
        if let Ok(cond) = c.compile(&src, &CompileOptions::default()) {
            let _ = cond.eval(&mut Frame::new(&TestFacts::default()));
        }
    }

    #[test]
    fn near_miss_text_is_handled_without_panicking(
        parts in proptest::collection::vec(prop_oneof![
            Just("context"), Just("."), Just("turn"), Just("token_usage"), Just("("), Just(")"),
            Just("and"), Just("not"), Just(" "), Just("'x'"), Just("0.8"), Just(">"), Just("["),
            Just("]"), Just("for"), Just("in"), Just("t"), Just("any"), Just("result"), Just(","),
            Just("history"), Just("tools"), Just("-"), Just("/"), Just("get"),
        ], 0..24)
    ) {
        let src: String = parts.concat();
        if let Ok(cond) = compiler().compile(&src, &CompileOptions::default()) {
            let _ = cond.eval(&mut Frame::new(&TestFacts::default()));
        }
    }

    #[test]
    fn boolean_operators_agree_with_rust((src, expected) in bool_expr()) {
        let c = compiler();
        let want = if expected { Verdict::True } else { Verdict::False };
        let facts = TestFacts::default();
        for force_script in [false, true] {
            let cond = c.compile(&src, &CompileOptions { force_script, ..Default::default() }).unwrap();
            prop_assert_eq!(cond.eval(&mut Frame::new(&facts)), want.clone(), "{} (script: {})", src, force_script);
        }
    }

    #[test]
    fn fast_path_and_script_engine_agree(
        src in cmp_expr(),
        usage in prop_oneof![Just(0.0f64), Just(0.8), Just(-2.5), Just(1e19)],
        turn in prop_oneof![Just(0i64), Just(3), Just(-7), Just(i64::MAX)],
    ) {
        let c = compiler();
        let facts = TestFacts { token_usage: usage, turn, ..TestFacts::default() };
        let fast = c.compile(&src, &CompileOptions::default()).unwrap();
        prop_assert!(fast.is_native(), "{}", src);
        let slow = c.compile(&src, &CompileOptions { force_script: true, ..Default::default() }).unwrap();
        let (a, b) = (fast.eval(&mut Frame::new(&facts)), slow.eval(&mut Frame::new(&facts)));
        prop_assert!(same_kind(&a, &b), "{}: native {:?} vs script {:?}", src, a, b);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// An embedder may skip a condition whose necessary threshold does not hold: it must then
    /// really be false.
    #[test]
    fn a_necessary_threshold_is_necessary(
        src in cmp_expr(),
        usage in prop_oneof![Just(0.0f64), Just(0.8), Just(-2.5), Just(1e19)],
        turn in prop_oneof![Just(0i64), Just(3), Just(-7), Just(i64::MAX)],
    ) {
        let c = compiler().compile(&src, &CompileOptions::default()).unwrap();
        let facts = TestFacts { token_usage: usage, turn, ..TestFacts::default() };
        if let Some(t) = c.necessary_threshold()
            && !t.holds(facts.scalar(t.fact)) {
                prop_assert_eq!(c.eval(&mut Frame::new(&facts)), Verdict::False, "{}", src);
            }
    }

    /// An embedder may take a condition whose exact threshold holds as true without
    /// evaluating it: it must then really be true, and false when it does not hold.
    #[test]
    fn an_exact_threshold_is_the_condition(
        src in cmp_expr(),
        usage in prop_oneof![Just(0.0f64), Just(0.8), Just(-2.5), Just(1e19), Just(f64::NAN), Just(f64::INFINITY)],
        turn in prop_oneof![Just(0i64), Just(3), Just(-7), Just(i64::MAX)],
    ) {
        let c = compiler().compile(&src, &CompileOptions::default()).unwrap();
        let facts = TestFacts { token_usage: usage, turn, ..TestFacts::default() };
        if let Some(t) = c.exact_threshold() {
            let want = if t.holds(facts.scalar(t.fact)) { Verdict::True } else { Verdict::False };
            prop_assert_eq!(c.eval(&mut Frame::new(&facts)), want, "{}", src);
        }
    }
}
