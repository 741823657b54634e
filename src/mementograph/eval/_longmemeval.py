"""`_longmemeval` -- LongMemEval (Wu et al., ICLR 2025): session-level `recall_all@k` and `ndcg_any@k`.

Ingest: every haystack session is one store session (one segment) of plain user/assistant turns, each message
stamped with the session's date (`haystack_dates`); the engine's work is done once per distinct session and the
same writes are replayed into each store that holds it.

Scopes:

- **per question** (default): one store per question holding that question's own haystack.
- **pooled** (`--pooled`): every session of the file in one store, every question answered against all of them:
  memory at scale (for the oracle file, all evidence sessions of every question: ~560 sessions).

Retrieval: a method ranks blocks; the sessions of those blocks, in order of first appearance, are the session
ranking that `recall_all@k` / `ndcg_any@k` score (upstream's definitions; abstention questions, `_abs`, are
excluded). With `time_filter` (default on) a question only sees blocks dated no later than the day it is asked
(`question_date`): a memory cannot hold a conversation that has not happened yet. The day, not the minute: the
data stamps some evidence sessions hours after the question that cites them, always on the same day. This only
matters when pooling, where other questions' sessions may be dated later. Recall is also told when the question is
asked (`now=question_date`), so a time range the question names ("in the past two weeks", "in March") is preferred,
as the `recall` tool would with the current time; this never excludes a block.
"""

from __future__ import annotations

import hashlib
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Final, cast

from pydantic_ai.embeddings import EmbeddingModel

from ..knowledge_graph.dense import DenseIndex
from ..knowledge_graph.recall import DENSE_METHODS, Method, parse_time, rank_blocks
from ..knowledge_graph.recall._time_range import plus_days
from ..knowledge_graph.store import GraphStore, open_store
from ._common import Table, dense_index, malformed, methods_for, read_benchmark
from ._ingest import (
    Dialogue,
    DialogueIngestor,
    EngineSpec,
    IngestedDialogue,
    Progress,
    Segment,
    Turn,
    distinct_errors,
    ingest_all,
)
from ._metrics import ndcg_any, recall_all

__all__ = ('DEFAULT_KS', 'LongMemEvalReport', 'evaluate_longmemeval', 'longmemeval_tables')

DEFAULT_KS: Final = (5, 10)
_BLOCKS_READ: Final = 200
"""Blocks ranked per question: enough to name well over k distinct sessions."""


@dataclass(frozen=True)
class _Question:
    question_id: str
    question_type: str
    question: str
    question_date: str
    session_ids: tuple[str, ...]
    gold: tuple[str, ...]


@dataclass(frozen=True)
class LongMemEvalReport:
    """Per method, scope and question type: mean `recall_all@k` and `ndcg_any@k`."""

    path: str
    ks: tuple[int, ...]
    methods: tuple[str, ...]
    scopes: tuple[str, ...]
    scores: dict[str, dict[str, dict[str, dict[str, float]]]]
    """scope -> method -> question type ('overall' too) -> metric (`recall_all@5`, ...) -> mean."""
    questions: dict[str, int]
    """question type -> questions scored (abstention excluded)."""
    abstention_excluded: int
    sessions: int
    turns: int
    blocks: int
    dialogue_tokens: int
    time_filter: bool
    seconds_ingest: float
    seconds_retrieval: float
    embedding_model: str | None = None
    """The model of the dense methods, when they ran."""
    seconds_embed: float = 0.0
    """Embedding every block (dense methods only)."""
    compressor: str = 'extractive'
    """What wrote the mementos (`llm:MODEL` with `EngineSpec.compressor`)."""
    judge: str = 'rubric'
    """What judged them (`rubric+llm:MODEL` with `EngineSpec.judge`)."""
    usage_tokens: int = 0
    """LLM tokens spent writing and judging the mementos (0 without a model)."""
    memento_errors: tuple[str, ...] = ()
    """Why blocks have no memento, one entry per such block (a failing compressor)."""

    def to_json(self) -> dict[str, Any]:
        return {
            'path': self.path,
            'compressor': self.compressor,
            'judge': self.judge,
            'usage_tokens': self.usage_tokens,
            'blocks_without_memento': len(self.memento_errors),
            'memento_errors': distinct_errors(self.memento_errors),
            'embedding_model': self.embedding_model,
            'seconds_embed': round(self.seconds_embed, 2),
            'ks': list(self.ks),
            'methods': list(self.methods),
            'scopes': list(self.scopes),
            'scores': self.scores,
            'questions': self.questions,
            'abstention_excluded': self.abstention_excluded,
            'sessions': self.sessions,
            'turns': self.turns,
            'blocks': self.blocks,
            'dialogue_tokens': self.dialogue_tokens,
            'time_filter': self.time_filter,
            'seconds_ingest': round(self.seconds_ingest, 2),
            'seconds_retrieval': round(self.seconds_retrieval, 2),
        }


