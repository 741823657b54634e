"""`mementograph demo` -- the main job, offline, on the embedded default."""

from __future__ import annotations

import argparse

from ._common import CliError, add_store_options

__all__ = ('register',)


def _demo(args: argparse.Namespace) -> int:
    raise CliError('the demo arrives with the MementoCompaction capability')


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `demo`."""
    demo = commands.add_parser('demo', help='run a scripted agent session with memento compaction (offline)')
    add_store_options(demo)
    demo.set_defaults(func=_demo)
