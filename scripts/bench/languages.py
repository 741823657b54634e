"""Recall and mementos in other languages.

Recall: one short exchange each in Chinese, Japanese, Korean, German, French, Russian and English, and queries that
name a word of one of them; which method finds that exchange first. Mementos: the same planning exchange (a path,
a command, durations) in Chinese, Japanese, German and English through the memento engine; the memento's size
against its block's, and whether it keeps the path. Page topics: five blocks of one working session in German,
French, Spanish and English closed as one page (`pages_for_eviction`), and which of its topics are function words.

Usage:
    TIKTOKEN_CACHE_DIR=... .venv/bin/python scripts/bench/languages.py [--store URI] [--namespace NS]

The store (default: a new SQLite file in a temporary directory) gets the exchanges as blocks of one session of
`--namespace`, with the entities the extractor finds in them, as the compactor writes them; an existing session of
that name is deleted first. A query is a hit for a method when that method's first result is the exchange it was
written from. Prints tables and, on the last line, JSON: per method the hits out of the queries, each miss, and
each language's memento.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

from mementograph._tokens import TokenCounter
from mementograph.knowledge_graph import BlockRecord, Eviction
from mementograph.knowledge_graph.entities import mentions_for
from mementograph.knowledge_graph.memory import BlockInput, MementoEngine, render_block
from mementograph.knowledge_graph.recall import PagePolicy, pages_for_eviction, recall
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
PLANNING = {
    'zh': (
        '我们昨天讨论了数据库迁移的问题。我觉得应该先备份所有的订单数据，然后再把表结构改成新的格式。'
        '迁移脚本放在scripts/migrate.py里面，运行时间大约需要四十分钟。',
        '好的，我同意先备份。备份命令是pg_dump -Fc orders > orders.dump，我已经在测试环境上试过了，一共用了十二分钟。'
        '下周一上午十点我们再开会确认最终的上线时间。',
    ),
    'ja': (
        '昨日はデータベースの移行について話しました。まず全ての注文データをバックアップしてから、'
        'テーブル構造を新しい形式に変更すべきだと思います。移行スクリプトはscripts/migrate.pyにあり、実行に約四十分かかります。',
        'わかりました。バックアップのコマンドはpg_dump -Fc orders > orders.dumpで、テスト環境で試したところ十二分かかりました。'
        '来週の月曜日の午前十時にリリース日を確認しましょう。',
    ),
    'de': (
        'Gestern haben wir über die Migration der Datenbank gesprochen. Ich denke, wir sollten zuerst alle '
        'Bestelldaten sichern und dann das Tabellenschema ändern. Das Skript liegt in scripts/migrate.py und läuft '
        'etwa vierzig Minuten.',
        'Einverstanden. Der Befehl für das Backup ist pg_dump -Fc orders > orders.dump, ich habe ihn in der '
        'Testumgebung ausprobiert, er brauchte zwölf Minuten. Nächsten Montag um zehn Uhr besprechen wir den '
        'Starttermin.',
    ),
    'en': (
        'Yesterday we talked about the database migration. I think we should first back up all the order data and '
        'then change the table schema. The script is in scripts/migrate.py and runs for about forty minutes.',
        'Agreed. The backup command is pg_dump -Fc orders > orders.dump, I tried it in the test environment, it took '
        'twelve minutes. Next Monday at ten we confirm the release date.',
    ),
}

SESSIONS = {
    'de': (
        'Wir haben heute die Datenbank auf den neuen Server migriert, und das Skript scripts/migrate.py lief zwölf '
        'Minuten.',
        'Die Tabelle der Bestellungen ist jetzt doppelt so groß, weil wir die alten Einträge nicht gelöscht haben.',
        'Ich habe den Index auf der Spalte kunden_id neu gebaut, aber die Abfrage ist immer noch langsam.',
        'Kannst du bitte prüfen, ob der Cronjob für die Sicherung noch läuft? Ich sehe keine neuen Dateien.',
        'Der Cronjob lief nicht, weil das Passwort für den Sicherungsbenutzer abgelaufen war.',
    ),
    'fr': (
        'Nous avons migré la base de données vers le nouveau serveur, et le script scripts/migrate.py a tourné douze '
        'minutes.',
        "La table des commandes est maintenant deux fois plus grande, car nous n'avons pas supprimé les anciennes "
        'lignes.',
        "J'ai reconstruit l'index sur la colonne client_id, mais la requête est toujours lente.",
        'Peux-tu vérifier si la tâche cron de sauvegarde tourne encore ? Je ne vois pas de nouveaux fichiers.',
        "La tâche cron ne tournait pas, parce que le mot de passe de l'utilisateur de sauvegarde avait expiré.",
    ),
    'es': (
        'Hoy hemos migrado la base de datos al nuevo servidor, y el script scripts/migrate.py tardó doce minutos.',
        'La tabla de pedidos ahora es el doble de grande, porque no hemos borrado los registros antiguos.',
        'He reconstruido el índice sobre la columna cliente_id, pero la consulta todavía es lenta.',
        '¿Puedes comprobar si la tarea cron de la copia de seguridad sigue funcionando? No veo archivos nuevos.',
        'La tarea cron no funcionaba porque la contraseña del usuario de copias había caducado.',
    ),
    'en': (
        'Today we migrated the database to the new server, and the script scripts/migrate.py ran for twelve minutes.',
        'The orders table is now twice as large, because we did not delete the old rows.',
        'I rebuilt the index on the customer_id column, but the query is still slow.',
        'Can you check whether the backup cron job is still running? I see no new files.',
        'The cron job did not run because the password of the backup user had expired.',
    ),
}


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


FUNCTION_WORDS = {
    'de': _words('aber als auf aus das dass den der die ein eine für haben ich ist mit nicht noch und war weil wir'),
    'fr': _words('avec avons car des est les mais nous pas plus que qui sur une vous'),
    'es': _words('ahora como con del este hemos las los más para pero por porque que una'),
    'en': _words('and because but did the was what when with'),
}
"""The function words a topic must not be: the language's commonest, fixed here so that any version of the code is
measured against the same list."""


def page_topics() -> dict[str, dict[str, object]]:
    """Each language's session closed as one page: its topics, and those that are function words."""
    out: dict[str, dict[str, object]] = {}
    print(f'\n{"language":<9} {"function words":>15}  topics')
    for language, texts in SESSIONS.items():
        store = open_store('memory://')
        try:
            blocks = []
            for seq, text in enumerate(texts):
                messages = [ModelRequest(parts=[UserPromptPart(text)])]
                blocks.append(
                    BlockRecord.from_messages(
                        messages, session_id='s1', seq=seq, tokens=40, text=render_block(messages)
                    )
                )
            mentions = tuple(mention for block in blocks for mention in mentions_for(block.id, block.text))
            pages = pages_for_eviction(
                store,
                session_id='s1',
                blocks=blocks,
                mementos=(),
                mentions=mentions,
                policy=PagePolicy(blocks_per_page=len(blocks)),
            )
        finally:
            store.close()
        topics = list(pages[0].topics)
        function = [topic for topic in topics if topic.lower() in FUNCTION_WORDS[language]]
        out[language] = {'topics': topics, 'function_words': function}
        print(f'{language:<9} {len(function):>11}/{len(topics)}  {", ".join(topics)}')
    return out


