"""`stats`, `recover`, `export`: read what the store holds."""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..knowledge_graph.store import ChainIntegrityError, GraphStore, RecoveredBlock, recover_chain
from ._commands import add_command
from ._common import CliError, add_store_options, check_output_path, emit, non_empty, require_session, store_from

__all__ = ('register',)


RECENT_SESSIONS = 5
"""Sessions `stats` lists (the newest): where a user finds the id that `transcript`, `pages` and `forget` take."""
_NAMESPACES_SHOWN = 8
"""Namespaces `stats` names for an empty one (those with the most sessions): a team's server may hold hundreds."""


def _stats(args: argparse.Namespace) -> int:
    with store_from(args) as store:
        require_session(store, args.namespace, args.session)
        stats = store.stats(namespace=args.namespace, session_id=args.session)
        uri = store.uri
        recent = [] if args.session else store.list_sessions(namespace=args.namespace)[-RECENT_SESSIONS:]
        sessions = [
            {'id': s.id, 'created_at': s.created_at, 'blocks': store.count_blocks(namespace=args.namespace, session_id=s.id)}
            for s in reversed(recent)
        ]  # fmt: skip
        # an empty namespace beside full ones: `replay` and `eval` write to namespaces of their own
        elsewhere = Counter(s.namespace for s in store.list_sessions(namespace=None)) if not stats.sessions else {}
    data = {'store': uri, 'namespace': args.namespace, **asdict(stats), 'tokens_saved': stats.tokens_saved}
    data.pop('details')
    lines = [
        f'{"store":<20}{uri}',
        f'{"namespace":<20}{args.namespace}' + (f'  session {args.session}' if args.session else ''),
    ]
    lines += [f'{key:<20}{value}' for key, value in data.items() if key not in ('store', 'namespace')]
    if sessions:
        lines.append(f'newest sessions ({len(sessions)} of {stats.sessions}):')
        lines += [f'  {s["id"]}  started {str(s["created_at"])[:19]}  {s["blocks"]} blocks' for s in sessions]
        data['newest_sessions'] = sessions
    if elsewhere:
        data['other_namespaces'] = dict(sorted(elsewhere.items()))
        largest = sorted(elsewhere.items(), key=lambda item: (-item[1], item[0]))[:_NAMESPACES_SHOWN]
        more = len(elsewhere) - len(largest)
        lines.append(
            f'namespace {args.namespace!r} holds nothing; sessions are in '
            + ', '.join(f'{name!r} ({count})' for name, count in largest)
            + (f' and {more} more namespaces (--json lists them all)' if more else '')
            + ': read one with --namespace NAME'
        )
    emit(args, data, '\n'.join(lines))
    return 0


def _block_data(recovered: RecoveredBlock) -> dict[str, Any]:
    record = recovered.record
    return {
        'block_id': record.id,
        'session_id': record.session_id,
        'seq': record.seq,
        'sha256': record.sha256,
        'verified_sha256': True,
        'messages': json.loads(record.messages_json),
    }


def _block_text(recovered: RecoveredBlock) -> str:
    from ..knowledge_graph.memory import render_block  # pydantic-ai: loaded by the commands that show messages

    record = recovered.record
    header = f'block {record.id}  session {record.session_id}  messages {record.first_message}-{record.last_message}'
    header += f'  started {record.started_at[:16]}' if record.started_at else ''
    return header + f'  sha256 {record.sha256} (verified)\n\n' + render_block(recovered.messages)


