"""`_common` -- what every command shares: store options, JSON output, user errors as messages not tracebacks."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ..knowledge_graph import DEFAULT_NAMESPACE
from ..knowledge_graph.store import (
    STORE_ENV,
    GraphStore,
    open_store,
    resolve_store_uri,
    sqlite_path,
)

if TYPE_CHECKING:
    from pydantic_ai.embeddings import EmbeddingModel

__all__ = (
    'EMBEDDING_ENV',
    'CliError',
    'add_embedding_option',
    'add_memento_model_options',
    'add_store_options',
    'check_entity_model_setting',
    'check_store_vectors',
    'checked_model_names',
    'checked_plot_format',
    'emit',
    'load_embedding',
    'refuse_unused_embedding',
    'store_from',
)

EMBEDDING_ENV: Final = 'MEMENTOGRAPH_EMBEDDING_MODEL'


class CliError(Exception):
    """A user error: printed as one line, exit code `code`."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def non_empty(text: str) -> str:
    """An id or name given on the command line: empty, it would be read as "every session" by one command and as
    a session named `''` by another."""
    if not text.strip():
        raise argparse.ArgumentTypeError('must not be empty')
    return text


def add_store_options(parser: argparse.ArgumentParser, *, json_flag: bool = True) -> None:
    """`--store`, `--namespace` (and `--json`) for a subcommand."""
    parser.add_argument(
        '--store',
        metavar='URI',
        help='store URI: sqlite:///path.db, memory://, neo4j://host:7687 '
        '(default: $MEMENTOGRAPH_STORE, else the embedded store in the user data directory)',
    )
    parser.add_argument(
        '--namespace',
        default=DEFAULT_NAMESPACE,
        type=non_empty,
        help='namespace every read and write stays in (default: %(default)s)',
    )
    if json_flag:
        parser.add_argument('--json', action='store_true', help='print JSON instead of text')