def mementos() -> dict[str, dict[str, object]]:
    """Each language's planning exchange through the memento engine (extractive compressor, rubric judge)."""
    counter, engine, stamp = TokenCounter(), MementoEngine(), datetime(2024, 5, 7, 10, tzinfo=UTC)
    out: dict[str, dict[str, object]] = {}
    print(f'\n{"language":<9} {"block":>6} {"memento":>8} {"ratio":>6} {"verified":>9} {"path kept":>10}')
    for language, (user, answer) in PLANNING.items():
        messages = [
            ModelRequest(parts=[UserPromptPart(user, timestamp=stamp)]),
            ModelResponse(parts=[TextPart(answer)], timestamp=stamp),
        ]
        block = BlockInput.from_messages(messages, counter)
        result = asyncio.run(engine.make_memento(block))
        row = {
            'block_tokens': block.tokens,
            'memento_tokens': result.tokens,
            'verified': result.verified,
            'path_kept': 'scripts/migrate.py' in result.text,
            'memento': result.text,
        }
        out[language] = row
        print(
            f'{language:<9} {block.tokens:>6} {result.tokens:>8} {result.tokens / block.tokens:>6.2f} '
            f'{result.verified!s:>9} {row["path_kept"]!s:>10}'
        )
    return out


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
    made = mementos()
    topics = page_topics()
    summary = {'queries': len(QUERIES), 'hits': hits, 'misses': misses, 'mementos': made, 'page_topics': topics}
    print(json.dumps(summary, ensure_ascii=False))


if __name__ == '__main__':
    main()
