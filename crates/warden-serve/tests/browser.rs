//! The Settings page in a real headless Chromium, driven over WebDriver (chromedriver): the
//! page lists the rules by plugin, a rule's state control turns it off (by keyboard) and the
//! next event of a session no longer fires it, a rule put in shadow refuses nothing and shows
//! what it would have done, a plugin's rules go in shadow and back on together, a core rule's
//! shadow and off are disabled with its reason on hover and for screen readers, an invalid
//! setting shows its error inline, the Test button shows the rendered message, the live feed
//! shows a firing, text from rules is never markup, and the sign-in and sign-out of a server
//! with a token work, on loopback and on a network address over plain HTTP (in a network
//! namespace of the test's own). It saves a screenshot of the page (`WARDEN_UPDATE_SCREENSHOT=1`
//! also writes it to the book).
//!
//! Skipped, saying so, where chromedriver or Chromium is missing; `.ci/run` installs both.

mod support;

use std::path::Path;

use serde_json::{Value, json};
use support::webdriver::{Browser, tools};
use support::{HOSTILE, Running, enc};
use warden_serve::{ServeOptions, Tokens};

const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/plugins");

/// WebDriver's arrow keys.
const RIGHT: &str = "\u{E014}";
const LEFT: &str = "\u{E012}";

fn rule(key: &str) -> String {
    format!("li.rule[data-rule=\"{key}\"]")
}

/// The installation the page shows: the built-in rules, the example plugins and `demo`.
fn installation(dir: &Path) -> warden_core::Warden {
    support::plugins(dir);
    let w = warden_core::Warden::builder()
        .builtin_rules()
        .plugins_dir(EXAMPLES)
        .plugins_dir(dir)
        .capabilities(["vault_search", "web_search"])
        .build()
        .unwrap();
    assert!(w.diagnostics().iter().all(|d| !d.is_error()));
    w
}

/// chromedriver and Chromium; `None` (and a line saying so) when they are missing, unless
/// `WARDEN_REQUIRE_BROWSER` is set (as `.ci/run` sets it), where a skip would hide a failure.
fn browser_tools() -> Option<(std::path::PathBuf, std::path::PathBuf)> {
    match tools() {
        Ok(t) => Some(t),
        Err(why) if std::env::var_os("WARDEN_REQUIRE_BROWSER").is_some() => {
            panic!("WARDEN_REQUIRE_BROWSER is set, but {why}")
        }
        Err(why) => {
            // Straight to standard error, which the test harness does not capture (as the
            // store's skipped PostgreSQL tests say it): a plain run shows what it did not test.
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "skipped: {why}");
            None
        }
    }
}