class _Given(argparse.Action):
    """Store the value, and set `<dest>_given`: the command line gave it, not the environment's default."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: str | None = None
    ) -> None:
        setattr(namespace, self.dest, values)
        setattr(namespace, f'{self.dest}_given', True)


def refuse_unused_embedding(args: argparse.Namespace, methods: str) -> None:
    """An `--embedding` the command line gave for methods that use none (`methods`, as the user wrote them) is a
    bad argument: the model would be loaded, or not even that, and never used. One from the environment is a
    default for the methods that use it, and passes."""
    if args.embedding_given and args.embedding:
        from ..knowledge_graph.recall import DENSE_METHODS  # every command imports this module: start-up stays light

        raise CliError(
            f'--embedding applies only to the methods that use it ({", ".join(DENSE_METHODS)}): {methods} embeds '
            'nothing',
            code=2,
        )


def add_embedding_option(parser: argparse.ArgumentParser, effect: str) -> None:
    """`--embedding MODEL` (default `$MEMENTOGRAPH_EMBEDDING_MODEL`), saying what it does for this command;
    `embedding_given` says whether the command line gave it (a setting of the environment applies where it can)."""
    parser.set_defaults(embedding_given=False)
    parser.add_argument(
        '--embedding',
        action=_Given,
        default=os.environ.get(EMBEDDING_ENV) or None,
        metavar='MODEL',
        help=f'embedding model: onnx:PATH (a local model, the dense extra; scripts/fetch-embedding-model) or a '
        f'pydantic-ai name such as openai:text-embedding-3-small; {effect} (default: ${EMBEDDING_ENV}, else none)',
    )


def add_memento_model_options(parser: argparse.ArgumentParser, measured: str) -> None:
    """`--compressor MODEL` and `--judge MODEL`: LLMs that write and judge the mementos instead of the defaults."""
    parser.add_argument(
        '--compressor',
        metavar='MODEL',
        help='write the mementos with this pydantic-ai model (LLMCompressor), e.g. openai:gpt-4o-mini, so '
        f'{measured} measure its mementos; default: the extractive compressor (no LLM)',
    )
    parser.add_argument(
        '--judge', metavar='MODEL', help='judge the mementos with the rubric and this model (CombinedJudge)'
    )


def checked_model_names(args: argparse.Namespace) -> tuple[str | None, str | None]:
    """`(--compressor, --judge)`, each name resolved before any work: a misspelt name or a missing API key would
    otherwise surface as blocks without mementos (a failing compressor never stops eviction's caller)."""
    from pydantic_ai.models import infer_model

    for option, name in (('--compressor', args.compressor), ('--judge', args.judge)):
        if name is not None:
            try:
                infer_model(name)
            except Exception as exc:
                raise CliError(f'{option} {name}: {exc}', code=2) from exc
    return args.compressor, args.judge


def check_entity_model_setting() -> None:
    """Refuse, before any work, a `$MEMENTOGRAPH_ENTITY_MODEL` that names no model that could work: a bad setting,
    as a bad `$MEMENTOGRAPH_STORE` is (exit 2), instead of a failure later (exit 1) or blocks linked without it."""
    from ..knowledge_graph.entities import EntityModelError, llm_extractor_from_env  # pydantic-ai's agents

    try:
        llm_extractor_from_env()
    except EntityModelError as exc:
        raise CliError(str(exc), code=2) from None


def add_store_vectors_option(parser: argparse.ArgumentParser) -> None:
    """`--no-store-vectors`: embed in memory only (the vectors are written beside their blocks by default)."""
    parser.add_argument(
        '--no-store-vectors',
        dest='store_vectors',
        action='store_false',
        help='with --embedding: keep the vectors of blocks no earlier run embedded in this process only (default: '
        'store them beside their blocks, so the next run reads them instead of embedding again)',
    )


def check_store_vectors(args: argparse.Namespace) -> None:
    """Refuse `--no-store-vectors` without an embedding model: nothing would be embedded, so the flag would do
    nothing, and a user who gave it likely meant to pass `--embedding` too (or set it in the environment)."""
    if not args.store_vectors and not args.embedding:
        raise CliError(f'--no-store-vectors applies only with --embedding MODEL (or ${EMBEDDING_ENV})', code=2)


def load_embedding(spec: str | None) -> EmbeddingModel | None:
    """The model `--embedding` names, loaded now (a local one runs once) so a bad name or path fails before any
    work, as a user error."""
    if not spec:
        return None
    from ..knowledge_graph.dense import EmbeddingModelError, OnnxEmbeddingModel, embedding_model

    try:
        model = embedding_model(spec)
        if isinstance(model, OnnxEmbeddingModel):
            model.vectors(['probe'])
    except EmbeddingModelError as exc:
        raise CliError(str(exc), code=2) from None
    return model


def _store_origin(args: argparse.Namespace) -> str:
    """Where the store URI came from, for messages: a wrong `$MEMENTOGRAPH_STORE` is otherwise hard to spot."""
    if getattr(args, 'store', None) is not None:
        return '--store'
    return f'${STORE_ENV}' if os.environ.get(STORE_ENV) else 'the default store'


@contextmanager
def store_from(args: argparse.Namespace, *, create: bool | str = False) -> Iterator[GraphStore]:
    """Open the store the arguments name, and close it afterwards.

    A command that only reads (`create=False`) refuses a SQLite file that does not exist: opening it would make
    an empty store, and a misspelt path would then answer "nothing found" or "OK" instead of saying it is wrong.
    `create` as text makes the file, printing that text (`{path}` filled in) on stderr when it is new.
    """
    uri = getattr(args, 'store', None)
    try:
        path = sqlite_path(uri)
    except ValueError as exc:  # an unknown scheme (UnknownStoreSchemeError) or option
        raise CliError(f'{exc} (from {_store_origin(args)})', code=2) from None
    if path is not None and not create and not path.exists():
        raise CliError(
            f'no store at {path} (from {_store_origin(args)}): nothing has been archived there yet; check the path, '
            'or archive something first (an agent with MementoCompaction, or `mementograph demo`)',
            code=3,
        )
    if path is not None and not create and path.is_file() and path.stat().st_size == 0:
        # an empty file is an empty SQLite database: opened, it would become a store and answer "nothing found"
        raise CliError(
            f'{path} (from {_store_origin(args)}) is an empty file, not a store: nothing has been archived there; '
            'check the path',
            code=3,
        )
    if path is not None and isinstance(create, str) and not path.exists():
        print(create.format(path=path), file=sys.stderr, flush=True)
    try:
        store = open_store(resolve_store_uri(uri))
    except ValueError as exc:  # a malformed option value (`?busy_timeout=abc`): a bad argument, as an unknown one is
        raise CliError(f'{exc} (from {_store_origin(args)})', code=2) from None
    try:
        yield store
    finally:
        store.close()


def check_output_path(args: argparse.Namespace, out: Path, option: str) -> None:
    """Refuse, before any work, a file a command could not write or must not: one in a missing or read-only
    directory, a directory, or the store the command reads (writing over it would destroy the archive)."""
    if not out.parent.is_dir():
        raise CliError(f'{option} {out}: directory {out.parent} does not exist', code=2)
    if out.is_dir():
        raise CliError(f'{option} {out} is a directory; give a file path', code=2)
    if not os.access(out.parent, os.W_OK) or (out.exists() and not os.access(out, os.W_OK)):
        raise CliError(f'{option} {out}: no permission to write there; choose another path', code=2)
    try:
        store_path = sqlite_path(getattr(args, 'store', None))
    except ValueError:
        return  # `store_from` says what is wrong with it
    if store_path is None:
        return
    base = store_path.expanduser().resolve()
    if out.expanduser().resolve() in {base, *(base.with_name(base.name + end) for end in ('-wal', '-shm', '-journal'))}:
        raise CliError(
            f'{option} {out} is the store this command reads ({store_path}); writing there would destroy the '
            'archive: choose another path',
            code=2,
        )


def checked_plot_format(path: str | Path, option: str) -> None:
    """Refuse, before any work, a plot file whose extension names no format it is saved in (`--out plot.txt` once
    got PNG bytes under that name)."""
    from .._plot import plot_format  # matplotlib's side: only the commands that plot load it

    try:
        plot_format(path)
    except ValueError as exc:
        raise CliError(f'{option} {exc}', code=2) from None


def require_session(store: GraphStore, namespace: str, session_id: str | None) -> None:
    """Refuse a `--session` the namespace does not hold (exit 3), as every command that takes one does: a
    mistyped id is an error, not an empty answer."""
    if session_id is not None and all(known.id != session_id for known in store.list_sessions(namespace=namespace)):
        raise CliError(f'no session {session_id!r} in namespace {namespace!r} (see `mementograph stats`)', code=3)


def emit(args: argparse.Namespace, data: Any, text: str) -> None:
    """Print `data` as JSON with `--json`, else `text`."""
    if getattr(args, 'json', False):
        json.dump(data, sys.stdout, ensure_ascii=False, indent=2, default=str)
        sys.stdout.write('\n')
    else:
        sys.stdout.write(text if text.endswith('\n') else text + '\n')
