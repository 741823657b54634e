"""`recall` and `pages`: search the archive, browse its paged index."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from .._tokens import TokenCounter
from ..knowledge_graph import PageRecord
from ..knowledge_graph.recall import (
    DENSE_METHODS,
    METHODS,
    Method,
    PagePolicy,
    RecallHit,
    TimeFilterError,
    find_page,
    page_header,
    page_index_text,
    page_parts,
    recall,
    render_recall,
)
from ..knowledge_graph.store import GraphStore
from ._commands import add_command
from ._common import (
    CliError,
    add_embedding_option,
    add_store_options,
    add_store_vectors_option,
    check_store_vectors,
    emit,
    load_embedding,
    non_empty,
    refuse_unused_embedding,
    require_session,
    store_from,
)
from ._progress import progress_bar, wants_progress

if TYPE_CHECKING:
    from pydantic_ai.embeddings import EmbeddingModel

    from ..knowledge_graph.dense import DenseIndex

__all__ = ('register',)


def _recall(args: argparse.Namespace) -> int:
    if not args.query.strip():
        raise CliError('recall needs a query: the names or words to look for', code=2)
    if args.k < 1:
        raise CliError(f'--k must be at least 1, not {args.k}', code=2)
    check_store_vectors(args)
    method: Method = args.method or ('hybrid' if args.embedding else 'fused')
    if method in DENSE_METHODS and not args.embedding:
        raise CliError(f'--method {method} needs --embedding MODEL (or MEMENTOGRAPH_EMBEDDING_MODEL)', code=2)
    if not args.store_vectors and method not in DENSE_METHODS:
        # the model is not even loaded: the flag would do nothing, as it would without --embedding
        raise CliError(
            f'--no-store-vectors applies only to the methods that use --embedding ({", ".join(DENSE_METHODS)}): '
            f'--method {method} embeds nothing',
            code=2,
        )
    if method not in DENSE_METHODS:
        refuse_unused_embedding(args, f'--method {method}')
    model = load_embedding(args.embedding) if method in DENSE_METHODS else None
    with store_from(args) as store:
        require_session(store, args.namespace, args.session)
        # stored vectors are read, the rest embedded here (and stored, unless told not to)
        dense = None if model is None else _synced_index(args, store, model, persist=args.store_vectors)[0]
        try:
            hits = recall(
                store,
                args.query,
                args.k,
                method=method,
                namespace=args.namespace,
                session_id=args.session,
                since=args.since,
                until=args.until,
                now=datetime.now(UTC),
                dense=dense,
            )
        except TimeFilterError as exc:
            raise CliError(f'--{exc}', code=2) from exc
    data = {'query': args.query, 'method': method, 'hits': [asdict(hit) for hit in hits]}
    text = render_recall(hits, args.query, max_chars=1_000_000, label=_hit_label, since=args.since, until=args.until)
    if hits:
        text += '\n\nmementograph recover ID prints the archived blocks of any id above (byte-exact, hash-checked)'
    emit(args, data, text)
    return 0


def _hit_label(hit: RecallHit) -> str:
    return f'{hit.memento_id or hit.block_id}  session {hit.session_id} '


def _synced_index(
    args: argparse.Namespace, store: GraphStore, model: EmbeddingModel, *, persist: bool
) -> tuple[DenseIndex, int]:
    """The scope's vectors: those stored read, the others embedded with a progress bar; and how many were made."""
    from ..knowledge_graph.dense import DenseIndex  # pydantic-ai's embeddings: only when a model is given

    made = 0
    with progress_bar('embedding archived blocks', None, enabled=wants_progress(args.json)) as advance:

        def embedded(count: int) -> None:
            nonlocal made
            made += count
            advance(count, f'embedding archived blocks: {made} done')

        dense = DenseIndex(model, persist=persist, progress=embedded)
        dense.sync(store, namespace=args.namespace, session_id=args.session)
    return dense, made


def _embed(args: argparse.Namespace) -> int:
    model = load_embedding(args.embedding)
    if model is None:
        raise CliError('embed needs --embedding MODEL (or MEMENTOGRAPH_EMBEDDING_MODEL)', code=2)
    with store_from(args) as store:
        require_session(store, args.namespace, args.session)
        dense, made = _synced_index(args, store, model, persist=True)
        blocks = store.count_blocks(namespace=args.namespace, session_id=args.session)
    where = f'namespace {args.namespace!r}' + (f', session {args.session!r}' if args.session else '')
    stored = len(dense) - made
    data = {
        'model': dense.model_key,
        'namespace': args.namespace,
        'session_id': args.session,
        'blocks': blocks,
        'embedded': made,
        'already_stored': stored,
    }
    text = (
        f'{made} blocks embedded and stored, {stored} read as stored: {len(dense)} of the {blocks} '
        f'archived blocks of {where} have a vector of {dense.model_key}'
    )
    emit(args, data, text)
    return 0