#[ignore = "needs Chromium and chromedriver: run `cargo test -- --ignored` (CI does)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_settings_page_in_a_real_browser() {
    let Some((driver, chromium)) = browser_tools() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let server = Running::start(installation(dir.path()), ServeOptions::default()).await;
    let api = server.client();
    let base = format!("http://127.0.0.1:{}", server.addr.port());
    let b = Browser::start(&driver, &chromium, 1360, 1900).await;
    b.goto(&format!("{base}/?user=ada")).await;
    b.wait_for(
        "the live feed to connect",
        "return document.getElementById('feed-status').textContent === 'live'",
        json!([]),
    )
    .await;

    // The rules, grouped by plugin.
    let keys = b
        .run(
            "return [...document.querySelectorAll('li.rule')].map(li => li.dataset.rule)",
            json!([]),
        )
        .await;
    for k in [
        "token-budget-warning",
        "research-assistant/search-first",
        "guardrails/deny-destructive-shell",
        "demo/no-rm",
    ] {
        assert!(
            keys.as_array().unwrap().contains(&json!(k)),
            "{k} in {keys}"
        );
    }
    let groups = b
        .run("return [...document.querySelectorAll('section.plugin h2')].map(h => h.textContent.trim())", json!([]))
        .await;
    let groups: Vec<String> = groups
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g.as_str().unwrap().to_string())
        .collect();
    assert!(
        groups
            .iter()
            .any(|g| g.starts_with("Warden built-in rules")),
        "{groups:?}"
    );
    assert!(
        groups.iter().any(|g| g.starts_with("Research Assistant")),
        "{groups:?}"
    );
    assert!(
        groups.iter().any(|g| g.starts_with("Demo plugin")),
        "{groups:?}"
    );
    let skipped = b.text(&b.one(".skipped").await).await;
    assert!(
        skipped.contains("code-review") && skipped.contains("git_diff"),
        "{skipped}"
    );

    // A core rule can only be on: its Shadow and Off are disabled, and it says why on hover and
    // to screen readers.
    let core = b
        .one(&format!("{} .state", rule("token-budget-warning")))
        .await;
    let disabled = b
        .run(
            "return [...arguments[0].querySelectorAll('input')].map(i => [i.value, i.disabled, i.checked])",
            json!([Browser::arg(&core)]),
        )
        .await;
    assert_eq!(
        disabled,
        json!([
            ["on", false, true],
            ["shadow", true, false],
            ["off", true, false]
        ])
    );
    let described = b.attr(&core, "aria-describedby").await;
    let reason = b
        .run(
            "return document.getElementById(arguments[0]).textContent",
            json!([described]),
        )
        .await;
    assert!(reason.as_str().unwrap().contains("core rule"), "{reason}");
    let tooltip = b
        .one(&format!("{} .tooltip", rule("token-budget-warning")))
        .await;
    let shown = "return getComputedStyle(arguments[0]).display !== 'none'";
    assert_eq!(b.run(shown, json!([Browser::arg(&tooltip)])).await, false);
    b.hover(
        &b.one(&format!("{} .seg-off", rule("token-budget-warning")))
            .await,
    )
    .await;
    assert_eq!(
        b.run(shown, json!([Browser::arg(&tooltip)])).await,
        true,
        "the reason shows on hover"
    );
    // It covers no control: not its own Test button, nor the next rule's state control.
    let covered = b
        .run(
            "const t = arguments[0].getBoundingClientRect();              const li = arguments[0].closest('li.rule');              const others = [li.querySelector('button.test')];              if (li.nextElementSibling) others.push(li.nextElementSibling.querySelector('.state'));              return others.filter(Boolean).filter(o => { const r = o.getBoundingClientRect();                return r.left < t.right && t.left < r.right && r.top < t.bottom && t.top < r.bottom; }).map(o => o.outerHTML)",
            json!([Browser::arg(&tooltip)]),
        )
        .await;
    assert_eq!(covered, json!([]), "the tooltip covers a control");
    // Every control has a name a screen reader can say.
    let unnamed = b
        .run(
            "return [...document.querySelectorAll('input, select, textarea, button')].filter(e => \
             !(e.labels && e.labels.length) && !e.getAttribute('aria-labelledby') && !e.getAttribute('aria-label') && !e.textContent.trim()).map(e => e.outerHTML)",
            json!([]),
        )
        .await;
    assert_eq!(unnamed, json!([]), "controls without a name");

    // The keyboard reaches the skip link first; on a rule's state, the arrow keys move between
    // On, Shadow and Off, and each applies at once.
    b.press(&["\u{E004}"]).await;
    assert_eq!(
        b.run("return document.activeElement.className", json!([]))
            .await,
        "skip"
    );
    let no_rm = b
        .one(&format!("{} .state input:checked", rule("demo/no-rm")))
        .await;
    assert_eq!(b.attr(&no_rm, "value").await, "on");
    b.run("arguments[0].focus()", json!([Browser::arg(&no_rm)]))
        .await;
    let ring = b
        .run(
            "return getComputedStyle(arguments[0].nextElementSibling).outlineStyle",
            json!([Browser::arg(&no_rm)]),
        )
        .await;
    assert_eq!(ring, "solid", "a visible focus ring");
    let status = b
        .one(&format!("{} [data-status]", rule("demo/no-rm")))
        .await;
    let group = b.one(&format!("{} .state", rule("demo/no-rm"))).await;
    for (key, word) in [
        (RIGHT, "Shadow"),
        (RIGHT, "Off"),
        (LEFT, "Shadow"),
        (RIGHT, "Off"),
    ] {
        b.press(&[key]).await;
        b.wait_for(
            &format!("the state to become {word}"),
            &format!("return arguments[0].textContent === '{word}'"),
            json!([Browser::arg(&status)]),
        )
        .await;
        // The keyboard is still on the rule's state, on the choice made.
        assert_eq!(
            b.run(
                "return document.activeElement.checked && arguments[0].contains(document.activeElement) \
                 && document.activeElement.nextElementSibling.textContent",
                json!([Browser::arg(&group)])
            )
            .await,
            word,
            "the state kept the focus"
        );
    }
    let listed = api
        .get(&format!("/v1/rules/{}?user=ada", enc("demo/no-rm")))
        .await
        .json();
    assert_eq!(listed["enabled"], false);
    assert_eq!(listed["state"], "off");
    let call = json!({"hook": "on_tool_call", "tool": {"name": "Bash", "arguments": {"command": "rm -rf /"}}});
    let o = api
        .post("/v1/sessions/ada-1/events?user=ada", &call)
        .await
        .json();
    assert!(
        !o["fired"]
            .as_array()
            .unwrap()
            .contains(&json!("demo/no-rm")),
        "the next tick no longer fires it: {o}"
    );
    let o = api
        .post("/v1/sessions/bob-1/events?user=bob", &call)
        .await
        .json();
    assert!(
        o["fired"]
            .as_array()
            .unwrap()
            .contains(&json!("demo/no-rm")),
        "Bob's is on: {o}"
    );

    // An invalid setting shows its error beside the field, and nothing is saved.
    let field = b.one("#plugin-builtin-token-budget-threshold").await;
    b.clear(&field).await;
    b.keys(&field, "5").await;
    b.click(
        &b.one("form[data-plugin=\"builtin\"] button[type=submit]")
            .await,
    )
    .await;
    let error = b.one("#plugin-builtin-token-budget-threshold-error").await;
    b.wait_for(
        "the setting's error",
        "return !arguments[0].hidden",
        json!([Browser::arg(&error)]),
    )
    .await;
    let message = b.text(&error).await;
    assert!(message.contains("at most 1"), "{message}");
    assert_eq!(b.attr(&field, "aria-invalid").await, "true");
    let values = api.get("/v1/plugins?user=ada").await.json();
    let builtin = values
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == "builtin")
        .unwrap();
    assert_eq!(builtin["values"][0]["value"], 0.8, "nothing was saved");
    // A valid one saves.
    b.clear(&field).await;
    b.keys(&field, "0.85").await;
    b.click(
        &b.one("form[data-plugin=\"builtin\"] button[type=submit]")
            .await,
    )
    .await;
    b.wait_for("the save", "return document.querySelector('form[data-plugin=builtin] .form-status').textContent.startsWith('Saved')", json!([])).await;
    // Only the setting changed became the user's: the others still follow their defaults.
    let values = api.get("/v1/plugins?user=ada").await.json();
    let set: Vec<&Value> = values
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["values"].as_array().unwrap())
        .filter(|v| v["set_by"] != "default")
        .collect();
    assert_eq!(set.len(), 1, "{set:?}");
    assert_eq!(set[0]["key"], "builtin.token_budget_threshold", "{set:?}");
    assert_eq!(
        b.run("return arguments[0].hidden", json!([Browser::arg(&error)]))
            .await,
        true
    );

    // The Test button shows what the rule would inject.
    b.click(
        &b.one(&format!("{} button.test", rule("token-budget-warning")))
            .await,
    )
    .await;
    let result = b
        .one(&format!("{} .test-result", rule("token-budget-warning")))
        .await;
    b.wait_for(
        "the test's result",
        "return arguments[0].querySelector('.verdict')",
        json!([Browser::arg(&result)]),
    )
    .await;
    let shown = b.text(&result).await;
    assert!(shown.contains("Fired"), "{shown}");
    assert!(
        shown.contains("Token budget at 90%. Consider wrapping up or summarizing."),
        "{shown}"
    );

    // The live feed shows a firing.
    let o = api
        .post(
            "/v1/sessions/ada-2/events?user=ada",
            &json!({"hook": "on_turn_start", "turn": {"token_usage": 0.93}}),
        )
        .await
        .json();
    assert_eq!(o["fired"], json!(["token-budget-warning"]));
    api.post(
        "/v1/sessions/ada-2/events?user=ada",
        &json!({"hook": "on_query_start", "query": "research and compare WAL modes"}),
    )
    .await;
    api.post(
        "/v1/sessions/ada-3/events?user=bob",
        &json!({"hook": "on_tool_call", "tool": {"name": "Bash", "arguments": {"command": "rm -rf build"}}}),
    )
    .await;
    let item = b
        .wait_for(
            "a firing in the feed",
            "const li = [...document.querySelectorAll('#feed li.feed-item')].find(li => li.textContent.includes('token-budget-warning')); return li ? li.textContent : null",
            json!([]),
        )
        .await;
    assert!(
        item.as_str().unwrap().contains("Token budget at 93%"),
        "{item}"
    );
    b.wait_for(
        "a decision in the feed",
        "return document.querySelector('#feed li.decision')",
        json!([]),
    )
    .await;

    // The picture for the book.
    b.run(
        "window.scrollTo(0, 0); document.activeElement.blur()",
        json!([]),
    )
    .await;
    let png = b.screenshot().await;
    assert!(png.starts_with(b"\x89PNG"), "a PNG");
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("settings-page.png");
    std::fs::write(&out, &png).unwrap();
    println!("screenshot: {}", out.display());
    if std::env::var_os("WARDEN_UPDATE_SCREENSHOT").is_some() {
        let book =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../book/src/images/settings-page.png");
        std::fs::create_dir_all(book.parent().unwrap()).unwrap();
        std::fs::write(&book, &png).unwrap();
    }
    drop(b);
    server.stop().await.unwrap();
}

