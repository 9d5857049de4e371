"""Threads and asyncio: one Warden shared by many threads, the GIL released while a tick runs,
and ``atick`` leaving the event loop free."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

import warden
from warden import EventError, Outcome

SPIN = '[rule]\nid = "spin"\ntrigger = "on_tool_call"\n[condition]\nscript = "spin.lua"\n'
SPIN_LUA = "local n = event.data.n\nlocal x = 0\nfor i = 1, n do x = x + i end\nreturn x < 0\n"


def spin_once(session: warden.Session, n: int) -> float:
    start = time.perf_counter()
    outcome = session.tick("on_tool_call", {"tool": {"name": "x"}, "data": {"n": n}})
    assert outcome.errors == []
    return time.perf_counter() - start


@pytest.fixture
def spinner(rules_dir):
    """A supervisor whose `on_tool_call` runs a Lua loop of `data.n` steps, and the `n` that
    makes one tick take about `seconds`."""
    w = warden.Warden(rules=rules_dir({"spin.toml": SPIN, "spin.lua": SPIN_LUA}), builtin=True)
    session = w.session()
    n = 200_000
    while True:
        # The fastest of three runs: the machine is shared, and a slow moment would make the
        # ticks asked for later shorter than meant.
        took = min(spin_once(session, n) for _ in range(3))
        if took > 0.05:
            break
        n *= 4

    def steps(seconds: float) -> int:
        return int(n * seconds / took)

    return w, steps


def test_one_warden_serves_many_threads():
    w = warden.Warden()

    def conversation(i: int) -> tuple[int, list[str]]:
        session = w.session(f"thread-{i}")
        fired = []
        for turn in range(1, 101):
            outcome = session.tick("on_turn_start", {"turn": {"number": turn, "token_usage": turn / 100}})
            fired += outcome.fired
        return session.facts["turn"]["number"], fired

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(conversation, range(16)))
    for turn, fired in results:
        assert turn == 100
        # token_usage 0.81 .. 1.00: twenty turns above the 0.8 threshold.
        assert fired.count("token-budget-warning") == 20


def test_a_session_shared_by_threads_takes_every_tick():
    session = warden.Warden().session()

    def report(_: int) -> None:
        for _ in range(200):
            session.tick("on_tool_failure", {"tool": {"name": "web_search"}, "error": "timeout"})

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(report, range(4)))
    assert session.facts["history"]["counts"]["tool_failures"] == 800


def test_the_gil_is_released_while_a_tick_runs(spinner):
    w, steps = spinner
    session = w.session()
    n = steps(1.0)
    span: list[float] = []

    def tick() -> None:
        span.append(time.perf_counter())
        session.tick("on_tool_call", {"tool": {"name": "x"}, "data": {"n": n}})
        span.append(time.perf_counter())

    thread = threading.Thread(target=tick)
    thread.start()
    # Python keeps running in this thread while the tick runs in the other: this loop goes
    # round all through the tick, with no pause anywhere near as long as the tick.
    stamps = [time.perf_counter()]
    while thread.is_alive():
        stamps.append(time.perf_counter())
    thread.join()
    start, end = span
    points = [start, *(t for t in stamps if start < t < end), end]
    longest = max(b - a for a, b in zip(points, points[1:]))
    # Long enough to mean something: far longer than a switch of threads.
    assert end - start > 0.2
    assert longest < (end - start) / 2, f"Python stood still {longest:.3f} s of a {end - start:.3f} s tick"


def test_reading_host_data_waits_for_a_tick_without_holding_the_gil(spinner):
    # host_data and set_host_data(save=False) keep the GIL when the session is free; while
    # another thread ticks it, they wait for the tick with the GIL released.
    w, steps = spinner
    session = w.session()
    n = steps(1.0)
    ticking = threading.Event()
    span: list[float] = []

    def tick() -> None:
        span.append(time.perf_counter())
        ticking.set()
        session.tick("on_tool_call", {"tool": {"name": "x"}, "data": {"n": n}})
        span.append(time.perf_counter())

    read: list[dict[str, Any]] = []

    def reader() -> None:
        ticking.wait()
        time.sleep(0.05)  # the tick has the session now
        session.set_host_data("k", {"v": 1}, save=False)
        read.append(session.host_data)

    threads = [threading.Thread(target=tick), threading.Thread(target=reader)]
    for t in threads:
        t.start()
    stamps = [time.perf_counter()]
    while any(t.is_alive() for t in threads):
        stamps.append(time.perf_counter())
    for t in threads:
        t.join()
    start, end = span
    assert read == [{"k": {"v": 1}}]
    points = [start, *(t for t in stamps if start < t < end), end]
    longest = max(b - a for a, b in zip(points, points[1:]))
    assert end - start > 0.2
    assert longest < (end - start) / 2, f"Python stood still {longest:.3f} s of a {end - start:.3f} s tick"


def test_atick_does_not_block_the_event_loop(spinner):
    w, steps = spinner
    session = w.session()
    n = steps(1.0)

    async def main() -> tuple[Outcome, float, float]:
        beats: list[float] = []
        done = asyncio.Event()

        async def heartbeat() -> None:
            while not done.is_set():
                beats.append(time.perf_counter())
                await asyncio.sleep(0.005)

        beating = asyncio.create_task(heartbeat())
        await asyncio.sleep(0.02)
        start = time.perf_counter()
        outcome = await session.atick("on_tool_call", {"tool": {"name": "x"}, "data": {"n": n}})
        took = time.perf_counter() - start
        done.set()
        await beating
        during = [b for b in beats if b >= start]
        gaps = [b - a for a, b in zip(during, during[1:])]
        return outcome, took, max(gaps, default=took)

    outcome, took, longest = asyncio.run(main())
    assert isinstance(outcome, Outcome) and outcome.errors == []
    # Long enough to mean something: far longer than the heartbeat's 5 ms.
    assert took > 0.2
    assert longest < took / 2, f"the event loop stood still {longest:.3f} s of a {took:.3f} s tick"


def test_atick_gives_the_outcome_and_raises_on_await():
    session = warden.Warden().session()

    async def main() -> Outcome:
        with pytest.raises(EventError) as raised:
            await session.atick("on_turn_start", {"turn": {"number": "one"}})
        assert raised.value.field == "turn.number"
        ticks = [session.atick("on_turn_start", {"turn": {"token_usage": 0.9}}) for _ in range(5)]
        outcomes = await asyncio.gather(*ticks)
        assert all(o.fired == ["token-budget-warning"] for o in outcomes)
        return await session.atick("on_turn_start")

    assert asyncio.run(main()).hook == "on_turn_start"
    # The bad event never reached the session.
    assert session.facts["turn"]["number"] == 6
