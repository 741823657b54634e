"""`_locomo` -- LoCoMo (Maharana et al. 2024): dialog-turn evidence recall@k per category, and answer retention.

Ingest: each conversation is one store session; each of its sessions (`session_N`, dated `session_N_date_time`) is
a segment; turns alternate as user (`speaker_a`) and assistant (`speaker_b`) messages whose text starts with the
speaker's name (`Caroline: ...`), image turns carry their caption (`[shares a photo: ...]`, the dataset's own text
for the image). Each turn keeps its `dia_id`, and each message is stamped with its session's date.

Retrieval: every method ranks blocks for the question (scoped to the conversation's session); retrieved blocks
are expanded into their turns in rank order (inside a block, turns naming more of the question's entities first,
then dialogue order) and cut at k turns. Evidence recall@k is the share of a question's evidence turns in those
k, averaged per category and overall (categories 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop,
5 adversarial; questions without evidence are skipped; ids are read with `D\\d+:\\d+`).

Answer retention (categories 1, 2 and 4): the share of questions whose answer words all occur in the mementos of
the blocks holding the evidence turns, beside the same share for the raw evidence turns and for the dataset's
LLM-written `session_summary` and `observation` of the evidence sessions, each with its size relative to the
dialogue (o200k tokens).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final, Literal, cast

from pydantic_ai.embeddings import EmbeddingModel

from .._tokens import TokenCounter
from ..knowledge_graph.recall import DENSE_METHODS, Method, rank_blocks
from ..knowledge_graph.store import open_store
from ._common import (
    Table,
    dense_index,
    key_weights,
    malformed,
    methods_for,
    order_turns,
    query_keys,
    read_benchmark,
    text_keys,
)
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
from ._metrics import evidence_recall, retains_answer

__all__ = (
    'CATEGORIES',
    'DEFAULT_KS',
    'LocomoQuestion',
    'LocomoReport',
    'LocomoSample',
    'evaluate_locomo',
    'load_locomo',
    'locomo_tables',
)

CATEGORIES: Final = {1: 'multi-hop', 2: 'temporal', 3: 'open-domain', 4: 'single-hop', 5: 'adversarial'}
DEFAULT_KS: Final = (5, 10, 25, 50)
RETENTION_CATEGORIES: Final = (1, 2, 4)
_EVIDENCE = re.compile(r'D\d+:\d+')
_SESSION = re.compile(r'^session_(\d+)$')


@dataclass(frozen=True)
class LocomoQuestion:
    question: str
    answer: str | None
    evidence: tuple[str, ...]
    category: int


@dataclass(frozen=True)
class LocomoSample:
    """One LoCoMo conversation, as a dialogue, with its questions and the dataset's own summaries."""

    sample_id: str
    dialogue: Dialogue
    questions: tuple[LocomoQuestion, ...]
    turn_text: dict[str, str]
    summaries: dict[int, str]
    """Session number -> the dataset's `session_summary` text."""
    observations: dict[int, str]
    """Session number -> the dataset's `observation` sentences, joined."""


