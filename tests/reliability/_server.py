"""A private Neo4j server for the one test that stops and restarts its server.

The shared server (the `neo4j_server` fixture, bolt 7687) is never touched: this one runs from its own home (a
temporary `MEMENTOGRAPH_CACHE`) on a free bolt port, and `scripts/neo4j-server stop` only ever stops the server of
its own home. Its jars are the shared installation's (`NEO4J_LIB_DIR`), so nothing is downloaded. Bolt is the only
port it listens on (HTTP, HTTPS and routing are off in the generated config), so nothing else can collide.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import REPO

SCRIPT = REPO / 'scripts' / 'neo4j-server'


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        return int(probe.getsockname()[1])


def shared_lib_dir() -> Path:
    """The jars of the default installation (fetched there by `scripts/neo4j-server start` if missing)."""
    env = {k: v for k, v in os.environ.items() if k not in ('NEO4J_BOLT_PORT', 'NEO4J_LIB_DIR')}
    out = subprocess.run([str(SCRIPT), 'status'], capture_output=True, text=True, env=env, timeout=60).stdout
    match = re.search(r'home (\S+?)\)?$', out.strip())
    assert match, f'cannot read the Neo4j home from `neo4j-server status`: {out!r}'
    return Path(match.group(1)) / 'lib'


@dataclass
class PrivateNeo4j:
    """One private server: `start()` (in the background or not), `stop()`, `uri` once started."""

    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix='mementograph-neo4j-')))
    port: int = field(default_factory=_free_port)
    password: str = ''
    _thread: threading.Thread | None = None
    _failure: BaseException | None = None
    _lib: Path | None = None
    log: list[str] = field(default_factory=list[str])

    @property
    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            'MEMENTOGRAPH_CACHE': str(self.root),
            'NEO4J_BOLT_PORT': str(self.port),
            'NEO4J_LIB_DIR': str(self.lib_dir),
            'NEO4J_HEAP_SIZE': '384m',
            'NEO4J_PAGECACHE_SIZE': '32m',
            # C1 only: a server that lives a minute spends less CPU compiling and answers sooner after a start
            'NEO4J_JVM_OPTIONS': '-XX:TieredStopAtLevel=1',
        }

    @property
    def lib_dir(self) -> Path:
        if self._lib is None:
            self._lib = shared_lib_dir()
        return self._lib

    @property
    def uri(self) -> str:
        """Credentials in the URI: the process-wide NEO4J_* variables belong to the shared server."""
        assert self.password, 'the private server has not started'
        return f'bolt://neo4j:{self.password}@127.0.0.1:{self.port}'

    def start_in_background(self, *, warm_up: bool = True) -> None:
        """Start the server (and warm it up) on a thread; `wait_started()` joins it."""

        def work() -> None:
            try:
                self.start()
                if warm_up:
                    self.warm_up()
            except BaseException as exc:
                self._failure = exc

        self._failure = None
        self._thread = threading.Thread(target=work, name='private-neo4j-start', daemon=True)
        self._thread.start()

    def wait_started(self, timeout: float = 600) -> None:
        if self._thread is not None:
            self._thread.join(timeout)
            assert not self._thread.is_alive(), 'the private Neo4j server is still starting'
            self._thread = None
        if self._failure is not None:
            raise self._failure

    def start(self) -> None:
        """Start it and wait until bolt answers."""
        done = subprocess.run([str(SCRIPT), 'start'], env=self.env, capture_output=True, text=True, timeout=600)
        self.log.append(done.stderr)
        if done.returncode != 0:
            raise RuntimeError(
                f'the private Neo4j server did not start (exit {done.returncode}):\n{done.stderr[-3000:]}'
            )
        match = re.search(r'NEO4J_PASSWORD=(\S+)', done.stdout)
        assert match, done.stdout
        self.password = match.group(1)

    def warm_up(self) -> None:
        """One short agent session in a namespace of its own, in a child process: a fresh server compiles its
        first queries slowly, which is start-up cost, not what the test measures."""
        with tempfile.TemporaryDirectory() as workdir:
            done = subprocess.run(
                [
                    sys.executable, '-m', 'tests.reliability._session', self.uri, 'warm-up', workdir,
                    '--namespace', 'reliability-warm-up', '--tasks', '1', '--steps', '3',
                ],
                cwd=REPO, capture_output=True, text=True, timeout=300, env={**os.environ, 'PYTHONPATH': str(REPO)},
            )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f'warming up the private Neo4j server failed:\n{done.stderr[-3000:]}')

    def pid(self) -> int:
        """The server's process id (from the pid file `scripts/neo4j-server` keeps)."""
        (pid_file,) = self.root.glob('neo4j-*/run/neo4j.pid')
        return int(pid_file.read_text().strip())

    def stop(self) -> None:
        done = subprocess.run([str(SCRIPT), 'stop'], env=self.env, capture_output=True, text=True, timeout=180)
        self.log.append(done.stderr)
        if done.returncode != 0:
            raise RuntimeError(f'the private Neo4j server did not stop:\n{done.stderr[-3000:]}')

    def running(self) -> bool:
        done = subprocess.run([str(SCRIPT), 'status'], env=self.env, capture_output=True, text=True, timeout=60)
        return done.returncode == 0

    def destroy(self) -> None:
        """Stop it (after a start still under way) and delete its home."""
        if self._thread is not None:
            self._thread.join(600)
            self._thread = None
        try:
            self.stop()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
