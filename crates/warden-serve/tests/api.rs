//! The HTTP API against the real server on a loopback port: the agent API, the management API,
//! the event stream, tokens and cross-site refusals, and bad input of every kind (always a
//! 4xx that says what is wrong, never a 500).

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::{Client, HOSTILE, Running, enc, warden};
use warden_serve::{ServeOptions, Tokens};

/// How long a test waits for what comes within milliseconds (an event in the stream, the end
/// of the stream once the server stops, a tick that starts): a hang detector, not a speed
/// check; a wait ends as soon as what it waits for comes.
const WAIT: Duration = Duration::from_secs(60);

async fn start() -> (tempfile::TempDir, Running, Client) {
    let dir = tempfile::tempdir().unwrap();
    let server = Running::start(warden(dir.path(), None), ServeOptions::default()).await;
    let client = server.client();
    (dir, server, client)
}

fn event(hook: &str) -> Value {
    json!({ "hook": hook })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_gets_the_outcome_and_the_session_remembers() {
    let (_dir, server, c) = start().await;
    let r = c
        .post(
            "/v1/sessions/s1/events?user=ada",
            &json!({"hook": "on_turn_start", "turn": {"token_usage": 0.9}}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let o = r.json();
    assert_eq!(o["session"], "s1");
    assert_eq!(o["proceed"], "yes");
    assert_eq!(o["fired"], json!(["token-budget-warning"]));
    assert_eq!(
        o["inject"][0]["message"],
        "Token budget at 90%. Consider wrapping up or summarizing."
    );
    assert_eq!(o["ruling"], Value::Null);

    // Over the budget is a fact the service reports, not a bad request.
    let r = c
        .post(
            "/v1/sessions/s1/events?user=ada",
            &json!({"hook": "on_turn_start", "turn": {"token_usage": 1.706, "context_usage": 1.2}}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json()["inject"][0]["message"],
        "Token budget at 170%. Consider wrapping up or summarizing."
    );

    let s = c.get("/v1/sessions/s1").await.json();
    assert_eq!(s["facts"]["turn"]["number"], 2);
    assert_eq!(s["facts"]["user"]["id"], "ada");
    assert_eq!(s["ended"], false);
    assert_eq!(s["running"], json!([]));

    // A decision: the host must not run the call.
    let r = c
        .post(
            "/v1/sessions/s1/events",
            &json!({"hook": "on_tool_call", "tool": {"name": "Bash", "arguments": {"command": "rm -rf /"}}}),
        )
        .await
        .json();
    assert_eq!(r["proceed"], "no");
    assert_eq!(r["ruling"]["decision"], "deny");
    assert_eq!(r["ruling"]["rule"], "demo/no-rm");
    assert_eq!(
        r["ruling"]["reason"],
        "`rm -rf /` deletes too much; ask the user to run it."
    );

    assert_eq!(c.delete("/v1/sessions/s1").await.status, 204);
    assert_eq!(c.get("/v1/sessions/s1").await.status, 404);
    assert_eq!(c.delete("/v1/sessions/s1").await.status, 404);
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_a_4xx_that_says_what_is_wrong() {
    let (_dir, server, c) = start().await;
    let raw = |body: &str| Some(body.as_bytes().to_vec());
    let json_ct = [("content-type", "application/json")];

    // Malformed JSON: 400 with the parser's position.
    let r = c
        .send(
            "POST",
            "/v1/sessions/s/events",
            &json_ct,
            raw("{\"hook\": "),
        )
        .await;
    assert_eq!(r.status, 400);
    assert!(r.error().contains("not valid JSON"), "{}", r.text());
    assert_eq!(r.json()["column"], 9);

    // Not declared JSON: 415.
    let r = c
        .send(
            "POST",
            "/v1/sessions/s/events",
            &[("content-type", "text/plain")],
            raw("{}"),
        )
        .await;
    assert_eq!(r.status, 415);

    // A key named twice in one object: 400 naming it (parsers disagree on which one counts).
    let r = c
        .send(
            "POST",
            "/v1/sessions/s/events",
            &[("content-type", "application/json")],
            raw("{\"hook\": \"on_tool_call\", \"tool\": {\"name\": \"a\", \"name\": \"Bash\"}}"),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(
        r.error()
            .contains("`name` is given twice at line 1 column 62; give each field once"),
        "{}",
        r.text()
    );

    // Well-formed, wrong shape: 422 naming the field.
    for (body, says) in [
        (json!({"turn": {}}), "no `hook`"),
        (
            json!({"hook": "on_turn_strat"}),
            "did you mean `on_turn_start`",
        ),
        (
            json!({"hook": "on_turn_start", "turn": {"tokn": 1}}),
            "unknown field `tokn`",
        ),
        (
            json!({"hook": "on_turn_start", "turn": {"token_usage": "lots"}}),
            "token_usage",
        ),
        (json!([1, 2]), "JSON object"),
        (json!(null), "JSON object"),
    ] {
        let r = c.post("/v1/sessions/s/events", &body).await;
        assert_eq!(r.status, 422, "{body}: {}", r.text());
        assert!(r.error().contains(says), "{body}: {}", r.error());
    }

    // Too large: 413.
    let big = format!(
        "{{\"hook\": \"on_turn_start\", \"data\": \"{}\"}}",
        "x".repeat(2 << 20)
    );
    let r = c
        .send("POST", "/v1/sessions/s/events", &json_ct, raw(&big))
        .await;
    assert_eq!(r.status, 413, "{}", r.text());

    // Bad ids and names: 400.
    for path in [
        "/v1/sessions/a%20b/events",
        "/v1/sessions/%3Cscript%3E/events",
        "/v1/sessions/s/events?user=",
        "/v1/sessions/s/events?usr=ada",
    ] {
        let r = c.post(path, &event("on_turn_start")).await;
        assert_eq!(r.status, 400, "{path}: {}", r.text());
    }
    let r = c
        .post(
            &format!("/v1/sessions/{}/events", "x".repeat(200)),
            &event("on_turn_start"),
        )
        .await;
    assert_eq!(r.status, 400);

    // Unknown things: 404, with help.
    let r = c.get("/v1/rules/token-budget-warnin").await;
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["suggestion"], "token-budget-warning");
    let r = c.get("/v1/rules/demo/remind").await;
    assert_eq!(r.status, 404);
    assert!(r.error().contains("percent-encoded"), "{}", r.error());
    assert_eq!(c.get("/v1/nothing").await.status, 404);
    let r = c.send("PATCH", "/v1/rules", &[], None).await;
    assert_eq!(r.status, 405);
    assert!(r.json()["error"].is_string());

    // Hostile bodies never reach a 500.
    let hostile = [
        "\u{0}",
        "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
        "{\"hook\": \"on_tool_call\", \"tool\": {\"name\": 5}}",
        "{\"hook\": \"on_tool_complete\", \"result\": 1e999}",
        "\"\\ud800\"",
        "{\"hook\": \"on_turn_start\", \"time\": -1e308}",
        "{\"hook\": \"on_turn_start\", \"turn\": {\"number\": -3}}",
        "{\"hook\": \"on_turn_start\", \"query\": {\"text\": 1}}",
    ];
    for body in hostile {
        let r = c
            .send("POST", "/v1/sessions/h/events", &json_ct, raw(body))
            .await;
        assert!(
            (400..500).contains(&r.status) || r.status == 200,
            "{body:?}: {} {}",
            r.status,
            r.text()
        );
        assert!(r.json()["error"].is_string() || r.status == 200);
    }
    let deep = "[".repeat(100_000);
    let r = c
        .send("POST", "/v1/sessions/h/events", &json_ct, raw(&deep))
        .await;
    assert_eq!(r.status, 400);

    // The 4xx were counted, and no 5xx.
    let m = c.get("/v1/metrics").await.text();
    assert!(
        m.contains("warden_http_errors_total{class=\"5xx\"} 0"),
        "{m}"
    );
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switching_a_rule_off_takes_effect_at_the_next_tick_for_that_user_only() {
    let (_dir, server, c) = start().await;
    let call = json!({"hook": "on_tool_call", "tool": {"name": "Bash", "arguments": {"command": "rm -rf /"}}});
    let r = c
        .put(
            &format!("/v1/rules/{}/enabled?user=ada", enc("demo/no-rm")),
            &json!({"enabled": false}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["enabled"], false);
    assert_eq!(r.json()["key"], "demo/no-rm");
    let ada = c.post("/v1/sessions/a/events?user=ada", &call).await.json();
    assert_eq!(ada["proceed"], "yes", "{ada}");
    let bob = c.post("/v1/sessions/b/events?user=bob", &call).await.json();
    assert_eq!(bob["proceed"], "no");

    // A bare boolean works too; the bare id is enough when it is unique.
    let r = c
        .put("/v1/rules/no-rm/enabled?user=ada", &json!(true))
        .await;
    assert_eq!(r.json()["enabled"], true);
    let ada = c.post("/v1/sessions/a/events", &call).await.json();
    assert_eq!(ada["proceed"], "no");
    // Forgetting the choice: the file's `enabled` again.
    let r = c
        .delete(&format!("/v1/rules/{}/enabled?user=ada", enc("demo/no-rm")))
        .await;
    assert_eq!(r.status, 200);

    // Core rules cannot be switched off: 409, with the engine's reason.
    let r = c
        .put(
            "/v1/rules/token-budget-warning/enabled",
            &json!({"enabled": false}),
        )
        .await;
    assert_eq!(r.status, 409);
    assert!(r.error().contains("core rule"), "{}", r.error());
    let listed = c.get("/v1/rules/token-budget-warning").await.json();
    assert_eq!(listed["enabled"], true);
    assert!(
        listed["core_reason"]
            .as_str()
            .unwrap()
            .contains("core = true")
    );

    // Wrong bodies and scopes.
    let r = c
        .put("/v1/rules/no-rm/enabled", &json!({"enabled": "no"}))
        .await;
    assert_eq!(r.status, 422);
    let r = c
        .put("/v1/rules/no-rm/enabled?project=p", &json!(false))
        .await;
    assert_eq!(r.status, 400);
    assert!(r.error().contains("per user"), "{}", r.error());
    server.stop().await.unwrap();
}

/// A server whose ticks are written to the execution log, in a database file of the test's own.
async fn start_logged() -> (tempfile::TempDir, Running, Client) {
    let dir = tempfile::tempdir().unwrap();
    support::plugins(&dir.path().join("plugins"));
    let w = warden_core::Warden::builder()
        .builtin_rules()
        .plugins_dir(dir.path().join("plugins"))
        .store(warden_core::Store::open(dir.path().join("w.db")).unwrap())
        .execution_log(true)
        .build()
        .unwrap();
    let server = Running::start(w, ServeOptions::default()).await;
    let client = server.client();
    (dir, server, client)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_in_shadow_refuses_nothing_and_says_what_it_would_have_done() {
    let (_dir, server, c) = start_logged().await;
    let no_rm = enc("demo/no-rm");
    let call = json!({"hook": "on_tool_call", "tool": {"name": "Bash", "arguments": {"command": "rm -rf /"}}});
    let mut events = c.events().await;
    let r = c
        .put(
            &format!("/v1/rules/{no_rm}/state?user=ada"),
            &json!({"state": "shadow"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["key"], "demo/no-rm");
    assert_eq!(v["state"], "shadow");
    assert_eq!(v["default_state"], "on");
    assert_eq!(v["enabled"], true, "a rule in shadow is evaluated: {v}");
    assert_eq!(v["shadow_fire_count"], 0);

    // Ada's call, which the rule would deny, is not refused, and nothing of the rule shows.
    let ada = c.post("/v1/sessions/a/events?user=ada", &call).await.json();
    assert_eq!(ada["proceed"], "yes", "{ada}");
    assert_eq!(ada["ruling"], Value::Null, "{ada}");
    assert!(
        !ada["fired"]
            .as_array()
            .unwrap()
            .contains(&json!("demo/no-rm")),
        "{ada}"
    );
    assert_eq!(ada["inject"], json!([]), "{ada}");
    // The state is Ada's: Bob's call is refused.
    let bob = c.post("/v1/sessions/b/events?user=bob", &call).await.json();
    assert_eq!(bob["proceed"], "no", "{bob}");

    // The feed marks Ada's firing shadow, Bob's not.
    let mut seen = std::collections::BTreeMap::new();
    while seen.len() < 2 {
        let f = events
            .next_where("fired", WAIT, |f| f["rule"] == "demo/no-rm")
            .await
            .expect("the rule's firings in the feed");
        assert_eq!(f["action"], "decide", "{f}");
        seen.insert(
            f["session"].as_str().unwrap().to_string(),
            f["shadow"].clone(),
        );
    }
    assert_eq!(seen["a"], true, "{seen:?}");
    assert_eq!(seen["b"], false, "{seen:?}");

    // The log's shadow rows: what it would have decided, beside what the live rules did.
    let log = c.get("/v1/log?shadow=true").await;
    assert_eq!(log.status, 200, "{}", log.text());
    let log = log.json();
    let rows = log.as_array().unwrap();
    assert!(rows.iter().all(|r| r["shadow"] == true), "{log}");
    let row = rows
        .iter()
        .find(|r| r["rule"] == "demo/no-rm")
        .unwrap_or_else(|| panic!("no shadow row of demo/no-rm in {log}"));
    assert_eq!(row["session"], "a", "{row}");
    assert_eq!(row["user"], "ada", "{row}");
    assert_eq!(row["acted"], true, "{row}");
    assert_eq!(row["decision"], "deny", "{row}");
    assert_eq!(row["live_decision"], "none", "{row}");
    // Bob's row is a live one, without a live decision of its own.
    let all = c.get("/v1/log?rule=demo/no-rm&session=b").await.json();
    assert_eq!(all[0]["shadow"], false, "{all}");
    assert_eq!(all[0]["decision"], "deny", "{all}");
    assert_eq!(all[0]["live_decision"], Value::Null, "{all}");
    assert_eq!(c.get("/v1/log?shadow=maybe").await.status, 400);

    // The metrics and the rule's figures.
    let m = c.get("/v1/metrics").await.text();
    for line in [
        "warden_shadow_firings_total{rule=\"demo/no-rm\"} 1",
        "warden_shadow_decisions_total{rule=\"demo/no-rm\",decision=\"deny\"} 1",
        "warden_shadow_errors_total 0",
        "warden_rule_firings_total{rule=\"demo/no-rm\"} 1",
        "warden_decisions_total{decision=\"deny\"} 1",
    ] {
        assert!(m.contains(line), "{line} in\n{m}");
    }
    let v = c.get(&format!("/v1/rules/{no_rm}?user=ada")).await.json();
    assert_eq!(v["state"], "shadow");
    assert_eq!(v["shadow_fire_count"], 1, "{v}");
    assert_eq!(v["shadow_refusals"], 1, "{v}");
    assert_eq!(v["fire_count"], 1, "Bob's live firing: {v}");

    // A bare state works too; off is not evaluated.
    let r = c
        .put(&format!("/v1/rules/{no_rm}/state?user=ada"), &json!("off"))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["state"], "off");
    assert_eq!(r.json()["enabled"], false);
    let ada = c.post("/v1/sessions/a/events", &call).await.json();
    assert_eq!(ada["proceed"], "yes", "{ada}");
    // Forgetting the choice: the file's state (on) again, and the call is refused.
    let r = c.delete(&format!("/v1/rules/{no_rm}/state?user=ada")).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["state"], "on");
    let ada = c.post("/v1/sessions/a/events", &call).await.json();
    assert_eq!(ada["proceed"], "no", "{ada}");
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugins_rules_change_state_together_and_its_core_rules_stay_on() {
    let (_dir, server, c) = start().await;
    let r = c
        .put(
            "/v1/plugins/demo/state?user=ada",
            &json!({"state": "shadow"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let rules = r.json();
    let mut keys: Vec<&str> = rules
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["key"].as_str().unwrap())
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, ["demo/announce", "demo/no-rm", "demo/remind"]);
    assert!(
        rules
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["state"] == "shadow"),
        "{rules}"
    );
    // The list agrees; the choice is Ada's alone.
    let state_of = |list: &Value, key: &str| {
        list.as_array()
            .unwrap()
            .iter()
            .find(|r| r["key"] == key)
            .map(|r| r["state"].clone())
            .unwrap()
    };
    let ada = c.get("/v1/rules?user=ada").await.json();
    assert_eq!(state_of(&ada, "demo/remind"), "shadow");
    let bob = c.get("/v1/rules?user=bob").await.json();
    assert_eq!(state_of(&bob, "demo/remind"), "on");

    // The built-in rules off, but for the core one.
    let r = c
        .put("/v1/plugins/builtin/state?user=ada", &json!("off"))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let builtin = r.json();
    let builtin = builtin.as_array().unwrap();
    assert!(builtin.iter().any(|r| r["core"] == false));
    for rule in builtin {
        let want = if rule["core"] == true { "on" } else { "off" };
        assert_eq!(rule["state"], want, "{rule}");
    }
    let o = c
        .post(
            "/v1/sessions/s/events?user=ada",
            &json!({"hook": "on_turn_start", "turn": {"token_usage": 0.9}}),
        )
        .await
        .json();
    assert_eq!(o["fired"], json!(["token-budget-warning"]), "{o}");

    // Forgetting the choices: the files again.
    for plugin in ["demo", "builtin"] {
        let r = c
            .delete(&format!("/v1/plugins/{plugin}/state?user=ada"))
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
        for rule in r.json().as_array().unwrap() {
            assert_eq!(rule["state"], rule["default_state"], "{rule}");
        }
    }

    // Unknown plugins, and a project.
    let r = c
        .put("/v1/plugins/dmeo/state", &json!({"state": "on"}))
        .await;
    assert_eq!(r.status, 404, "{}", r.text());
    assert_eq!(r.json()["suggestion"], "demo");
    assert_eq!(c.delete("/v1/plugins/nope/state").await.status, 404);
    let r = c
        .put("/v1/plugins/demo/state?project=p", &json!({"state": "on"}))
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["parameter"], "project");
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_states_refuse_bad_bodies_and_core_rules() {
    let (_dir, server, c) = start().await;
    let rule = format!("/v1/rules/{}/state", enc("demo/no-rm"));
    let plugin = "/v1/plugins/demo/state";
    for body in [
        json!({"state": "sideways"}),
        json!({"state": true}),
        json!({"state": "on", "user": "bob"}),
        json!({"enabled": false}),
        json!("SHADOW"),
        json!(false),
        json!(null),
        json!([]),
        json!({}),
    ] {
        for path in [rule.as_str(), plugin] {
            let r = c.put(path, &body).await;
            assert_eq!(r.status, 422, "{path} {body}: {}", r.text());
            assert_eq!(r.json()["field"], "state", "{path} {body}");
            assert!(r.error().contains("\"shadow\""), "{}", r.error());
        }
    }
    let r = c
        .send(
            "PUT",
            &rule,
            &[("content-type", "text/plain")],
            Some(b"shadow".to_vec()),
        )
        .await;
    assert_eq!(r.status, 415);
    let r = c
        .send(
            "PUT",
            &rule,
            &[("content-type", "application/json")],
            Some(b"{\"state\": ".to_vec()),
        )
        .await;
    assert_eq!(r.status, 400);
    // Nothing was changed by any of them.
    let v = c
        .get(&format!("/v1/rules/{}", enc("demo/no-rm")))
        .await
        .json();
    assert_eq!(v["state"], "on");

    // A core rule can be neither put in shadow nor switched off: 409, with the engine's reason.
    let core = "/v1/rules/token-budget-warning/state";
    for (state, says) in [
        ("shadow", "cannot be put in shadow"),
        ("off", "cannot be switched off"),
    ] {
        let r = c.put(core, &json!({ "state": state })).await;
        assert_eq!(r.status, 409, "{}", r.text());
        assert!(r.error().contains(says), "{}", r.error());
        assert_eq!(r.json()["rule"], "token-budget-warning");
    }
    let r = c.put(core, &json!({"state": "on"})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["state"], "on");

    // Unknown rules, and a project.
    let r = c
        .put("/v1/rules/token-budget-warnin/state", &json!("on"))
        .await;
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["suggestion"], "token-budget-warning");
    assert_eq!(c.delete("/v1/rules/nope/state").await.status, 404);
    let r = c
        .put(&format!("{rule}?project=p"), &json!({"state": "off"}))
        .await;
    assert_eq!(r.status, 400);
    assert!(r.error().contains("per user"), "{}", r.error());
    let r = c.delete(&format!("{rule}?project=p")).await;
    assert_eq!(r.status, 400);
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_are_checked_against_the_manifest_and_scoped() {
    let (_dir, server, c) = start().await;
    // Out of bounds: 422 naming the setting and its bounds; nothing is written.
    let r = c
        .put(
            "/v1/plugins/demo/settings?user=ada",
            &json!({"tone": "detailed", "max_calls": 50}),
        )
        .await;
    assert_eq!(r.status, 422, "{}", r.text());
    let e = r.json();
    assert_eq!(e["errors"][0]["setting"], "max_calls");
    assert_eq!(e["errors"][0]["max"], 10.0);
    assert!(e["error"].as_str().unwrap().contains("at most 10"), "{e}");
    let tone = |v: &Value| {
        v.as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == "tone")
            .unwrap()["value"]
            .clone()
    };
    let plugins = c.get("/v1/plugins?user=ada").await.json();
    let demo = plugins
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == "demo")
        .unwrap()
        .clone();
    assert_eq!(tone(&demo["values"]), "brief", "nothing was written");

    for (body, says) in [
        (json!({"tone": "loud"}), "one of"),
        (json!({"max_calls": 2.5}), "whole number"),
        (json!({"nope": 1}), "no setting `nope`"),
        (json!({}), "JSON object"),
        (json!([1]), "JSON object"),
    ] {
        let r = c.put("/v1/plugins/demo/settings", &body).await;
        assert_eq!(r.status, 422, "{body}");
        assert!(r.error().contains(says), "{body}: {}", r.error());
    }
    assert_eq!(
        c.put("/v1/plugins/nope/settings", &json!({"a": 1}))
            .await
            .status,
        404
    );

    // In one project only, then for all of Ada's projects.
    let r = c
        .put(
            "/v1/plugins/demo/settings?user=ada&project=p1",
            &json!({"max_calls": 1, "tone": "detailed"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(tone(&r.json()), "detailed");
    let call = json!({"hook": "on_tool_call", "tool": {"name": "web_search"}});
    let p1 = c
        .post("/v1/sessions/p1/events?user=ada&project=p1", &call)
        .await
        .json();
    assert_eq!(
        p1["fired"],
        json!(["demo/remind", "hostile/markup"]),
        "{p1}"
    );
    assert!(
        p1["effects"][0]["message"]
            .as_str()
            .unwrap()
            .starts_with("Call 1 (detailed)"),
        "{p1}"
    );
    let p2 = c
        .post("/v1/sessions/p2/events?user=ada&project=p2", &call)
        .await
        .json();
    assert_eq!(
        p2["fired"],
        json!(["hostile/markup"]),
        "the default (3) holds elsewhere"
    );

    // `null` puts a setting back to its default.
    let r = c
        .put(
            "/v1/plugins/demo/settings?user=ada&project=p1",
            &json!({"tone": null}),
        )
        .await;
    assert_eq!(tone(&r.json()), "brief");
    // The built-in rules' plugin is `builtin`.
    let r = c
        .put(
            "/v1/plugins/builtin/settings?user=ada",
            &json!({"token_budget_threshold": 0.95}),
        )
        .await;
    assert_eq!(r.status, 200);
    let o = c
        .post(
            "/v1/sessions/t/events?user=ada",
            &json!({"hook": "on_turn_start", "turn": {"token_usage": 0.9}}),
        )
        .await
        .json();
    assert_eq!(o["fired"], json!([]));
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_test_button_runs_one_rule_and_touches_nothing_real() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("warden.db");
    let w = warden(&dir.path().join("plugins"), Some(&db));
    let store = w.clone();
    let server = Running::start(w, ServeOptions::default()).await;
    let c = server.client();

    // The sample: a session late in its budgets.
    let r = c
        .post("/v1/rules/token-budget-warning/test", &json!({}))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let t = r.json();
    assert_eq!(t["fired"], true);
    assert_eq!(t["sample"], true);
    assert_eq!(
        t["messages"][0]["message"],
        "Token budget at 90%. Consider wrapping up or summarizing."
    );
    assert!(t["why"].as_str().unwrap().contains("token_usage"), "{t}");
    assert!(t["events"].as_array().unwrap().len() >= 2);
    // The body is optional: none at all, with no content type, is the sample too.
    let bare = c
        .send("POST", "/v1/rules/token-budget-warning/test", &[], None)
        .await;
    assert_eq!(bare.status, 200, "{}", bare.text());
    assert_eq!(bare.json()["fired"], true);

    // Given events; a rule that is off for the user still runs; decisions are reported.
    c.put(
        &format!("/v1/rules/{}/enabled?user=ada", enc("demo/no-rm")),
        &json!(false),
    )
    .await;
    let t = c
        .post(
            &format!("/v1/rules/{}/test?user=ada", enc("demo/no-rm")),
            &json!({"event": {"hook": "on_tool_call", "tool": {"name": "Bash", "arguments": {"command": "rm -rf build"}}}}),
        )
        .await
        .json();
    assert_eq!(t["fired"], true, "{t}");
    assert_eq!(t["enabled_for_user"], false);
    assert_eq!(t["decision"]["decision"], "deny");
    let t = c
        .post(
            &format!("/v1/rules/{}/test", enc("demo/no-rm")),
            &json!({"event": {"hook": "on_tool_call", "tool": {"name": "Bash", "arguments": {"command": "ls"}}}}),
        )
        .await
        .json();
    assert_eq!(t["fired"], false);
    assert_eq!(t["evaluation"], "not_matched");
    assert!(
        t["why"].as_str().unwrap().contains("condition was false"),
        "{t}"
    );

    // The user's settings are used: with max_calls = 1, one call is enough.
    c.put(
        "/v1/plugins/demo/settings?user=ada",
        &json!({"max_calls": 1, "tone": "detailed"}),
    )
    .await;
    let t = c
        .post(
            &format!("/v1/rules/{}/test?user=ada", enc("demo/remind")),
            &json!({"events": [{"hook": "on_tool_call", "tool": {"name": "web_search"}}]}),
        )
        .await
        .json();
    assert_eq!(t["fired"], true, "{t}");
    assert_eq!(
        t["messages"][0]["message"],
        "Call 1 (detailed): use what you found before searching again."
    );
    // Only the rule tried is reported (hostile/markup would fire at the same call).
    assert_eq!(t["effects"].as_array().unwrap().len(), 1, "{t}");
    let t = c
        .post(
            &format!("/v1/rules/{}/test", enc("hostile/markup")),
            &json!({}),
        )
        .await
        .json();
    assert!(
        t["messages"][0]["message"]
            .as_str()
            .unwrap()
            .contains(HOSTILE),
        "{t}"
    );

    // An event that does not reach the rule's hook.
    let t = c
        .post(
            "/v1/rules/large-result-summary/test",
            &json!({"event": {"hook": "on_turn_start"}}),
        )
        .await
        .json();
    assert_eq!(t["evaluation"], "not_reached");

    // Bad trials.
    let r = c
        .post(
            "/v1/rules/token-budget-warning/test",
            &json!({"events": [{"turn": {}}]}),
        )
        .await;
    assert_eq!(r.status, 422);
    assert!(r.error().starts_with("events[0]"), "{}", r.error());
    let r = c
        .post(
            "/v1/rules/token-budget-warning/test",
            &json!({"events": []}),
        )
        .await;
    assert_eq!(r.status, 422);
    let r = c
        .post("/v1/rules/token-budget-warning/test", &json!({"evnts": []}))
        .await;
    assert_eq!(r.status, 422);
    let r = c.post("/v1/rules/nope/test", &json!({})).await;
    assert_eq!(r.status, 404);
    let r = c
        .send(
            "POST",
            "/v1/rules/token-budget-warning/test",
            &[("content-type", "application/json")],
            None,
        )
        .await;
    assert_eq!(r.status, 200, "an empty body is the sample");

    // Nothing real happened: no session, no firings, no log rows, no state.
    assert_eq!(c.get("/v1/health").await.json()["sessions"], 0);
    let rules = c.get("/v1/rules").await.json();
    assert!(
        rules
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["fire_count"] == 0),
        "{rules}"
    );
    let rows = store
        .store()
        .executions(&warden_core::ExecutionFilter::default())
        .unwrap();
    assert!(rows.is_empty());
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_stream_carries_firings_decisions_and_emitted_events() {
    let (_dir, server, c) = start().await;
    let mut events = c.events().await;
    c.post(
        "/v1/sessions/e1/events",
        &json!({"hook": "on_query_start", "query": "hello"}),
    )
    .await;
    let emitted = events
        .next_named("emitted", WAIT)
        .await
        .expect("an emitted event");
    assert_eq!(emitted["event_type"], "query_seen");
    assert_eq!(emitted["payload"]["text"], "hello");
    assert_eq!(emitted["session"], "e1");
    c.post(
        "/v1/sessions/e1/events",
        &json!({"hook": "on_tool_call", "tool": {"name": "Bash", "arguments": {"command": "rm -rf /"}}}),
    )
    .await;
    let fired = events
        .next_where("fired", WAIT, |f| f["rule"] == "demo/no-rm")
        .await
        .expect("a firing");
    assert_eq!(fired["action"], "decide");
    let decision = events
        .next_named("decision", WAIT)
        .await
        .expect("a decision");
    assert_eq!(decision["decision"], "deny");
    assert_eq!(decision["session"], "e1");
    // The stream ends when the server stops; the stop does not wait for it.
    server.stop().await.unwrap();
    assert!(
        events.ends_within(WAIT).await,
        "the event stream was still open after the server stopped"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_metrics_log_and_rules_lists() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("w.db");
    support::plugins(&dir.path().join("plugins"));
    let w = warden_core::Warden::builder()
        .builtin_rules()
        .plugins_dir(dir.path().join("plugins"))
        .store(warden_core::Store::open(&db).unwrap())
        .execution_log(true)
        .build()
        .unwrap();
    let server = Running::start(w, ServeOptions::default()).await;
    let c = server.client();
    let h = c.get("/v1/health").await.json();
    assert_eq!(h["status"], "ok");
    c.post(
        "/v1/sessions/m/events?user=ada",
        &json!({"hook": "on_turn_start", "turn": {"token_usage": 0.9}}),
    )
    .await;
    let m = c.get("/v1/metrics").await;
    assert!(
        m.header("content-type")
            .unwrap()
            .starts_with("text/plain; version=0.0.4")
    );
    let m = m.text();
    for line in [
        "warden_ticks_total{hook=\"on_turn_start\"} 1",
        "warden_rule_firings_total{rule=\"token-budget-warning\"} 1",
        "warden_tick_duration_seconds_count 1",
        "warden_sessions 1",
    ] {
        assert!(m.contains(line), "{line} in\n{m}");
    }
    let rules = c.get("/v1/rules?user=ada").await.json();
    let t = rules
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == "token-budget-warning")
        .unwrap();
    assert_eq!(t["fire_count"], 1);
    assert!(t["last_fired"].as_f64().unwrap() > 1e9);
    assert_eq!(t["hook"], "on_turn_start");
    assert_eq!(t["settings"][0]["key"], "builtin.token_budget_threshold");
    assert_eq!(t["settings"][0]["max"], 1.0);
    let log = c
        .get("/v1/log?rule=token-budget-warning&limit=5")
        .await
        .json();
    assert_eq!(log[0]["rule"], "token-budget-warning");
    assert_eq!(log[0]["acted"], true);
    assert_eq!(log[0]["user"], "ada");
    assert_eq!(c.get("/v1/log?limit=0").await.status, 400);
    assert_eq!(c.get("/v1/log?colour=red").await.status, 400);
    // Compressed when the client accepts it.
    let r = c
        .send("GET", "/v1/rules", &[("accept-encoding", "gzip")], None)
        .await;
    assert_eq!(r.header("content-encoding").as_deref(), Some("gzip"));
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_guard_the_apis_and_cross_site_requests_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let management = "management-token-0123456789abcdef";
    let agent = "agent-token-0123456789abcdefghij";
    let options = ServeOptions {
        tokens: Tokens::new(management, Some(agent)).unwrap(),
        ..ServeOptions::default()
    };
    let server = Running::start(warden(dir.path(), None), options).await;
    let c = server.client();
    let as_agent = c.clone().with("authorization", &format!("Bearer {agent}"));
    let as_admin = c
        .clone()
        .with("authorization", &format!("Bearer {management}"));
    let ev = json!({"hook": "on_turn_start"});

    assert_eq!(c.get("/v1/health").await.status, 200, "health is public");
    assert_eq!(c.get("/v1/openapi.json").await.status, 200);
    let r = c.post("/v1/sessions/s/events", &ev).await;
    assert_eq!(r.status, 401);
    assert_eq!(
        r.header("www-authenticate").as_deref(),
        Some("Bearer realm=\"warden\"")
    );
    assert_eq!(
        c.clone()
            .with("authorization", "Bearer wrong-token-0123456789")
            .get("/v1/rules")
            .await
            .status,
        401
    );
    assert_eq!(
        as_agent.post("/v1/sessions/s/events", &ev).await.status,
        200
    );
    let r = as_agent.get("/v1/rules").await;
    assert_eq!(r.status, 403, "the agent token does not open management");
    assert!(r.error().contains("agent API only"));
    assert_eq!(as_admin.get("/v1/rules").await.status, 200);
    assert_eq!(
        as_admin.post("/v1/sessions/s/events", &ev).await.status,
        200
    );

    // The page asks for the token, and a sign-in cookie opens management.
    let page = c.get("/").await;
    assert!(page.text().contains("Sign in"), "{}", page.text());
    let form = |t: &str| format!("token={t}").into_bytes();
    let ct = [("content-type", "application/x-www-form-urlencoded")];
    let bad = c.send("POST", "/sign-in", &ct, Some(form("nope"))).await;
    assert_eq!(bad.status, 401);
    let ok = c
        .send("POST", "/sign-in", &ct, Some(form(management)))
        .await;
    assert_eq!(ok.status, 303);
    let cookie = ok.header("set-cookie").unwrap();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let pair = cookie.split(';').next().unwrap().to_string();
    let browser = c.clone().with("cookie", &pair);
    assert!(browser.get("/").await.text().contains("Live feed"));
    assert_eq!(browser.get("/v1/rules").await.status, 200);

    // Cross-site requests are refused, whatever they carry.
    let cross = browser
        .clone()
        .with("origin", "https://evil.example")
        .with("sec-fetch-site", "cross-site");
    let r = cross.put("/v1/rules/no-rm/enabled", &json!(false)).await;
    assert_eq!(r.status, 403, "{}", r.text());
    assert!(r.error().contains("cross-site"));
    let same = browser
        .clone()
        .with(
            "origin",
            &format!("http://127.0.0.1:{}", server.addr.port()),
        )
        .with("sec-fetch-site", "same-origin");
    assert_eq!(
        same.put("/v1/rules/no-rm/enabled", &json!(false))
            .await
            .status,
        200
    );
    // A plain form cannot change anything: the body must be declared JSON.
    let r = browser
        .send(
            "PUT",
            "/v1/rules/no-rm/enabled",
            &[("content-type", "text/plain")],
            Some(b"false".to_vec()),
        )
        .await;
    assert_eq!(r.status, 415);
    // Signing out ends the cookie.
    browser.send("POST", "/sign-out", &[], None).await;
    assert_eq!(browser.get("/v1/rules").await.status, 401);
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tokenless_server_answers_only_loopback_names() {
    let (_dir, server, c) = start().await;
    let r = c
        .send("GET", "/v1/rules", &[("host", "evil.example:7878")], None)
        .await;
    assert_eq!(
        r.status, 403,
        "a page reaching the server through a DNS name of its own"
    );
    assert_eq!(
        c.send("GET", "/v1/rules", &[("host", "localhost:1")], None)
            .await
            .status,
        200
    );
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binding_another_address_without_a_token_is_refused() {
    let w = warden_core::Warden::builder().build().unwrap();
    let options = ServeOptions {
        listen: "0.0.0.0:0".parse().unwrap(),
        ..ServeOptions::default()
    };
    let err = warden_serve::Server::bind(w, options)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("refusing to listen on 0.0.0.0:0 without a token"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_finishes_the_ticks_in_flight() {
    // A rule that writes plugin state, and the database's write lock held by the test: the
    // tick is in flight until the test lets go, which it does only once the server has stopped
    // taking connections. No script that runs "long enough" for a machine of some speed.
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules");
    std::fs::create_dir_all(&rules).unwrap();
    std::fs::write(
        rules.join("held.toml"),
        "[rule]\nid = \"held\"\nname = \"Held\"\ntrigger = \"on_turn_start\"\n\n[condition]\nexpression = \"true\"\n\n[action]\ntype = \"set_state\"\nkey = \"n\"\nvalue = \"1\"\n",
    )
    .unwrap();
    let db = dir.path().join("warden.db");
    let build = || {
        warden_core::Warden::builder()
            .rules_dir(&rules)
            .store(
                warden_core::Store::open_with_lock_timeout(&db, Duration::from_secs(600)).unwrap(),
            )
            .build()
            .unwrap()
    };
    let w = build();
    assert!(
        w.diagnostics().iter().all(|d| !d.is_error()),
        "{:?}",
        w.diagnostics()
    );
    let server = Running::start(w, ServeOptions::default()).await;
    let addr = server.addr;
    let holder = warden_core::Store::open(&db).unwrap();
    let held = holder.tick();
    held.begin().unwrap();
    let c = server.client();
    let in_flight = tokio::spawn(async move {
        c.post(
            "/v1/sessions/held/events",
            &json!({"hook": "on_turn_start"}),
        )
        .await
    });
    // The tick is in flight (it waits for the lock as long as the test holds it).
    let probe = server.client();
    let deadline = std::time::Instant::now() + WAIT;
    while !probe
        .get("/v1/metrics")
        .await
        .text()
        .contains("warden_ticks_in_flight 1")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the tick never started"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let stopping = tokio::spawn(server.stop());
    // The server has stopped taking connections: the stop is under way, the tick still held.
    while tokio::net::TcpStream::connect(addr).await.is_ok() {
        assert!(
            std::time::Instant::now() < deadline,
            "the server never stopped listening"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        !in_flight.is_finished(),
        "the tick ended while the lock was held"
    );
    drop(held);
    stopping.await.unwrap().unwrap();
    let r = in_flight.await.unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    // The tick ran to its end after the stop: the rule fired and its write was saved.
    let o = r.json();
    assert_eq!(o["fired"], json!(["held"]), "{o}");
    assert_eq!(o["saved"], true, "{o}");
    // And its session was saved with it.
    let again = build()
        .open_session("held", warden_core::SessionOptions::default())
        .unwrap();
    assert_eq!(again.events(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_server_loses_no_session() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("warden.db");
    let plugins = dir.path().join("plugins");
    let fail =
        json!({"hook": "on_tool_failure", "tool": {"name": "web_search"}, "error": "timeout"});
    let first = Running::start(warden(&plugins, Some(&db)), ServeOptions::default()).await;
    let c = first.client();
    for _ in 0..2 {
        let o = c
            .post("/v1/sessions/long/events?user=ada", &fail)
            .await
            .json();
        assert_eq!(o["fired"], json!([]));
    }
    c.post("/v1/sessions/gone/events", &event("on_turn_start"))
        .await;
    assert_eq!(c.delete("/v1/sessions/gone").await.status, 204);
    first.stop().await.unwrap();

    // Another process's server, on the same database: the third failure is the third.
    let second = Running::start(warden(&plugins, Some(&db)), ServeOptions::default()).await;
    let c = second.client();
    let s = c.get("/v1/sessions/long").await;
    assert_eq!(s.status, 200, "{}", s.text());
    assert_eq!(s.json()["events"], 2);
    assert_eq!(s.json()["facts"]["user"]["id"], "ada");
    let o = c.post("/v1/sessions/long/events", &fail).await.json();
    assert_eq!(o["fired"], json!(["repeated-failure-warning"]), "{o}");
    assert_eq!(
        c.get("/v1/sessions/gone").await.status,
        404,
        "deleted means deleted"
    );
    // Many sessions, few in memory: the ones put down come back from the store.
    second.stop().await.unwrap();
    let options = ServeOptions {
        max_sessions: 2,
        ..ServeOptions::default()
    };
    let third = Running::start(warden(&plugins, Some(&db)), options).await;
    let c = third.client();
    for round in 0..3 {
        for i in 0..5 {
            let o = c
                .post(&format!("/v1/sessions/many-{i}/events"), &fail)
                .await
                .json();
            let expect = if round == 2 {
                json!(["repeated-failure-warning"])
            } else {
                json!([])
            };
            assert_eq!(o["fired"], expect, "session {i}, failure {}", round + 1);
        }
    }
    assert!(
        c.get("/v1/health").await.json()["sessions"]
            .as_u64()
            .unwrap()
            <= 2
    );
    third.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ephemeral_sessions_live_in_memory_only() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("warden.db");
    let plugins = dir.path().join("plugins");
    let options = || ServeOptions {
        durable: false,
        max_sessions: 2,
        ..ServeOptions::default()
    };
    let first = Running::start(warden(&plugins, Some(&db)), options()).await;
    let c = first.client();
    for id in ["a", "b"] {
        assert_eq!(
            c.post(
                &format!("/v1/sessions/{id}/events"),
                &event("on_turn_start")
            )
            .await
            .status,
            200
        );
    }
    let r = c
        .post("/v1/sessions/c/events", &event("on_turn_start"))
        .await;
    assert_eq!(r.status, 429, "{}", r.text());
    assert!(r.error().contains("memory only"), "{}", r.error());
    assert_eq!(c.delete("/v1/sessions/a").await.status, 204);
    assert_eq!(
        c.post("/v1/sessions/c/events", &event("on_turn_start"))
            .await
            .status,
        200
    );
    assert_eq!(c.get("/v1/sessions/b").await.json()["events"], 1);
    first.stop().await.unwrap();
    let second = Running::start(warden(&plugins, Some(&db)), options()).await;
    assert_eq!(
        second.client().get("/v1/sessions/b").await.status,
        404,
        "a restart loses them"
    );
    second.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_codes_http_hook_gets_the_hook_commands_answer() {
    let (_dir, server, c) = start().await;
    let failure = json!({"session_id": "cc-1", "hook_event_name": "PostToolUseFailure",
        "tool_name": "WebFetch", "tool_input": {"url": "https://example.com"}, "error": "timeout"});
    for _ in 0..2 {
        let r = c.post("/v1/claude-code", &failure).await;
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let third = c.post("/v1/claude-code", &failure).await.json();
    let context = third["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap_or_default();
    assert!(context.contains("WebFetch has failed 3 times"), "{third}");
    // A tool call a rule denies.
    let call = json!({"session_id": "cc-1", "hook_event_name": "PreToolUse", "tool_name": "Bash",
        "tool_input": {"command": "rm -rf /"}});
    let denied = c.post("/v1/claude-code", &call).await.json();
    assert_eq!(
        denied["hookSpecificOutput"]["permissionDecision"], "deny",
        "{denied}"
    );
    // What is not Claude Code's is answered, not failed: the session goes on.
    let r = c
        .post("/v1/claude-code", &json!({"hook_event_name": "PreToolUse"}))
        .await;
    assert_eq!(r.status, 200);
    assert!(
        r.json()["systemMessage"]
            .as_str()
            .unwrap()
            .contains("Warden could not supervise"),
        "{}",
        r.text()
    );
    let r = c
        .post(
            "/v1/claude-code",
            &json!({"session_id": "cc-1", "hook_event_name": "Notification"}),
        )
        .await;
    assert_eq!(r.json(), json!({}));
    let r = c
        .send(
            "POST",
            "/v1/claude-code",
            &[("content-type", "text/plain")],
            Some(b"{}".to_vec()),
        )
        .await;
    assert_eq!(r.status, 415);
    server.stop().await.unwrap();
}

/// A supervisor's promise through the service, over random rule sets (seeded, so a failure
/// names its case): a tool call may run only when `proceed` says `yes` or `with_input`; a
/// `deny` or `stop` of any rule that fired makes it `no` or `stop`; a stopped session refuses
/// every later call; and the service's Claude Code endpoint denies the same calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_call_never_runs_through_the_service() {
    /// SplitMix64: a small seeded generator.
    fn next(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    const ACTS: [&str; 6] = ["allow", "ask", "deny", "stop", "rewrite", "notify"];
    for case in 0..24u64 {
        let mut rng = case.wrapping_mul(7919).wrapping_add(1);
        let dir = tempfile::tempdir().unwrap();
        let n = 1 + next(&mut rng) % 6;
        let mut rules = Vec::new();
        for i in 0..n {
            let act = ACTS[(next(&mut rng) % 6) as usize];
            let tool = (next(&mut rng) % 4) as u8; // 3: every tool
            let priority = 1 + next(&mut rng) % 3;
            let id = format!("r-{}", (next(&mut rng) % 1000) * 10 + i);
            let filter = if tool < 3 {
                format!("tool = \"t{tool}\"\n")
            } else {
                String::new()
            };
            let action = match act {
                "rewrite" => {
                    "type = \"rewrite\"\n[action.set]\n\"arguments.checked\" = true\n".to_string()
                }
                "notify" => format!("type = \"notify_self\"\nmessage = \"{id} noticed\"\n"),
                d => format!("type = \"decide\"\ndecision = \"{d}\"\nreason = \"{id} says {d}\"\n"),
            };
            std::fs::write(
                dir.path().join(format!("{id}.toml")),
                format!("[rule]\nid = \"{id}\"\ntrigger = \"on_tool_call\"\npriority = {priority}\n{filter}condition = \"true\"\n\n[action]\n{action}"),
            )
            .unwrap();
            rules.push((act, tool));
        }
        let w = warden_core::Warden::builder()
            .rules_dir(dir.path())
            .build()
            .unwrap();
        let server = Running::start(w, ServeOptions::default()).await;
        let c = server.client();
        let mut stopped = false;
        for call in 0..4 {
            let tool = (next(&mut rng) % 3) as u8;
            let fired: Vec<&str> = rules
                .iter()
                .filter(|(_, t)| *t == 3 || *t == tool)
                .map(|(a, _)| *a)
                .collect();
            let has = |a: &str| fired.contains(&a);
            let refused = stopped || has("deny") || has("stop");
            stopped |= has("stop");
            let what = format!("case {case}, call {call}: rules {rules:?}, tool t{tool}");
            let o = c
                .post(
                    "/v1/sessions/s/events",
                    &json!({"hook": "on_tool_call", "tool": {"name": format!("t{tool}"), "arguments": {}}}),
                )
                .await
                .json();
            let proceed = o["proceed"].as_str().unwrap().to_string();
            let runs = proceed == "yes" || proceed == "with_input";
            assert_eq!(!runs && proceed != "ask", refused, "{what}: {o}");
            if has("stop") {
                assert_eq!(proceed, "stop", "{what}: {o}");
            }
            let a = c
                .post(
                    "/v1/claude-code",
                    &json!({"session_id": "cc", "hook_event_name": "PreToolUse",
                        "tool_name": format!("t{tool}"), "tool_input": {}}),
                )
                .await
                .json();
            assert_eq!(
                a["hookSpecificOutput"]["permissionDecision"] == "deny",
                refused,
                "{what}: {a}"
            );
            assert_eq!(a["continue"] == false, has("stop"), "{what}: {a}");
        }
        server.stop().await.unwrap();
    }
}
