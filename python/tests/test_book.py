"""The book's Python chapter cannot drift from the package: its Python blocks run, in order,
in one namespace, in a folder that holds nothing but the files the chapter shows
(``toml,file=NAME`` blocks), as a reader's empty folder would. Blocks that include a file (``{{#include ...}}``) show an
example that test_examples.py runs."""

from __future__ import annotations

import os
import re
from pathlib import Path

from conftest import REPO

CHAPTER = REPO / "book" / "src" / "python.md"
FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```", re.M | re.S)


def blocks() -> list[tuple[str, str, int]]:
    text = CHAPTER.read_text()
    return [(m[1].strip(), m[2], text.count("\n", 0, m.start()) + 1) for m in FENCE.finditer(text)]


def test_the_python_chapter_runs(tmp_path: Path, capsys):
    ran = 0
    namespace: dict = {"__name__": "book"}
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        for info, body, line in blocks():
            lang = [x.strip() for x in info.split(",")]
            files = [x.removeprefix("file=") for x in lang if x.startswith("file=")]
            for name in files:
                (tmp_path / name).write_text(body)
            if lang[0] != "python" or "{{#include" in body:
                continue
            code = compile(body, f"{CHAPTER}:{line}", "exec")
            exec(code, namespace)  # noqa: S102 - the book's own examples
            ran += 1
    finally:
        os.chdir(cwd)
    assert ran >= 7, f"only {ran} Python blocks found"
    out = capsys.readouterr().out
    assert "Token budget at 85%. Consider wrapping up or summarizing." in out


def test_the_chapter_includes_what_the_examples_have():
    for info, body, line in blocks():
        for path, anchor in re.findall(r"\{\{#include ([^:}]+)(?::(\w+))?\}\}", body):
            target = (CHAPTER.parent / path).resolve()
            assert target.is_file(), f"{CHAPTER}:{line}: {path} does not exist"
            if anchor:
                assert f"ANCHOR: {anchor}" in target.read_text(), f"{CHAPTER}:{line}: no anchor {anchor}"
