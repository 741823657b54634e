"""`_progress` -- progress bars for long commands, on stderr, only when a person is watching.

A bar is drawn only when stderr is a terminal and the command does not print `--json`, so logs, pipes, tests and
CI see nothing extra (and stdout stays exactly the command's output). rich is imported only when a bar is drawn.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ('Advance', 'progress_bar', 'stderr_console', 'wants_progress')

Advance = Callable[..., None]
"""`advance(step=1, description=None)`: move the bar on (and optionally relabel it)."""


def stderr_console() -> Any:
    """A rich console on stderr."""
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def wants_progress(json_output: bool = False) -> bool:
    """Whether to draw progress: stderr is a terminal and the output is not JSON."""
    return not json_output and sys.stderr.isatty()


def _noop(step: int = 1, description: str | None = None) -> None:
    return None


@contextmanager
def progress_bar(description: str, total: int | None, *, enabled: bool) -> Iterator[Advance]:
    """A bar of `total` steps (a spinner when `total` is None) on stderr; yields `advance`. Disabled: a no-op."""
    if not enabled:
        yield _noop
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    columns: list[Any] = [SpinnerColumn(), TextColumn('{task.description}')]
    if total is not None:
        columns += [BarColumn(), MofNCompleteColumn()]
    columns.append(TimeElapsedColumn())
    with Progress(*columns, console=stderr_console(), transient=True) as progress:
        task = progress.add_task(description, total=total)

        def advance(step: int = 1, description: str | None = None) -> None:
            if description is None:
                progress.advance(task, step)
            else:
                progress.update(task, advance=step, description=description)

        yield advance