/// A rule put in shadow on the page: the request takes effect, a call the rule would deny is
/// not refused, the feed and the rule's figures say what it would have done, a reload shows it
/// in shadow with its figures, and it goes back on. Then a plugin's pair of buttons: all its
/// rules in shadow (its core rule stays on), and all on again.
#[ignore = "needs Chromium and chromedriver: run `cargo test -- --ignored` (CI does)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_in_shadow_on_the_page_refuses_nothing_and_shows_what_it_would_have_done() {
    let Some((driver, chromium)) = browser_tools() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let server = Running::start(installation(dir.path()), ServeOptions::default()).await;
    let api = server.client();
    let b = Browser::start(&driver, &chromium, 1360, 1400).await;
    b.goto(&format!(
        "http://127.0.0.1:{}/?user=ada",
        server.addr.port()
    ))
    .await;
    let live = "return document.getElementById('feed-status').textContent === 'live'";
    b.wait_for("the live feed to connect", live, json!([]))
        .await;
    let key = "demo/no-rm";
    let url = format!("/v1/rules/{}?user=ada", enc(key));
    let figures = b.one(&format!("{} .shadow-figures", rule(key))).await;
    assert_eq!(
        b.run(
            "return arguments[0].hidden",
            json!([Browser::arg(&figures)])
        )
        .await,
        true,
        "no shadow figures for a rule never in shadow"
    );

    // Shadow, by a click: the request took effect.
    set_state(&b, key, "shadow").await;
    let v = api.get(&url).await.json();
    assert_eq!(v["state"], "shadow", "{v}");
    let marked = b
        .run(
            "const li = document.querySelector(arguments[0]); \
             return [li.classList.contains('shadow'), li.querySelector('.shadow-figures').hidden]",
            json!([rule(key)]),
        )
        .await;
    assert_eq!(
        marked,
        json!([true, false]),
        "marked shadow, its figures shown"
    );

    // A call the rule would deny is not refused (`rm -rf /` the guardrails refuse too; this one
    // only `demo/no-rm` would).
    let call = json!({"hook": "on_tool_call", "tool": {"name": "Bash", "arguments": {"command": "rm -rf build"}}});
    let o = api
        .post("/v1/sessions/ada-shadow/events?user=ada", &call)
        .await
        .json();
    assert_eq!(o["proceed"], "yes", "{o}");
    assert_eq!(o["ruling"], Value::Null, "{o}");
    // The feed shows what it would have done, marked shadow; the rule's figures follow.
    let item = b
        .wait_for(
            "the shadow firing in the feed",
            "const li = document.querySelector('#feed li.feed-item.shadow'); return li ? li.textContent : null",
            json!([]),
        )
        .await;
    let item = item.as_str().unwrap();
    assert!(item.contains("shadow") && item.contains(key), "{item}");
    assert!(
        item.contains("deny: `rm -rf build` deletes too much"),
        "{item}"
    );
    b.wait_for(
        "the shadow figures to count the firing",
        "return arguments[0].dataset.shadowCount === '1'",
        json!([Browser::arg(&figures)]),
    )
    .await;

    // After a reload: marked shadow, with its figures.
    b.refresh().await;
    b.wait_for("the live feed to connect again", live, json!([]))
        .await;
    let shown = b
        .run(
            "const li = document.querySelector(arguments[0]); const f = li.querySelector('.shadow-figures'); \
             return {shadow: li.classList.contains('shadow'), status: li.querySelector('[data-status]').textContent, \
             checked: li.querySelector('.state input:checked').value, count: f.dataset.shadowCount, \
             refusals: f.dataset.shadowRefusals, hidden: f.hidden, text: f.textContent}",
            json!([rule(key)]),
        )
        .await;
    assert_eq!(
        shown,
        json!({
            "shadow": true, "status": "Shadow", "checked": "shadow", "count": "1",
            "refusals": "1", "hidden": false,
            "text": "In shadow, it would have fired 1 time; it would have refused 1 call the live rules let through.",
        })
    );

    // Back on: the same call is refused again.
    set_state(&b, key, "on").await;
    assert_eq!(api.get(&url).await.json()["state"], "on");
    let o = api
        .post("/v1/sessions/ada-shadow/events?user=ada", &call)
        .await
        .json();
    assert_eq!(o["proceed"], "no", "{o}");
    assert_eq!(
        b.run(
            "return document.querySelector(arguments[0]).classList.contains('shadow')",
            json!([rule(key)])
        )
        .await,
        false
    );

    // A plugin's rules all in shadow, then all on; a core rule stays on.
    for (plugin, state, says) in [
        ("demo", "shadow", "3 rules in shadow."),
        ("demo", "on", "3 rules on."),
        (
            "builtin",
            "shadow",
            "3 rules in shadow; 1 core rule stays on; 1 rule off in its file stays off.",
        ),
        ("builtin", "on", "5 rules on."),
    ] {
        let button = b
            .one(&format!(
                "button.plugin-state[data-plugin=\"{plugin}\"][data-state=\"{state}\"]"
            ))
            .await;
        // (Into the middle of the window: at its top the sticky bar would take the click.)
        b.run(
            "arguments[0].scrollIntoView({block: 'center'})",
            json!([Browser::arg(&button)]),
        )
        .await;
        b.click(&button).await;
        b.wait_for(
            &format!("{plugin}'s rules to go {state}"),
            "return arguments[0].closest('.plugin-states').querySelector('[role=status]').textContent === arguments[1]",
            json!([Browser::arg(&button), says]),
        )
        .await;
        let rules = api.get("/v1/rules?user=ada").await.json();
        for r in rules
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["plugin"] == plugin)
        {
            let want = match (r["core"] == true, r["default_state"] == "off") {
                (true, _) => "on",
                // In shadow, a rule its file leaves off stays off.
                (false, true) if state == "shadow" => "off",
                _ => state,
            };
            assert_eq!(r["state"], want, "{r}");
            let k = r["key"].as_str().unwrap();
            let page = b
                .run(
                    "const li = document.querySelector(arguments[0]); \
                     return [li.dataset.state, li.querySelector('.state input:checked').value]",
                    json!([rule(k)]),
                )
                .await;
            assert_eq!(page, json!([want, want]), "{k} on the page");
        }
    }
    drop(b);
    server.stop().await.unwrap();
}

