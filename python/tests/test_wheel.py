"""The built wheel installs into a fresh virtual environment, with nothing else, and works
there: `import warden` and a tick."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import need

SMOKE = """
import warden
w = warden.Warden()
outcome = w.session("fresh").tick("on_turn_start", {"turn": {"token_usage": 0.9}})
assert outcome.fired == ["token-budget-warning"], outcome.fired
assert outcome.inject[0].priority == warden.Priority.HIGH
print(warden.__version__, outcome.inject[0].message)
"""


def test_the_wheel_installs_into_a_fresh_environment(tmp_path: Path):
    wheel = os.environ.get("WARDEN_WHEEL", "")
    need(bool(wheel) and Path(wheel).is_file(), "WARDEN_WHEEL does not name a built wheel")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    # The environment's pip is the test's own, pointed at the fresh environment.
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-index", "--no-deps", "-q", wheel],
        check=True,
    )
    # Run away from the repository, so that only the installed package can be imported.
    done = subprocess.run([str(python), "-c", SMOKE], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "Token budget at 90%" in done.stdout