def _load(path: str | Path) -> tuple[list[_Question], dict[str, Dialogue], int]:
    raw = read_benchmark(path, 'LongMemEval questions')
    questions: list[_Question] = []
    dialogues: dict[str, Dialogue] = {}
    abstention = 0
    position = 0
    try:
        for position, item in enumerate(cast(list[dict[str, Any]], raw)):  # noqa: B007 (the except names it)
            ids = [str(s) for s in item['haystack_session_ids']]
            for session_id, date, session in zip(ids, item['haystack_dates'], item['haystack_sessions'], strict=True):
                if session_id in dialogues:
                    continue
                start = parse_time(str(date))
                turns = tuple(
                    Turn(
                        turn_id=f'{session_id}:{index}',
                        role='user' if turn['role'] == 'user' else 'assistant',
                        text=str(turn['content']),
                        timestamp=None if start is None else _turn_time(start, index),
                    )
                    for index, turn in enumerate(session)
                    if str(turn.get('content', '')).strip()
                )
                dialogues[session_id] = Dialogue(session_id=session_id, segments=(Segment(session_id, turns),))
            if str(item['question_id']).endswith('_abs'):
                abstention += 1
                continue
            questions.append(
                _Question(
                    question_id=str(item['question_id']),
                    question_type=str(item['question_type']),
                    question=str(item['question']),
                    question_date=str(item['question_date']),
                    session_ids=tuple(ids),
                    gold=tuple(str(s) for s in item['answer_session_ids']),
                )
            )
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise ValueError(f'{path}: question {position}: {malformed(exc)}') from exc
    return questions, dialogues, abstention


def _turn_time(start: datetime, index: int) -> datetime:
    """The `index`-th turn of a session begun at `start`, a second apart (their order kept); the calendar's last
    moment for turns past it (a session dated at 9999-12-31 23:59:59)."""
    try:
        return start + timedelta(seconds=index)
    except OverflowError:
        return datetime.max.replace(tzinfo=start.tzinfo)


def _end_of_day(moment: str) -> datetime | None:
    """Midnight after `moment`: the dataset's clock times within a day are not reliable (some evidence sessions are
    stamped hours after the question that cites them, always on the same day), its dates are. `None` (no bound)
    when `moment` is not a date, or is on the calendar's last day, which has no midnight after it."""
    parsed = parse_time(moment)
    if parsed is None:
        return None
    return plus_days(datetime.combine(parsed.date(), datetime.min.time(), tzinfo=parsed.tzinfo), 1)


