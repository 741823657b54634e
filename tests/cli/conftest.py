"""A demo run in a fresh temporary HOME, shared by the demo and plot tests of this module."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

MEMENTOGRAPH = Path(sys.executable).parent / 'mementograph'
"""The installed console script: what a user runs."""


@dataclass(frozen=True)
class DemoRun:
    home: Path
    cwd: Path
    returncode: int
    stdout: str
    stderr: str

    @property
    def data(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.stdout)
        return data


def fresh_home_env(home: Path) -> dict[str, str]:
    """The environment of a user who never ran mementograph: HOME is new, no XDG or store overrides; the
    tiktoken cache is kept (no network here)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(('XDG_', 'MEMENTOGRAPH_', 'MPLCONFIGDIR'))}
    env['HOME'] = str(home)
    assert 'TIKTOKEN_CACHE_DIR' in env, 'tests/conftest.py sets it from the shared data'
    return env


@pytest.fixture(scope='session')
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    """`mementograph demo --json`, once, as a first-time user would run it."""
    base = tmp_path_factory.mktemp('demo')
    home, cwd = base / 'home', base / 'work'
    home.mkdir()
    cwd.mkdir()
    done = subprocess.run(
        [str(MEMENTOGRAPH), 'demo', '--json'],
        cwd=cwd,
        env=fresh_home_env(home),
        capture_output=True,
        text=True,
        timeout=600,
    )
    return DemoRun(home, cwd, done.returncode, done.stdout, done.stderr)