def _latest_session(store: GraphStore, namespace: str) -> str:
    sessions = store.list_sessions(namespace=namespace)
    if not sessions:
        raise CliError(f'no session in namespace {namespace!r} (see `mementograph stats`)', code=3)
    return sessions[-1].id


def _pages(args: argparse.Namespace) -> int:
    if args.part is not None and args.page is None:
        raise CliError('--part picks a part of one page: give --page too', code=2)
    args.part = 1 if args.part is None else args.part
    if args.part < 1 or args.max_tokens < 20:
        raise CliError(f'--part must be at least 1 and --max-tokens at least 20, not {args.part} / {args.max_tokens}',
                       code=2)  # fmt: skip
    with store_from(args) as store:
        require_session(store, args.namespace, args.session)
        session = args.session or _latest_session(store, args.namespace)
        pages = store.list_pages(namespace=args.namespace, session_id=session)
        if args.page is not None:
            _print_page(args, store, pages, session)
            return 0
        index = page_index_text(store, session_id=session, namespace=args.namespace, policy=PagePolicy())
    data = {
        'session_id': session,
        'index': index,
        'pages': [
            {
                'id': page.id,
                'number': page.number,
                'first_turn': page.first_turn,
                'last_turn': page.last_turn,
                'closed': bool(page.summary),
                'summary': page.summary,
                'topics': list(page.topics),
                'block_ids': list(page.block_ids),
            }
            for page in pages
        ],
    }
    open_pages = [page for page in pages if not page.summary]
    text = f'session {session}\n' + (index or 'no closed page yet')
    if open_pages:
        page = open_pages[-1]
        text += f'\n(open) page {page.number} {page.id}: turns {page.first_turn}-{page.last_turn}, {len(page.block_ids)} blocks'
    emit(args, data, text)
    return 0


def _print_page(args: argparse.Namespace, store: GraphStore, pages: list[PageRecord], session: str) -> None:
    """One part of one page, or a one-line error (exit 3) for a page or part that is not there."""
    record = find_page(pages, args.page)
    if record is None:
        raise CliError(f'no page {args.page!r} in session {session!r} ({len(pages)} pages; see `mementograph pages`)',
                       code=3)  # fmt: skip
    parts = page_parts(store, record, namespace=args.namespace, max_tokens=args.max_tokens, counter=TokenCounter())
    if args.part > len(parts):
        raise CliError(f'page {record.id} has {len(parts)} part{"s" * (len(parts) != 1)}, not {args.part}', code=3)
    hint = f'; next: --part {args.part + 1}' if args.part < len(parts) else ''
    text = page_header(record, args.part, len(parts), hint) + f'\n\n{parts[args.part - 1]}'
    data = {'session_id': session, 'page': record.id, 'part': args.part, 'parts': len(parts), 'text': text}
    emit(args, data, text)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `recall` and `pages`."""
    parser = add_command(commands, 'recall')
    parser.add_argument('query')
    add_store_options(parser)
    parser.add_argument('--k', type=int, default=10, help='hits to return (default: %(default)s)')
    parser.add_argument(
        '--method',
        choices=(*METHODS, *DENSE_METHODS),
        help='ranking (default: fused, or hybrid with --embedding; dense and hybrid need --embedding)',
    )
    add_embedding_option(
        parser,
        'for dense and hybrid (refused with another --method); stored vectors are read, blocks without one '
        'embedded (and stored)',
    )
    add_store_vectors_option(parser)
    parser.add_argument('--session', type=non_empty, help='one session (default: every session of the namespace)')
    parser.add_argument('--since', metavar='TIME', help='only blocks that started at or after this ISO-8601 time')
    parser.add_argument('--until', metavar='TIME', help='only blocks that started before this ISO-8601 time')
    parser.set_defaults(func=_recall)

    embed = add_command(
        commands,
        'embed',
        description='Embed every archived block of the scope that has no stored vector of this model yet, and store '
        'the vectors beside the blocks: later `recall --embedding`, `mcp --embedding` and agents with the same '
        'model read them instead of embedding again. Run it once over a large archive (it shows progress; Ctrl-C '
        'keeps what is done) before serving it.',
    )
    add_store_options(embed)
    add_embedding_option(embed, 'required')
    embed.add_argument('--session', type=non_empty, help='one session (default: every session of the namespace)')
    embed.set_defaults(func=_embed)

    pages = add_command(commands, 'pages')
    add_store_options(pages)
    pages.add_argument('--session', type=non_empty, help='the session (default: the most recent one)')
    pages.add_argument('--page', help='a page id (pg_...) or number: print its blocks')
    pages.add_argument('--part', type=int, help='part of a long page, with --page (default: 1)')
    pages.add_argument('--max-tokens', type=int, default=3_000, help='tokens per part (default: %(default)s)')
    pages.set_defaults(func=_pages)
