"""Threads and asyncio: one Warden shared by many threads, the GIL released while a tick runs,
and ``atick`` leaving the event loop free.

The tests of what goes on while a tick runs hold the tick open themselves, for as long as they
need, rather than give it work that takes "long enough": its rule writes plugin state to a
SQLite file, and the test holds that file's write lock (the tick waits for it) until it has seen
what it looks for; then it lets the lock go and the tick ends, saved. Nothing is timed."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pytest

import warden
from warden import EventError, Outcome

HOLD = (
    '[rule]\nid = "hold"\ntrigger = "on_tool_call"\n[condition]\nexpression = "true"\n'
    '[action]\ntype = "set_state"\nkey = "held"\nvalue = true\n'
)
CALL = {"tool": {"name": "x"}}

# Holds the database's write lock until its standard input closes, then lets it go (a rollback:
# it writes nothing). Another process, because SQLite's locks belong to the process: the engine's
# SQLite (compiled into the extension) and Python's own would not see each other's in one.
HOLDER = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], timeout=60, isolation_level=None)
db.execute("BEGIN IMMEDIATE")
print("held", flush=True)
sys.stdin.read()
db.execute("ROLLBACK")
"""

WRITE_LOCK_WAIT = 60
"""How long a tick waits for the write lock (`[database] lock_timeout`): only a hang detector,
as the lock is held for milliseconds past what the test waits for. A tick that does not get it
is not saved, and the tests say so."""


@contextmanager
def write_lock(db: Path) -> Iterator[None]:
    """Holds `db`'s write lock while the block runs: a tick that writes to it waits meanwhile."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdin is not None and holder.stdout is not None
    try:
        assert holder.stdout.readline() == "held\n", "the lock could not be taken"
        yield
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
        holder.stdout.close()


@pytest.fixture
def held(tmp_path: Path, rules_dir) -> tuple[warden.Warden, Callable[[], AbstractContextManager[None]]]:
    """A supervisor whose `on_tool_call` writes plugin state to a SQLite file, and the hold of
    that file's write lock: a tick started in the hold cannot end before the hold does."""
    rules_dir({"hold.toml": HOLD})
    config = tmp_path / "warden.toml"
    config.write_text(
        f'builtin = false\nrules = ["rules"]\n\n[database]\npath = "warden.db"\nlock_timeout = {WRITE_LOCK_WAIT}\n'
    )
    return warden.Warden.from_config(config), lambda: write_lock(tmp_path / "warden.db")


def calling(thread: threading.Thread, fn: Callable[..., Any]) -> bool:
    """Whether `thread`, running `fn`, is in the call on the first line of `fn`'s body: its
    innermost Python frame is `fn`'s, on that line. A call into the engine pushes no frame of its
    own, so a thread waiting in a tick shows there. Seen from another thread, which holds the GIL
    to look: a thread that kept the GIL through the call would not be seen in it."""
    # (Nothing on such a line before the call lets the GIL go: the interpreter checks for a
    # thread switch at a call's end, not before it.)
    frame = sys._current_frames().get(thread.ident or 0)
    code = fn.__code__
    return frame is not None and frame.f_code is code and frame.f_lineno == code.co_firstlineno + 1


def wait_until(seen: Callable[[], bool]) -> None:
    while not seen():
        time.sleep(0.001)


def python_runs() -> None:
    """Python code running on a thread of its own, from its start to its end."""
    total: list[int] = []
    beat = threading.Thread(target=lambda: total.append(sum(range(10_000))))
    beat.start()
    beat.join()
    assert total == [49_995_000]


def job(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return fn(*args, **kwargs)


class Workers(ThreadPoolExecutor):
    """An event loop's executor whose workers run each job through `job`, so that `calling`
    sees a worker in the job (the tick `atick` sends there)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        return super().submit(job, fn, args, kwargs)


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


def test_the_gil_is_released_while_a_tick_runs(held):
    w, hold = held
    session = w.session()
    outcomes: list[Outcome] = []

    def tick() -> None:
        outcomes.append(session.tick("on_tool_call", CALL))

    ticker = threading.Thread(target=tick)
    with hold():
        ticker.start()
        # Python goes on in this thread while the other is in the tick (else this thread would
        # not see it there), and in a thread that starts and ends meanwhile.
        wait_until(lambda: calling(ticker, tick) or not ticker.is_alive())
        python_runs()
        assert calling(ticker, tick), "the tick ended while its write lock was held"
    ticker.join()
    [outcome] = outcomes
    assert outcome.fired == ["hold"] and outcome.errors == []
    # It had the lock once this thread let it go. Had the tick kept the GIL while it waited,
    # this thread could not have let it go: the tick would have given up, unsaved.
    assert outcome.saved, outcome.unsaved


def test_reading_host_data_waits_for_a_tick_without_holding_the_gil(held):
    # host_data and set_host_data(save=False) keep the GIL when the session is free; while
    # another thread ticks it, they wait for the tick with the GIL released.
    w, hold = held
    session = w.session()
    outcomes: list[Outcome] = []
    read: list[dict[str, Any]] = []

    def tick() -> None:
        outcomes.append(session.tick("on_tool_call", CALL))

    def reader() -> None:
        session.set_host_data("k", {"v": 1}, save=False)
        read.append(session.host_data)

    ticker = threading.Thread(target=tick)
    readers: list[threading.Thread] = []
    with hold():
        ticker.start()
        wait_until(lambda: calling(ticker, tick) or not ticker.is_alive())
        waiting = False
        while not waiting and ticker.is_alive():
            # The tick lets the GIL go a moment before it takes the session: a reader started in
            # that moment has the session first, and ends. Then another one.
            readers.append(threading.Thread(target=reader))
            readers[-1].start()
            wait_until(lambda: calling(readers[-1], reader) or not readers[-1].is_alive())
            # The reader waits for the session, which the tick has until the lock is let go;
            # Python goes on meanwhile.
            python_runs()
            waiting = calling(readers[-1], reader)
        assert waiting and calling(ticker, tick), "the tick ended while its write lock was held"
    for t in [ticker, *readers]:
        t.join()
    assert read == [{"k": {"v": 1}}] * len(readers)
    [outcome] = outcomes
    assert outcome.fired == ["hold"] and outcome.errors == []
    # Had the waiting reader kept the GIL, this thread could not have let the lock go: the tick
    # would have given up, unsaved.
    assert outcome.saved, outcome.unsaved


def test_atick_does_not_block_the_event_loop(held):
    w, hold = held
    session = w.session()

    async def main() -> Outcome:
        asyncio.get_running_loop().set_default_executor(Workers())
        beats: list[int] = []

        async def heartbeat() -> None:
            while True:
                beats.append(len(beats))
                await asyncio.sleep(0.001)

        def in_the_tick() -> bool:
            return any(calling(t, job) for t in threading.enumerate())

        beating = asyncio.create_task(heartbeat())
        with hold():
            ticking = asyncio.ensure_future(session.atick("on_tool_call", CALL))
            while not ticking.done() and not in_the_tick():
                await asyncio.sleep(0.001)
            # A worker is in the tick, which cannot end while the lock is held; the event loop
            # goes on meanwhile: the heartbeat beats.
            seen = len(beats)
            while len(beats) < seen + 3 and not ticking.done():
                await asyncio.sleep(0.001)
            assert not ticking.done() and in_the_tick(), "the tick ended while its write lock was held"
        outcome = await ticking
        beating.cancel()
        return outcome

    outcome = asyncio.run(main())
    assert isinstance(outcome, Outcome)
    assert outcome.fired == ["hold"] and outcome.errors == []
    assert outcome.saved, outcome.unsaved


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