def _session_date(text: str) -> datetime | None:
    for fmt in ('%I:%M %p on %d %B, %Y', '%I:%M %p on %d %b, %Y'):
        try:
            return datetime.strptime(text.strip(), fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    return None


def _turn_text(turn: dict[str, Any]) -> str:
    text = f'{turn["speaker"]}: {turn["text"]}'
    caption = turn.get('blip_caption')
    if isinstance(caption, str) and caption.strip():
        text += f' [shares a photo: {caption.strip()}]'
    return text


def load_locomo(path: str | Path) -> list[LocomoSample]:
    """Read a LoCoMo file (a list of samples, `locomo10.json` format)."""
    raw = read_benchmark(path, 'LoCoMo samples')
    samples: list[LocomoSample] = []
    position = 0
    try:
        for position, item in enumerate(cast(list[dict[str, Any]], raw)):  # noqa: B007 (the except names it)
            conversation = item['conversation']
            speaker_a = conversation.get('speaker_a')
            numbers = sorted(int(m.group(1)) for key in conversation if (m := _SESSION.match(key)))
            segments: list[Segment] = []
            turn_text: dict[str, str] = {}
            for number in numbers:
                date = _session_date(str(conversation.get(f'session_{number}_date_time', '')))
                turns: list[Turn] = []
                for index, turn in enumerate(conversation[f'session_{number}']):
                    text = _turn_text(turn)
                    turn_id = str(turn['dia_id'])
                    turn_text[turn_id] = text
                    stamp = None if date is None else date + timedelta(seconds=30 * index)
                    role: Literal['user', 'assistant'] = 'user' if turn['speaker'] == speaker_a else 'assistant'
                    turns.append(Turn(turn_id=turn_id, role=role, text=text, timestamp=stamp))
                segments.append(Segment(segment_id=f'session_{number}', turns=tuple(turns)))
            questions = tuple(
                LocomoQuestion(
                    question=str(qa['question']),
                    answer=None if qa.get('answer') is None else str(qa['answer']),
                    evidence=tuple(dict.fromkeys(_EVIDENCE.findall(' '.join(str(e) for e in qa.get('evidence', []))))),
                    category=int(qa['category']),
                )
                for qa in item.get('qa', [])
            )
            summaries = {
                int(m.group(1)): str(text)
                for key, text in (item.get('session_summary') or {}).items()
                if (m := re.match(r'session_(\d+)_summary$', key))
            }
            observations: dict[int, str] = {}
            for key, by_speaker in (item.get('observation') or {}).items():
                m = re.match(r'session_(\d+)_observation$', key)
                if m and isinstance(by_speaker, dict):
                    observations[int(m.group(1))] = ' '.join(
                        str(entry[0]) for entries in by_speaker.values() for entry in entries if entry
                    )
            samples.append(
                LocomoSample(
                    sample_id=str(item.get('sample_id', f'conv-{len(samples)}')),
                    dialogue=Dialogue(
                        session_id=str(item.get('sample_id', f'conv-{len(samples)}')), segments=tuple(segments)
                    ),
                    questions=questions,
                    turn_text=turn_text,
                    summaries=summaries,
                    observations=observations,
                )
            )
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise ValueError(f'{path}: sample {position}: {malformed(exc)}') from exc
    return samples


@dataclass
class _Acc:
    values: dict[tuple[str, int | str], list[float]] = field(default_factory=lambda: defaultdict(list))

    def add(self, key: tuple[str, int | str], value: float) -> None:
        self.values[key].append(value)

    def mean(self, key: tuple[str, int | str]) -> float:
        values = self.values.get(key, [])
        return sum(values) / len(values) if values else 0.0

    def count(self, key: tuple[str, int | str]) -> int:
        return len(self.values.get(key, []))


@dataclass(frozen=True)
class Retention:
    """One source of text for answer retention: its share of retained answers and its size."""

    name: str
    retained: float
    questions: int
    size_ratio: float
    """Its tokens relative to the dialogue's."""


@dataclass(frozen=True)
class LocomoReport:
    """Evidence recall per method, category and k; answer retention; ingest figures."""

    path: str
    ks: tuple[int, ...]
    methods: tuple[str, ...]
    recall: dict[str, dict[str, dict[int, float]]]
    """method -> category name ('overall' too) -> k -> recall."""
    questions: dict[str, int]
    """category name -> questions scored."""
    retention: tuple[Retention, ...]
    conversations: int
    turns: int
    blocks: int
    mementos: int
    verified: int
    dialogue_tokens: int
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
            'recall': {
                m: {c: {str(k): v for k, v in by_k.items()} for c, by_k in cats.items()}
                for m, cats in self.recall.items()
            },
            'questions': self.questions,
            'answer_retention': [
                {'source': r.name, 'retained': r.retained, 'questions': r.questions, 'size_ratio': r.size_ratio}
                for r in self.retention
            ],
            'conversations': self.conversations,
            'turns': self.turns,
            'blocks': self.blocks,
            'mementos': self.mementos,
            'verified_mementos': self.verified,
            'dialogue_tokens': self.dialogue_tokens,
            'seconds_ingest': round(self.seconds_ingest, 2),
            'seconds_retrieval': round(self.seconds_retrieval, 2),
        }


def _expand(ranking: Sequence[str], block_turns: dict[str, tuple[str, ...]], wanted: dict[str, int],
            turn_keys: dict[str, frozenset[str]], weights: dict[str, float], limit: int) -> list[str]:  # fmt: skip
    turns: list[str] = []
    for block_id in ranking:
        turns.extend(order_turns(block_turns.get(block_id, ()), turn_keys, wanted, weights))
        if len(turns) >= limit:
            break
    return turns[:limit]


