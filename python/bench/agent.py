"""What Warden's ticks cost inside a LangChain agent, beside the same events ticked outside it,
in the same process, in alternation (the machine is shared and noisy: only figures from one
run compare).

Each round runs a real agent (``langchain.agents.create_agent``, a scripted fake chat model,
real tools) supervised by ``WardenMiddleware`` over the built-in rules and the guardrails
plugin: one run of a query, eight tool calls (shell commands, searches, file reads and writes)
and a final answer, 35 ticks. Every tick the middleware makes is timed (``_timed_tick``, the
steps of ``Session.tick`` with clocks: reading the event, the engine, the GIL released and
taken back around it), and its hook and event kept; then the same events are ticked, in the
same order, on a fresh session of the same Warden outside any agent, each timed the same way:
once in a plain loop (the baseline), once with an 8 MB copy before each tick, out of its time,
that empties the processor's caches as the agent's work between two hooks does. The middleware's
own work is timed too: its hooks, without their ticks, and without the model's and the tools'
time (LangChain's own work between the hooks is not Warden's, and is left out).

Printed: per tick, each tick's median over the rounds, summed (a garbage collection or the
scheduler landing in one tick of one round does not move it), in the agent and outside it, with
the ratios, for every tick and apart for the agent's thread and the tool node's worker thread;
the middleware's own work per tick; and the share of the agent's run that is Warden's. A build
without ``_timed_tick`` (from before it) is timed as a whole. Build the package in release mode
first (python/bench/run.sh does).

    python python/bench/agent.py [--rounds 40]
"""

from __future__ import annotations

import argparse
import copy
import functools
import gc
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import tool

import warden
import warden.langchain as wl
from warden import Hook
from warden._hosts import as_json
from warden._native import EventError, Outcome, Session

try:
    from warden._native import _timed_tick
except ImportError:  # a build from before it
    _timed_tick = None  # type: ignore[assignment]

ROOT = "/home/ada/app"
TOOL_CALLS = [
    ("Bash", {"command": "cargo test --workspace 2>&1 | tail -20"}),
    ("web_search", {"query": "tokio select cancellation safety", "limit": 5}),
    ("read_file", {"path": f"{ROOT}/src/main.rs"}),
    ("write_file", {"path": f"{ROOT}/src/lib.rs", "content": "pub fn answer() -> u32 { 42 }\n"}),
    ("Bash", {"command": "git status --short && git diff --stat"}),
    ("web_search", {"query": "serde flatten enum", "limit": 3}),
    ("Bash", {"command": "cargo clippy --all-targets -- -D warnings"}),
    ("write_file", {"path": f"{ROOT}/README.md", "content": "# app\n\nIt answers.\n"}),
]


class Model(GenericFakeChatModel):
    """LangChain's fake chat model, scripted, accepting tools (as python/tests/scripted.py)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Model:
        return self


def replies() -> list[AIMessage]:
    """One run's replies: a tool call per turn, then the answer; each with its token usage."""
    out = []
    for i, (name, args) in enumerate(TOOL_CALLS):
        usage = {"input_tokens": 1200 + 300 * i, "output_tokens": 80, "total_tokens": 1280 + 300 * i}
        out.append(AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"call-{i}"}], usage_metadata=usage))
    out.append(AIMessage(content="Done: the tests pass.", usage_metadata={"input_tokens": 4000, "output_tokens": 20, "total_tokens": 4020}))
    return out


@tool
def Bash(command: str) -> str:
    """Run a shell command."""
    return "test result: ok. 42 passed; 0 failed"


@tool
def web_search(query: str, limit: int = 10) -> str:
    """Search the web."""
    return json.dumps({"count": limit, "titles": ["a", "b", "c"]})


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return "fn main() {}\n"


@tool
def write_file(path: str, content: str) -> str:
    """Write a file."""
    return "written"


TOOLS = [Bash, web_search, read_file, write_file]


