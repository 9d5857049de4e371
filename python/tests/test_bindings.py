"""The bindings: what a tick takes and returns, errors, configuration, scripts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import warden
from warden import (
    Decided,
    Decision,
    DeliverAt,
    EventError,
    Hook,
    LoadError,
    Notification,
    Outcome,
    Priority,
    ProceedKind,
    Rewrite,
)

from conftest import PLUGINS, need

APP = {"id": "app", "root": "/home/ada/app"}


def test_a_tick_returns_a_typed_outcome():
    w = warden.Warden()
    session = w.session("conversation-1", user="ada")
    assert session.id == "conversation-1"
    session.tick("on_query_start", {"query": "Summarise the design notes"})
    outcome = session.tick(Hook.ON_TURN_START, {"turn": {"token_usage": 0.85}})

    assert isinstance(outcome, Outcome)
    assert outcome.hook is Hook.ON_TURN_START
    assert outcome.fired == ["token-budget-warning"]
    [note] = outcome.inject
    assert isinstance(note, Notification)
    assert note.message == "Token budget at 85%. Consider wrapping up or summarizing."
    assert note.rule == "token-budget-warning"
    assert note.category == "warning"
    assert note.priority is Priority.HIGH and note.priority == "high"
    assert note.deliver_at is DeliverAt.TURN_START
    assert note.fired_at is Hook.ON_TURN_START
    assert [type(e) for e in outcome.effects] == [Notification]
    # No rule decided: the agent proceeds.
    assert outcome.decision is None and outcome.reason is None and outcome.ruling is None
    assert outcome.updated_input is None
    assert outcome.proceed.kind is ProceedKind.YES and outcome.proceed.runs
    assert outcome.errors == [] and outcome.halted == [] and outcome.overridden == []
    assert outcome.mode == "default" and outcome.mode_change is None
    assert not outcome.quiet
    assert session.facts["turn"]["number"] == 1
    assert session.facts["user"]["id"] == "ada"


def test_replay_lines_are_what_warden_replay_prints():
    session = warden.Warden().session()
    outcome = session.tick("on_tool_complete", {"tool": {"name": "vault_search"}, "result": {"count": 9}})
    [line] = [json.loads(x) for x in outcome.replay_lines(3)]
    expected = {
        "event": 3,
        "hook": "on_tool_complete",
        "rule": "large-result-summary",
        "action": "notify_self",
        "message": "vault_search returned 9 results. Summarize the key findings before going on.",
        "category": "hint",
        "priority": "normal",
        "deliver_at": "immediate",
    }
    assert line == expected
    # The same lines as one UTF-8 text, each ending in a newline; nothing when nothing happened.
    assert outcome.replay_output(3) == json.dumps(expected, separators=(",", ":")).encode() + b"\n"
    assert session.tick("on_turn_end", {}).replay_output(4) == b""


def test_a_deny_is_a_decision_with_its_reason():
    session = warden.Warden(plugins=PLUGINS).session(project="app")
    outcome = session.tick(
        "on_tool_call",
        {"project": APP, "tool": {"name": "Bash", "arguments": {"command": "rm -rf /"}}},
    )
    assert outcome.decision is Decision.DENY and outcome.decision == "deny"
    assert "outside the project" in outcome.reason
    assert outcome.ruling.rule == "guardrails/deny-destructive-shell"
    assert outcome.proceed.kind is ProceedKind.NO
    assert outcome.proceed.reason == outcome.reason
    assert not outcome.proceed.runs
    decided = [e for e in outcome.effects if isinstance(e, Decided)]
    assert [(d.rule, d.decision, d.action) for d in decided] == [
        ("guardrails/deny-destructive-shell", Decision.DENY, "decide")
    ]


def test_a_rewrite_gives_the_whole_arguments_to_run_with():
    session = warden.Warden(plugins=PLUGINS).session()
    outcome = session.tick(
        "on_tool_call", {"tool": {"name": "web_search", "arguments": {"query": "wal", "limit": 5000}}}
    )
    assert outcome.decision is None
    assert outcome.updated_input == {"query": "wal", "limit": 50}
    assert outcome.proceed.kind is ProceedKind.WITH_INPUT
    assert outcome.proceed.input == {"query": "wal", "limit": 50}
    assert outcome.ruling.name == "rewrite"
    [rewrite] = [e for e in outcome.effects if isinstance(e, Rewrite)]
    assert rewrite.set == {"arguments.limit": 50}


def test_ask_and_continue():
    session = warden.Warden(plugins=PLUGINS).session()
    asked = session.tick(
        "on_tool_call",
        {"project": APP, "tool": {"name": "write_file", "arguments": {"path": "/etc/hosts", "content": "x"}}},
    )
    assert asked.decision is Decision.ASK
    assert asked.proceed.kind is ProceedKind.ASK and asked.proceed.reason

    session.tick("on_tool_failure", {"tool": {"name": "Bash", "arguments": {"command": "pytest -q"}}, "error": "1 failed"})
    final = session.tick("on_turn_end", {"turn": {"final": True}, "message": {"role": "assistant", "content": "Done."}})
    assert final.decision is Decision.CONTINUE
    assert final.proceed.kind is ProceedKind.KEEP_WORKING
    assert "Fix the failing tests" in final.proceed.reason


@pytest.mark.parametrize(
    ("hook", "event", "field", "words"),
    [
        ("on_tool", {}, "hook", "did you mean `on_tool_call`"),
        ("on_mode_change", {}, "hook", "Warden's own hook"),
        ("on_turn_start", {"tol": {}}, "tol", "did you mean `tool`"),
        ("on_turn_start", {"turn": {"number": -1}}, "turn.number", "whole number"),
        ("on_turn_start", {"turn": {"token_usage": "high"}}, "turn.token_usage", "must be a share from 0.0 to 1000000"),
        ("on_turn_start", {"turn": {"context_usage": -5}}, "turn.context_usage", "must be a share from 0.0 to 1000000"),
        ("on_turn_start", {"turn": {"token_usage": float("nan")}}, "turn.token_usage", "finite"),
        ("on_tool_call", {"tool": {"name": 3}}, "tool.name", "tool's name"),
        ("on_tool_call", {"tool": {"arguments": {}}}, "tool.name", "has no `name`"),
        ("on_tool_call", {"tool": {"name": "x", "arguments": {"when": object()}}}, "tool.arguments.when", "JSON-like"),
        ("on_tool_call", {"tool": {"name": "x", "arguments": {"ids": [1, {2}]}}}, "tool.arguments.ids[1]", "JSON-like"),
        ("on_turn_start", {"data": {1: "one"}}, "data", "keys of `data` must be strings"),
        ("on_turn_start", {"data": 2**70}, "data", "too large"),
        ("on_turn_start", {"message": {"role": "user"}}, "message.content", "no `content`"),
        ("on_turn_start", {7: "seven"}, "", "keys of `the event` must be strings"),
    ],
)
def test_a_bad_event_raises_a_value_error_naming_the_field(hook, event, field, words):
    session = warden.Warden().session()
    with pytest.raises(EventError) as raised:
        session.tick(hook, event)
    assert isinstance(raised.value, ValueError)
    assert raised.value.field == field
    assert words in str(raised.value)
    # The session is unharmed.
    assert session.tick("on_turn_start", {"turn": {"token_usage": 0.1}}).errors == []


def test_hostile_events_raise_instead_of_crashing():
    session = warden.Warden().session()
    looped: dict = {}
    looped["self"] = looped
    with pytest.raises(EventError, match="nests more than 64 levels"):
        session.tick("on_turn_start", {"data": looped})
    deep: list = []
    for _ in range(10_000):
        deep = [deep]
    with pytest.raises(EventError, match="nests more than"):
        session.tick("on_turn_start", {"data": deep})
    with pytest.raises(EventError, match="must be a dict"):
        session.tick("on_turn_start", [("turn", {})])
    with pytest.raises(EventError, match="not valid Unicode"):
        session.tick("on_turn_start", {"query": "\ud800"})
    # A huge string is data like any other.
    assert session.tick("on_query_start", {"query": "x" * 2_000_000}).errors == []


def test_a_mapping_that_is_not_a_dict_is_read_too():
    from types import MappingProxyType

    session = warden.Warden().session()
    outcome = session.tick("on_tool_complete", {"tool": {"name": "vault_search"}, "result": MappingProxyType({"count": 8})})
    assert outcome.fired == ["large-result-summary"]


def test_a_rule_in_shadow_is_evaluated_and_decides_nothing(rules_dir):
    folder = rules_dir(
        {
            "deny.toml": '[rule]\nid = "no-rm"\ntrigger = "on_tool_call"\nshadow = true\n'
            "condition = \"matches(tool.arguments.command, '^rm')\"\n"
            '[action]\ntype = "decide"\ndecision = "deny"\nreason = "no rm"\n',
        }
    )
    session = warden.Warden(rules=folder).session()
    outcome = session.tick(
        "on_tool_call", {"tool": {"name": "Bash", "arguments": {"command": "rm -rf build"}}}
    )
    assert outcome.proceed.runs and outcome.decision is None
    assert outcome.fired == [] and outcome.effects == []
    assert outcome.shadow_fired == ["no-rm"]
    [decided] = outcome.shadow
    assert isinstance(decided, Decided)
    assert (decided.rule, decided.decision, decided.reason) == ("no-rm", Decision.DENY, "no rm")


def test_a_lua_error_is_reported_in_the_outcome(rules_dir):
    folder = rules_dir(
        {
            "boom.toml": '[rule]\nid = "boom"\ntrigger = "on_turn_start"\n[condition]\nscript = "boom.lua"\n',
            "boom.lua": 'error("the script broke")\n',
            "loop.toml": '[rule]\nid = "loop"\ntrigger = "on_turn_start"\n[condition]\nscript = "loop.lua"\n',
            "loop.lua": "while true do end\n",
            "fine.toml": '[rule]\nid = "fine"\ntrigger = "on_turn_start"\ncondition = "true"\n'
            '[action]\ntype = "notify_self"\nmessage = "still here"\ndeliver_at = "immediate"\n',
        }
    )
    session = warden.Warden(rules=folder, script_timeout=0.2).session()
    outcome = session.tick("on_turn_start")
    errors = {e.rule: e.error for e in outcome.errors}
    assert "the script broke" in errors["boom"]
    assert "time limit" in errors["loop"]
    assert [n.message for n in outcome.inject] == ["still here"]


WORKFLOW = """
notify("search first", { deliver_at = "immediate" })
wait_for("on_tool_complete", { tool = "vault_search" })
local found = result.count
notify("found " .. found, { deliver_at = "immediate" })
wait_turns(2)
notify("two turns after finding " .. found, { deliver_at = "immediate" })
return true
"""


def test_a_lua_workflow_waits_across_ticks(rules_dir):
    folder = rules_dir(
        {
            "workflow.toml": '[rule]\nid = "workflow"\ntrigger = "on_query_start"\n[condition]\nscript = "workflow.lua"\n',
            "workflow.lua": WORKFLOW,
        }
    )
    session = warden.Warden(rules=folder).session(explain=True)

    def said(outcome: Outcome) -> list[str]:
        return [n.message for n in outcome.inject]

    assert said(session.tick("on_query_start", {"query": "research WAL"})) == ["search first"]
    assert session.script_memory is not None
    waiting = session.tick("on_tool_complete", {"tool": {"name": "web_search"}, "result": {"count": 2}})
    assert said(waiting) == []
    assert [(e.rule, e.result) for e in waiting.evaluations] == [("workflow", "running")]
    # Found at turn 0 (no turn has started): two turns later is turn 2.
    assert said(session.tick("on_tool_complete", {"tool": {"name": "vault_search"}, "result": {"count": 9}})) == ["found 9"]
    assert said(session.tick("on_turn_start", {"turn": {"number": 1}})) == []
    done = session.tick("on_turn_start", {"turn": {"number": 2}})
    assert said(done) == ["two turns after finding 9"]
    assert done.fired == ["workflow"]

    # Ending the session halts a script still waiting, and says so.
    session.tick("on_query_start", {"query": "research again"})
    end = session.tick("on_session_end")
    assert [(h.rule, h.reason) for h in end.halted] == [("workflow", "the session ended")]
    assert session.ended
    late = session.tick("on_turn_start")
    assert "after on_session_end" in late.errors[0].error and late.errors[0].rule is None


def test_from_config_reads_warden_toml_as_the_cli_does(tmp_path: Path, rules_dir):
    rules_dir(
        {
            "hello.toml": '[rule]\nid = "hello"\ntrigger = "on_query_start"\ncondition = "true"\n'
            '[action]\ntype = "notify_self"\nmessage = "hello {{ context.user.id }}"\ndeliver_at = "immediate"\n'
        }
    )
    (tmp_path / "warden.toml").write_text('builtin = false\nrules = ["rules"]\ndatabase = "state.db"\n')
    w = warden.Warden.from_config(tmp_path / "warden.toml", plugins=str(PLUGINS))
    assert "hello" in w.rules and "guardrails/deny-destructive-shell" in w.rules
    assert "token-budget-warning" not in w.rules
    assert Path(w.database) == tmp_path / "state.db"
    assert (tmp_path / "state.db").exists()
    outcome = w.session(user="ada").tick("on_query_start", {"query": "hi"})
    assert [n.message for n in outcome.inject] == ["hello ada"]


def test_a_configuration_error_names_the_file_line_and_field(tmp_path: Path):
    config = tmp_path / "warden.toml"
    config.write_text('builtin = true\nrulez = ["rules"]\n')
    with pytest.raises(LoadError) as raised:
        warden.Warden.from_config(config)
    error = raised.value
    assert (error.file, error.line, error.field) == (str(config), 2, "rulez")
    assert "did you mean `rules`" in str(error)
    [d] = error.diagnostics
    assert (d.severity, d.line, d.field, d.is_error) == ("error", 2, "rulez", True)

    with pytest.raises(LoadError) as missing:
        warden.Warden.from_config(tmp_path / "absent.toml")
    assert missing.value.file == str(tmp_path / "absent.toml") and missing.value.line is None


OK_RULE = """[rule]
id = "{id}"
trigger = "on_turn_start"
priority = {priority}
condition = "true"