def _session_ranking(store: GraphStore, question: _Question, method: Method, session_of: dict[str, str],
                     time_filter: bool, corpus: Sequence[str], index: DenseIndex | None) -> list[str]:  # fmt: skip
    until = _end_of_day(question.question_date) if time_filter else None
    # asked on `question_date`: a range the question names ("in the past two weeks") is relative to it
    ranking = rank_blocks(
        store,
        question.question,
        method=method,
        session_id=None,
        until=until,
        now=parse_time(question.question_date),
        dense=None if index is None else index.scoped(corpus),  # the vectors of every store: only this one's
    )
    sessions: list[str] = []
    for block in ranking[:_BLOCKS_READ]:
        session = session_of.get(block.block_id)
        if session is not None and session not in sessions:
            sessions.append(session)
    # upstream ranks the whole corpus: sessions no block reached follow, in an order unrelated to the answer
    # (a hash of the id: haystack and id order both correlate with which sessions are gold)
    seen = set(sessions)
    rest = sorted((s for s in corpus if s not in seen), key=lambda s: hashlib.sha256(s.encode()).hexdigest())
    return sessions + rest


def evaluate_longmemeval(
    path: str | Path,
    *,
    pooled: bool = False,
    per_question: bool = True,
    ks: Sequence[int] = DEFAULT_KS,
    methods: Sequence[Method] | None = None,
    time_filter: bool = True,
    limit: int | None = None,
    workers: int = 1,
    embedding: EmbeddingModel | str | None = None,
    engine: EngineSpec | None = None,
    progress: Progress | None = None,
) -> LongMemEvalReport:
    """Ingest each distinct session once, then score every method per question's haystack and/or pooled.

    Args:
        path: a LongMemEval JSON file.
        pooled: also score with every session of the file in one store.
        per_question: score against each question's own haystack.
        ks: cut-offs in sessions.
        methods: ranking methods (all on the same stores); default: every method the run can do.
        time_filter: a question sees only blocks dated before its `question_date`.
        limit: only the first `limit` questions (tests); their sessions only.
        workers: processes for the engine's work at ingest.
        embedding: an embedding model (or its name, `onnx:PATH` for a local one) for `dense` and `hybrid`.
        engine: the models that write and judge the mementos (default: the extractive compressor and rubric).
        progress: told what the run is doing (ingest per session, then ranking).
    """
    engine = engine or EngineSpec()
    methods = methods_for(methods, embedding)
    questions, dialogues, abstention = _load(path)
    if limit is not None:
        questions = questions[:limit]
        wanted = {sid for q in questions for sid in q.session_ids}
        dialogues = {sid: d for sid, d in dialogues.items() if sid in wanted}
    ks = tuple(sorted(set(ks)))
    started = time.perf_counter()
    pool = open_store('memory://')
    ingested: dict[str, IngestedDialogue] = {}
    scores: dict[str, dict[str, dict[str, dict[str, list[float]]]]] = {}
    try:
        for dialogue in ingest_all(list(dialogues.values()), workers=workers, engine=engine, progress=progress):
            ingested[dialogue.session_id] = dialogue
            if pooled:
                DialogueIngestor.replay(pool, dialogue)
        ingest_seconds = time.perf_counter() - started
        started = time.perf_counter()
        index = None
        if embedding is not None and any(m in DENSE_METHODS for m in methods):
            index = dense_index(embedding, [(dialogues[sid], d) for sid, d in ingested.items()])
        embed_seconds = time.perf_counter() - started
        session_of = {block.block_id: sid for sid, d in ingested.items() for block in d.blocks}
        session_start = {
            sid: d.segments[0].turns[0].timestamp
            for sid, d in dialogues.items()
            if d.segments and d.segments[0].turns and d.segments[0].turns[0].timestamp is not None
        }
        started = time.perf_counter()
        if progress is not None:
            progress(f'ranking {len(questions):,} questions')
        scopes: list[str] = []
        if per_question:
            scopes.append('per-question')
            table = scores.setdefault('per-question', {})
            for question in questions:
                store = open_store('memory://')
                try:
                    for session_id in dict.fromkeys(question.session_ids):
                        DialogueIngestor.replay(store, ingested[session_id])
                    _score(table, store, question, methods, ks, session_of, time_filter, question.session_ids, index)
                finally:
                    store.close()
        if pooled:
            scopes.append('pooled')
            table = scores.setdefault('pooled', {})
            for question in questions:
                corpus = list(ingested)
                if time_filter and (end := _end_of_day(question.question_date)) is not None:
                    corpus = [sid for sid in corpus if (start := session_start.get(sid)) is None or start < end]
                _score(table, pool, question, methods, ks, session_of, time_filter, corpus, index)
        retrieval_seconds = time.perf_counter() - started
    finally:
        pool.close()
    types = sorted({q.question_type for q in questions})
    means = {
        scope: {
            method: {
                qtype: {metric: (sum(v) / len(v) if v else 0.0) for metric, v in by_metric.items()}
                for qtype, by_metric in by_type.items()
            }
            for method, by_type in by_method.items()
        }
        for scope, by_method in scores.items()
    }
    counts = {qtype: sum(1 for q in questions if q.question_type == qtype) for qtype in types}
    counts['overall'] = len(questions)
    return LongMemEvalReport(
        path=str(path),
        ks=ks,
        methods=tuple(methods),
        scopes=tuple(scopes),
        scores=means,
        questions=counts,
        abstention_excluded=abstention if limit is None else 0,
        sessions=len(ingested),
        turns=sum(d.turns for d in ingested.values()),
        blocks=sum(len(d.blocks) for d in ingested.values()),
        dialogue_tokens=sum(d.dialogue_tokens for d in ingested.values()),
        time_filter=time_filter,
        seconds_ingest=ingest_seconds,
        seconds_retrieval=retrieval_seconds,
        embedding_model=None if index is None else index.model.model_name,
        seconds_embed=embed_seconds,
        compressor=engine.names[0],
        judge=engine.names[1],
        usage_tokens=sum(d.usage_tokens for d in ingested.values()),
        memento_errors=tuple(error for d in ingested.values() for error in d.memento_errors),
    )