#[ignore = "needs Chromium and chromedriver: run `cargo test -- --ignored` (CI does)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_from_rules_is_never_markup() {
    let Some((driver, chromium)) = browser_tools() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    support::hostile(dir.path());
    let w = warden_core::Warden::builder()
        .plugins_dir(dir.path())
        .build()
        .unwrap();
    let server = Running::start(w, ServeOptions::default()).await;
    let api = server.client();
    let b = Browser::start(&driver, &chromium, 1200, 900).await;
    b.goto(&format!("http://127.0.0.1:{}/", server.addr.port()))
        .await;
    b.wait_for(
        "the live feed to connect",
        "return document.getElementById('feed-status').textContent === 'live'",
        json!([]),
    )
    .await;
    let key = "hostile/markup";
    let name = b.text(&b.one(&format!("{} h4", rule(key))).await).await;
    assert_eq!(
        name,
        format!("Markup {HOSTILE}"),
        "the name is shown as text"
    );
    let heading = b.text(&b.one("section.plugin h2").await).await;
    assert!(heading.starts_with("Hostile <b>plugin</b>"), "{heading}");

    b.click(&b.one(&format!("{} button.test", rule(key))).await)
        .await;
    let result = b.one(&format!("{} .test-result", rule(key))).await;
    b.wait_for(
        "the test's result",
        "return arguments[0].querySelector('blockquote')",
        json!([Browser::arg(&result)]),
    )
    .await;
    let quoted = b
        .text(
            &b.one(&format!("{} .test-result blockquote", rule(key)))
                .await,
        )
        .await;
    assert_eq!(quoted, format!("Searching again: {HOSTILE}"));

    api.post(
        "/v1/sessions/h/events",
        &json!({"hook": "on_tool_call", "tool": {"name": "web_search"}}),
    )
    .await;
    let item = b
        .wait_for(
            "the firing in the feed",
            "const li = document.querySelector('#feed li.feed-item .what'); return li ? li.textContent : null",
            json!([]),
        )
        .await;
    assert_eq!(item, Value::String(format!("Searching again: {HOSTILE}")));

    let injected = b
        .run(
            "return { pwned: window.__pwned === undefined ? null : window.__pwned, \
             scripts: document.querySelectorAll('main script, aside script').length, \
             images: document.querySelectorAll('main img, aside img').length, \
             bold: document.querySelectorAll('h2 b').length }",
            json!([]),
        )
        .await;
    assert_eq!(
        injected,
        json!({"pwned": null, "scripts": 0, "images": 0, "bold": 0})
    );
    drop(b);
    server.stop().await.unwrap();
}

