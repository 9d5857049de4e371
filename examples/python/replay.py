"""Replays a session trace from Python, printing what `warden replay` prints: one JSON line per
action, ruling and error. It is the Python side of the long-session benchmark
(python/bench/run.sh), and a template for feeding recorded sessions to Warden.

    python examples/python/replay.py examples/traces/research-session.jsonl
    python examples/python/replay.py --plugins examples/plugins --builtin TRACE
"""

from __future__ import annotations

import sys

import warden

USAGE = """usage: replay.py [-h] [--rules DIR] [--plugins DIR] [--builtin] TRACE

Replays a session trace from Python, printing what `warden replay` prints.

options:
  --rules DIR    a rule folder (repeatable)
  --plugins DIR  a folder of plugins (repeatable)
  --builtin      the built-in rules too (the default when no folder is given)
  -h, --help     show this help and exit
"""


def parse_args(argv: list[str]) -> tuple[str, list[str], list[str], bool]:
    """The trace, rule folders, plugin folders and --builtin of `argv`. Parsed by hand: argparse
    (with what it imports) takes longer to start than replaying a short trace."""
    rules: list[str] = []
    plugins: list[str] = []
    builtin = False
    trace = None
    args = iter(argv)
    for arg in args:
        if arg in ("-h", "--help"):
            sys.stdout.write(USAGE)
            sys.exit(0)
        name, eq, value = arg.partition("=")
        if name in ("--rules", "--plugins"):
            if not eq:
                value = next(args, None)
            if not value:
                raise usage_error(f"{name} needs a folder")
            (rules if name == "--rules" else plugins).append(value)
        elif arg == "--builtin":
            builtin = True
        elif arg.startswith("-") and arg != "-":
            raise usage_error(f"unknown option {arg}")
        elif trace is None:
            trace = arg
        else:
            raise usage_error(f"one trace at a time ({trace} and {arg} given)")
    if trace is None:
        raise usage_error("the trace file is missing")
    return trace, rules, plugins, builtin


def usage_error(message: str) -> SystemExit:
    """Says what is wrong with the command line; raise what it returns (exit status 2)."""
    sys.stderr.write(USAGE.splitlines()[0] + f"\nreplay.py: error: {message}\n")
    return SystemExit(2)


def main() -> int:
    trace_path, rules, plugins, builtin_flag = parse_args(sys.argv[1:])
    builtin = True if builtin_flag or not (rules or plugins) else None
    supervisor = warden.Warden(rules=rules, plugins=plugins, builtin=builtin)
    for d in supervisor.diagnostics:
        print(d, file=sys.stderr)
    session = supervisor.session()
    sys.stdout.flush()
    out = sys.stdout.buffer  # the engine writes UTF-8 JSON text: no str is made per line
    bad = 0
    try:
        trace = open(trace_path, "rb")
    except OSError as e:
        sys.stderr.write(f"error: cannot read {trace_path}: {e.strerror}\n")
        return 2
    with trace:
        for n, line in enumerate(trace):
            if n == 0:
                line = line.removeprefix(b"\xef\xbb\xbf")  # a UTF-8 byte order mark
            # Skip blank lines and // comments (a line opening an object is neither).
            if not line.startswith(b"{") and (not line.strip() or line.lstrip().startswith(b"//")):
                continue
            try:
                # The engine reads the JSON: no dict is built for the event.
                outcome = session.tick_json(line)
            except warden.EventError as e:
                import json  # only for a bad line

                error = {"event": n, "rule": None, "error": f"{trace_path}: line {n + 1}: {e}"}
                out.write(json.dumps(error, separators=(",", ":"), ensure_ascii=False).encode() + b"\n")
                bad += 1
                continue
            printed = outcome.replay_output(n)
            if printed:  # (an empty write would still be a system call)
                out.write(printed)
    # As `warden replay`: 1 when a line was not an event.
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
