"""The examples of examples/python run, offline, and say what they should."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from conftest import REPO, need

EXAMPLES = REPO / "examples" / "python"


def run(*args: str) -> str:
    done = subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_hand_written_loop():
    out = run(str(EXAMPLES / "agent_loop.py"))
    assert "Warden refused Bash: `rm -rf /` deletes `/`" in out
    assert "-> {'query': 'sqlite wal', 'limit': 50}" in out
    assert "Warden: keep working: The last test run failed." in out
    assert out.rstrip().endswith("answer: WAL mode is on, and the tests pass.")


def test_the_langchain_agent():
    try:
        import langchain  # noqa: F401
    except ImportError:
        need(False, "the [langchain] extra is not installed")
    out = run(str(EXAMPLES / "langchain_agent.py"))
    assert "Warden asks: this writes `/etc/hosts`, outside the project folder" in out
    assert "  Tool: `rm -rf /` deletes `/`" in out
    assert '[warden] The call ran with these arguments instead: {"query": "sqlite wal", "limit": 50}' in out
    assert "- HIGH warning: Token budget at 82%" in out
    assert "User rejected the tool call for `write_file` with reason: leave /etc alone" in out


def test_the_openai_agents_sdk_agent():
    try:
        import agents  # noqa: F401
    except ImportError:
        need(False, "the [openai-agents] extra is not installed")
    out = run(str(EXAMPLES / "openai_agents_agent.py"))
    assert "ran Bash" not in out
    assert "tool result: `rm -rf /` deletes `/`, everything outside the project" in out
    assert "- HIGH warning: Token budget at 82%" in out
    assert "- hint: web_search returned 9 results" in out
    assert out.rstrip().endswith("answer: WAL mode lets readers and a writer work at once.")


BAD_LINES = (
    '{"hook": "on_tool", "x": 1}\n'
    "not json\n"
    '{"hook": "on_turn_start", "tol": 1}\n'
    "[1]\n"
    "\n"
    "// a comment\n"
    '{"turn": {}}\n'
    '{"hook": "on_turn_start", "turn": {"token_usage": 0.9}}\n'
)


def test_the_python_replay_prints_what_warden_replay_prints(tmp_path):
    cli = os.environ.get("WARDEN_CLI") or shutil.which("warden") or str(REPO / "target" / "debug" / "warden")
    need(os.path.isfile(cli), "the warden command was not found (WARDEN_CLI, PATH, target/debug)")
    trace = str(REPO / "tests" / "scenarios" / "guardrails-coding-session" / "session.jsonl")
    plugins = str(REPO / "examples" / "plugins")
    ours = run(str(EXAMPLES / "replay.py"), "--plugins", plugins, "--builtin", trace)
    theirs = subprocess.run(
        [cli, "replay", "--plugins", plugins, "--builtin", trace], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    assert ours == theirs
    assert '"decision":"deny"' in ours

    bad = tmp_path / "bad.jsonl"
    bad.write_text(BAD_LINES)
    ours_done = subprocess.run(
        [sys.executable, str(EXAMPLES / "replay.py"), str(bad)], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    theirs_done = subprocess.run([cli, "replay", str(bad)], cwd=REPO, capture_output=True, text=True)
    ours = ours_done.stdout
    assert ours == theirs_done.stdout
    assert ours.count('"error"') == 5 and "token-budget-warning" in ours
    # Bad lines make both exit 1; a trace that cannot be read, 2.
    assert ours_done.returncode == theirs_done.returncode == 1
    missing = [str(tmp_path / "missing.jsonl")]
    ours_done = subprocess.run([sys.executable, str(EXAMPLES / "replay.py"), *missing], capture_output=True, text=True)
    theirs_done = subprocess.run([cli, "replay", *missing], capture_output=True, text=True)
    assert ours_done.returncode == theirs_done.returncode == 2
    assert "cannot read" in ours_done.stderr and "cannot read" in theirs_done.stderr


def test_the_python_replay_says_how_to_call_it():
    assert run(str(EXAMPLES / "replay.py"), "--help").startswith("usage: replay.py")
    for args, words in [
        ([], "the trace file is missing"),
        (["--rules"], "--rules needs a folder"),
        (["--bogus", "t.jsonl"], "unknown option --bogus"),
        (["a.jsonl", "b.jsonl"], "one trace at a time"),
    ]:
        done = subprocess.run(
            [sys.executable, str(EXAMPLES / "replay.py"), *args], cwd=REPO, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 2 and words in done.stderr, done.stderr
