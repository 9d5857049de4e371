"""Shared fixtures: the repository's folders, and rule folders written for a test."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
"""The repository's root."""
PLUGINS = REPO / "examples" / "plugins"
"""The example plugins (guardrails among them)."""


@pytest.fixture
def rules_dir(tmp_path: Path):
    """Writes rule files (and scripts) into a fresh folder: ``rules_dir({"a.toml": "..."})``."""

    def write(files: dict[str, str]) -> Path:
        for name, text in files.items():
            path = tmp_path / "rules" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        return tmp_path / "rules"

    return write

IN_CI = bool(__import__("os").environ.get("WARDEN_PYTHON_CI"))
"""Set by .ci/run: there, nothing a test needs may be missing, so nothing is skipped."""


def need(condition: bool, reason: str) -> None:
    """Skips the test when `condition` is false (saying why), except in CI, where it fails."""
    if not condition:
        if IN_CI:
            pytest.fail(f"{reason}, and .ci/run must provide it")
        pytest.skip(f"skipped: {reason}; CI runs it", allow_module_level=True)
