"""Durable sessions: with a database, a session with an id is saved after every tick and
resumed by any Warden on the same file, in this process or another."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import warden

FAILURE = {"tool": {"name": "web_search"}, "error": "timeout"}

WORKFLOW = """
notify("search first", { deliver_at = "immediate" })
wait_for("on_tool_complete", { tool = "vault_search" })
notify("found " .. result.count .. " notes: summarize them", { deliver_at = "immediate" })
return true
"""

RESUME = """
import sys, warden
w = warden.Warden(rules=sys.argv[1], database=sys.argv[2])
s = w.session("research")
outcome = s.tick("on_tool_complete", {"tool": {"name": "vault_search"}, "result": {"count": 9}})
print([n.message for n in outcome.inject], outcome.fired, [e.error for e in outcome.errors])
"""


def test_a_second_warden_on_the_same_file_resumes_the_session(tmp_path: Path):
    db = tmp_path / "warden.db"
    first = warden.Warden(database=db).session("conversation-7")
    assert first.tick("on_tool_failure", FAILURE).fired == []
    assert first.tick("on_tool_failure", FAILURE).fired == []
    del first

    again = warden.Warden(database=db).session("conversation-7")
    assert again.facts["history"]["failures"] == {"web_search": 2}
    outcome = again.tick("on_tool_failure", FAILURE)
    assert outcome.fired == ["repeated-failure-warning"]
    assert "web_search" in outcome.inject[0].message


def test_the_hosts_data_is_saved_with_the_session(tmp_path: Path):
    db = tmp_path / "warden.db"
    first = warden.Warden(database=db).session("conversation-8")
    assert first.host_data == {}
    first.set_host_data("adapter.calls", {"c1": {"ask": [1, "two"]}})
    first.set_host_data("adapter.later", 3, save=False)
    # Saved now, without a tick; the other key waits for the next save.
    again = warden.Warden(database=db).session("conversation-8")
    assert again.host_data == {"adapter.calls": {"c1": {"ask": [1, "two"]}}}
    first.tick("on_turn_start")
    assert warden.Warden(database=db).session("conversation-8").host_data == {
        "adapter.calls": {"c1": {"ask": [1, "two"]}},
        "adapter.later": 3,
    }
    first.set_host_data("adapter.calls", None)
    assert warden.Warden(database=db).session("conversation-8").host_data == {"adapter.later": 3}
    # Rules never see it, and what is not JSON is refused, naming the key.
    assert "adapter" not in str(first.facts)
    with pytest.raises(warden.EventError, match="adapter.bad"):
        first.set_host_data("adapter.bad", {"x": object()})
    assert first.host_data == {"adapter.later": 3}


def test_without_a_database_sessions_are_not_saved():
    w = warden.Warden()
    w.session("conversation-7").tick("on_tool_failure", FAILURE)
    assert w.session("conversation-7").facts["history"]["failures"] == {}


def test_a_waiting_script_is_resumed_by_another_process(tmp_path: Path, rules_dir):
    folder = rules_dir(
        {
            "research.toml": '[rule]\nid = "research"\ntrigger = "on_query_start"\n[condition]\nscript = "research.lua"\n',
            "research.lua": WORKFLOW,
        }
    )
    db = tmp_path / "warden.db"
    session = warden.Warden(rules=folder, database=db).session("research")
    assert [n.message for n in session.tick("on_query_start", {"query": "WAL"}).inject] == ["search first"]
    del session

    done = subprocess.run(
        [sys.executable, "-c", RESUME, str(folder), str(db)], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['found 9 notes: summarize them'] ['research'] []"


def test_a_saved_session_that_cannot_be_read_raises(tmp_path: Path):
    db = tmp_path / "warden.db"
    warden.Warden(database=db).session("broken").tick("on_tool_failure", FAILURE)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE session SET snapshot = ? WHERE id = 'broken'", ("{\"not\": \"a session\"}",))
    with pytest.raises(warden.SessionError, match="broken"):
        warden.Warden(database=db).session("broken")
