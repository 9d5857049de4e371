"""A hand-written agent loop supervised by Warden, offline: the "model" is a script of replies,
so this runs anywhere (python examples/python/agent_loop.py). Swap `ScriptedModel` for a real
client (anything that returns text and tool calls) and the loop stays the same.

Warden is ticked at every hook; after each tick the loop does what `outcome.proceed` says:
run the call, run it with rewritten arguments, ask a person, refuse it, keep working, or stop.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import warden
from warden import ProceedKind

EXAMPLES = Path(__file__).resolve().parents[1]


@dataclass
class Reply:
    """What a model answers: text, and the tool calls it wants made."""

    text: str = ""
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    tokens: int = 0


class ScriptedModel:
    """Stands in for a model client: answers from a script, whatever it is sent."""

    def __init__(self, replies: list[Reply]) -> None:
        self.replies = iter(replies)

    def complete(self, messages: list[dict[str, str]]) -> Reply:
        return next(self.replies)


TEST_RUNS = []


def run_tool(name: str, arguments: dict[str, Any]) -> Any:
    """The agent's tools (pretend ones): the first test run fails, the next passes."""
    if name == "web_search":
        return {"count": 9, "titles": [f"result {i}" for i in range(arguments.get("limit", 10))][:3]}
    if name == "Bash":
        if arguments["command"].startswith("pytest"):
            TEST_RUNS.append(arguments["command"])
            if len(TEST_RUNS) == 1:
                raise RuntimeError("1 failed, 41 passed")
            return {"exit_code": 0, "output": "42 passed"}
        return {"exit_code": 0, "output": ""}
    raise ValueError(f"no tool {name}")


def ask_a_person(question: str) -> bool:
    print(f"  ? {question} -> (this example says no)")
    return False


def main() -> None:
    supervisor = warden.Warden(plugins=EXAMPLES / "plugins", builtin=True)
    session = supervisor.session("example-loop", user="ada", project="shop")
    model = ScriptedModel(
        [
            Reply(tool_calls=[("Bash", {"command": "rm -rf /"})], tokens=30_000),
            Reply(tool_calls=[("web_search", {"query": "sqlite wal", "limit": 500})], tokens=50_000),
            Reply(tool_calls=[("Bash", {"command": "pytest -q"})], tokens=40_000),
            Reply(text="All done: WAL is the better choice.", tokens=30_000),
            Reply(tool_calls=[("Bash", {"command": "pytest -q"})], tokens=20_000),
            Reply(text="WAL mode is on, and the tests pass.", tokens=10_000),
        ]
    )
    budget, used = 200_000, 0
    continues = 0  # how many times Warden sent the agent back to work: bounded
    question = "Make the store use WAL mode, and check the tests."
    messages = [{"role": "user", "content": question}]

    outcome = session.tick(
        "on_query_start",
        {"query": question, "project": {"id": "shop", "root": "/home/ada/shop"}, "turn": {"max_iterations": 8}},
    )
    if outcome.proceed.kind in (ProceedKind.NO, ProceedKind.STOP):
        print(f"refused: {outcome.proceed.reason}")
        return
    notes = list(outcome.inject)

    for iteration in range(1, 9):
        outcome = session.tick("on_turn_start", {"turn": {"iteration_count": iteration, "token_usage": used / budget}})
        if outcome.proceed.kind is ProceedKind.STOP:
            print(f"stopped: {outcome.proceed.reason}")
            return
        notes += outcome.inject
        if notes:
            note = supervisor.render(notes)
            print(f"  (into the context) {note!r}")
            messages.append({"role": "user", "content": note})
            notes = []

        reply = model.complete(messages)
        used += reply.tokens
        print(f"turn {iteration}: model says {reply.text or reply.tool_calls}")
        messages.append({"role": "assistant", "content": reply.text or json.dumps(reply.tool_calls)})

        for name, arguments in reply.tool_calls:
            call = session.tick("on_tool_call", {"tool": {"name": name, "arguments": arguments}})
            notes += call.inject
            proceed = call.proceed
            if proceed.kind is ProceedKind.WITH_INPUT:
                print(f"  Warden rewrote {arguments} -> {proceed.input}")
                arguments = proceed.input
            elif proceed.kind is ProceedKind.ASK and not ask_a_person(proceed.reason):
                proceed_reason = f"the user said no: {proceed.reason}"
                messages.append({"role": "tool", "content": proceed_reason})
                session.tick("on_tool_failure", {"tool": {"name": name, "arguments": arguments}, "error": proceed_reason})
                continue
            elif proceed.kind in (ProceedKind.NO, ProceedKind.STOP):
                print(f"  Warden refused {name}: {proceed.reason}")
                messages.append({"role": "tool", "content": proceed.reason})
                session.tick("on_tool_failure", {"tool": {"name": name, "arguments": arguments}, "error": proceed.reason})
                if proceed.kind is ProceedKind.STOP:
                    print("stopped")
                    return
                continue
            try:
                result = run_tool(name, arguments)
            except Exception as e:
                done = session.tick("on_tool_failure", {"tool": {"name": name, "arguments": arguments}, "error": str(e)})
                messages.append({"role": "tool", "content": f"error: {e}"})
                print(f"  {name} failed: {e}")
            else:
                done = session.tick("on_tool_complete", {"tool": {"name": name, "arguments": arguments}, "result": result})
                messages.append({"role": "tool", "content": json.dumps(result)})
            notes += done.inject

        final = not reply.tool_calls
        end = session.tick(
            "on_turn_end", {"turn": {"final": final}, "message": {"role": "assistant", "content": reply.text}}
        )
        notes += end.inject
        if end.proceed.kind is ProceedKind.KEEP_WORKING and final and continues < 3:
            continues += 1
            print(f"  Warden: keep working: {end.proceed.reason}")
            messages.append({"role": "user", "content": end.proceed.reason})
            continue
        if final:
            print(f"answer: {reply.text}")
            break

    for line in session.tick("on_session_end").errors:
        print(f"  rule error: {line}")


if __name__ == "__main__":
    main()
