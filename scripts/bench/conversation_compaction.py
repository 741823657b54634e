#!/usr/bin/env python
"""Compaction of long conversations: LoCoMo's dialogues replayed through a real `Agent`, answers in the last context.

The compaction bench (`compaction.py`) replays agent trajectories, where mementos of mementos pool their children's
sections. A conversation's mementos are `Name: sentence` lines instead, and a long chat merges them again and again:
this bench measures what a chat agent keeps in front of the model at one budget.

Each LoCoMo conversation (`--data`, default `../shared/data/locomo/locomo_dev7.json`) becomes one transcript: speaker
A's turns are user prompts, speaker B's the model's replies (consecutive turns of one speaker in one message), each
stamped with its session's date, so relative dates are anchored as in `mementograph eval locomo`. It is replayed
(`mementograph._replay.replay_messages`: a `FunctionModel` answering with the recorded turns) once per strategy:

- `sliding` -- pydantic-ai-harness `SlidingWindowCompaction(max_tokens=B, keep_tokens=K)`;
- `memento` -- `MementoCompaction(store, max_tokens=B)` on `--store` (default `memory://`).

Reported per strategy, conversations pooled: the questions of categories 1, 2 and 4 (as answer retention in
`mementograph eval locomo`) whose answer words all appear in the last request the model received; the peak
request; cache-prefix stability (mean over conversations); for `memento`, mementos of mementos and how many the
judge verified, and the share of the last request taken by stub headers and notes (`[memento of ...]`,
`[messages ... archived]`). As a bound, the share whose answer words all appear in the whole dialogue. Results go to stdout and `bench-results/conversation_compaction.json`.

Usage:
    TIKTOKEN_CACHE_DIR=... .venv/bin/python scripts/bench/conversation_compaction.py [--budget 8000] [--limit N] \
        [--strategies sliding,memento] [--settings '{"conversation_memento_share": 0.3}']
        [--extractive '{"dialogue_stretch": 2.0}']
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, UserPromptPart

from mementograph._replay import replay_messages
from mementograph._tokens import TokenCounter
from mementograph.capabilities import MementoCompaction
from mementograph.eval._ingest import _message
from mementograph.eval._locomo import LocomoSample, load_locomo, retention_questions
from mementograph.eval._metrics import retains_answer
from mementograph.knowledge_graph.memory import ExtractiveCompressor, render_block
from mementograph.knowledge_graph.store import open_store

REPO = Path(__file__).resolve().parents[2]
_STUB_TEXT = re.compile(r'\[memento[^\]\n]*\]|\[messages \d+-\d+ archived[^\]\n]*\]')


def transcript(sample: LocomoSample) -> list[ModelMessage]:
    """The dialogue as alternating requests and responses (a speaker's consecutive turns in one message)."""
    messages: list[ModelMessage] = []
    index = 0
    for segment in sample.dialogue.segments:
        for turn in segment.turns:
            message = _message(turn, index)
            index += 1
            if messages and type(messages[-1]) is type(message):
                messages[-1].parts.extend(message.parts)
            else:
                messages.append(message)
    if isinstance(messages[0], ModelResponse):  # a replay starts with the user's input
        messages.insert(0, ModelRequest(parts=[UserPromptPart('(the conversation begins)')]))
    return messages


def answers_in(sample: LocomoSample, text: str) -> tuple[int, int]:
    """`(questions whose answer words are all in text, questions scored)`."""
    kept = scored = 0
    for question in retention_questions(sample):
        verdict = retains_answer(question.answer, text)
        if verdict is not None:
            scored += 1
            kept += verdict
    return kept, scored


async def replay(
    sample: LocomoSample, strategy: str, args: argparse.Namespace, counter: TokenCounter
) -> dict[str, Any]:
    messages = transcript(sample)
    store = None
    session = f'{sample.sample_id}-{time.time_ns()}'
    if strategy == 'sliding':
        from pydantic_ai_harness.compaction import SlidingWindowCompaction

        capability: Any = SlidingWindowCompaction(
            max_tokens=args.budget, keep_tokens=args.keep_tokens, tokenizer=counter.count_text
        )
    else:
        store = open_store(args.store)
        extractive = json.loads(args.extractive)
        compressor = ExtractiveCompressor(**extractive) if extractive else None  # None: the capability's own default
        capability = MementoCompaction(
            store, max_tokens=args.budget, session_id=session, compressor=compressor, **json.loads(args.settings)
        )
    started = time.perf_counter()
    trace = await replay_messages(messages, capabilities=[capability], counter=counter)
    last = render_block(trace.requests[-1])
    kept, scored = answers_in(sample, last)
    row: dict[str, Any] = {
        'conversation': sample.sample_id,
        'strategy': strategy,
        'requests': len(trace.requests),
        'peak_tokens': trace.peak_tokens,
        'cache_prefix_stability': round(trace.cache_prefix_stability(), 4),
        'answers_in_context': kept,
        'questions': scored,
        'seconds': round(time.perf_counter() - started, 1),
    }
    if store is not None:
        mementos = store.list_mementos(session_id=session)
        merged = [memento for memento in mementos if memento.level > 1]
        stub_tokens = sum(counter.count_text(match) for match in _STUB_TEXT.findall(last))
        row |= {
            'mementos': len(mementos),
            'merged': len(merged),
            'merged_verified': sum(memento.verified for memento in merged),
            'stub_header_share': round(stub_tokens / max(1, counter.count_text(last)), 3),
        }
        store.close()
    return row


def pooled(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    total: dict[str, Any] = {
        'answers_in_context': sum(row['answers_in_context'] for row in rows),
        'questions': sum(row['questions'] for row in rows),
        'peak_tokens': max(row['peak_tokens'] for row in rows),
        'cache_prefix_stability': round(sum(row['cache_prefix_stability'] for row in rows) / len(rows), 3),
    }
    total['share'] = round(total['answers_in_context'] / max(1, total['questions']), 3)
    if 'merged' in rows[0]:
        total['merged'] = sum(row['merged'] for row in rows)
        total['merged_verified'] = sum(row['merged_verified'] for row in rows)
        total['stub_header_share'] = round(sum(row['stub_header_share'] for row in rows) / len(rows), 3)
    return total


async def main(args: argparse.Namespace) -> dict[str, Any]:
    samples = load_locomo(args.data)[: args.limit]
    counter = TokenCounter()
    bound = [answers_in(sample, '\n'.join(sample.turn_text.values())) for sample in samples]
    result: dict[str, Any] = {
        'budget': args.budget,
        'settings': json.loads(args.settings),
        'extractive': json.loads(args.extractive),
        'keep_tokens': args.keep_tokens,
        'whole_dialogue': round(sum(k for k, _ in bound) / max(1, sum(n for _, n in bound)), 3),
        'strategies': {},
    }
    for strategy in args.strategies.split(','):
        rows = []
        for sample in samples:
            row = await replay(sample, strategy, args, counter)
            print(json.dumps(row), flush=True)
            rows.append(row)
        result['strategies'][strategy] = {'total': pooled(rows), 'conversations': rows}
    return result


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--data', default=str(REPO.parent / 'shared/data/locomo/locomo_dev7.json'))
    parser.add_argument('--budget', type=int, default=8_000, help='high-water mark in tokens (default: %(default)s)')
    parser.add_argument(
        '--keep-tokens', type=int, default=2_000, help='SlidingWindow keep_tokens (default: %(default)s)'
    )
    parser.add_argument('--store', default='memory://', help="MementoCompaction's store (default: %(default)s)")
    parser.add_argument('--strategies', default='sliding,memento', help='comma-separated (default: %(default)s)')
    parser.add_argument('--limit', type=int, default=None, help='the first N conversations only')
    parser.add_argument(
        '--settings',
        default='{}',
        help='more MementoCompaction settings as JSON, e.g. \'{"conversation_memento_share": 0.3}\'',
    )
    parser.add_argument(
        '--extractive',
        default='{}',
        help='ExtractiveCompressor settings as JSON, e.g. \'{"dialogue_stretch": 2.0}\'',
    )
    args = parser.parse_args()
    result = asyncio.run(main(args))
    print(f'\nanswers (categories 1, 2, 4) whose words are all in the whole dialogue: {result["whole_dialogue"]:.3f}')
    print(
        '| strategy | answers in the last context | peak tokens | prefix stability | merged mementos verified | stub headers |'
    )
    print('|---|---|---|---|---|---|')
    for name, data in result['strategies'].items():
        total = data['total']
        merged = f'{total["merged_verified"]}/{total["merged"]}' if 'merged' in total else '-'
        header = f'{total["stub_header_share"]:.1%}' if 'stub_header_share' in total else '-'
        print(
            f'| {name} | {total["share"]:.3f} ({total["answers_in_context"]}/{total["questions"]}) '
            f'| {total["peak_tokens"]:,} | {total["cache_prefix_stability"]:.3f} | {merged} | {header} |'
        )
    out = REPO / 'bench-results' / 'conversation_compaction.json'
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2))


if __name__ == '__main__':
    cli()