def evaluate_locomo(
    path: str | Path,
    *,
    ks: Sequence[int] = DEFAULT_KS,
    methods: Sequence[Method] | None = None,
    store_uri: str = 'memory://',
    limit: int | None = None,
    counter: TokenCounter | None = None,
    workers: int = 1,
    embedding: EmbeddingModel | str | None = None,
    engine: EngineSpec | None = None,
    progress: Progress | None = None,
) -> LocomoReport:
    """Ingest every conversation through the engine into one store, then score every method on every question.

    Args:
        path: a LoCoMo JSON file.
        ks: cut-offs in turns.
        methods: ranking methods to compare (all on the same store); default: every method the run can do.
        store_uri: where to archive (default: in memory).
        limit: only the first `limit` conversations (tests).
        counter: token counter (default o200k).
        workers: processes for the engine's work at ingest.
        embedding: an embedding model (or its name, `onnx:PATH` for a local one) for `dense` and `hybrid`.
        engine: the models that write and judge the mementos (default: the extractive compressor and rubric).
        progress: told what the run is doing (ingest per conversation, then ranking).
    """
    import time

    engine = engine or EngineSpec()
    methods = methods_for(methods, embedding)
    counter = counter or TokenCounter()
    samples = load_locomo(path)[:limit]
    ks = tuple(sorted(set(ks)))
    store = open_store(store_uri)
    started = time.perf_counter()
    try:
        ingested = ingest_all(
            [sample.dialogue for sample in samples], workers=workers, engine=engine, progress=progress
        )
        for dialogue in ingested:
            DialogueIngestor.replay(store, dialogue)
        ingest_seconds = time.perf_counter() - started
        started = time.perf_counter()
        index = None
        if embedding is not None and any(m in DENSE_METHODS for m in methods):
            index = dense_index(embedding, [(s.dialogue, d) for s, d in zip(samples, ingested, strict=True)])
        embed_seconds = time.perf_counter() - started
        started = time.perf_counter()
        if progress is not None:
            progress(f'ranking {sum(len(sample.questions) for sample in samples):,} questions')
        acc = _Acc()
        for sample, dialogue in zip(samples, ingested, strict=True):
            block_turns = {block.block_id: block.turn_ids for block in dialogue.blocks}
            turn_keys = {turn_id: text_keys(text) for turn_id, text in sample.turn_text.items()}
            weights = key_weights(turn_keys)
            for question in sample.questions:
                if not question.evidence:
                    continue
                category = CATEGORIES.get(question.category, str(question.category))
                wanted = query_keys(question.question)
                for method in methods:
                    ranking = rank_blocks(
                        store, question.question, method=method, session_id=sample.sample_id, dense=index
                    )
                    turns = _expand([b.block_id for b in ranking], block_turns, wanted, turn_keys, weights, max(ks))
                    for k in ks:
                        value = evidence_recall(turns, question.evidence, k)
                        acc.add((f'{method}|{category}', k), value)
                        acc.add((f'{method}|overall', k), value)
                acc.add(('questions', category), 1.0)
                acc.add(('questions', 'overall'), 1.0)
        retrieval_seconds = time.perf_counter() - started
    finally:
        store.close()
    categories = [name for number, name in sorted(CATEGORIES.items()) if acc.count(('questions', name))]
    recall: dict[str, dict[str, dict[int, float]]] = {
        method: {cat: {k: acc.mean((f'{method}|{cat}', k)) for k in ks} for cat in [*categories, 'overall']}
        for method in methods
    }
    questions = {cat: acc.count(('questions', cat)) for cat in [*categories, 'overall']}
    return LocomoReport(
        path=str(path),
        ks=ks,
        methods=tuple(methods),
        recall=recall,
        questions=questions,
        retention=_retention(samples, ingested, counter),
        conversations=len(samples),
        turns=sum(d.turns for d in ingested),
        blocks=sum(len(d.blocks) for d in ingested),
        mementos=sum(1 for d in ingested for b in d.blocks if b.memento_id is not None),
        verified=sum(1 for d in ingested for b in d.blocks if b.verified),
        dialogue_tokens=sum(d.dialogue_tokens for d in ingested),
        seconds_ingest=ingest_seconds,
        seconds_retrieval=retrieval_seconds,
        embedding_model=None if index is None else index.model.model_name,
        seconds_embed=embed_seconds,
        compressor=engine.names[0],
        judge=engine.names[1],
        usage_tokens=sum(d.usage_tokens for d in ingested),
        memento_errors=tuple(error for d in ingested for error in d.memento_errors),
    )


