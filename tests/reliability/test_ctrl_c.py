"""Ctrl-C during `mementograph demo`'s agent run: exit 130 within seconds, and the archive stays whole.

An interrupt raised inside the run's task used to end the task while the event loop was stopped, so anyio's worker
threads (the demo's sync tools run in them; not daemons) never got the stop scheduled for the task's end, and the
interpreter waited for them at exit for ever, after printing `mementograph: interrupted`. The first Ctrl-C now
cancels the run's task instead (`mementograph.cli._interrupt`).

The interrupts here are real SIGINTs, sent at well-defined points of the run: by the process itself from the
demo's progress callback of a chosen request (`_ctrl_c_demo`, the same place every time), and by the test, as a
terminal would, once the demo has printed a chosen request's progress line. Afterwards the session log holds every
message of the requests made, each archived block recovers to it, and the store verifies.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import mementograph
from mementograph.knowledge_graph.store import GraphStore
from tests.reliability._checks import log_payloads, session_problems, verify_problems
from tests.reliability.conftest import RealStore

REPO = Path(__file__).resolve().parents[2]
EXIT_BOUND = 30.0
"""Seconds from the interrupt to the process's exit, at most; it takes 1-3 s (most of it the interpreter's own
teardown), and a process that hangs at exit fails the test."""


def _env() -> dict[str, str]:
    """The code under test (`mementograph` as this test imported it) and the `tests` package, for the child."""
    source = Path(mementograph.__file__).resolve().parents[1]
    return {**os.environ, 'PYTHONPATH': os.pathsep.join([str(source), str(REPO)])}


def _default_sigint() -> None:
    """A process started in the background of a non-interactive shell ignores SIGINT, and its children inherit
    that: the child must take Ctrl-C as a terminal's process would."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _wait_for_exit(proc: subprocess.Popen[str], marker: str, *, press: bool) -> tuple[list[str], float]:
    """stderr's lines, read until the process ends, and how long it took to end after the line starting with
    `marker` (when it came, SIGINT is sent to the process if `press`); the process is killed, and the test fails,
    when it outlives `EXIT_BOUND`."""
    assert proc.stderr is not None
    lines: list[str] = []
    interrupted_at: float | None = None
    for line in proc.stderr:
        lines.append(line.rstrip('\n'))
        if line.startswith(marker):
            if press:
                proc.send_signal(signal.SIGINT)
            interrupted_at = time.monotonic()
            break
    assert interrupted_at is not None, f'the demo ended before {marker!r}: {lines[-5:]}'
    try:
        _, rest = proc.communicate(timeout=EXIT_BOUND)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f'the demo did not exit within {EXIT_BOUND:g} s of the interrupt ({marker!r})')
    lines += rest.splitlines()
    return lines, time.monotonic() - interrupted_at


def _check_ended(proc: subprocess.Popen[str], lines: list[str], seconds: float) -> None:
    assert proc.returncode == 130, lines[-20:]
    assert lines[-1] == 'mementograph: interrupted' and not any('Traceback' in line for line in lines), lines[-20:]
    assert seconds < EXIT_BOUND


def _check_archive(store: GraphStore, namespace: str, requests: int) -> None:
    """The demo's one session: its log holds the `requests` requests made and the responses between them, each
    archived block recovers to the logged messages, nothing is archived twice, and the store verifies."""
    (session,) = store.list_sessions(namespace=namespace)
    log, problems = log_payloads(store, session.id, namespace=namespace)
    assert problems == []
    assert len(log) == 2 * requests - 1, f'{len(log)} messages logged for {requests} requests'
    assert session_problems(store, session.id, namespace=namespace, originals=log, live=None) == []
    assert verify_problems(store, namespace=namespace, session_id=session.id) == []


@pytest.mark.parametrize(
    ('request_number', 'presses'),
    [
        pytest.param(1, 1, id='first-request'),
        pytest.param(14, 1, id='after-the-first-compaction'),
        pytest.param(22, 2, id='twice-after-a-merge'),  # the second Ctrl-C interrupts the run's cleanup
    ],
)
def test_ctrl_c_in_the_run_exits_130_and_keeps_the_archive(
    real_store: RealStore, tmp_path: Path, request_number: int, presses: int
) -> None:
    proc = subprocess.Popen(
        [
            sys.executable, '-m', 'tests.reliability._ctrl_c_demo', str(request_number), str(presses),
            '--store', real_store.uri, '--namespace', real_store.namespace, '--no-plot', '-q',
        ],
        cwd=tmp_path, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        preexec_fn=_default_sigint,
    )  # fmt: skip
    lines, seconds = _wait_for_exit(proc, f'interrupting at request {request_number}', press=False)
    _check_ended(proc, lines, seconds)
    _check_archive(real_store.store, real_store.namespace, request_number)


def test_ctrl_c_from_outside_during_the_run_exits_130(tmp_path: Path) -> None:
    """A terminal's Ctrl-C: SIGINT from another process, once the demo has printed request 10's progress line
    (the plain progress of a stderr that is not a terminal); the interrupt lands wherever the run then is."""
    uri = f'sqlite://{tmp_path / "memory.db"}'
    proc = subprocess.Popen(
        [sys.executable, '-m', 'mementograph', 'demo', '--store', uri, '--no-plot'],
        cwd=tmp_path, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        preexec_fn=_default_sigint,
    )  # fmt: skip
    lines, seconds = _wait_for_exit(proc, 'request  10 ', press=True)
    _check_ended(proc, lines, seconds)
    verified = subprocess.run(
        [sys.executable, '-m', 'mementograph', 'verify', '--store', uri],
        env=_env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert verified.returncode == 0, verified.stdout + verified.stderr
