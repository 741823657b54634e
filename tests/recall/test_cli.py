"""`mementograph recall` and `mementograph pages` on an embedded store file."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from mementograph.cli import _recall_cmd
from mementograph.cli._common import CliError
from mementograph.eval import DialogueIngestor, IngestedDialogue
from mementograph.knowledge_graph.dense import DenseIndex, embedding_model
from mementograph.knowledge_graph.store import open_store


@pytest.fixture
def store_uri(tmp_path: Path, ingested: IngestedDialogue) -> str:
    uri = f'sqlite://{tmp_path / "memory.db"}'
    store = open_store(uri)
    DialogueIngestor.replay(store, ingested)
    store.close()
    return uri


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    _recall_cmd.register(parser.add_subparsers())
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


def test_recall_command(store_uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(['recall', 'adoption agencies', '--store', store_uri, '--k', '2']) == 0
    out = capsys.readouterr().out
    assert out.startswith('1. mem_') and '  session conv-1  score ' in out and 'adoption' in out
    assert 'recover_block(' not in out  # the agent's tool call means nothing at a terminal
    assert out.rstrip().endswith(
        'mementograph recover ID prints the archived blocks of any id above (byte-exact, hash-checked)'
    )
    assert run(['recall', 'adoption agencies', '--store', store_uri, '--json', '--method', 'graph']) == 0
    data = json.loads(capsys.readouterr().out)
    assert data['method'] == 'graph' and data['hits'][0]['memento_id'].startswith('mem_')
    assert run(['recall', 'adoption', '--store', store_uri, '--since', '2023-06-01T00:00:00+00:00', '--json']) == 0
    later = json.loads(capsys.readouterr().out)['hits']
    assert later and all(hit['started_at'] >= '2023-06-01' for hit in later)
    assert run(['recall', 'xylophone', '--store', store_uri]) == 0
    assert 'Nothing archived matches' in capsys.readouterr().out


@pytest.mark.parametrize(
    ('argv', 'message'),
    [
        (['recall', ' '], 'recall needs a query'),
        (['recall', 'adoption', '--k', '0'], '--k must be at least 1, not 0'),
        (['pages', '--page', '1', '--part', '0'], '--part must be at least 1'),
        (['pages', '--part', '2'], '--part picks a part of one page: give --page too'),
        (['pages', '--max-tokens', '5'], '--max-tokens at least 20'),
    ],
)
def test_recall_and_pages_refuse_bad_arguments(store_uri: str, argv: list[str], message: str) -> None:
    with pytest.raises(CliError, match=message) as raised:
        run([*argv, '--store', store_uri])
    assert raised.value.code == 2


def test_recall_command_by_meaning(
    store_uri: str, onnx_model_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv('MEMENTOGRAPH_EMBEDDING_MODEL', raising=False)
    query = 'Which pastime does she find calming?'  # no word of "painting relaxes me"
    model = f'onnx:{onnx_model_path}'
    key = DenseIndex(embedding_model(model)).model_key
    assert run(['recall', query, '--store', store_uri, '--json', '--embedding', model, '--no-store-vectors']) == 0
    unstored = json.loads(capsys.readouterr().out)
    assert _vectors(store_uri, key) == (0, _blocks(store_uri))
    assert run(['recall', query, '--store', store_uri, '--json', '--embedding', model]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data == unstored  # the same ranking, whether or not its vectors are kept
    assert data['method'] == 'hybrid' and any(r.startswith('dense rank 1') for r in data['hits'][0]['reasons'])
    assert _vectors(store_uri, key) == (_blocks(store_uri), _blocks(store_uri))  # the next run embeds nothing
    with pytest.raises(CliError, match='--method dense needs --embedding MODEL') as raised:
        run(['recall', query, '--store', store_uri, '--method', 'dense'])
    assert raised.value.code == 2
    with pytest.raises(CliError, match='no such embedding model'):
        run(['recall', query, '--store', store_uri, '--embedding', 'onnx:/no/such/model'])


def _vectors(uri: str, model_key: str) -> tuple[int, int]:
    store = open_store(uri)
    try:
        return len(store.read_vectors(model_key)), store.count_blocks()
    finally:
        store.close()


def _blocks(uri: str) -> int:
    return _vectors(uri, '')[1]


def test_pages_command(store_uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(['pages', '--store', store_uri, '--json']) == 0
    data = json.loads(capsys.readouterr().out)
    assert data['session_id'] == 'conv-1' and data['pages']
    first = data['pages'][0]
    assert run(['pages', '--store', store_uri]) == 0
    assert capsys.readouterr().out.startswith('session conv-1\n')
    assert run(['pages', '--store', store_uri, '--page', str(first['number']), '--max-tokens', '20', '--json']) == 0
    part = json.loads(capsys.readouterr().out)
    assert part['page'] == first['id'] and part['part'] == 1 and part['parts'] > 1
    assert part['text'].startswith(f'[page {first["number"]} {first["id"]}')
    assert f'part 1 of {part["parts"]}; next: --part 2]' in part['text']  # what a terminal user types next
    assert (
        run(['pages', '--store', store_uri, '--page', first['id'], '--max-tokens', '20', '--part', str(part['parts'])])
        == 0
    )
    assert f'part {part["parts"]} of {part["parts"]}]' in capsys.readouterr().out
    for argv, message in (
        (['--page', '99'], "no page '99' in session 'conv-1'"),
        (['--page', first['id'], '--part', str(part['parts'] + 1), '--max-tokens', '20'], f'has {part["parts"]} parts'),
        (['--session', 'nope'], "no session 'nope' in namespace 'default'"),
    ):
        with pytest.raises(CliError, match=message) as raised:
            run(['pages', '--store', store_uri, *argv])
        assert raised.value.code == 3


def test_embed_command_stores_every_vector_once(
    store_uri: str, onnx_model_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv('MEMENTOGRAPH_EMBEDDING_MODEL', raising=False)
    with pytest.raises(CliError, match='embed needs --embedding MODEL') as raised:
        run(['embed', '--store', store_uri])
    assert raised.value.code == 2
    model = f'onnx:{onnx_model_path}'
    assert run(['embed', '--store', store_uri, '--embedding', model, '--json']) == 0
    first = json.loads(capsys.readouterr().out)
    blocks = _blocks(store_uri)
    assert first['blocks'] == first['embedded'] == blocks > 0 and first['already_stored'] == 0
    assert _vectors(store_uri, first['model']) == (blocks, blocks)
    assert run(['embed', '--store', store_uri, '--embedding', model]) == 0  # a later run reads them all
    assert capsys.readouterr().out.startswith(f'0 blocks embedded and stored, {blocks} read as stored: {blocks} of')
    with pytest.raises(CliError, match="no session 'nope' in namespace 'default'") as raised:
        run(['embed', '--store', store_uri, '--embedding', model, '--session', 'nope'])
    assert raised.value.code == 3  # as every other command says of a session it does not hold, not "0 of 0"
