"""Ctrl-C reported as an interrupt, exit 130, however the interrupt reached the command.

Each case runs the command line in a process of its own that sends itself a real SIGINT at a chosen point (a
signal sent to oneself is handled at the next bytecode, so the point is the same every time). The agent run's own
interrupts are `tests/reliability/test_ctrl_c.py`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import mementograph

PRELUDE = """
import os, signal, sys
import mementograph.cli as cli

def interrupt():
    os.kill(os.getpid(), signal.SIGINT)
"""


def _default_sigint() -> None:
    """A process started in the background of a non-interactive shell ignores SIGINT; so would its children."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _run(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    """`PRELUDE` + `body`, which patches the command line, then `sys.exit(cli.main(['stats', ...]))`, run as
    `python -m mementograph` is: as a module (`-c` and a script file exit at `sys.exit` itself, before CPython
    looks at how an interrupt went)."""
    source = Path(mementograph.__file__).resolve().parents[1]
    (tmp_path / 'interrupted_cli.py').write_text(
        PRELUDE + body + "\nsys.exit(cli.main(['stats', '--store', 'memory://']))\n"
    )
    return subprocess.run(
        [sys.executable, '-m', 'interrupted_cli'],
        env={**os.environ, 'PYTHONPATH': os.pathsep.join([str(source), str(tmp_path)])},
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_default_sigint,
    )


def test_an_interrupt_while_a_module_runs_exec_still_exits_130(tmp_path: Path) -> None:
    """`dataclasses` and `namedtuple` make their methods with `exec()` while a command's modules load; CPython
    marks an interrupt raised inside one as unhandled, caught or not, and the process used to end by SIGINT."""
    done = _run(
        tmp_path,
        """
load = cli.build_parser
def build_parser(command=None):
    exec('interrupt()')
    return load(command)
cli.build_parser = build_parser
""",
    )
    assert done.returncode == 130, (done.returncode, done.stderr)
    assert done.stderr == 'mementograph: interrupted\n'


def test_an_interrupt_an_extension_turned_into_another_error_exits_130(tmp_path: Path) -> None:
    """Rust and C extensions (pydantic-core building a schema) hand an interrupt raised in their Python callback
    back as an error of their own: the command reports the interrupt, not a traceback of that error."""
    done = _run(
        tmp_path,
        """
load = cli.build_parser
def build_parser(command=None):
    try:
        interrupt()
    except KeyboardInterrupt:
        raise RuntimeError('SchemaError: KeyboardInterrupt') from None
    return load(command)
cli.build_parser = build_parser
""",
    )
    assert done.returncode == 130, (done.returncode, done.stderr)
    assert done.stderr == 'mementograph: interrupted\n'


def test_an_interrupt_swallowed_on_the_way_still_ends_the_command_with_130(tmp_path: Path) -> None:
    """Something caught the interrupt and the command went on to its end: it still exits 130, with its output."""
    done = _run(
        tmp_path,
        """
load = cli.build_parser
def build_parser(command=None):
    try:
        interrupt()
    except KeyboardInterrupt:
        pass
    return load(command)
cli.build_parser = build_parser
""",
    )
    assert done.returncode == 130, (done.returncode, done.stderr)
    assert done.stderr == 'mementograph: interrupted\n'
    assert 'sessions' in done.stdout
