//! The OpenAPI document cannot drift from the server: every route of the router is in it (with
//! the access it really has) and every path in it is a route; every example in it fits the
//! schema it illustrates; and the real server's answers, for every route, fit the schemas the
//! document declares for their status.
//!
//! Schemas are checked by a small validator of the JSON Schema keywords the document uses;
//! a test fails if the document uses any other keyword, so nothing goes unchecked.

mod support;

use std::collections::BTreeSet;

use serde_json::{Value, json};
use support::{Client, Running, enc};
use warden_serve::{OPENAPI, ServeOptions, route_table};

const METHODS: [&str; 4] = ["get", "post", "put", "delete"];
/// The keywords the validator understands, and the annotations it may ignore.
const CHECKED: [&str; 16] = [
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "oneOf",
    "$ref",
    "pattern",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "minProperties",
    "minItems",
    "maxItems",
];
const ANNOTATIONS: [&str; 1] = ["description"];

fn doc() -> Value {
    serde_json::from_str(OPENAPI).expect("the document is JSON")
}

/// Resolves a `$ref` within the document.
fn resolve<'a>(doc: &'a Value, reference: &str) -> &'a Value {
    let pointer = reference.strip_prefix('#').expect("a local reference");
    doc.pointer(pointer)
        .unwrap_or_else(|| panic!("{reference} does not resolve"))
}

fn kind_fits(kind: &str, v: &Value) -> bool {
    match kind {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        "number" => v.is_number(),
        "integer" => v.is_i64() || v.is_u64(),
        other => panic!("unknown type `{other}`"),
    }
}

/// Every way `value` breaks `schema`, with where.
fn validate(doc: &Value, schema: &Value, value: &Value, at: &str, errors: &mut Vec<String>) {
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        return validate(doc, resolve(doc, r), value, at, errors);
    }
    if let Some(options) = schema.get("oneOf").and_then(Value::as_array) {
        let fits = options
            .iter()
            .filter(|o| {
                let mut e = Vec::new();
                validate(doc, o, value, at, &mut e);
                e.is_empty()
            })
            .count();
        if fits != 1 {
            errors.push(format!(
                "{at}: fits {fits} of the oneOf options, not exactly one: {value}"
            ));
        }
    }
    if let Some(t) = schema.get("type") {
        let kinds: Vec<&str> = match t {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => panic!("{at}: a bad type"),
        };
        if !kinds.iter().any(|k| kind_fits(k, value)) {
            errors.push(format!("{at}: expected {kinds:?}, got {value}"));
            return;
        }
    }
    if let Some(e) = schema.get("enum").and_then(Value::as_array)
        && !e.contains(value)
    {
        errors.push(format!("{at}: {value} is not one of {e:?}"));
    }
    if let (Some(p), Some(s)) = (
        schema.get("pattern").and_then(Value::as_str),
        value.as_str(),
    ) && !regex::Regex::new(p).unwrap().is_match(s)
    {
        errors.push(format!("{at}: {s:?} does not match {p}"));
    }
    if let Some(s) = value.as_str() {
        let chars = s.chars().count() as u64;
        if schema
            .get("minLength")
            .and_then(Value::as_u64)
            .is_some_and(|m| chars < m)
        {
            errors.push(format!("{at}: {s:?} is shorter than its minLength"));
        }
        if schema
            .get("maxLength")
            .and_then(Value::as_u64)
            .is_some_and(|m| chars > m)
        {
            errors.push(format!("{at}: {s:?} is longer than its maxLength"));
        }
    }
    if let Some(items) = value.as_array() {
        let n = items.len() as u64;
        if schema
            .get("minItems")
            .and_then(Value::as_u64)
            .is_some_and(|m| n < m)
        {
            errors.push(format!("{at}: fewer items than its minItems"));
        }
        if schema
            .get("maxItems")
            .and_then(Value::as_u64)
            .is_some_and(|m| n > m)
        {
            errors.push(format!("{at}: more items than its maxItems"));
        }
    }
    if let Some(obj) = value.as_object()
        && schema
            .get("minProperties")
            .and_then(Value::as_u64)
            .is_some_and(|m| (obj.len() as u64) < m)
    {
        errors.push(format!("{at}: fewer properties than its minProperties"));
    }
    if let Some(n) = value.as_f64() {
        if schema
            .get("minimum")
            .and_then(Value::as_f64)
            .is_some_and(|m| n < m)
        {
            errors.push(format!("{at}: {n} is below the minimum"));
        }
        if schema
            .get("maximum")
            .and_then(Value::as_f64)
            .is_some_and(|m| n > m)
        {
            errors.push(format!("{at}: {n} is above the maximum"));
        }
    }
    if let Some(obj) = value.as_object() {
        let props = schema.get("properties").and_then(Value::as_object);
        for r in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let r = r.as_str().unwrap();
            if !obj.contains_key(r) {
                errors.push(format!("{at}: `{r}` is required"));
            }
        }
        for (k, v) in obj {
            match props.and_then(|p| p.get(k)) {
                Some(s) => validate(doc, s, v, &format!("{at}.{k}"), errors),
                None => match schema.get("additionalProperties") {
                    Some(Value::Bool(false)) => {
                        errors.push(format!("{at}: `{k}` is not declared"));
                    }
                    Some(s @ Value::Object(_)) => validate(doc, s, v, &format!("{at}.{k}"), errors),
                    _ => {}
                },
            }
        }
    }
    if let (Some(items), Some(a)) = (schema.get("items"), value.as_array()) {
        for (i, v) in a.iter().enumerate() {
            validate(doc, items, v, &format!("{at}[{i}]"), errors);
        }
    }
}

