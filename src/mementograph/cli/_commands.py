"""The subcommands: each one's name, the module that registers it and its one-line help.

The table lives apart from the commands' modules so that `mementograph --help` (and a mistyped command) lists every
command without importing any of them: `demo`, `replay` and `eval` load pydantic-ai's agents, most of a second.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any, Final

__all__ = ('COMMANDS', 'Command', 'add_command')


@dataclass(frozen=True)
class Command:
    """One subcommand of `mementograph`."""

    name: str
    module: str
    """The `cli` module whose `register` adds it (relative, e.g. `._store_commands`)."""
    help: str
    """Its line in `mementograph --help`."""


COMMANDS: Final = (
    Command(
        'demo',
        '._demo',
        'run an agent session with memento compaction (offline, embedded store), then recover, recall, plot',
    ),
    Command('stats', '._store_commands', 'what the store holds: sessions, blocks, mementos, tokens saved'),
    Command(
        'recover',
        '._store_commands',
        'print an evicted block (or every block under a memento), byte-exact and hash-checked',
    ),
    Command(
        'transcript',
        '._store_commands',
        'rebuild a whole session, in order, from its log (compactions marked where they happened; --json gives the '
        'messages alone, as pydantic-ai JSON that replay takes, and export --events the log with its compactions)',
    ),
    Command('export', '._store_commands', 'write evicted blocks (and mementos, entities, pages) as JSON lines'),
    Command('replay', '._replay_cmd', 'replay recorded transcripts with and without memento compaction and measure it'),
    Command('query', '._query', 'run a read-only Cypher query over session memory'),
    Command(
        'recall',
        '._recall_cmd',
        'find archived blocks by entities and words (graph + BM25, fused), optionally by meaning',
    ),
    Command(
        'embed',
        '._recall_cmd',
        'embed the archived blocks once and store their vectors, so recall by meaning is ready in later runs',
    ),
    Command('pages', '._recall_cmd', "a session's paged index, or one page's blocks (--page)"),
    Command(
        'reindex',
        '._reindex_cmd',
        'find the entities of archived blocks and mementos again with the current extractor (after an upgrade, or '
        'to use the LLM extractor)',
    ),
    Command('eval', '._eval_cmd', 'retrieval benchmarks: LoCoMo, LongMemEval (every method, one run)'),
    Command(
        'mcp',
        '._mcp_cmd',
        'serve memory to MCP clients (Claude Desktop, IDEs): stdio, or HTTP on 127.0.0.1 with --http',
    ),
    Command(
        'plot', '._plot_cmd', 'save the sawtooth (context tokens per request) of a stored session as PNG, SVG or PDF'
    ),
    Command(
        'verify',
        '._verify_cmd',
        'check the store file, every archived block against its sha256, every memento, NEXT chain and page; exit 4 '
        'if any fails',
    ),
    Command('forget', '._verify_cmd', 'delete a session from the store for good (asks first)'),
)
"""Every subcommand, in the order `--help` lists them."""

_HELP: Final = {command.name: command.help for command in COMMANDS}


def add_command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], name: str, **settings: Any
) -> argparse.ArgumentParser:
    """Add the subcommand `name` with its help line from `COMMANDS` (a name missing there is a `KeyError`)."""
    return commands.add_parser(name, help=_HELP[name], **settings)
