"""The daemon threads that run store calls: `ThreadPoolExecutor`'s contract, threads the process does not wait
for at exit, and the two ways a cancelled caller treats a call still running."""

from __future__ import annotations

import asyncio
import threading
import time

import anyio
import pytest

from mementograph._daemon import DaemonExecutor, run_in_daemon_thread
from mementograph._threads import StoreCalls
from mementograph.knowledge_graph.store import StoreTimeoutError


def test_the_executor_runs_work_in_order_on_daemon_threads_and_passes_errors_on() -> None:
    executor = DaemonExecutor(max_workers=1, name='test-daemon')
    seen: list[int] = []
    threads: set[threading.Thread] = set()

    def work(i: int) -> int:
        threads.add(threading.current_thread())
        seen.append(i)
        return i * i

    futures = [executor.submit(work, i) for i in range(20)]
    assert [future.result(timeout=10) for future in futures] == [i * i for i in range(20)]
    assert seen == list(range(20))  # one worker: in submission order
    assert len(threads) == 1 and all(thread.daemon for thread in threads)

    def fail() -> None:
        raise KeyError('boom')

    with pytest.raises(KeyError, match='boom'):
        executor.submit(fail).result(timeout=10)
    executor.shutdown(wait=True)
    assert not any(thread.is_alive() for thread in threads)
    with pytest.raises(RuntimeError, match='after shutdown'):
        executor.submit(work, 1)


def test_the_executor_grows_to_its_bound_while_work_blocks() -> None:
    executor = DaemonExecutor(max_workers=3, name='test-daemon')
    release = threading.Event()
    running: set[str] = set()

    def block() -> None:
        running.add(threading.current_thread().name)
        release.wait(10)

    futures = [executor.submit(block) for _ in range(5)]
    deadline = time.monotonic() + 10
    while len(running) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)
    assert len(running) == 3  # no fourth thread: the other two calls wait for a free one
    release.set()
    for future in futures:
        future.result(timeout=10)
    executor.shutdown(wait=True)


async def test_a_cancelled_caller_abandons_or_waits_as_asked() -> None:
    for abandon in (True, False):
        release = threading.Event()
        finished = threading.Event()

        def slow(release: threading.Event = release, finished: threading.Event = finished) -> str:
            release.wait(10)
            finished.set()
            return 'done'

        started = time.monotonic()
        with anyio.move_on_after(0.2):
            threading.Timer(1.0, release.set).start()
            await run_in_daemon_thread(slow, abandon_on_cancel=abandon, name='test-daemon')
        waited = time.monotonic() - started
        if abandon:
            assert waited < 0.9 and not finished.is_set(), waited  # left to finish on its own
        else:
            assert waited >= 0.9 and finished.is_set(), waited  # held until the call returned
        release.set()
        assert finished.wait(10)


async def test_results_and_errors_come_back_to_the_caller() -> None:
    assert await run_in_daemon_thread(lambda: 42, abandon_on_cancel=True, name='test-daemon') == 42

    def fail() -> None:
        raise ValueError('from the thread')

    with pytest.raises(ValueError, match='from the thread'):
        await run_in_daemon_thread(fail, abandon_on_cancel=False, name='test-daemon')


@pytest.mark.parametrize('outcome', ['answers', 'fails'])
async def test_a_call_given_up_on_is_reported_as_it_ended(outcome: str, caplog: pytest.LogCaptureFixture) -> None:
    calls = StoreCalls(timeout=0.05)
    release = threading.Event()

    def slow_write() -> None:
        release.wait(5)
        if outcome == 'fails':
            raise ConnectionError('server unreachable')

    with pytest.raises(StoreTimeoutError, match=r'did not answer slow_write within 0\.05 s'):
        await calls(slow_write)
    assert calls.busy() is not None  # still out: later calls are refused at once
    release.set()
    for _ in range(100):
        if calls.busy() is None:
            break
        await asyncio.sleep(0.01)
    said = [r.getMessage() for r in caplog.records if r.name == 'mementograph']
    if outcome == 'answers':
        assert said[-1].startswith('mementograph: the store answered slow_write again after ')
    else:  # an error is not an answer: the store may still be down
        assert 'the slow_write call left to finish failed after ' in said[-1] and 'server unreachable' in said[-1]
