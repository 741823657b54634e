"""`_interrupt` -- Ctrl-C for the command line: noted always, and an agent run is cancelled, not interrupted.

Python raises `KeyboardInterrupt` wherever the main thread is when SIGINT arrives. Inside an agent run that point
can be anywhere, and several are fatal for an exit: raised inside the run's task, it ends the task while the event
loop is stopped, so anyio's worker threads (not daemons; pydantic-ai runs sync tools and sync model functions in
them) never get the stop their task's end schedules, and the interpreter waits for them at exit for ever; raised in
a Python callback of a Rust or C extension, it comes back as another exception (pydantic-core building a schema
while the demo's modules load returns it as `SchemaError`: a traceback and exit 1), which the run's "never crash
the run" handlers (`except Exception`) would take for a failure to work around.

So while a command runs, the first Ctrl-C of an agent run cancels the run's task (at an `await`, as `asyncio.run`
does): its cleanup runs (the session log is flushed, nothing half-applied stays in the context) and the command
exits 130. Outside a run, or at a second Ctrl-C, `KeyboardInterrupt` is raised as usual; `asyncio.run` then still
runs what the task's end scheduled (the workers' stop) before it closes its loop. Every interrupt is counted, so
one that an extension turned into another error, or that something swallowed, still ends the command with exit 130.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import asyncio

__all__ = ('catch_interrupts', 'forget_unhandled_interrupt', 'interrupted', 'run_cancellable')

T = TypeVar('T')


@dataclass
class _Interrupts:
    received: int = 0
    """Interrupts since `catch_interrupts` began."""
    run: asyncio.Task[Any] | None = None
    """The task of the agent run under way (`run_cancellable`), which the first interrupt cancels."""


_STATE = _Interrupts()


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    _STATE.received += 1
    run = _STATE.run
    if _STATE.received == 1 and run is not None and not run.done():
        run.cancel()
        run.get_loop().call_soon_threadsafe(lambda: None)  # wake the loop if it is waiting in select()
        return
    raise KeyboardInterrupt


@contextmanager
def catch_interrupts() -> Iterator[None]:
    """Count interrupts and cancel the run under way at the first, for the duration of the block.

    Only where Python's own handler is in place, in the main thread: a SIGINT ignored by the parent (a background
    job) stays ignored, and a program that calls `main` with a handler of its own keeps it.
    """
    _STATE.received = 0
    in_main = threading.current_thread() is threading.main_thread()
    if not in_main or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    signal.signal(signal.SIGINT, _on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def interrupted() -> bool:
    """Whether an interrupt arrived since `catch_interrupts` began."""
    return _STATE.received > 0


def run_cancellable(work: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(work)`, which the first interrupt cancels; then `KeyboardInterrupt` once its cleanup is done,
    also if `work` finished anyway (an interrupt is never lost to a run that swallowed its cancellation)."""
    import asyncio  # not with this module: `main` imports it, and most commands run no event loop

    if interrupted():  # one arrived before (and was swallowed): do not start
        work.close()
        raise KeyboardInterrupt

    async def cancellable() -> T:
        _STATE.run = asyncio.current_task()
        try:
            return await work
        finally:
            _STATE.run = None

    try:
        result = asyncio.run(cancellable())
    except asyncio.CancelledError:
        if interrupted():
            raise KeyboardInterrupt from None
        raise
    if interrupted():
        raise KeyboardInterrupt
    return result


def forget_unhandled_interrupt() -> None:
    """Let the process exit with the code the command returns (130) after an interrupt it handled.

    CPython marks a `KeyboardInterrupt` that leaves code run by `exec()` of a string as unhandled, caught later or
    not, and a module run with `python -m` then ends by SIGINT instead of with its exit code; `dataclasses` and
    `namedtuple` make their methods so, hence an interrupt while a command's modules load. The next `exec()` of a
    string clears the mark.
    """
    exec('')  # the call itself is what clears the mark