def _recover(args: argparse.Namespace) -> int:
    # A memento id (what `recall` shows) recovers every block under it, as the agent's tool does.
    damaged: ChainIntegrityError | None = None
    with store_from(args) as store:
        try:
            blocks = recover_chain(store, args.block_id, namespace=args.namespace, session_id=args.session)
        except ChainIntegrityError as exc:  # the blocks that passed are printed, then the check's failure (exit 4)
            blocks, damaged = list(exc.recovered), exc
    if args.raw:  # one line of archived bytes per block, in session order
        sys.stdout.buffer.write(b''.join(block.record.messages_json + b'\n' for block in blocks))
    elif not args.block_id.startswith('mem_'):
        emit(args, _block_data(blocks[0]), _block_text(blocks[0]))
    else:
        data: dict[str, Any] = {'memento_id': args.block_id, 'blocks': [_block_data(block) for block in blocks]}
        failed = damaged.damaged if damaged is not None else ()
        total = len(blocks) + len(failed)
        text = f'memento {args.block_id} summarizes {total} block{"s" * (total != 1)}'
        if failed:
            data['failed_sha256_check'] = list(failed)
            text += f'; {len(failed)} failed the sha256 check and {"is" if len(failed) == 1 else "are"} not shown: '
            text += ', '.join(failed)
        emit(args, data, text + '\n\n' + '\n\n'.join(_block_text(block) for block in blocks))
    if damaged is not None:  # named in the output above, so under `--json` no second document follows it
        print(f'mementograph: check failed: {damaged}', file=sys.stderr)
        return 4
    return 0


def export_records(store: GraphStore, namespace: str, session_id: str | None) -> list[dict[str, Any]]:
    """One JSON-ready object per evicted block: its id, session, seq, sha256 and messages, with its memento, entity
    mentions and page (`export --jsonl`)."""
    page_of = {
        block_id: page.id
        for page in store.list_pages(namespace=namespace, session_id=session_id)
        for block_id in page.block_ids
    }
    records = []
    for block in store.list_blocks(namespace=namespace, session_id=session_id):
        memento = store.memento_of(block.id, namespace=namespace)
        records.append(
            {
                'block_id': block.id,
                'session_id': block.session_id,
                'seq': block.seq,
                'sha256': block.sha256,
                # no decoding (pydantic-ai stays unloaded): the bytes against their hash, as `recover` checks them
                'verified_sha256': hashlib.sha256(block.messages_json).hexdigest() == block.sha256,
                'messages': json.loads(block.messages_json),
                'memento': None
                if memento is None
                else {'id': memento.id, 'text': memento.text, 'score': memento.score, 'verified': memento.verified},
                'entities': [
                    {'key': entity.key, 'name': entity.name, 'kind': entity.kind, 'count': count}
                    for entity, count in store.entities_of(block.id, namespace=namespace)
                ],
                'page_id': page_of.get(block.id),
            }
        )
    return records


def event_records(store: GraphStore, namespace: str, session_id: str | None) -> list[dict[str, Any]]:
    """The session log(s) as JSON-ready objects, in order: messages exactly, compactions with their blocks."""
    sessions = [session_id] if session_id else [s.id for s in store.list_sessions(namespace=namespace)]
    records: list[dict[str, Any]] = []
    for sid in sessions:
        for event in store.read_events(sid, namespace=namespace):
            record: dict[str, Any] = {'session_id': sid, 'seq': event.seq, 'kind': event.kind}
            if event.kind == 'message':
                record |= {
                    'message_index': event.message_index,
                    'sha256': event.sha256,
                    'message': json.loads(event.payload)[0],
                }
            else:
                record |= {'block_ids': list(event.block_ids), 'report': json.loads(event.payload)}
            records.append(record)
    return records


def _json_line(record: dict[str, Any]) -> str:
    """One JSONL line, non-ASCII text as is; a record holding a lone surrogate (archived from text decoded with
    `surrogateescape`) has no UTF-8 form, so its line escapes it (`\\udcff`) and stays exact."""
    line = json.dumps(record, ensure_ascii=False)
    try:
        line.encode('utf-8')
    except UnicodeEncodeError:
        line = json.dumps(record)
    return line + '\n'


def _export(args: argparse.Namespace) -> int:
    if args.output not in (None, '-'):
        check_output_path(args, Path(args.output), '--output')
    with store_from(args) as store:  # JSON lines, the one format (`--jsonl` says so explicitly)
        require_session(store, args.namespace, args.session)
        if args.events:
            records = event_records(store, args.namespace, args.session)
        else:
            records = export_records(store, args.namespace, args.session)
    lines = ''.join(_json_line(record) for record in records)
    if args.output in (None, '-'):
        sys.stdout.write(lines)
    else:
        try:
            Path(args.output).write_text(lines, encoding='utf-8')
        except OSError as exc:
            raise CliError(f'cannot write {args.output}: {exc.strerror or exc}', code=2) from exc
        print(f'wrote {len(records)} records to {args.output}', file=sys.stderr)
    altered = [record['block_id'] for record in records if record.get('verified_sha256') is False]
    if altered:  # written as they are, marked: an export is also how one looks at a damaged archive
        print(
            f'mementograph export: {len(altered)} block(s) fail their sha256 check (written with verified_sha256 '
            f'false): {", ".join(altered[:5])}{" ..." if len(altered) > 5 else ""}; see `mementograph verify`',
            file=sys.stderr,
        )
        return 4
    return 0


