//! Criterion benchmarks of a tick: 100 threshold rules on one hook, beside the same work
//! written by hand (the floor), in the same run. `warden bench` runs the same scenario
//! without criterion. Run with `cargo bench --bench tick`.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use warden::SessionOptions;
use warden_bench as bench;

fn tick(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let warden = bench::warden(dir.path());
    let floor = bench::Floor::default();
    let mut session = warden.session();
    let mut explained = warden.session_with(SessionOptions {
        explain: true,
        ..SessionOptions::default()
    });
    let mut group = c.benchmark_group("tick/100-threshold-rules");
    group.bench_function("hand-written floor", |b| {
        b.iter(|| floor.tick(black_box(bench::TOKEN_USAGE)).len())
    });
    group.bench_function("warden", |b| b.iter(|| bench::tick(&mut session)));
    group.bench_function("warden, every rule evaluated", |b| {
        b.iter(|| bench::tick(&mut explained))
    });
    group.finish();

    let mut group = c.benchmark_group("tick/one-rule");
    for (name, kind) in [
        ("expression", bench::OneRule::Expression),
        ("lua script condition", bench::OneRule::ScriptCondition),
        ("lua coroutine resume", bench::OneRule::Coroutine),
    ] {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let warden = bench::one_rule(dir.path(), kind);
        let mut session = warden.session();
        group.bench_function(name, |b| b.iter(|| bench::tick(&mut session)));
    }
    let dir = tempfile::tempdir().expect("a temporary folder");
    let warden = bench::one_rule_with_modes(dir.path());
    let mut session = warden.session();
    group.bench_function("expression, context-window modes detected", |b| {
        b.iter(|| bench::tick(&mut session))
    });
    group.finish();

    // The frame lock: the cost of resuming a running node must not grow with the siblings
    // before it.
    let mut group = c.benchmark_group("tick/behavior-running-4-levels-down");
    for siblings in [1, 100] {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let warden = bench::deep_tree(dir.path(), siblings, 4);
        let mut session = warden.session();
        group.bench_function(format!("{siblings} siblings before it"), |b| {
            b.iter(|| bench::tick(&mut session))
        });
    }
    group.finish();
}

criterion_group!(benches, tick);
criterion_main!(benches);
