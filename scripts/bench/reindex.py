"""Recall by a definition's name in an existing archive, before and after `reindex_entities` (changes the store).

Usage:
    TIKTOKEN_CACHE_DIR=... .venv/bin/python scripts/bench/reindex.py --store URI [--namespace NS] [--queries 300]

Meant for an archive an older release wrote, whose extractor did not link definitions to their blocks, e.g. the
35 trajectories replayed by session 15's code:

    git worktree add /tmp/old 9a2d448
    PYTHONPATH=/tmp/old/src .venv/bin/python -m mementograph replay ../shared/data/agent_trajectories/*.traj.json \
        --store sqlite:///tmp/traj.db

Queries: seeded, up to `--queries` names (6+ characters, no dunders) that the archive's blocks' tool outputs define
(`definitions_shown` over each block's rendered messages); relevant are the blocks that show the definition. For
`graph` and `fused`: hit@1 and hit@5 before, then the reindex (its time and what it wrote), then hit@1 and hit@5
after. A second reindex is timed too (it finds what the first wrote: the same edges). JSON to stdout's last line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random

from mementograph.knowledge_graph.entities import reindex_entities
from mementograph.knowledge_graph.memory import definitions_shown, render_block
from mementograph.knowledge_graph.recall import rank_blocks
from mementograph.knowledge_graph.store import GraphStore, open_store

METHODS = ('graph', 'fused')


def queries(store: GraphStore, namespace: str, wanted: int) -> dict[str, set[str]]:
    where: dict[str, set[str]] = {}
    for block in store.list_blocks(namespace=namespace, session_id=None):
        text = render_block(store.recover_block(block.id, namespace=namespace).messages)
        for definition in definitions_shown(text, limit=len(text)):
            if len(definition.name) >= 6 and not definition.name.startswith('__'):
                where.setdefault(definition.name, set()).add(block.id)
    chosen = random.Random(7).sample(sorted(where), min(wanted, len(where)))
    return {name: where[name] for name in chosen}


def hits(store: GraphStore, namespace: str, asked: dict[str, set[str]]) -> dict[str, dict[str, float]]:
    scores: dict[str, dict[str, float]] = {}
    for method in METHODS:
        first = top5 = 0
        for name, relevant in asked.items():
            ranked = [b.block_id for b in rank_blocks(store, name, method=method, namespace=namespace)[:5]]
            first += bool(ranked) and ranked[0] in relevant
            top5 += any(block_id in relevant for block_id in ranked)
        scores[method] = {'hit@1': first / len(asked), 'hit@5': top5 / len(asked)}
    return scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--store', required=True, help='the archive (reindexed in place)')
    parser.add_argument('--namespace', default='replay', help='default: replay (what `mementograph replay` writes)')
    parser.add_argument('--queries', type=int, default=300)
    args = parser.parse_args()
    store = open_store(args.store)
    try:
        asked = queries(store, args.namespace, args.queries)
        if not asked:
            raise SystemExit(f'no block of namespace {args.namespace!r} in {args.store} shows a definition')
        before = hits(store, args.namespace, asked)
        runs = [asyncio.run(reindex_entities(store, namespace=args.namespace)) for _ in range(2)]
        after = hits(store, args.namespace, asked)
    finally:
        store.close()
    print(f'{len(asked)} definition names; reindex {runs[0].seconds:.1f} s (again: {runs[1].seconds:.1f} s): '
          f'{runs[0].blocks} blocks, {runs[0].mementos} mementos, {runs[0].mentions} MENTIONS edges, '
          f'entities {runs[0].entities_before} -> {runs[0].entities_after}')  # fmt: skip
    print(f'{"method":<8}{"hit@1 before / after":>24}{"hit@5 before / after":>24}')
    for method in METHODS:
        b, a = before[method], after[method]
        print(f'{method:<8}{b["hit@1"]:>13.3f} / {a["hit@1"]:.3f}{b["hit@5"]:>15.3f} / {a["hit@5"]:.3f}')
    report = [{'seconds': r.seconds, 'blocks': r.blocks, 'mementos': r.mementos, 'mentions': r.mentions,
               'entities_before': r.entities_before, 'entities_after': r.entities_after} for r in runs]  # fmt: skip
    print(json.dumps({'queries': len(asked), 'before': before, 'after': after, 'reindex': report}))


if __name__ == '__main__':
    main()