#[ignore = "needs Chromium and chromedriver: run `cargo test -- --ignored` (CI does)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_with_a_token_asks_the_browser_to_sign_in() {
    let Some((driver, chromium)) = browser_tools() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let token = "page-token-0123456789abcdefghij";
    let options = ServeOptions {
        tokens: Tokens::new(token, None).unwrap(),
        ..ServeOptions::default()
    };
    let server = Running::start(installation(dir.path()), options).await;
    let b = Browser::start(&driver, &chromium, 1200, 900).await;
    b.goto(&format!("http://127.0.0.1:{}/", server.addr.port()))
        .await;
    let field = b.one("#token").await;
    b.keys(&field, "not-the-token").await;
    b.click(&b.one("form button[type=submit]").await).await;
    b.wait_for(
        "the refusal",
        "return document.querySelector('#token-error')",
        json!([]),
    )
    .await;
    sign_in(&b, token).await;
    // The page's own requests carry the sign-in (and pass the cross-site check).
    set_state(&b, "demo/no-rm", "off").await;
    let off = b
        .one(&format!("{} .state input[value=off]", rule("demo/no-rm")))
        .await;
    assert_eq!(
        b.run("return arguments[0].checked", json!([Browser::arg(&off)]))
            .await,
        true
    );
    drop(b);
    server.stop().await.unwrap();
}