[action]
type = "log"
message = "ok"
"""


def test_a_broken_rule_raises_unless_asked_to_keep_going(rules_dir):
    folder = rules_dir(
        {
            "ok.toml": OK_RULE.format(id="ok", priority="1"),
            "broken.toml": OK_RULE.format(id="broken", priority='"high"'),
        }
    )
    with pytest.raises(LoadError) as raised:
        warden.Warden(rules=folder)
    assert raised.value.file.endswith("broken.toml")
    assert (raised.value.line, raised.value.field) == (4, "rule.priority")

    w = warden.Warden(rules=folder, strict=False)
    assert w.rules == ["ok"]
    [d] = [d for d in w.diagnostics if d.is_error]
    assert d.file.endswith("broken.toml") and d.line == 4 and d.field == "rule.priority"
    assert "integer" in d.message
    assert "broken.toml:4" in str(d)


@pytest.mark.parametrize("argument", ["rules", "plugins", "modes"])
def test_a_path_that_does_not_exist_raises_file_not_found(tmp_path, argument):
    typo = tmp_path / "plugin"  # the folder is "plugins"
    with pytest.raises(FileNotFoundError) as raised:
        warden.Warden(**{argument: str(typo)})
    assert raised.value.filename == str(typo)
    assert str(typo) in str(raised.value)
    # Given to the config file, as to the keywords.
    config = tmp_path / "warden.toml"
    config.write_text(f'{argument} = {[str(typo)] if argument != "modes" else repr(str(typo))}\n'.replace("'", '"'))
    with pytest.raises(FileNotFoundError):
        warden.Warden.from_config(config)


def test_a_warden_with_no_rules_warns(tmp_path):
    empty = tmp_path / "rules"
    empty.mkdir()
    with pytest.warns(UserWarning, match="no rules"):
        w = warden.Warden(rules=empty)
    assert w.rules == []


FULL_DISK = """
import json, subprocess, sys, warden
db = sys.argv[1] + "/warden.db"
w = warden.Warden(plugins=sys.argv[2], database=db)
s = w.session("full")
first = s.tick("on_tool_call", {"tool": {"name": "Bash", "arguments": {"command": "ls"}}})
subprocess.run(["dd", "if=/dev/zero", "of=" + sys.argv[1] + "/fill", "bs=1k", "count=1024"],
               capture_output=True)
