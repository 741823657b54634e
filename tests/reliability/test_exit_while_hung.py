"""A process whose store stops answering still exits, and says what its session log is missing.

Another process takes the SQLite file's write lock (`BEGIN IMMEDIATE`) before an agent run starts, and the run's
store would wait ten minutes for it. The run itself returns after `store_timeout` (`test_hung_store.py`); what is
checked here is the process around it. The thread appending the session log is still inside a store call when the
program ends. It used to be a non-daemon thread, so Python waited for it at exit, here for the ten minutes. Now the
process waits `store_timeout` more, then exits. If the store answers in that time, the log is complete. If not,
the process names the messages it could not write, and a later run that continues the conversation writes them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic_ai.messages import ModelMessagesTypeAdapter

from mementograph import open_store
from mementograph.knowledge_graph import DEFAULT_NAMESPACE
from tests.reliability._checks import log_payloads, one

REPO = Path(__file__).resolve().parents[2]
STORE_TIMEOUT = 3.0
EXIT_BOUND = 90.0
"""Far above what a run and its exit take (seconds); a process that does not exit fails the test."""
MESSAGES = 6
"""A run of `_exit_run`: the prompt, two tool calls with their returns, the answer (a continued run adds two)."""
NOT_WRITTEN = 'were not written to the session log'


def _env() -> dict[str, str]:
    return {**os.environ, 'PYTHONPATH': str(REPO)}


@pytest.fixture
def locked_file(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A store file whose write lock another process holds until the marker file (second item) appears."""
    path, marker = tmp_path / 'memory.db', tmp_path / 'release'
    open_store(f'sqlite://{path}').close()  # the schema exists before the lock is taken
    holder = subprocess.Popen(
        [
            sys.executable, '-c',
            'import os, sqlite3, sys, time\n'
            'conn = sqlite3.connect(sys.argv[1], isolation_level=None)\n'
            "conn.execute('BEGIN IMMEDIATE')\n"
            "print('locked', flush=True)\n"
            'while not os.path.exists(sys.argv[2]):\n'
            '    time.sleep(0.05)\n'
            "conn.execute('ROLLBACK')\n",
            str(path), str(marker),
        ],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == 'locked'
        yield path, marker
    finally:
        marker.touch()
        holder.wait(timeout=30)


def _run(path: Path, out: Path, *extra: str) -> tuple[float, int, str, float, str]:
    """One `_exit_run` process: when its run returned, its message count and conversation id, when the process
    ended, and its stderr."""
    completed = subprocess.run(
        [sys.executable, '-m', 'tests.reliability._exit_run', str(path), str(out),
         '--store-timeout', str(STORE_TIMEOUT), *extra],
        cwd=REPO, env=_env(), capture_output=True, text=True, timeout=EXIT_BOUND,
    )  # fmt: skip
    ended = time.time()
    assert completed.returncode == 0, completed.stderr
    line = next(line for line in completed.stdout.splitlines() if line.startswith('returned '))
    _, returned_at, count, conversation = line.split()
    return float(returned_at), int(count), conversation, ended, completed.stderr


def _logged(path: Path, session: str) -> int:
    store = open_store(f'sqlite://{path}')
    try:
        return store.last_message_index(session) + 1
    finally:
        store.close()


def test_a_store_that_never_answers_lets_the_process_exit_and_a_continued_run_completes_the_log(
    locked_file: tuple[Path, Path], tmp_path: Path
) -> None:
    path, marker = locked_file
    out = tmp_path / 'run1.json'
    returned, count, session, ended, stderr = _run(path, out)
    assert count == MESSAGES
    waited = ended - returned
    assert STORE_TIMEOUT * 0.9 <= waited < STORE_TIMEOUT + 30, f'waited {waited:.1f} s at exit'
    assert f'{MESSAGES} messages of session {session!r}' in stderr and NOT_WRITTEN in stderr, stderr

    marker.touch()  # the lock goes with the process that held it
    assert _logged(path, session) < MESSAGES, 'the log held the run although the store never answered it'
    returned, count, continued, _, stderr = _run(path, tmp_path / 'run2.json', '--history', str(out))
    assert continued == session and count == MESSAGES + 2  # its prompt and the answer
    assert NOT_WRITTEN not in stderr, stderr
    store = open_store(f'sqlite://{path}')
    try:
        logged, problems = log_payloads(store, session, namespace=DEFAULT_NAMESPACE)
    finally:
        store.close()
    assert problems == []
    produced = ModelMessagesTypeAdapter.validate_json((tmp_path / 'run2.json').read_bytes())
    assert logged == [one(message) for message in produced]  # the first run's messages too, byte for byte


def test_a_store_that_answers_while_the_process_exits_gets_the_whole_log(
    locked_file: tuple[Path, Path], tmp_path: Path
) -> None:
    path, marker = locked_file
    _, count, session, _, stderr = _run(path, tmp_path / 'run.json', '--release', str(marker))
    assert 'could not complete the session log' in stderr  # the run's end gave up on it...
    assert NOT_WRITTEN not in stderr, stderr  # ...and the exit got it through
    assert _logged(path, session) == count == MESSAGES