/// Every schema object in the document (components, parameters, bodies, responses), with
/// where it is.
fn schemas(doc: &Value) -> Vec<(String, Value)> {
    fn walk(v: &Value, at: String, out: &mut Vec<(String, Value)>) {
        out.push((at.clone(), v.clone()));
        for key in ["items", "additionalProperties"] {
            if let Some(s) = v.get(key).filter(|s| s.is_object()) {
                walk(s, format!("{at}.{key}"), out);
            }
        }
        for (k, s) in v
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            walk(s, format!("{at}.properties.{k}"), out);
        }
        for (i, s) in v
            .get("oneOf")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            walk(s, format!("{at}.oneOf[{i}]"), out);
        }
    }
    let mut out = Vec::new();
    for (name, s) in doc["components"]["schemas"].as_object().unwrap() {
        walk(s, format!("components.schemas.{name}"), &mut out);
    }
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let at = format!("{method} {path}");
            for p in op["parameters"].as_array().into_iter().flatten() {
                walk(
                    &p["schema"],
                    format!("{at} parameter {}", p["name"]),
                    &mut out,
                );
            }
            for (ct, c) in op["requestBody"]["content"]
                .as_object()
                .into_iter()
                .flatten()
            {
                walk(&c["schema"], format!("{at} body {ct}"), &mut out);
            }
            for (status, r) in op["responses"].as_object().unwrap() {
                for (ct, c) in r["content"].as_object().into_iter().flatten() {
                    walk(&c["schema"], format!("{at} {status} {ct}"), &mut out);
                }
            }
        }
    }
    out
}

#[test]
fn every_route_is_documented_and_every_documented_route_exists() {
    let doc = doc();
    assert_eq!(doc["openapi"], "3.1.0");
    let mut routes = BTreeSet::new();
    for (method, path, access) in route_table() {
        let m = method.to_lowercase();
        let op = &doc["paths"][path][&m];
        assert!(
            op.is_object(),
            "{method} {path} is not in the OpenAPI document"
        );
        assert_eq!(
            op["x-warden-access"],
            access.name(),
            "{method} {path}: access"
        );
        let public = op["security"] == json!([]);
        assert_eq!(
            public,
            access.name() == "public",
            "{method} {path}: security"
        );
        routes.insert((m, path.to_string()));
    }
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            assert!(METHODS.contains(&method.as_str()), "{method} {path}");
            assert!(
                routes.contains(&(method.clone(), path.clone())),
                "{method} {path} is documented but the server has no such route"
            );
        }
    }
}

