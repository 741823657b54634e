"""`reindex`: link archived blocks and mementos to the entities the extractor finds in them now."""

from __future__ import annotations

import argparse
import warnings
from dataclasses import asdict

from ..knowledge_graph.entities import ENTITY_MODEL_ENV, default_mention_extractor, reindex_entities
from ..knowledge_graph.store import NotFoundError
from ._commands import add_command
from ._common import CliError, add_store_options, check_entity_model_setting, emit, non_empty, store_from
from ._interrupt import run_cancellable
from ._progress import progress_bar, wants_progress

__all__ = ('register',)


def _reindex(args: argparse.Namespace) -> int:
    check_entity_model_setting()
    extractor = default_mention_extractor()
    with store_from(args) as store:
        uri = store.uri
        total = store.count_blocks(namespace=args.namespace, session_id=args.session, kind=None)
        with progress_bar('reindexing entities', total, enabled=wants_progress(args.json)) as advance:
            try:
                with warnings.catch_warnings():  # a block failing its sha256 is named in the report below, once
                    warnings.simplefilter('ignore', UserWarning)
                    report = run_cancellable(
                        reindex_entities(
                            store,
                            namespace=args.namespace,
                            session_id=args.session,
                            extractor=extractor,
                            progress=advance,
                        )
                    )
            except NotFoundError as exc:
                raise CliError(f'{exc} of {uri} (see `mementograph stats`)', code=3) from exc
    data = {'store': uri, 'namespace': args.namespace, 'session_id': args.session, **asdict(report)}
    data['skipped'] = list(report.skipped)
    text = (
        f'reindexed {report.blocks} blocks and {report.mementos} mementos of {report.sessions} '
        f'session{"s" * (report.sessions != 1)} in {uri} '
        f'(namespace {args.namespace!r}) in {report.seconds:.1f} s: {report.mentions} MENTIONS edges, '
        f'entities {report.entities_before} -> {report.entities_after}'
    )
    if report.skipped:
        text += f'\n{len(report.skipped)} block(s) fail their sha256 check and keep their edges: ' + ', '.join(
            report.skipped
        )
        text += '\n(see `mementograph verify`)'
    emit(args, data, text)
    return 0


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `reindex`."""
    parser = add_command(
        commands,
        'reindex',
        description='Extract the entities of archived blocks and mementos again and replace their MENTIONS edges, '
        'a batch of blocks per transaction (run again to finish an interrupted run). Blocks, mementos, pages and '
        f'the session log are not changed. The extractor is the deterministic one, or the LLM one that '
        f'${ENTITY_MODEL_ENV} names.',
    )
    add_store_options(parser)
    parser.add_argument('--session', type=non_empty, help='only this session (default: every session of the namespace)')
    parser.set_defaults(func=_reindex)