def _score(
    table: dict[str, dict[str, dict[str, list[float]]]],
    store: GraphStore,
    question: _Question,
    methods: Sequence[Method],
    ks: Sequence[int],
    session_of: dict[str, str],
    time_filter: bool,
    corpus: Sequence[str],
    index: DenseIndex | None,
) -> None:
    for method in methods:
        ranked = _session_ranking(store, question, method, session_of, time_filter, corpus, index)
        for qtype in (question.question_type, 'overall'):
            bucket = table.setdefault(method, {}).setdefault(qtype, defaultdict(list))
            for k in ks:
                bucket[f'recall_all@{k}'].append(recall_all(ranked, question.gold, k))
                bucket[f'ndcg_any@{k}'].append(ndcg_any(ranked, question.gold, k))


def longmemeval_tables(report: LongMemEvalReport) -> list[Table]:
    """Per scope: overall metrics per method, then `recall_all@k` per question type."""
    tables: list[Table] = []
    metrics = [f'{m}@{k}' for m in ('recall_all', 'ndcg_any') for k in report.ks]
    types = [t for t in report.questions if t != 'overall']
    for scope in report.scopes:
        rows = tuple(
            (method, *(f'{report.scores[scope][method]["overall"][m]:.3f}' for m in metrics))
            for method in report.methods
        )
        filt = "blocks dated up to the question's day" if report.time_filter else 'no time filter'
        tables.append(
            Table(
                f'LongMemEval {scope} ({report.questions["overall"]} questions, {report.sessions} sessions, {filt})',
                ('method', *metrics),
                rows,
            )
        )
        k = report.ks[0]
        rows = tuple(
            (method, *(f'{report.scores[scope][method].get(t, {}).get(f"recall_all@{k}", 0.0):.3f}' for t in types))
            for method in report.methods
        )
        tables.append(
            Table(
                f'LongMemEval {scope}: recall_all@{k} per question type',
                ('method', *(f'{t} ({report.questions[t]})' for t in types)),
                rows,
            )
        )
    return tables