#[test]
fn the_document_uses_only_the_keywords_that_are_checked() {
    let doc = doc();
    for (at, s) in schemas(&doc) {
        for key in s.as_object().unwrap().keys() {
            assert!(
                CHECKED.contains(&key.as_str()) || ANNOTATIONS.contains(&key.as_str()),
                "{at}: `{key}` is a keyword the tests do not check"
            );
        }
        if let Some(r) = s.get("$ref").and_then(Value::as_str) {
            resolve(&doc, r);
        }
    }
}

#[test]
fn every_example_fits_its_schema() {
    let doc = doc();
    let mut checked = 0;
    let mut errors = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let bodies = op["requestBody"]["content"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(ct, c)| (format!("{method} {path} body"), ct, c));
            let answers = op["responses"]
                .as_object()
                .unwrap()
                .iter()
                .flat_map(|(status, r)| {
                    r["content"]
                        .as_object()
                        .into_iter()
                        .flatten()
                        .map(move |(ct, c)| (format!("{method} {path} {status}"), ct, c))
                });
            for (at, ct, c) in bodies.chain(answers) {
                if ct != "application/json" {
                    continue;
                }
                let examples: Vec<&Value> = c
                    .get("example")
                    .into_iter()
                    .chain(
                        c["examples"]
                            .as_object()
                            .into_iter()
                            .flatten()
                            .map(|(_, e)| &e["value"]),
                    )
                    .collect();
                for e in examples {
                    validate(&doc, &c["schema"], e, &at, &mut errors);
                    checked += 1;
                }
            }
        }
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    assert!(checked >= 40, "only {checked} examples");
}

