#!/usr/bin/env python3
"""The code one repetition of a scenario runs, in 64-byte lines: how much of the processor's
first-level instruction cache (32 KiB, 512 lines, on the development machine) a tick needs.

    benches/code_lines.py LOW.out HIGH.out REPETITIONS

LOW.out and HIGH.out are callgrind's output (`--dump-instr=yes`, without `--collect-jumps`)
for the same scenario run twice, REPETITIONS more times in the second. An instruction runs at
every repetition when its count grew by at least nine tenths of REPETITIONS (a path taken at
nearly every tick counts; a rare one does not); the answer is how many distinct 64-byte lines
of code those instructions are in, each object (the binary, libc, ...) counted apart.
A tick whose lines pass what the cache holds evicts, at every tick, code the next tick needs:
its instructions then run at a fraction of their speed (see the book's performance chapter).
"""

import collections
import re
import sys

# `ob=(3) /lib/libc.so.6` names object 3 and makes it current; `ob=(3)` makes it current
# again; `cob=` names one (for a call's target) without making it current.
OBJECT = re.compile(r"(c?ob)=(?:\((\d+)\))?\s*(.*)")


def counts(path):
    """Executed instructions by (object, address), from a callgrind output file. Callgrind
    writes each address relative to its object, so two objects' addresses may be equal."""
    ir = collections.Counter()
    names = {}
    current = ""
    last = 0
    skip_next = False
    # The instruction's address comes first; then the source line, if it was dumped too.
    columns = 1
    with open(path) as f:
        for line in f:
            if line.startswith("positions:"):
                columns = len(line.split()) - 1
                continue
            if line.startswith(("jump=", "jcnd=")):
                sys.exit(f"{path}: counted with --collect-jumps, which this script does not read")
            m = OBJECT.match(line)
            if m:
                kind, number, name = m.group(1), m.group(2), m.group(3).strip()
                if number is not None and name:
                    names[number] = name
                if kind == "ob":
                    current = names.get(number, name) if number is not None else name
                continue
            if not line or not (line[0].isdigit() or line[0] in "+-*"):
                # A call's cost line follows its `calls=` line: inclusive, not this address's.
                skip_next = line.startswith("calls=")
                continue
            fields = line.split()
            position = fields[0]
            # Relative positions are decimal; absolute ones hexadecimal, with `0x`.
            if position.startswith("+"):
                address = last + int(position[1:])
            elif position.startswith("-"):
                address = last - int(position[1:])
            elif position == "*":
                address = last
            else:
                address = int(position, 0)
            last = address
            if skip_next:
                skip_next = False
                continue
            if len(fields) > columns:
                ir[(current, address)] += int(fields[columns])
    return ir


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: code_lines.py LOW.out HIGH.out REPETITIONS")
    low, high, repetitions = counts(sys.argv[1]), counts(sys.argv[2]), int(sys.argv[3])
    every = 0.9 * repetitions
    lines = {(o, a // 64) for (o, a), n in high.items() if n - low.get((o, a), 0) >= every}
    print(len(lines))


if __name__ == "__main__":
    main()