/// Signs in with `token` on the sign-in form shown, and waits for the page and its live feed.
async fn sign_in(b: &Browser, token: &str) {
    let field = b.one("#token").await;
    b.keys(&field, token).await;
    b.click(&b.one("form button[type=submit]").await).await;
    b.wait_for("the page after signing in", "return document.getElementById('feed-status') && document.getElementById('feed-status').textContent === 'live'", json!([])).await;
}

/// Clicks `state` (`on`, `shadow` or `off`) on rule `key`'s state control and waits until the
/// page shows the rule in that state.
async fn set_state(b: &Browser, key: &str, state: &str) {
    let status = b.one(&format!("{} [data-status]", rule(key))).await;
    b.click(&b.one(&format!("{} .seg-{state}", rule(key))).await)
        .await;
    b.wait_for(
        &format!("the state {state} to apply"),
        "return arguments[0].textContent.toLowerCase() === arguments[1]",
        json!([Browser::arg(&status), state]),
    )
    .await;
}

/// The address the network-address test serves on, inside its own network namespace: not a
/// loopback one, so the browser treats the page as any site on a network (no `Sec-Fetch-Site`
/// over plain HTTP), and nothing leaves the machine.
const NETWORK_ADDRESS: &str = "10.55.0.1";

/// Signing in and out from Chromium at `http://10.55.0.1:PORT/`, then at `https://...` with a
/// certificate for that address: the page's own forms pass the cross-site check (a referrer
/// policy of `no-referrer` once made them `Origin: null` over plain HTTP, refused), and a form
/// posted from another origin is still refused. The test runs itself again inside
/// `unshare --user --net`, where it can give the loopback interface that address.
#[ignore = "needs Chromium and chromedriver: run `cargo test -- --ignored` (CI does)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signing_in_works_on_a_network_address_over_plain_http_and_tls() {
    let Some((driver, chromium)) = browser_tools() else {
        return;
    };
    if std::env::var_os("WARDEN_TEST_NETNS").is_none() {
        let name = "signing_in_works_on_a_network_address_over_plain_http_and_tls";
        let status = std::process::Command::new("unshare")
            .args(["--user", "--map-root-user", "--net", "sh", "-c"])
            .arg(format!(
                "ip link set lo up && ip addr add {NETWORK_ADDRESS}/32 dev lo && exec \"$0\" \"$@\""
            ))
            .arg(std::env::current_exe().unwrap())
            .args([name, "--exact", "--ignored", "--nocapture"])
            .env("WARDEN_TEST_NETNS", "1")
            .status();
        match status {
            Ok(s) => assert!(
                s.success(),
                "the test inside its network namespace failed ({s})"
            ),
            Err(e) if std::env::var_os("WARDEN_REQUIRE_BROWSER").is_some() => {
                panic!("WARDEN_REQUIRE_BROWSER is set, but unshare could not run: {e}")
            }
            Err(e) => {
                use std::io::Write;
                let _ = writeln!(std::io::stderr(), "skipped: unshare could not run: {e}");
            }
        }
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    sign_in_and_out_on_the_network(&driver, &chromium, dir.path(), None).await;
    let Some((cert, key)) = support::certificate(dir.path(), &[NETWORK_ADDRESS], "network") else {
        return;
    };
    let tls = warden_serve::TlsFiles { cert, key };
    sign_in_and_out_on_the_network(&driver, &chromium, dir.path(), Some(tls)).await;
}