Tick = tuple[Hook, dict[str, Any], list[int]]
"""A tick: its hook, its event, and its nanoseconds: in all, reading the event, in the engine,
and around the engine (releasing the GIL and taking it back)."""


class Clock:
    """The time spent in Warden: in its ticks, and in the middleware's hooks."""

    def __init__(self) -> None:
        self.ticks: list[Tick] = []
        self.hooks = 0
        self.own = 0

    def reset(self) -> None:
        self.ticks = []
        self.hooks = 0
        self.own = 0


CLOCK = Clock()


def timed(session: Session, hook: Any, event: Any) -> tuple[Outcome, list[int]]:
    """``session.tick(hook, event)``, timed: ``_timed_tick`` is the same steps with clocks (a
    build without it, from before it, is timed as a whole)."""
    start = time.perf_counter_ns()
    if _timed_tick is None:
        outcome = session.tick(hook, event)
        return outcome, [time.perf_counter_ns() - start, 0, 0, 0]
    outcome, read, engine, gil = _timed_tick(session, hook, event)
    return outcome, [time.perf_counter_ns() - start, read, engine, gil]


def timed_tick(session: Session, hook: Hook, event: dict[str, Any], log: Any) -> Outcome:
    """``warden._hosts.tick``, the native tick timed and its event kept (the time this takes
    beyond the tick is the benchmark's, and taken off the hook's)."""
    entered = time.perf_counter_ns()
    try:
        outcome, ns = timed(session, hook, event)
    except EventError:
        outcome, ns = timed(session, hook, as_json(event))
    for error in outcome.errors:
        log.warning("session %s, %s: %s", session.id, hook.value, error)
    CLOCK.ticks.append((hook, event, ns))
    CLOCK.own += time.perf_counter_ns() - entered - ns[0]
    return outcome


def hook_timer(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)  # keeps what hook_config set on it
    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter_ns()
        try:
            return method(*args, **kwargs)
        finally:
            CLOCK.hooks += time.perf_counter_ns() - start

    return timed


class TimedMiddleware(wl.WardenMiddleware):
    """The middleware, its hooks timed (a handler's time, the model's or the tool's, left out)."""

    before_agent = hook_timer(wl.WardenMiddleware.before_agent)
    before_model = hook_timer(wl.WardenMiddleware.before_model)
    after_model = hook_timer(wl.WardenMiddleware.after_model)
    after_agent = hook_timer(wl.WardenMiddleware.after_agent)

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        return self._wrapped(super().wrap_model_call, request, handler)

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        return self._wrapped(super().wrap_tool_call, request, handler)

    def _wrapped(self, method: Any, request: Any, handler: Any) -> Any:
        inner = 0

        def timed_handler(r: Any) -> Any:
            nonlocal inner
            start = time.perf_counter_ns()
            try:
                return handler(r)
            finally:
                inner += time.perf_counter_ns() - start

        start = time.perf_counter_ns()
        try:
            return method(request, timed_handler)
        finally:
            CLOCK.hooks += time.perf_counter_ns() - start - inner


def agent_round(w: warden.Warden, i: int) -> tuple[int, int, list[Tick]]:
    """One supervised agent run: (Warden's hook time, the whole run's time, the ticks)."""
    middleware = TimedMiddleware(w, project_root=ROOT, token_budget=200_000, context_window=128_000, name="WardenMiddleware")
    agent = create_agent(Model(messages=iter(replies())), TOOLS, middleware=[middleware])
    config: Any = {"configurable": {"thread_id": f"agent-{i}"}}
    CLOCK.reset()
    start = time.perf_counter_ns()
    result = agent.invoke({"messages": [{"role": "user", "content": "Make the tests pass, then tidy up."}]}, config)
    whole = time.perf_counter_ns() - start
    assert result["messages"][-1].text == "Done: the tests pass.", result["messages"][-1]
    # The events as the ticks read them (copied now, after the run, not in its hooks).
    ticks = [(hook, copy.deepcopy(event), ns) for hook, event, ns in CLOCK.ticks]
    return CLOCK.hooks - CLOCK.own, whole, ticks