def retention_questions(sample: LocomoSample) -> list[LocomoQuestion]:
    """The questions answer retention scores: categories 1, 2 and 4, with an answer and evidence turns."""
    return [
        question
        for question in sample.questions
        if question.category in RETENTION_CATEGORIES and question.evidence and question.answer is not None
    ]


def _retention(
    samples: Sequence[LocomoSample], ingested: Sequence[IngestedDialogue], counter: TokenCounter
) -> tuple[Retention, ...]:
    kept: dict[str, list[bool]] = defaultdict(list)
    sizes: dict[str, int] = defaultdict(int)
    for sample, dialogue in zip(samples, ingested, strict=True):
        block_of = {turn_id: block for block in dialogue.blocks for turn_id in block.turn_ids}
        sizes['dialogue'] += sum(counter.count_text(text) for text in sample.turn_text.values())
        sizes['mementos'] += sum(counter.count_text(block.memento_text) for block in dialogue.blocks)
        sizes['session summaries'] += sum(counter.count_text(text) for text in sample.summaries.values())
        sizes['observations'] += sum(counter.count_text(text) for text in sample.observations.values())
        for question in retention_questions(sample):
            evidence = [e for e in question.evidence if e in sample.turn_text]
            sessions = sorted({int(e[1:].split(':')[0]) for e in evidence})
            blocks = list(dict.fromkeys(block_of[e].block_id for e in evidence if e in block_of))
            memento_text = '\n'.join(b.memento_text for d in (dialogue,) for b in d.blocks if b.block_id in blocks)
            texts = {
                'mementos': memento_text,
                'raw evidence turns': '\n'.join(sample.turn_text[e] for e in evidence),
                'session summaries': '\n'.join(sample.summaries.get(n, '') for n in sessions),
                'observations': '\n'.join(sample.observations.get(n, '') for n in sessions),
            }
            for name, text in texts.items():
                verdict = retains_answer(question.answer, text)
                if verdict is not None:
                    kept[name].append(verdict)
    dialogue_tokens = sizes['dialogue'] or 1
    return tuple(
        Retention(
            name=name,
            retained=sum(values) / len(values) if values else 0.0,
            questions=len(values),
            size_ratio=1.0 if name == 'raw evidence turns' else sizes[name] / dialogue_tokens,
        )
        for name, values in kept.items()
    )


def locomo_tables(report: LocomoReport) -> list[Table]:
    """Recall per method and k (overall), per category at each k, and answer retention."""
    tables: list[Table] = []
    overall_rows = tuple(
        (method, *(f'{report.recall[method]["overall"][k]:.3f}' for k in report.ks)) for method in report.methods
    )
    tables.append(
        Table(
            f'LoCoMo dialog-turn evidence recall@k, overall ({report.questions["overall"]} questions, '
            f'{report.conversations} conversations)',
            ('method', *(f'R@{k}' for k in report.ks)),
            overall_rows,
        )
    )
    categories = [c for c in report.questions if c != 'overall']
    for k in report.ks:
        rows = tuple(
            (method, *(f'{report.recall[method][c][k]:.3f}' for c in [*categories, 'overall']))
            for method in report.methods
        )
        headers = ('method', *(f'{c} ({report.questions[c]})' for c in categories), 'overall')
        tables.append(Table(f'LoCoMo evidence recall@{k} per category', headers, rows))
    tables.append(
        Table(
            'Answer retention (categories 1, 2, 4): answer words all present',
            ('source', 'retained', 'questions', 'size vs dialogue'),
            tuple(
                (
                    r.name,
                    f'{r.retained:.3f}',
                    str(r.questions),
                    '-' if r.name == 'raw evidence turns' else f'{r.size_ratio:.1%}',
                )
                for r in report.retention
            ),
        )
    )
    return tables
