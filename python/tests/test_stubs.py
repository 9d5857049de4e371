"""The type stubs say what the native module has: every class, function and exception of
``warden._native`` is in ``_native.pyi`` with the same public members, and the other way
round, so an editor's completion and a type checker see the package as it is."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

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
