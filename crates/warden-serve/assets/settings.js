// Warden's Settings page: rule states (on, shadow, off), settings forms, Test buttons and the
// live feed, over the management API. Everything shown is set with textContent: nothing from a rule is ever
// parsed as HTML.
"use strict";

(function () {
  const body = document.body;
  const user = body.dataset.user;
  const project = body.dataset.project;

  function query(withProject) {
    const q = new URLSearchParams({ user: user });
    if (withProject) q.set("project", project);
    return "?" + q.toString();
  }

  async function api(method, path, data) {
    const init = { method: method, credentials: "same-origin", headers: { "accept": "application/json" } };
    if (data !== undefined) {
      init.headers["content-type"] = "application/json";
      init.body = JSON.stringify(data);
    }
    let response;
    try {
      response = await fetch(path, init);
    } catch (e) {
      return { ok: false, status: 0, data: { error: "the server cannot be reached" } };
    }
    let json = null;
    try { json = await response.json(); } catch (e) { json = null; }
    return { ok: response.ok, status: response.status, data: json || {} };
  }

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function ruleUrl(key, rest) {
    return "/v1/rules/" + encodeURIComponent(key) + rest;
  }

  // Rule states: on, in shadow, off.
  const LABELS = { on: "On", shadow: "Shadow", off: "Off" };

  function plural(n, one, many) { return n + " " + (n === 1 ? one : many); }

  // The same words as the page's template (`shadow_text` in page.rs).
  function shadowText(fires, refusals) {
    return "In shadow, it would have fired " + plural(fires, "time", "times") +
      "; it would have refused " + plural(refusals, "call", "calls") + " the live rules let through.";
  }

  function ruleItem(key) {
    return [...document.querySelectorAll("li.rule")].find(function (li) { return li.dataset.rule === key; });
  }

  // Shows a rule as the API returned it: its state, and its shadow figures.
  function showRule(li, view) {
    li.dataset.state = view.state;
    li.classList.toggle("off", view.state === "off");
    li.classList.toggle("shadow", view.state === "shadow");
    li.querySelector("[data-status]").textContent = LABELS[view.state] || view.state;
    const radio = li.querySelector(".state input[value='" + view.state + "']");
    if (radio) radio.checked = true;
    showShadow(li, view.shadow_fire_count, view.shadow_refusals);
  }

  function showShadow(li, fires, refusals) {
    const p = li.querySelector(".shadow-figures");
    if (typeof fires !== "number" || typeof refusals !== "number") return;
    p.dataset.shadowCount = String(fires);
    p.dataset.shadowRefusals = String(refusals);
    p.textContent = shadowText(fires, refusals);
    p.hidden = li.dataset.state !== "shadow" && fires === 0;
  }

  document.querySelectorAll(".state[role=radiogroup]").forEach(function (group) {
    const li = group.closest(".rule");
    const radios = [...group.querySelectorAll("input[type=radio]")];
    const core = radios.filter(function (r) { return r.disabled; });
    radios.forEach(function (input) {
      input.addEventListener("change", async function () {
        if (!input.checked) return;
        const error = li.querySelector(".rule-error");
        const before = li.dataset.state;
        // Disabled while the change is sent (a second one waits), which takes the focus away:
        // it comes back after, so that the keyboard stays on the rule's state.
        const focused = group.contains(document.activeElement);
        radios.forEach(function (radio) { radio.disabled = true; });
        const r = await api("PUT", ruleUrl(group.dataset.rule, "/state" + query(false)), { state: input.value });
        radios.forEach(function (radio) { radio.disabled = core.includes(radio); });
        if (r.ok) {
          error.hidden = true;
          showRule(li, r.data);
        } else {
          const back = group.querySelector("input[value='" + before + "']");
          if (back) back.checked = true;
          error.textContent = r.data.error || ("the change failed (HTTP " + r.status + ")");
          error.hidden = false;
        }
        if (focused) {
          const checked = group.querySelector("input:checked");
          if (checked) checked.focus();
        }
      });
    });
  });

  // A plugin's rules all in shadow, or all on (its core rules stay on; in shadow, the rules
  // its files leave off stay off).
  document.querySelectorAll("button.plugin-state").forEach(function (button) {
    button.addEventListener("click", async function () {
      const box = button.closest(".plugin-states");
      const status = box.querySelector(".plugin-state-status");
      const buttons = [...box.querySelectorAll("button")];
      const wanted = button.dataset.state;
      status.classList.remove("bad");
      status.textContent = "";
      buttons.forEach(function (b) { b.disabled = true; });
      const r = await api("PUT", "/v1/plugins/" + encodeURIComponent(button.dataset.plugin) + "/state" + query(false), { state: wanted });
      buttons.forEach(function (b) { b.disabled = false; });
      button.focus();
      if (!r.ok) {
        status.classList.add("bad");
        status.textContent = r.data.error || ("The change failed (HTTP " + r.status + ").");
        return;
      }
      const views = Array.isArray(r.data) ? r.data : [];
      let core = 0;
      let off = 0;
      views.forEach(function (view) {
        const li = ruleItem(view.key);
        if (li) showRule(li, view);
        if (view.state !== wanted) {
          if (view.core) core += 1;
          else off += 1;
        }
      });
      const done = plural(views.length - core - off, "rule", "rules") + (wanted === "shadow" ? " in shadow" : " on");
      const kept = [];
      if (core) kept.push(plural(core, "core rule stays", "core rules stay") + " on");
      if (off) kept.push(plural(off, "rule", "rules") + " off in " + (off === 1 ? "its file stays" : "their files stay") + " off");
      status.textContent = done + (kept.length ? "; " + kept.join("; ") + "." : ".");
    });
  });

  // Settings forms.
  function readValue(field) {
    const type = field.dataset.type;
    if (type === "boolean") return field.value === "true";
    if (type === "integer" || type === "float") {
      if (field.validity && field.validity.badInput) return { bad: "enter a number" };
      if (field.value.trim() === "") return null;
      const n = Number(field.value);
      return Number.isFinite(n) ? n : { bad: "enter a number" };
    }
    return field.value;
  }

  function showFieldError(form, name, message) {
    const field = form.querySelector("[name='" + CSS.escape(name) + "']");
    if (!field) return false;
    const error = document.getElementById(field.id + "-error");
    field.setAttribute("aria-invalid", "true");
    error.textContent = message;
    error.hidden = false;
    return true;
  }

  // What each field held when the page was drawn (or last saved): Save sends only what changed,
  // so that a value the user never touched does not become theirs.
  const shown = new Map();
  function remember(form) {
    form.querySelectorAll("[name]").forEach(function (field) {
      shown.set(field, JSON.stringify(readValue(field)));
    });
  }

  document.querySelectorAll("form.settings").forEach(function (form) {
    remember(form);
    form.addEventListener("submit", async function (event) {
      event.preventDefault();
      const status = form.querySelector(".form-status");
      const button = form.querySelector("button[type=submit]");
      form.querySelectorAll("[aria-invalid]").forEach(function (f) { f.removeAttribute("aria-invalid"); });
      form.querySelectorAll(".field-error").forEach(function (e) { e.hidden = true; e.textContent = ""; });
      status.textContent = "";
      status.classList.remove("bad");
      const values = {};
      let firstBad = null;
      form.querySelectorAll("[name]").forEach(function (field) {
        const v = readValue(field);
        if (v && typeof v === "object" && v.bad) {
          showFieldError(form, field.name, v.bad);
          firstBad = firstBad || field;
        } else if (JSON.stringify(v) !== shown.get(field)) {
          values[field.name] = v;
        }
      });
      if (firstBad) { firstBad.focus(); return; }
      if (Object.keys(values).length === 0) {
        status.textContent = "Nothing to save: no setting was changed.";
        return;
      }
      button.disabled = true;
      const r = await api("PUT", "/v1/plugins/" + encodeURIComponent(form.dataset.plugin) + "/settings" + query(false), values);
      button.disabled = false;
      if (r.ok) {
        remember(form);
        status.textContent = "Saved. Sessions use the new values from their next event.";
        return;
      }
      const errors = (r.data && r.data.errors) || [];
      let first = null;
      errors.forEach(function (e) {
        if (showFieldError(form, e.setting, e.message) && !first) first = e.setting;
      });
      status.classList.add("bad");
      status.textContent = errors.length ? "Nothing was saved: fix the marked setting." : (r.data.error || ("Saving failed (HTTP " + r.status + ")."));
      if (first) form.querySelector("[name='" + CSS.escape(first) + "']").focus();
    });
  });

  // Test buttons.
  function renderTest(box, key, r, events) {
    box.replaceChildren();
    box.hidden = false;
    box.className = "test-result";
    if (!r.ok) {
      box.classList.add("failed");
      box.append(el("p", "verdict", "The test could not run"), el("p", "why", r.data.error || ("HTTP " + r.status)));
      return;
    }
    const d = r.data;
    box.classList.add(d.fired ? "fired" : (d.evaluation === "failed" ? "failed" : "quiet"));
    let verdict = d.fired ? "Fired" : "Did not fire";
    if (d.decision) verdict = "Fired: decides " + d.decision.decision;
    box.append(el("p", "verdict", verdict + (d.sample ? " (on the sample session)" : "")));
    (d.messages || []).forEach(function (m) {
      box.append(el("p", "label", "Would inject:"), el("blockquote", "message", m.message));
    });
    if (d.decision && d.decision.reason) box.append(el("p", "label", "Reason given:"), el("blockquote", "message", d.decision.reason));
    if (d.input) box.append(el("p", "label", "Rewritten arguments:"), el("blockquote", "message", JSON.stringify(d.input, null, 2)));
    box.append(el("p", "why", "Why: " + d.why));
    (d.errors || []).forEach(function (e) { box.append(el("p", "rule-error", e)); });
    if (!d.enabled_for_user) box.append(el("p", "why", "This rule is off for " + user + "; the test ran it anyway."));
    const details = el("details");
    details.append(el("summary", null, "Try other events"));
    const label = el("label", "sr-only", "Events, one JSON object per hook, as a JSON list");
    const area = el("textarea");
    area.id = box.id + "-events";
    label.htmlFor = area.id;
    area.spellcheck = false;
    area.value = JSON.stringify(d.events || events || [], null, 2);
    const run = el("button", "btn", "Run with these events");
    run.type = "button";
    run.addEventListener("click", function () {
      let parsed;
      try { parsed = JSON.parse(area.value); } catch (e) {
        area.setAttribute("aria-invalid", "true");
        run.nextSibling && run.nextSibling.remove();
        run.after(el("p", "field-error", "Not valid JSON: " + e.message));
        return;
      }
      runTest(box, key, Array.isArray(parsed) ? { events: parsed } : { event: parsed });
    });
    details.append(label, area, run);
    box.append(details);
  }

  async function runTest(box, key, request) {
    box.hidden = false;
    box.className = "test-result";
    box.replaceChildren(el("p", "why", "Running…"));
    const r = await api("POST", ruleUrl(key, "/test" + query(true)), request);
    renderTest(box, key, r, request.events);
  }

  document.querySelectorAll("button.test").forEach(function (button) {
    button.addEventListener("click", function () {
      const box = document.getElementById(button.getAttribute("aria-controls"));
      runTest(box, button.dataset.rule, {});
    });
  });

  // The live feed.
  const feed = document.getElementById("feed");
  const feedStatus = document.getElementById("feed-status");
  const MAX_ITEMS = 60;

  function clock(seconds) {
    const d = seconds ? new Date(seconds * 1000) : new Date();
    return d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
  }

  function addItem(kind, tag, rule, what, at) {
    const empty = feed.querySelector(".feed-empty");
    if (empty) empty.remove();
    const li = el("li", "feed-item " + kind);
    const top = el("div", "top");
    const name = el("span", "rule-name");
    name.append(el("span", "tag", tag), document.createTextNode(rule || "event"));
    const time = el("time", null, clock(at));
    top.append(name, time);
    li.append(top);
    if (what) li.append(el("div", "what", what));
    feed.prepend(li);
    while (feed.children.length > MAX_ITEMS) feed.lastElementChild.remove();
  }

  // Keeps a rule's "last fired" up to date: once per firing, whatever its actions.
  function markFired(d, counted) {
    const key = d.session + " " + d.rule + " " + d.at;
    if (counted.has(key)) return;
    counted.add(key);
    if (counted.size > 5000) counted.clear();
    const li = ruleItem(d.rule);
    if (!li) return;
    const span = li.querySelector(".fired");
    const count = Number(span.dataset.count || 0) + 1;
    span.dataset.count = String(count);
    const time = el("time", null, clock(d.at));
    time.dateTime = new Date(d.at * 1000).toISOString();
    span.replaceChildren(document.createTextNode("last fired "), time, document.createTextNode(" · " + count + "×"));
  }

  // Keeps a rule's shadow figures up to date: the server counts what the live rules let
  // through, so the figures are read again (once at a time per rule) after a shadow firing.
  const reading = new Map();
  async function markShadow(d, counted) {
    const key = "shadow " + d.session + " " + d.rule + " " + d.at;
    if (counted.has(key)) return;
    counted.add(key);
    const li = ruleItem(d.rule);
    if (!li) return;
    if (reading.has(d.rule)) { reading.set(d.rule, true); return; }
    do {
      reading.set(d.rule, false);
      const r = await api("GET", ruleUrl(d.rule, query(true)));
      if (r.ok) showShadow(li, r.data.shadow_fire_count, r.data.shadow_refusals);
    } while (reading.get(d.rule));
    reading.delete(d.rule);
  }

  function connect() {
    if (!window.EventSource) { feedStatus.textContent = "not supported by this browser"; return; }
    const source = new EventSource("/v1/events", { withCredentials: true });
    source.addEventListener("ready", function () { feedStatus.textContent = "live"; feedStatus.classList.add("live"); });
    source.onerror = function () { feedStatus.textContent = "reconnecting…"; feedStatus.classList.remove("live"); };
    function on(type, handler) {
      source.addEventListener(type, function (event) {
        let data;
        try { data = JSON.parse(event.data); } catch (e) { return; }
        handler(data);
      });
    }
    const counted = new Set();
    on("fired", function (d) {
      if (d.shadow) {
        // Nothing of it applied, and no decision item follows: shown as it is, marked.
        markShadow(d, counted);
        addItem("fired shadow", "shadow · " + d.action.replace("_", " "), d.rule, d.message, d.at);
        return;
      }
      markFired(d, counted);
      // A decision is shown once, merged, as its `decision` item; an emitted event as its
      // `emitted` item.
      if (d.action === "decide" || d.action === "rewrite" || d.action === "emit_event") return;
      addItem("fired", d.action.replace("_", " "), d.rule, d.message, d.at);
    });
    on("decision", function (d) { addItem("decision", d.decision, d.rule, d.reason, d.at); });
    on("rule_error", function (d) {
      addItem(d.shadow ? "rule_error shadow" : "rule_error", d.shadow ? "shadow · error" : "error", d.rule, d.error, d.at);
    });
    on("emitted", function (d) { addItem("emitted", "event", d.rule, d.event_type, null); });
    on("reload", function (d) {
      addItem("reload", d.applied ? "reloaded" : "reload refused", null,
        d.applied ? "Rules reloaded (generation " + d.generation + "): refresh the page to see them." : (d.errors || []).join("; "), null);
    });
    on("lagged", function (d) { addItem("rule_error", "missed", null, d.missed + " items were missed", null); });
  }
  connect();
})();