o = s.tick("on_tool_call", {"tool": {"name": "Bash", "arguments": {"command": "rm -rf /"}}})
print(json.dumps({"first_saved": first.saved, "decision": str(o.decision), "saved": o.saved,
                  "unsaved": o.unsaved}))
"""


def test_a_full_disk_still_refuses_and_says_the_tick_was_not_saved(tmp_path):
    # A real full disk: a 256 KiB tmpfs in a mount namespace of the test's own.
    import shutil
    import subprocess
    import sys

    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True) if shutil.which("unshare") else None
    need(probe is not None and probe.returncode == 0, "a full disk needs `unshare -rm` (user and mount namespaces)")
    disk = tmp_path / "disk"
    disk.mkdir()
    script = tmp_path / "full.py"
    script.write_text(FULL_DISK)
    run = subprocess.run(
        ["unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o size=256k none '{disk}' && \"$0\" \"$@\"",
         sys.executable, str(script), str(disk), str(PLUGINS)],
        capture_output=True, text=True,
    )
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout)
    assert got["first_saved"] is True
    assert got["decision"] == str(warden.Decision.DENY), got
    assert got["saved"] is False
    assert "the disk is full" in got["unsaved"], got


@pytest.mark.parametrize("seed", range(24))
def test_a_refused_call_never_runs_whatever_the_rules(tmp_path, seed):
    # Random rule sets (ties of priority included): a call runs only when no rule that fired
    # decided deny or stop (or an ask), a stop both refuses and ends, and holds for later calls.
    import random

    rng = random.Random(seed)
    rules = []
    for i in range(rng.randint(1, 6)):
        act = rng.choice(["allow", "ask", "deny", "stop", "rewrite", "notify"])
        tool = rng.choice(["t0", "t1", "t2", None])
        rid = f"r-{rng.randint(0, 999)}{i}"
        action = {
            "rewrite": 'type = "rewrite"\n[action.set]\n"arguments.checked" = true\n',
            "notify": f'type = "notify_self"\nmessage = "{rid} noticed"\n',
        }.get(act, f'type = "decide"\ndecision = "{act}"\nreason = "{rid} says {act}"\n')
        only = f'tool = "{tool}"\n' if tool else ""
        (tmp_path / f"{rid}.toml").write_text(
            f'[rule]\nid = "{rid}"\ntrigger = "on_tool_call"\npriority = {rng.randint(1, 3)}\n{only}condition = "true"\n\n[action]\n{action}'
        )
        rules.append((act, tool))
    s = warden.Warden(rules=tmp_path).session()
    stopped = False
    for j in range(4):
        tool = rng.choice(["t0", "t1", "t2"])
        fired = {act for act, t in rules if t in (None, tool)}
        refused = stopped or bool({"deny", "stop"} & fired)
        stopped = stopped or "stop" in fired
        p = s.tick("on_tool_call", {"tool": {"name": tool, "arguments": {}}}).proceed
        assert p.runs == (not refused and "ask" not in fired), (rules, tool, p.kind)
        assert (p.kind in (ProceedKind.NO, ProceedKind.STOP)) == refused, (rules, tool, p.kind)
        if "stop" in fired:
            assert p.kind == ProceedKind.STOP