/// What the real server answered, checked against the document.
fn check_answer(
    doc: &Value,
    method: &str,
    path: &str,
    status: u16,
    body: &[u8],
    errors: &mut Vec<String>,
) {
    let op = &doc["paths"][path][method];
    let response = &op["responses"][status.to_string()];
    if !response.is_object() {
        errors.push(format!(
            "{method} {path} answered {status}, which is not documented"
        ));
        return;
    }
    let Some(schema) = response["content"]["application/json"].get("schema") else {
        return;
    };
    match serde_json::from_slice::<Value>(body) {
        Ok(v) => validate(
            doc,
            schema,
            &v,
            &format!("{method} {path} {status}"),
            errors,
        ),
        Err(e) => errors.push(format!("{method} {path} {status}: not JSON: {e}")),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_answers_fit_the_documented_schemas() {
    let dir = tempfile::tempdir().unwrap();
    // With the execution log on, so that `GET /v1/log` answers rows (a shadow one among them).
    support::plugins(dir.path());
    support::hostile(dir.path());
    let w = warden_core::Warden::builder()
        .builtin_rules()
        .plugins_dir(dir.path())
        .execution_log(true)
        .build()
        .unwrap();
    let server = Running::start(w, ServeOptions::default()).await;
    let c: Client = server.client();
    let doc = doc();
    let no_rm = enc("demo/no-rm");
    let ev = json!({"hook": "on_turn_start", "turn": {"token_usage": 0.9}});
    let deny = json!({"hook": "on_tool_call", "tool": {"name": "Bash", "arguments": {"command": "rm -rf /"}}});
    // (method, documented path, real path, body)
    let cases: Vec<(&str, &str, String, Option<Value>)> = vec![
        ("get", "/v1/health", "/v1/health".into(), None),
        ("get", "/v1/openapi.json", "/v1/openapi.json".into(), None),
        ("get", "/v1/metrics", "/v1/metrics".into(), None),
        (
            "post",
            "/v1/sessions/{id}/events",
            "/v1/sessions/s1/events".into(),
            Some(ev.clone()),
        ),
        (
            "post",
            "/v1/sessions/{id}/events",
            "/v1/sessions/s1/events".into(),
            Some(deny.clone()),
        ),
        (
            "post",
            "/v1/sessions/{id}/events",
            "/v1/sessions/s1/events".into(),
            Some(json!({"hook": "nope"})),
        ),
        (
            "post",
            "/v1/sessions/{id}/events",
            "/v1/sessions/a%20b/events".into(),
            Some(ev),
        ),
        ("get", "/v1/sessions/{id}", "/v1/sessions/s1".into(), None),
        (
            "post",
            "/v1/claude-code",
            "/v1/claude-code".into(),
            Some(
                json!({"session_id": "cc", "hook_event_name": "PostToolUseFailure", "tool_name": "WebFetch", "tool_input": {}, "error": "timeout"}),
            ),
        ),
        (
            "post",
            "/v1/claude-code",
            "/v1/claude-code".into(),
            Some(json!({"nope": 1})),
        ),
        ("get", "/v1/sessions/{id}", "/v1/sessions/none".into(), None),
        ("get", "/v1/rules", "/v1/rules?user=ada".into(), None),
        ("get", "/v1/rules/{id}", format!("/v1/rules/{no_rm}"), None),
        ("get", "/v1/rules/{id}", "/v1/rules/nope".into(), None),
        (
            "put",
            "/v1/rules/{id}/enabled",
            format!("/v1/rules/{no_rm}/enabled"),
            Some(json!({"enabled": false})),
        ),
        (
            "put",
            "/v1/rules/{id}/enabled",
            "/v1/rules/token-budget-warning/enabled".into(),
            Some(json!(false)),
        ),
        (
            "put",
            "/v1/rules/{id}/enabled",
            format!("/v1/rules/{no_rm}/enabled"),
            Some(json!({"on": 1})),
        ),
        (
            "delete",
            "/v1/rules/{id}/enabled",
            format!("/v1/rules/{no_rm}/enabled"),
            None,
        ),
        // A rule in shadow: an event it would deny, then the log's shadow rows.
        (
            "put",
            "/v1/rules/{id}/state",
            format!("/v1/rules/{no_rm}/state"),
            Some(json!({"state": "shadow"})),
        ),
        (
            "post",
            "/v1/sessions/{id}/events",
            "/v1/sessions/s2/events".into(),
            Some(deny.clone()),
        ),
        ("get", "/v1/log", "/v1/log?shadow=true".into(), None),
        (
            "put",
            "/v1/rules/{id}/state",
            format!("/v1/rules/{no_rm}/state"),
            Some(json!("on")),
        ),
        (
            "put",
            "/v1/rules/{id}/state",
            "/v1/rules/token-budget-warning/state".into(),
            Some(json!({"state": "shadow"})),
        ),
        (
            "put",
            "/v1/rules/{id}/state",
            format!("/v1/rules/{no_rm}/state"),
            Some(json!({"state": "sideways"})),
        ),
        (
            "put",
            "/v1/rules/{id}/state",
            "/v1/rules/nope/state".into(),
            Some(json!({"state": "off"})),
        ),
        (
            "put",
            "/v1/rules/{id}/state",
            format!("/v1/rules/{no_rm}/state?project=p"),
            Some(json!({"state": "off"})),
        ),
        (
            "delete",
            "/v1/rules/{id}/state",
            format!("/v1/rules/{no_rm}/state"),
            None,
        ),
        (
            "delete",
            "/v1/rules/{id}/state",
            "/v1/rules/nope/state".into(),
            None,
        ),
        (
            "put",
            "/v1/plugins/{id}/state",
            "/v1/plugins/demo/state".into(),
            Some(json!({"state": "shadow"})),
        ),
        (
            "put",
            "/v1/plugins/{id}/state",
            "/v1/plugins/builtin/state".into(),
            Some(json!("off")),
        ),
        (
            "put",
            "/v1/plugins/{id}/state",
            "/v1/plugins/dmeo/state".into(),
            Some(json!({"state": "on"})),
        ),
        (
            "put",
            "/v1/plugins/{id}/state",
            "/v1/plugins/demo/state".into(),
            Some(json!({"state": true})),
        ),
        (
            "delete",
            "/v1/plugins/{id}/state",
            "/v1/plugins/demo/state".into(),
            None,
        ),
        (
            "delete",
            "/v1/plugins/{id}/state",
            "/v1/plugins/builtin/state".into(),
            None,
        ),
        (
            "delete",
            "/v1/plugins/{id}/state",
            "/v1/plugins/nope/state?project=p".into(),
            None,
        ),
        (
            "delete",
            "/v1/plugins/{id}/state",
            "/v1/plugins/nope/state".into(),
            None,
        ),
        (
            "post",
            "/v1/rules/{id}/test",
            "/v1/rules/token-budget-warning/test".into(),
            Some(json!({})),
        ),
        (
            "post",
            "/v1/rules/{id}/test",
            format!("/v1/rules/{no_rm}/test"),
            Some(
                json!({"event": {"hook": "on_tool_call", "tool": {"name": "Bash", "arguments": {"command": "rm -rf x"}}}}),
            ),
        ),
        (
            "post",
            "/v1/rules/{id}/test",
            "/v1/rules/token-budget-warning/test".into(),
            Some(json!({"events": [{}]})),
        ),
        ("get", "/v1/plugins", "/v1/plugins".into(), None),
        (
            "put",
            "/v1/plugins/{id}/settings",
            "/v1/plugins/demo/settings".into(),
            Some(json!({"max_calls": 4})),
        ),
        (
            "put",
            "/v1/plugins/{id}/settings",
            "/v1/plugins/demo/settings".into(),
            Some(json!({"max_calls": 40})),
        ),
        (
            "put",
            "/v1/plugins/{id}/settings",
            "/v1/plugins/nope/settings".into(),
            Some(json!({"a": 1})),
        ),
        ("get", "/v1/log", "/v1/log".into(), None),
        ("get", "/v1/log", "/v1/log?limit=0".into(), None),
        ("get", "/", "/".into(), None),
        (
            "get",
            "/assets/warden.css",
            "/assets/warden.css".into(),
            None,
        ),
        (
            "get",
            "/assets/settings.js",
            "/assets/settings.js".into(),
            None,
        ),
        (
            "get",
            "/assets/favicon.svg",
            "/assets/favicon.svg".into(),
            None,
        ),
        (
            "delete",
            "/v1/sessions/{id}",
            "/v1/sessions/s1".into(),
            None,
        ),
        (
            "delete",
            "/v1/sessions/{id}",
            "/v1/sessions/s1".into(),
            None,
        ),
    ];
    let mut errors = Vec::new();
    let mut exercised = BTreeSet::new();
    for (method, path, real, body) in &cases {
        let r = match body {
            Some(b) => c.json(&method.to_uppercase(), real, b).await,
            None => c.send(&method.to_uppercase(), real, &[], None).await,
        };
        check_answer(&doc, method, path, r.status, &r.body, &mut errors);
        exercised.insert((method.to_string(), path.to_string()));
    }
    // The event stream and the page's sign-in are checked by their own tests.
    for (method, path, _) in route_table() {
        let m = method.to_lowercase();
        if !["/v1/events", "/sign-in", "/sign-out"].contains(&path) {
            assert!(
                exercised.contains(&(m, path.to_string())),
                "{method} {path} is not exercised here"
            );
        }
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    server.stop().await.unwrap();
}

#[test]
fn the_validator_refuses_what_does_not_fit() {
    let doc = doc();
    let outcome = json!({"$ref": "#/components/schemas/Outcome"});
    let cases = [
        (json!({"type": "integer"}), json!(1.5)),
        (json!({"type": ["string", "null"]}), json!(3)),
        (json!({"enum": ["a"]}), json!("b")),
        (json!({"type": "string", "pattern": "^a+$"}), json!("ab")),
        (json!({"type": "integer", "maximum": 3}), json!(4)),
        (
            json!({"type": "object", "properties": {"a": {}}, "required": ["a"]}),
            json!({}),
        ),
        (
            json!({"type": "object", "properties": {"a": {}}, "additionalProperties": false}),
            json!({"b": 1}),
        ),
        (
            json!({"type": "array", "items": {"type": "string"}}),
            json!(["a", 1]),
        ),
        (
            json!({"oneOf": [{"type": "number"}, {"type": "integer"}]}),
            json!(1),
        ),
        (outcome.clone(), json!({"session": "s"})),
    ];
    for (schema, value) in cases {
        let mut errors = Vec::new();
        validate(&doc, &schema, &value, "case", &mut errors);
        assert!(!errors.is_empty(), "{schema} accepted {value}");
    }
    let mut errors = Vec::new();
    let ok = &doc["paths"]["/v1/sessions/{id}/events"]["post"]["responses"]["200"]["content"]["application/json"]
        ["examples"]["notify"]["value"];
    validate(&doc, &outcome, ok, "ok", &mut errors);
    assert!(errors.is_empty(), "{errors:?}");
}
