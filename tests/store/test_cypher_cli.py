"""`mementograph query`: parameters, output, and errors, on the embedded store (Neo4j: test_neo4j_query.py)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from mementograph.cli import _query
from mementograph.cli._common import CliError
from mementograph.knowledge_graph.store import ReadOnlyViolationError, UnsupportedQueryError, open_store
from tests.store.test_cypher_examples import APP, write_known_data


def _cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog='mementograph')
    commands = parser.add_subparsers(dest='command', required=True)
    _query.register(commands)
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


@pytest.fixture
def db(tmp_path: Path, unique_namespace: str) -> str:
    uri = f'sqlite://{tmp_path / "memory.db"}'
    store = open_store(uri)
    try:
        write_known_data(store, unique_namespace)
    finally:
        store.close()
    return uri


@pytest.mark.parametrize(
    ('text', 'expected'),
    [
        ('n=5', ('n', 5)),
        ('$flag=true', ('flag', True)),
        ('name=src/app.py', ('name', 'src/app.py')),
        ('quoted="5"', ('quoted', '5')),
        ('ids=["a", "b"]', ('ids', ['a', 'b'])),
        ('empty=', ('empty', '')),
        ('eq=a=b', ('eq', 'a=b')),
    ],
)
def test_param_values_are_json_or_text(text: str, expected: tuple[str, object]) -> None:
    assert _query.parse_param(text) == expected


def test_param_without_a_name_is_a_usage_error() -> None:
    with pytest.raises(_query.CliError, match='NAME=VALUE'):
        _query.parse_param('novalue')


def test_query_prints_a_table_or_json(db: str, unique_namespace: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        'query', 'MATCH (b:EvictedBlock {namespace: $namespace})-[r:MENTIONS]->(:Entity {key: $entity}) '
        'RETURN b.session_id AS session, r.count AS mentions ORDER BY mentions DESC',
        '--store', db, '--namespace', unique_namespace, '--param', f'entity={APP.key}',
    ]  # fmt: skip
    assert _cli([*argv, '--json']) == 0
    assert json.loads(capsys.readouterr().out) == [
        {'session': 'beta', 'mentions': 5}, {'session': 'alpha', 'mentions': 3}, {'session': 'alpha', 'mentions': 1}
    ]  # fmt: skip
    assert _cli(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ['session', 'mentions'] and lines[2].split() == ['beta', '5'] and lines[-1] == '(3 rows)'


def test_session_option_binds_session_id(db: str, unique_namespace: str, capsys: pytest.CaptureFixture[str]) -> None:
    cypher = 'MATCH (p:Page {namespace: $namespace, session_id: $session_id}) RETURN p.number AS n ORDER BY n'
    assert _cli(['query', cypher, '--store', db, '--namespace', unique_namespace, '--session', 'alpha', '--json']) == 0
    bound = capsys.readouterr()
    assert json.loads(bound.out) == [{'n': 1}, {'n': 2}] and 'is null without --session' not in bound.err
    assert _cli(['query', cypher, '--store', db, '--namespace', unique_namespace, '--json']) == 0
    captured = capsys.readouterr()  # no session: nothing matches, and the command says why
    assert json.loads(captured.out) == [] and '$session_id is null without --session ID' in captured.err


def test_refusals_reach_the_caller(db: str, unique_namespace: str) -> None:
    with pytest.raises(ReadOnlyViolationError):
        _cli(['query', 'MATCH (n) DETACH DELETE n', '--store', db])
    with pytest.raises(UnsupportedQueryError, match='Neo4j backend'):
        _cli(['query', 'UNWIND [1] AS x RETURN x', '--store', db])


@pytest.mark.parametrize(
    ('bounds', 'message'),
    [
        (['--limit', '0'], '--limit must be at least 1, not 0'),
        (['--limit', '-1'], '--limit must be at least 1, not -1'),
        (['--timeout', '0'], '--timeout must be a positive number of seconds, not 0'),
    ],
)
def test_bounds_that_cannot_hold_are_usage_errors(db: str, bounds: list[str], message: str) -> None:
    with pytest.raises(CliError, match=message) as raised:
        _cli(['query', 'MATCH (m:Memento) RETURN m.id', '--store', db, *bounds])
    assert raised.value.code == 2


def test_long_cells_are_cut_in_the_table_only() -> None:
    rows = [{'text': 'x' * 200, 'data': b'\xff\x00'}]
    table = _query.render_table(rows)
    assert '…' in table and len(table.splitlines()[2]) < 120
    assert _query.render_table([]) == '(no rows)'