/// Signs in, switches a rule off and signs out from Chromium at the network address, over
/// plain HTTP or TLS; then checks that a form from another site is refused.
async fn sign_in_and_out_on_the_network(
    driver: &std::path::PathBuf,
    chromium: &std::path::PathBuf,
    dir: &Path,
    tls: Option<warden_serve::TlsFiles>,
) {
    let token = "network-token-0123456789abcdefgh";
    let scheme = if tls.is_some() { "https" } else { "http" };
    let options = ServeOptions {
        tokens: Tokens::new(token, None).unwrap(),
        plain_http: tls.is_none(),
        tls,
        ..ServeOptions::default()
    };
    let ip = NETWORK_ADDRESS.parse().unwrap();
    let sub = tempfile::tempdir_in(dir).unwrap();
    let server = Running::start_on(installation(sub.path()), options, ip).await;
    let origin = format!("{scheme}://{NETWORK_ADDRESS}:{}", server.addr.port());
    let b = Browser::start_with(driver, chromium, 1200, 900, scheme == "https").await;
    b.goto(&format!("{origin}/")).await;
    sign_in(&b, token).await;
    // The page's own requests pass the check too: a rule's state control turns it off.
    set_state(&b, "demo/no-rm", "off").await;
    // Signing out ends the sign-in: the sign-in form again.
    b.click(&b.one("form.sign-out button").await).await;
    b.wait_for(
        "the sign-in form after signing out",
        "return document.getElementById('token') !== null",
        json!([]),
    )
    .await;
    // A form posted from another site is still refused, token or not: what a browser sends
    // with it (its `Origin`, or `null` from a page whose referrer policy hides it). (The raw
    // client speaks plain HTTP; over TLS the check is the same code.)
    if scheme == "https" {
        drop(b);
        server.stop().await.unwrap();
        return;
    }
    let host = format!("{NETWORK_ADDRESS}:{}", server.addr.port());
    for from in ["http://elsewhere.example", "null"] {
        let refused = server
            .client()
            .send(
                "POST",
                "/sign-in",
                &[
                    ("host", &host),
                    ("origin", from),
                    ("content-type", "application/x-www-form-urlencoded"),
                ],
                Some(format!("token={token}").into_bytes()),
            )
            .await;
        assert_eq!(refused.status, 403, "from {from}: {}", refused.text());
        assert!(refused.text().contains("cross-site"), "{}", refused.text());
    }
    drop(b);
    server.stop().await.unwrap();
}
