"""The type stubs say what the native module has: every class, function and exception of
``warden._native`` is in ``_native.pyi`` with the same public members, and the other way
round, so an editor's completion and a type checker see the package as it is."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from pathlib import Path

from conftest import need

import warden
from warden import _native

STUB = Path(__file__).resolve().parents[1] / "warden" / "_native.pyi"


def stub_members() -> dict[str, set[str]]:
    tree = ast.parse(STUB.read_text())
    out: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            out[node.name] = {
                item.name if isinstance(item, ast.FunctionDef) else item.target.id
                for item in node.body
                if isinstance(item, ast.FunctionDef) or (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name))
            }
        elif isinstance(node, ast.FunctionDef):
            out[node.name] = set()
    return out


def runtime_members(obj: object) -> set[str]:
    return {n for n in vars(obj) if not n.startswith("_") or n in ("__init__",)}


def test_the_stubs_match_the_native_module():
    stubs = stub_members()
    native = {n for n in vars(_native) if not n.startswith("__") and not inspect.ismodule(getattr(_native, n))}
    assert native == set(stubs), f"only at run time: {native - set(stubs)}; only in the stubs: {set(stubs) - native}"
    for name, members in stubs.items():
        obj = getattr(_native, name)
        if not inspect.isclass(obj) or issubclass(obj, BaseException):
            continue
        public = {m for m in members if not m.startswith("_")}
        assert public == runtime_members(obj) - {"__init__"}, name


def test_every_public_item_is_documented():
    for name in warden.__all__:
        obj = getattr(warden, name)
        if inspect.isclass(obj) or callable(obj):
            assert obj.__doc__, f"warden.{name} has no docstring"
        if inspect.isclass(obj) and not issubclass(obj, BaseException) and obj.__module__ == "warden":
            for member, value in vars(obj).items():
                if not member.startswith("_"):
                    assert getattr(value, "__doc__", None), f"warden.{name}.{member} has no docstring"


USER_CODE = '''
import asyncio
import warden
from warden import ProceedKind

w = warden.Warden(builtin=True)
s = w.session("typed")
o = s.tick("on_tool_call", {"tool": {"name": "Bash", "arguments": {"command": "ls"}}})
if o.proceed.kind is ProceedKind.WITH_INPUT and o.proceed.input is not None:
    arguments: dict[str, object] = o.proceed.input
reason: str | None = o.reason
for n in o.inject:
    level: warden.Priority = n.priority
    print(n.message.upper(), level.rank)
text: str | None = w.render(o.inject)
later: warden.Outcome = asyncio.run(s.atick("on_turn_start"))
wrong: int = o.fired
folders: list[str] = ["rules"]
names: tuple[str, ...] = ("web_search",)
w = warden.Warden(rules=folders, plugins=(), capabilities=names)
'''


def test_a_type_checker_reads_the_package_as_it_is(tmp_path):
    try:
        import mypy  # noqa: F401
    except ImportError:
        need(False, "mypy is not installed")
    program = tmp_path / "agent.py"
    program.write_text(USER_CODE)
    def mypy(*args: str) -> list[str]:
        done = subprocess.run(
            [sys.executable, "-m", "mypy", "--strict", "--no-incremental", *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
        )
        assert "error:" in done.stdout or done.returncode == 0, done.stdout + done.stderr
        return [line for line in done.stdout.splitlines() if ": error:" in line]

    # The package itself checks clean, its LangChain middleware included.
    assert mypy("-p", "warden") == []
    # A user's program: the one mistake in it is found, and nothing else.
    [error] = mypy(str(program))
    assert 'agent.py:17: error: Incompatible types in assignment (expression has type "list[str]"' in error
