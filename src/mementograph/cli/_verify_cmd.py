"""`verify` and `forget`: prove the archive whole, or delete a session from it for good."""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from typing import Any, Final

from ..knowledge_graph.store import (
    GraphStore,
    StoreCorruptError,
    VerifyProblem,
    VerifyReport,
    resolve_store_uri,
    verify_store,
)
from ._commands import add_command
from ._common import CliError, add_store_options, emit, non_empty, store_from

__all__ = ('VERIFY_FAILED', 'register')

VERIFY_FAILED: Final = 4
"""Exit code when the archive does not hold (the same as `replay --check`)."""
NOT_FOUND: Final = 3

_COUNTED: Final = ('sessions', 'blocks', 'parts', 'mementos', 'pages', 'events')


def _verify_text(report: VerifyReport, uri: str, namespace: str, session_id: str | None) -> str:
    lines = [
        f'{"store":<12}{uri}',
        f'{"namespace":<12}{namespace}' + (f'  session {session_id}' if session_id else ''),
        f'{"sessions":<12}{report.sessions_checked}',
        f'{"blocks":<12}{report.blocks_checked} (sha256 checked)',
        f'{"mementos":<12}{report.mementos_checked}',
        f'{"pages":<12}{report.pages_checked}',
        f'{"problems":<12}{len(report.problems)}',
    ]
    lines += [
        f'{p.kind}  {p.subject_id}' + (f'  session {p.session_id}' if p.session_id else '') + f': {p.detail}'
        for p in report.problems
    ]
    if report.ok:
        lines.append('OK: every block matches its sha256; SUMMARIZES, NEXT chains and pages hold; no orphans')
    return '\n'.join(lines)


def _verify(args: argparse.Namespace) -> int:
    try:
        with store_from(args) as store:
            report = verify_store(
                store, namespace=args.namespace, session_id=args.session, check_storage=not args.skip_file_check
            )
            uri = store.uri
    except StoreCorruptError as exc:  # too damaged to open: the check failed, as for a damaged page found later
        uri = resolve_store_uri(args.store)
        report = VerifyReport(False, 0, 0, 0, 0, (VerifyProblem('corrupt_file', uri, '', str(exc)),))
    if report.ok and report.sessions_checked == 0:  # a misspelt session or namespace must not pass as verified
        where = f'session {args.session!r} in namespace' if args.session else 'session in namespace'
        raise CliError(f'no {where} {args.namespace!r} of {uri}: nothing to verify (see `mementograph stats`)',
                       code=NOT_FOUND)  # fmt: skip
    data = {'store': uri, 'namespace': args.namespace, 'session_id': args.session, **asdict(report)}
    emit(args, data, _verify_text(report, uri, args.namespace, args.session))
    if not report.ok:
        count = len(report.problems)
        print(f'mementograph: verify failed: {count} problem{"s" * (count != 1)} in {uri}', file=sys.stderr)
        return VERIFY_FAILED
    return 0


def _counts(store: GraphStore, namespace: str, session_id: str) -> dict[str, int]:
    stats = store.stats(namespace=namespace, session_id=session_id)
    return {name: int(getattr(stats, name)) for name in _COUNTED}


def _confirm(args: argparse.Namespace, uri: str, counts: dict[str, int]) -> None:
    """Ask on a terminal; refuse without one, since a script that forgot `--yes` must not delete by accident."""
    if args.yes:
        return
    what = ', '.join(f'{counts[name]} {name}' for name in _COUNTED[1:])
    if not sys.stdin.isatty():
        raise CliError(
            f'forget deletes session {args.session!r} ({what}) from {uri} for good; '
            'pass --yes to confirm (no terminal to ask on)',
            code=2,
        )
    answer = input(f'Delete session {args.session!r} of namespace {args.namespace!r} from {uri} ({what})? [y/N] ')
    if answer.strip().lower() not in ('y', 'yes'):
        raise CliError('not confirmed; nothing was deleted')


def _forget(args: argparse.Namespace) -> int:
    with store_from(args) as store:
        uri = store.uri
        before = _counts(store, args.namespace, args.session)
        if not any(before.values()):
            raise CliError(
                f'no session {args.session!r} in namespace {args.namespace!r} of {uri} (see `mementograph stats`)',
                code=NOT_FOUND,
            )
        _confirm(args, uri, before)
        removed = store.delete_session(args.session, namespace=args.namespace)
        # proved by query, not assumed: the store is asked again what it holds of the session
        after = _counts(store, args.namespace, args.session)
        left = any(after.values()) or any(s.id == args.session for s in store.list_sessions(namespace=args.namespace))
    if left:
        raise CliError(f'session {args.session!r} was only partly deleted from {uri}: still there {after}')
    data: dict[str, Any] = {
        'store': uri,
        'namespace': args.namespace,
        'session_id': args.session,
        'deleted': before,
        'records_removed': removed,
        'remaining': after,
    }
    what = ', '.join(f'{before[name]} {name}' for name in _COUNTED[1:])
    text = (
        f'forgot session {args.session!r} of namespace {args.namespace!r} in {uri}: {what} '
        f'({removed} records and edges in all, with entities nothing else mentions); nothing of it remains'
    )
    emit(args, data, text)
    return 0


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `verify` and `forget`."""
    verify = add_command(
        commands,
        'verify',
    )
    add_store_options(verify)
    verify.add_argument('--session', type=non_empty, help='only this session')
    verify.add_argument(
        '--skip-file-check',
        action='store_true',
        help="leave out SQLite's own check of the whole file (every page: ~3.5 min at 100k blocks, 3.9 GB)",
    )
    verify.set_defaults(func=_verify)

    forget = add_command(commands, 'forget')
    add_store_options(forget)
    forget.add_argument(
        '--session', type=non_empty, required=True, help='the session to delete (see `mementograph stats`)'
    )
    forget.add_argument('--yes', action='store_true', help='do not ask for confirmation (needed without a terminal)')
    forget.set_defaults(func=_forget)