SPILL = bytearray(4 << 20)
"""Copied between the cold ticks: 8 MB read and written, several times the processor's own
caches (64 KB and 512 KB a core on the project's machine), as the agent's work between two
hooks does."""


def outside_round(w: warden.Warden, i: int, ticks: list[Tick], cold: bool = False) -> list[Tick]:
    """The same events, ticked on a fresh session in a plain loop (`cold`: the caches emptied
    before each tick, out of its time)."""
    session = w.session(f"outside-{i}-{cold}")
    out = []
    for hook, event, _ in ticks:
        if cold:
            bytes(SPILL)
        out.append((hook, event, timed(session, hook, event)[1]))
    return out


TOOL_HOOKS = {Hook.ON_TOOL_CALL, Hook.ON_TOOL_COMPLETE, Hook.ON_TOOL_FAILURE}
PARTS = ("all", "reading the event", "the engine", "the GIL released and taken back")


def typical(rounds: list[list[Tick]], which: Callable[[Hook], bool]) -> list[float]:
    """Part by part, the sum over a run's ticks of each tick's median over the rounds (a tick
    is the same event at the same place in every round): a collection of Python's garbage or
    the scheduler landing in one tick of one round does not move it."""
    hooks = [h for h, _, _ in rounds[0]]
    return [
        sum(statistics.median(r[j][2][k] for r in rounds) for j, h in enumerate(hooks) if which(h))
        for k in range(len(PARTS))
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    w = warden.Warden(plugins=["builtin:guardrails"], builtin=True)
    wl.tick = timed_tick  # type: ignore[attr-defined]  # the middleware's ticks, timed
    for i in range(3):  # warm up
        _, _, ticks = agent_round(w, -1 - i)
        outside_round(w, -1 - i, ticks)
    groups: dict[str, Callable[[Hook], bool]] = {
        "every tick": lambda h: True,
        "on the agent's thread (query, turns)": lambda h: h not in TOOL_HOOKS,
        "on the tool node's worker thread (tool calls, results)": lambda h: h in TOOL_HOOKS,
    }
    inside: list[list[Tick]] = []
    outside: list[list[Tick]] = []
    cold: list[list[Tick]] = []
    hooks, own, whole = [], [], []
    for i in range(args.rounds):
        h, a, ticks = agent_round(w, i)
        inside.append(ticks)
        outside.append(outside_round(w, i, ticks))
        cold.append(outside_round(w, i, ticks, cold=True))
        hooks.append(h)
        own.append(h - sum(ns[0] for _, _, ns in ticks))
        whole.append(a)
    n = len(inside[0])
    print(f"one supervised agent run, {n} ticks, {args.rounds} rounds: the agent, the same ticks outside it, and outside it with")
    print("the caches emptied before each tick, in alternation; each tick's median over the rounds, summed")
    for g, which in groups.items():
        count = sum(1 for hk, _, _ in inside[0] if which(hk))
        t, o, c = (typical(x, which) for x in (inside, outside, cold))
        print(f"  {g}, {count} ticks, per tick: in the agent / outside it (ratio) / outside, caches emptied (ratio)")
        for k, part in enumerate(PARTS if _timed_tick is not None else PARTS[:1]):
            print(
                f"    {part:<34} {t[k] / count / 1000:7.2f} us / {o[k] / count / 1000:6.2f} us ({t[k] / o[k]:5.2f}x)"
                f" / {c[k] / count / 1000:6.2f} us ({t[k] / c[k]:5.2f}x)"
            )
    hook, mine, run = statistics.median(hooks), statistics.median(own), statistics.median(whole)
    print(f"  the middleware's own work, its hooks without their ticks (median run): {mine / n / 1000:7.2f} us a tick")
    print(f"  the whole agent run (median): {run / 1000:.0f} us; Warden's hooks, ticks included, are {hook / run * 100:.1f}% of it")


if __name__ == "__main__":
    main()
