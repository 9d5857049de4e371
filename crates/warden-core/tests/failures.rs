//! A rule that fails is logged whatever the execution log's sampling: the specification's
//! "the timeout is logged" (user story 4, scenario 3).

use std::fs;

use warden_core::{Event, ExecutionFilter, Hook, Store, Warden};

#[test]
fn a_script_timeout_reaches_the_execution_log_without_sampling() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("rules")).unwrap();
    fs::create_dir(dir.path().join("scripts")).unwrap();
    fs::write(
        dir.path().join("rules/spin.toml"),
        "[rule]\nid = \"spin\"\ntrigger = \"on_turn_start\"\n\n[condition]\nscript = \"scripts/spin.lua\"\ntimeout = 0.05\n",
    )
    .unwrap();
    fs::write(dir.path().join("scripts/spin.lua"), "while true do end").unwrap();
    let db = dir.path().join("w.db");
    let w = Warden::builder()
        .rules_dir(dir.path().join("rules"))
        .store(Store::open(&db).unwrap())
        .build()
        .unwrap();
    let mut s = w.session();
    let o = s.tick(Hook::OnTurnStart, Event::new());
    assert!(o.errors[0].error.contains("time limit"), "{:?}", o.errors);
    let rows = w
        .store()
        .executions(&ExecutionFilter {
            failures_only: true,
            ..ExecutionFilter::default()
        })
        .unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    let r = &rows[0].record;
    assert_eq!(r.rule_id, "spin");
    assert!(r.error_message.as_deref().unwrap().contains("time limit"));
    assert!(
        r.execution_time_ms >= 40.0,
        "the script's time is measured: {}",
        r.execution_time_ms
    );
    // A rule that does not fail leaves no row when the log is not sampled.
    s.tick(Hook::OnTurnEnd, Event::new());
    assert_eq!(
        w.store()
            .executions(&ExecutionFilter::default())
            .unwrap()
            .len(),
        1
    );
}
