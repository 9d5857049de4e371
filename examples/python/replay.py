"""Replays a session trace from Python, printing what `warden replay` prints: one JSON line per
action, ruling and error. It is the Python side of the long-session benchmark
(python/bench/run.sh), and a template for feeding recorded sessions to Warden.

    python examples/python/replay.py examples/traces/research-session.jsonl
    python examples/python/replay.py --plugins examples/plugins --builtin TRACE
"""

from __future__ import annotations

import argparse
import json
import sys

import warden


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("--rules", action="append", default=[], help="a rule folder (repeatable)")
    parser.add_argument("--plugins", action="append", default=[], help="a folder of plugins (repeatable)")
    parser.add_argument("--builtin", action="store_true", help="the built-in rules too")
    args = parser.parse_args()

    builtin = True if args.builtin or not (args.rules or args.plugins) else None
    supervisor = warden.Warden(rules=args.rules, plugins=args.plugins, builtin=builtin)
    for d in supervisor.diagnostics:
        print(d, file=sys.stderr)
    session = supervisor.session()
    sys.stdout.flush()
    out = sys.stdout.buffer  # the engine writes UTF-8 JSON text: no str is made per line
    with open(args.trace, "rb") as trace:
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
                error = {"event": n, "rule": None, "error": f"{args.trace}: line {n + 1}: {e}"}
                out.write(json.dumps(error, separators=(",", ":"), ensure_ascii=False).encode() + b"\n")
                continue
            printed = outcome.replay_output(n)
            if printed:  # (an empty write would still be a system call)
                out.write(printed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