def _transcript(args: argparse.Namespace) -> int:
    from .._messages import deserialize_messages
    from ..knowledge_graph.memory import render_block

    with store_from(args) as store:
        events = store.read_events(args.session, namespace=args.namespace)
    if not events:
        raise CliError(
            f'no session {args.session!r} in namespace {args.namespace!r} (see `mementograph stats`)', code=3
        )
    messages = [
        message for event in events if event.kind == 'message' for message in deserialize_messages(event.payload)
    ]
    if args.json:
        data = [json.loads(event.payload)[0] for event in events if event.kind == 'message']
        emit(args, data, '')
        return 0
    lines: list[str] = []
    position = 0
    first_logged: dict[str, int | None] = {}
    repeating = False
    for event in events:
        if event.kind == 'message':
            earlier = first_logged.setdefault(event.sha256, event.message_index) if event.sha256 else None
            if earlier != event.message_index and not repeating:  # the same bytes again: a history sent anew
                lines.append(
                    f'=== a branch: message {earlier} and those after it are logged again from here (a retried '
                    'turn, or a conversation continued from an earlier point) ==='
                )
            repeating = earlier != event.message_index
            lines.append(f'--- message {event.message_index} ---')
            lines.append(render_block([messages[position]]))
            position += 1
        else:
            lines.append(_compaction_line(event.kind, event.block_ids, json.loads(event.payload)))
    sys.stdout.write('\n'.join(lines) + '\n')
    return 0


def _compaction_line(kind: str, block_ids: Sequence[str], report: dict[str, Any]) -> str:
    """A compaction event as one line: what it archived and the context before and after, or, for mementos
    merged into one (which archives nothing new), which mementos went into which; blocks archived at a run's end
    (which stay in the context), which."""
    if kind == 'archive':
        return f"=== archived at the run's end, kept in the context: {', '.join(block_ids) or '-'} ==="
    if 'into' in report:
        merged = report.get('merged', [])
        return (
            f'=== {kind} compaction: {len(merged)} mementos merged into {report["into"]} '
            f'(context {report.get("tokens_after", "?")} tokens after) ==='
        )
    return (
        f'=== {kind} compaction: {", ".join(block_ids) or "-"} '
        f'({report.get("tokens_before", "?")} -> {report.get("tokens_after", "?")} tokens) ==='
    )


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the store commands."""
    stats = add_command(commands, 'stats')
    add_store_options(stats)
    stats.add_argument('--session', type=non_empty, help='only this session')
    stats.set_defaults(func=_stats)

    recover = add_command(commands, 'recover')
    recover.add_argument('block_id', help='a block id (blk_...) or a memento id (mem_...), as `recall` shows them')
    add_store_options(recover)
    recover.add_argument('--session', type=non_empty, help='only look in this session')
    recover.add_argument(
        '--raw',
        action='store_true',
        help='print the archived pydantic-ai JSON bytes exactly, one line per block (each followed by a newline)',
    )
    recover.set_defaults(func=_recover)

    transcript = add_command(commands, 'transcript')
    add_store_options(transcript)
    transcript.add_argument(
        '--session', type=non_empty, required=True, help='the session id (see `mementograph stats`/`export`)'
    )
    transcript.set_defaults(func=_transcript)

    export = add_command(commands, 'export')
    add_store_options(export, json_flag=False)
    export.add_argument('--jsonl', action='store_true', help='one JSON object per evicted block (the default format)')
    export.add_argument('--session', type=non_empty, help='only this session')
    export.add_argument('--events', action='store_true', help='write the session event log instead of the blocks')
    export.add_argument('-o', '--output', help='file to write (default: stdout)')
    export.set_defaults(func=_export)
