"""What a tick costs when called from Python, beside the same tick called from Rust, in the
same process, on the same supervisor, measured in alternation (the machine is shared and noisy:
only figures from one run compare).

The scenarios are `warden bench`'s (crates/warden-bench): one `on_turn_start` tick over 100
threshold rules, 10 of them firing; one `on_tool_call` tick over the same rules at that hook,
the 10 firing ones deciding `deny`; and its `guardrails-tool-call`, one `on_tool_call` of a
`Bash` command with the built-in rules and the guardrails plugin (mostly the analysis of the
shell command). "Rust" is `Session::tick` in a Rust loop
(`warden._native._rust_ticks`); "Python" is `session.tick(hook, event)` in a Python loop, the
event a dict, the outcome an `Outcome`; "Python, reading" also reads `outcome.inject` (or the
decision). Build the package in release mode first (python/bench/run.sh does).

    python python/bench/tick.py [--ticks 20000] [--rounds 15]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import warden
from warden._native import _rust_ticks

RULES = 100
TOKEN_USAGE = 0.095
GUARDED_COMMAND = "cargo test --workspace 2>&1 | tail -20"


def write_rules(folder: Path, hook: str, decisions: int) -> None:
    """The rule files of crates/warden-bench/src/scenarios.rs, byte for byte."""
    for i in range(RULES):
        t = f"{i / RULES:.2f}"
        if hook == "on_turn_start":
            action = f'type = "notify_self"\nmessage = "Token usage passed {t}."\n'
        elif i < decisions:
            action = f'type = "decide"\ndecision = "deny"\nreason = "Token usage passed {t}."\n'
        else:
            action = f'type = "notify_self"\nmessage = "Token usage passed {t}."\ndeliver_at = "immediate"\n'
        (folder / f"threshold-{i:03}.toml").write_text(
            f'[rule]\nid = "threshold-{i:03}"\ntrigger = "{hook}"\npriority = {1000 - i}\n\n'
            f'[condition]\nexpression = "context.turn.token_usage > {t}"\n\n[action]\n{action}'
        )


def threshold_rules(hook: str, decisions: int) -> warden.Warden:
    with tempfile.TemporaryDirectory() as folder:
        write_rules(Path(folder), hook, decisions)
        return warden.Warden(rules=folder, strict=True)


def measure(name: str, w: warden.Warden, hook: str, event: dict[str, object], ticks: int, rounds: int) -> None:
    rust_session, py_session, read_session = w.session(), w.session(), w.session()
    tick = py_session.tick
    read = read_session.tick

    def python_loop() -> float:
        start = time.perf_counter_ns()
        for _ in range(ticks):
            tick(hook, event)
        return (time.perf_counter_ns() - start) / ticks

    def reading_loop() -> float:
        start = time.perf_counter_ns()
        for _ in range(ticks):
            outcome = read(hook, event)
            outcome.inject
            outcome.decision
        return (time.perf_counter_ns() - start) / ticks

    # Warm up all three.
    _rust_ticks(rust_session, hook, event, 2000)
    for _ in range(2000):
        tick(hook, event)
        read(hook, event).inject

    rust, python, reading = [], [], []
    for _ in range(rounds):
        rust.append(_rust_ticks(rust_session, hook, event, ticks))
        python.append(python_loop())
        reading.append(reading_loop())
    r, p, q = statistics.median(rust), statistics.median(python), statistics.median(reading)
    fired = read(hook, event)
    print(f"{name} (median of {rounds} rounds of {ticks} ticks; {len(fired.fired)} rules fire):")
    print(f"  Rust    session.tick               {r:>8.0f} ns")
    print(f"  Python  session.tick               {p:>8.0f} ns   {p / r:5.2f}x Rust, {(p - r) / 1000:+.2f} us per tick")
    print(f"  Python  session.tick + reading it  {q:>8.0f} ns   {q / r:5.2f}x Rust, {(q - r) / 1000:+.2f} us per tick")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ticks", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    measure(
        "one on_turn_start tick, 100 threshold rules",
        threshold_rules("on_turn_start", 0),
        "on_turn_start",
        {"turn": {"token_usage": TOKEN_USAGE}, "time": 0.0},
        args.ticks,
        args.rounds,
    )
    measure(
        "one on_tool_call tick, 100 threshold rules, the 10 firing ones deny",
        threshold_rules("on_tool_call", 10),
        "on_tool_call",
        {"tool": {"name": "Bash", "arguments": None}, "turn": {"token_usage": TOKEN_USAGE}, "time": 0.0},
        args.ticks,
        args.rounds,
    )
    # warden bench's `guardrails-tool-call` (crates/warden-bench/src/repeat.rs): the shell
    # analysis of the command is most of the Rust tick.
    measure(
        "one on_tool_call of Bash (`cargo test --workspace 2>&1 | tail -20`), built-in rules and builtin:guardrails",
        warden.Warden(plugins=["builtin:guardrails"], builtin=True),
        "on_tool_call",
        {"tool": {"name": "Bash", "arguments": {"command": GUARDED_COMMAND}}, "time": 0.0},
        max(1, args.ticks // 10),
        args.rounds,
    )


if __name__ == "__main__":
    main()
