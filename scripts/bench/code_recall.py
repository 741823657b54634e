"""Code recall on the shared agent trajectories: does recall find where the agent read a definition or ran a test?

Usage:
    TIKTOKEN_CACHE_DIR=... .venv/bin/python scripts/bench/code_recall.py [--data DIR] [--queries 300] [--store URI]

Every distinct block of the 35 trajectories (segmented as `recall.py` segments them, with its extractive memento
and the mentions of block and memento, as the compactor writes them) is archived once, in one session. Two query
sets, drawn with a fixed seed:

- **definitions**: a name a long tool output defines (`def apply_discount`, `class Cart`; names of 6+ characters,
  no dunders), as `definitions_shown` reads them; relevant are the blocks whose outputs define it;
- **written**: a name a command's code defines (a heredoc's file, a `python - <<EOF` script), as
  `definitions_written` reads them; relevant are the blocks whose commands define it;
- **tests**: a test a test line names (`FAILED tests/test_cart.py::test_total`, `FAIL: test_x (mod.TestX)`);
  relevant are the blocks with a test line naming it;
- **narration**: two words of the agent's own text in one block (6+ letters, no stop words, each in the text of
  at most 3 blocks: "serialization" and "deprecate", say); relevant are the blocks whose text has both.

The query is the bare name, what an agent asks when it wants back what it saw ("where was apply_discount?").
Reported per method (`graph`, `bm25`, `fused`): hit@1 and hit@5, the share of queries with a relevant block
first, or among the first five. Writes a table to stdout and JSON to bench-results/code_recall.json.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mementograph._tokens import TokenCounter
from mementograph.knowledge_graph import BlockRecord, Eviction, MementoRecord, memento_id_for
from mementograph.knowledge_graph.entities import stem
from mementograph.knowledge_graph.memory import critical_facts, definitions_shown, definitions_written, parse_regions
from mementograph.knowledge_graph.recall import rank_blocks
from mementograph.knowledge_graph.store import open_store
from recall import _relink, real_sources  # the recall bench's blocks, mementos and mentions

REPO = Path(__file__).resolve().parents[2]
TEST_NAME = re.compile(r'test_\w+|Test[A-Z0-9_]\w*')
STOP_STEMS = frozenset(stem(word) for word in ('should', 'because', 'though', 'through', 'already', 'before'))
KS = (1, 5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--data', type=Path, default=REPO.parent / 'shared' / 'data')
    parser.add_argument('--queries', type=int, default=300, help='queries per set at most (default: 300)')
    parser.add_argument('--store', default='memory://', help='where to archive the blocks (default: memory://)')
    args = parser.parse_args()

    sources = real_sources(args.data, TokenCounter())
    definitions: dict[str, set[str]] = {}
    tests: dict[str, set[str]] = {}
    written: dict[str, set[str]] = {}
    narration: dict[str, set[str]] = {}
    words_of: dict[str, dict[str, str]] = {}  # block id -> its agent text's words of 6+ letters, by stem
    word_blocks: dict[str, set[str]] = {}
    with open_store(args.store) as store:
        for seq, source in enumerate(sources):
            block = BlockRecord.from_messages(
                source.messages, session_id='code', seq=seq, tokens=source.tokens, text=source.text
            )
            memento = MementoRecord(
                id=memento_id_for('default', 'code', [block.id]), session_id='code', namespace='default',
                text=source.memento, tokens=source.memento_tokens, summarizes=(block.id,), compressor='extractive',
            )  # fmt: skip
            mentions = (*_relink(source.block_entities, block.id), *_relink(source.memento_entities, memento.id))
            store.write_eviction(Eviction(session_id='code', blocks=(block,), mementos=(memento,), mentions=mentions))
            for definition in definitions_shown(source.text, limit=len(source.text)):
                name = definition.name
                if name and len(name) >= 6 and not name.startswith('__'):
                    definitions.setdefault(name, set()).add(block.id)
            for definition in definitions_written(source.text, limit=len(source.text)):
                name = definition.name
                if name and len(name) >= 6 and not name.startswith('__'):
                    written.setdefault(name, set()).add(block.id)
            said = ' '.join(r.text for r in parse_regions(source.text) if r.label == 'assistant')
            stems = {stem(word.lower()): word.lower() for word in re.findall(r'\b[A-Za-z]{6,}\b', said)}
            words_of[block.id] = stems
            for key in stems:
                word_blocks.setdefault(key, set()).add(block.id)
            for fact in critical_facts(source.text):
                if fact.kind == 'test':
                    for part in re.split(r'::|\s|\(|\)|\[|\.', fact.text):
                        if TEST_NAME.fullmatch(part.rstrip(':,')):
                            tests.setdefault(part.rstrip(':,'), set()).add(block.id)
        rows: list[dict[str, object]] = []
        rng = random.Random(7)
        pick = random.Random(11)  # its own: a new query set leaves the others' draws as they were
        for _, stems in sorted(words_of.items()):
            rare = sorted(key for key in stems if len(word_blocks[key]) <= 3 and key not in STOP_STEMS)
            if len(rare) >= 2:
                pair = pick.sample(rare, 2)
                narration[' '.join(stems[key] for key in pair)] = word_blocks[pair[0]] & word_blocks[pair[1]]
        for label, relevant in (
            ('definitions', definitions),
            ('written', written),
            ('tests', tests),
            ('narration', narration),
        ):
            names = sorted(relevant)
            rng.shuffle(names)
            names = names[: args.queries]
            for method in ('graph', 'bm25', 'fused'):
                hits = dict.fromkeys(KS, 0)
                for name in names:
                    ranked = [hit.block_id for hit in rank_blocks(store, name, method=method, limit=max(KS))]
                    for k in KS:
                        hits[k] += bool(set(ranked[:k]) & relevant[name])
                rows.append(
                    {'queries': label, 'method': method, 'count': len(names)}
                    | {f'hit@{k}': round(hits[k] / len(names), 3) for k in KS}
                )
    print(f'{len(sources)} blocks archived')
    print('| queries | method | count | ' + ' | '.join(f'hit@{k}' for k in KS) + ' |')
    print('|---|---|---|' + '---|' * len(KS))
    for row in rows:
        print(
            f'| {row["queries"]} | {row["method"]} | {row["count"]} | '
            + ' | '.join(str(row[f'hit@{k}']) for k in KS)
            + ' |'
        )
    out = REPO / 'bench-results' / 'code_recall.json'
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({'blocks': len(sources), 'rows': rows}, indent=2))


if __name__ == '__main__':
    main()
