"""Recall in other languages: one short exchange each in Chinese, Japanese, Korean, German, French, Russian and
English, and queries that name a word of one of them; which method finds that exchange first.

Usage:
    TIKTOKEN_CACHE_DIR=... .venv/bin/python scripts/bench/languages.py [--store URI] [--namespace NS]

The store (default: a new SQLite file in a temporary directory) gets the exchanges as blocks of one session of
`--namespace`, with the entities the extractor finds in them, as the compactor writes them; an existing session of
that name is deleted first. A query is a hit for a method when that method's first result is the exchange it was
written from. Prints a table and, on the last line, JSON: per method the hits out of the queries, and each miss.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

from mementograph.knowledge_graph import BlockRecord, Eviction
from mementograph.knowledge_graph.entities import mentions_for
from mementograph.knowledge_graph.memory import render_block
from mementograph.knowledge_graph.recall import recall
from mementograph.knowledge_graph.store import open_store

EXCHANGES = [
    ('我们决定使用PostgreSQL数据库来存储用户的订单。', '好的，我会把数据库的连接字符串放在config.yaml里。'),
    ('明天下午三点开会讨论预算。', '收到，我会准备预算报告。'),
    ('東京の会議は来週の月曜日です。', 'わかりました。新幹線の切符を予約します。'),
    ('서울에서 회의가 있습니다.', '알겠습니다. 기차표를 예매하겠습니다.'),
    ('Der Flughafen in München ist geschlossen.', 'Dann nehmen wir den Zug nach Berlin über Nürnberg.'),
    ("Élodie a inscrit sa fille à l'école Jules-Ferry.", 'Très bien, la rentrée est le 4 septembre.'),
    ('Мы переехали в Новосибирск в прошлом году.', 'Как вам зима в Сибири?'),
    ('The deploy script lives in ops/deploy.sh.', 'It exits 0 since the fix to the retry loop.'),
]
QUERIES = {
    '数据库': 0,
    '用户的订单在哪里': 0,
    'PostgreSQL': 0,
    'config.yaml': 0,
    '预算': 1,
    '会議': 2,
    '新幹線の切符': 2,
    '회의가': 3,
    '서울': 3,
    'München': 4,
    'Nürnberg': 4,
    'über': 4,
    'Élodie': 5,
    'école': 5,
    'Новосибирск': 6,
    'зима': 6,
    'ops/deploy.sh': 7,
    'retry loop': 7,
}
METHODS = ('graph', 'bm25', 'fused')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--store', help='store URI (default: a new SQLite file)')
    parser.add_argument('--namespace', default='languages-bench')
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(args.store or f'sqlite:///{Path(tmp) / "languages.db"}')
        try:
            store.delete_session('s1', namespace=args.namespace)
            blocks = []
            for seq, (user, answer) in enumerate(EXCHANGES):
                messages = [ModelRequest(parts=[UserPromptPart(user)]), ModelResponse(parts=[TextPart(answer)])]
                text = render_block(messages)
                blocks.append(
                    BlockRecord.from_messages(
                        messages, session_id='s1', seq=2 * seq, tokens=40, text=text, namespace=args.namespace
                    )
                )
            mentions = tuple(mention for block in blocks for mention in mentions_for(block.id, block.text))
            store.write_eviction(
                Eviction(session_id='s1', namespace=args.namespace, blocks=tuple(blocks), mentions=mentions)
            )
            hits = {method: 0 for method in METHODS}
            misses: dict[str, list[str]] = {method: [] for method in METHODS}
            print(f'{"query":<20} ' + ' '.join(f'{method:>6}' for method in METHODS))
            for query, index in QUERIES.items():
                row = []
                for method in METHODS:
                    found = recall(store, query, k=3, method=method, namespace=args.namespace)
                    hit = bool(found) and found[0].block_id == blocks[index].id
                    hits[method] += hit
                    if not hit:
                        misses[method].append(query)
                    row.append('hit' if hit else ('miss' if found else '-'))
                print(f'{query:<20} ' + ' '.join(f'{cell:>6}' for cell in row))
            print(f'{"hits":<20} ' + ' '.join(f'{hits[method]:>3}/{len(QUERIES)}' for method in METHODS))
            store.delete_session('s1', namespace=args.namespace)
        finally:
            store.close()
    print(json.dumps({'queries': len(QUERIES), 'hits': hits, 'misses': misses}, ensure_ascii=False))


if __name__ == '__main__':
    main()
