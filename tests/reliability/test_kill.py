"""SIGKILL at random moments of a real agent session, then a restart that continues the session from the store.

The child (`python -m tests.reliability._session`) runs two tasks through a real `Agent` with `MementoCompaction`
on a real store and journals every original message it sees. For each seed the parent kills it with SIGKILL right
after a randomly chosen model request plus a random delay (anywhere in the hooks, the tools, the log writer or an
eviction's transaction), then continues the session in a fresh agent that knows only the store. The seeds are new
every run and printed with any failure (`MEMENTOGRAPH_KILL_SEEDS` replays them).

Checked: right after the kill the log is a prefix of what the child saw, every archived block recovers to it and
the store verifies; after the restart the session ends with its answer, every original message is live or
recoverable byte for byte, nothing is archived twice, and the store verifies.
"""

from __future__ import annotations

import base64
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from mementograph.knowledge_graph.store import GraphStore, open_store
from tests.conftest import REPO, neo4j_uri_with_auth
from tests.reliability._checks import log_payloads, session_problems, verify_problems
from tests.reliability._session import final_text, run_session

TASKS, STEPS = 2, 5
REQUESTS = TASKS * (2 * STEPS + 1)


def kill_seeds(count: int) -> list[int]:
    """Fresh seeds each run, so the kills fall at new moments every time; `MEMENTOGRAPH_KILL_SEEDS=11,23` replays
    the moments a failure printed."""
    given = os.environ.get('MEMENTOGRAPH_KILL_SEEDS')
    if given:
        return [int(seed) for seed in given.split(',')][:count]
    return [random.SystemRandom().randrange(1, 1_000_000) for _ in range(count)]


@dataclass
class Victim:
    """One child process and where it will be killed."""

    seed: int
    uri: str
    namespace: str
    workdir: Path
    kill_after_request: int = 0
    delay: float = 0.0
    proc: subprocess.Popen[str] | None = None
    killed: bool = False
    output: list[str] = field(default_factory=list[str])

    def __post_init__(self) -> None:
        rng = random.Random(self.seed)
        self.kill_after_request = rng.randint(1, REQUESTS - 1)
        self.delay = rng.uniform(0.0, 0.03)

    @property
    def session(self) -> str:
        return f'kill-{self.seed}'

    def spawn(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [
                sys.executable, '-m', 'tests.reliability._session', self.uri, self.session, str(self.workdir),
                '--namespace', self.namespace, '--tasks', str(TASKS), '--steps', str(STEPS),
            ],
            cwd=REPO, stdout=subprocess.PIPE, text=True, env={**os.environ, 'PYTHONPATH': str(REPO)},
        )  # fmt: skip

    def kill_when_due(self) -> None:
        """Read the child's progress; SIGKILL it `delay` seconds after it announced the chosen request."""
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            self.output.append(line.strip())
            if line.strip() == f'request {self.kill_after_request}':
                time.sleep(self.delay)
                self.proc.send_signal(signal.SIGKILL)
                self.killed = True
                break
        self.proc.wait(60)

    def journal(self) -> list[bytes]:
        """What the killed child saw, in order (a line cut short by the kill is ignored)."""
        assert self.proc is not None
        path = self.workdir / f'journal-{self.proc.pid}.jsonl'
        seen: list[bytes] = []
        for line in path.read_text().splitlines() if path.exists() else []:
            try:
                index, data = json.loads(line)
            except ValueError:
                break
            if index < len(seen):  # a resumed request re-created in its place (never in a killed child)
                seen[index] = base64.b64decode(data)
            else:
                assert index == len(seen)
                seen.append(base64.b64decode(data))
        return seen


async def _check_kill_and_restart(victim: Victim, store: GraphStore) -> int:
    """The checks after a kill and after the restart; returns how many seen messages the log did not hold."""
    assert victim.killed, f'the child finished before request {victim.kill_after_request}: {victim.output[-3:]}'
    assert victim.proc is not None and victim.proc.returncode == -signal.SIGKILL
    ns, session = victim.namespace, victim.session

    # right after the kill: the durable log is a prefix of what happened, and the archive holds to it
    seen = victim.journal()
    log, log_problems = log_payloads(store, session, namespace=ns)
    assert log_problems == []
    assert log == seen[: len(log)], 'the log is not a prefix of the messages the child saw'
    assert session_problems(store, session, namespace=ns, originals=log, live=None) == []
    assert verify_problems(store, namespace=ns, session_id=session) == []

    # a fresh agent that knows only the store continues the session
    live, recorder = await run_session(store, session, ns, tasks=TASKS, steps=STEPS)
    assert live[-1].parts[0].content == final_text(TASKS)  # type: ignore[union-attr]
    restamped = recorder.restamped
    assert all(recorder.originals[i] == log[i] for i in range(len(log)) if i not in restamped)
    assert session_problems(
        store, session, namespace=ns, originals=recorder.originals, live=live, restamped=restamped
    ) == []  # fmt: skip
    assert verify_problems(store, namespace=ns, session_id=session) == []
    assert store.list_blocks(namespace=ns, session_id=session), 'the session never compacted'
    return len(seen) - len(log)


def _run_victims(victims: list[Victim]) -> None:
    """Start every child at once (their start-up is most of the time), kill each at its moment."""
    for victim in victims:
        victim.spawn()
    threads = [threading.Thread(target=victim.kill_when_due, daemon=True) for victim in victims]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)


@pytest.fixture
def cleanup() -> Iterator[list[Victim]]:
    victims: list[Victim] = []
    yield victims
    for victim in victims:
        if victim.proc is not None and victim.proc.poll() is None:
            victim.proc.kill()
            victim.proc.wait()


async def _check_victims(victims: list[Victim]) -> dict[int, tuple[int, int]]:
    """Each victim's checks; (seed: kill request, unlogged messages). A failure names the seeds to replay."""
    outcome: dict[int, tuple[int, int]] = {}
    for victim in victims:
        store = open_store(victim.uri)
        try:
            outcome[victim.seed] = (victim.kill_after_request, await _check_kill_and_restart(victim, store))
        except AssertionError as exc:
            seeds = ','.join(str(v.seed) for v in victims)
            raise AssertionError(f'seed {victim.seed} (replay: MEMENTOGRAPH_KILL_SEEDS={seeds}): {exc}') from exc
        finally:
            store.close()
    return outcome


async def test_sigkill_at_random_moments_sqlite(tmp_path: Path, cleanup: list[Victim]) -> None:
    victims = [
        Victim(seed, f'sqlite://{tmp_path / f"m{seed}.db"}', 'default', tmp_path / f'w{seed}') for seed in kill_seeds(4)
    ]
    cleanup += victims
    _run_victims(victims)
    print(f'sqlite kills (seed: request, unlogged messages): {await _check_victims(victims)}')


@pytest.mark.neo4j
async def test_sigkill_at_random_moments_neo4j(
    tmp_path: Path, neo4j_server: dict[str, str], unique_namespace: str, cleanup: list[Victim]
) -> None:
    uri = neo4j_uri_with_auth(neo4j_server)
    victims = [Victim(seed, uri, unique_namespace, tmp_path / f'w{seed}') for seed in kill_seeds(3)]
    cleanup += victims
    _run_victims(victims)
    print(f'neo4j kills (seed: request, unlogged messages): {await _check_victims(victims)}')
