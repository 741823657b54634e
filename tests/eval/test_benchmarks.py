"""LoCoMo and LongMemEval evaluators on small slices of the shared data, and the `eval` command."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from mementograph.cli import _eval_cmd
from mementograph.cli._common import CliError
from mementograph.eval import (
    ALL_METHODS,
    EVAL_METHODS,
    EngineSpec,
    evaluate_locomo,
    evaluate_longmemeval,
    format_table,
    locomo_tables,
    longmemeval_tables,
)
from mementograph.knowledge_graph.dense import OnnxEmbeddingModel


def test_locomo_slice(locomo_slice: Path) -> None:
    report = evaluate_locomo(locomo_slice, ks=(5, 10, 50), workers=1)
    assert report.methods == EVAL_METHODS and report.conversations == 1
    assert report.questions['overall'] >= 20
    for method in report.methods:
        values = [report.recall[method]['overall'][k] for k in report.ks]
        assert values == sorted(values) and values[0] >= 0.0 and values[-1] <= 1.0
    assert report.recall['fused']['overall'][50] >= 0.6  # a small haystack: most evidence is found
    sources = {r.name: r for r in report.retention}
    assert set(sources) == {'mementos', 'raw evidence turns', 'session summaries', 'observations'}
    assert 0 < sources['mementos'].size_ratio < 1 and sources['raw evidence turns'].retained > 0
    assert report.mementos == report.blocks and report.turns > 50
    text = '\n'.join(format_table(t) for t in locomo_tables(report))
    assert 'R@10' in text and 'single-hop' in text and 'Answer retention' in text
    json.dumps(report.to_json())


def test_longmemeval_slice(longmemeval_oracle: Path) -> None:
    report = evaluate_longmemeval(longmemeval_oracle, pooled=True, limit=4, workers=1)
    assert report.scopes == ('per-question', 'pooled') and report.questions['overall'] == 4
    for scope in report.scopes:
        for method in report.methods:
            overall = report.scores[scope][method]['overall']
            assert set(overall) == {'recall_all@5', 'recall_all@10', 'ndcg_any@5', 'ndcg_any@10'}
            assert all(0.0 <= value <= 1.0 for value in overall.values())
            assert overall['recall_all@10'] >= overall['recall_all@5']
    assert report.scores['per-question']['fused']['overall']['recall_all@10'] >= 0.75
    text = '\n'.join(format_table(t) for t in longmemeval_tables(report))
    assert 'pooled' in text and 'recall_all@5' in text


def test_eval_command_prints_json(locomo_slice: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    _eval_cmd.register(parser.add_subparsers())
    args = parser.parse_args(
        ['eval', 'locomo', str(locomo_slice), '--k', '5,10', '--methods', 'bm25,graph', '--json', '--workers', '1']
    )
    assert args.func(args) == 0
    data = json.loads(capsys.readouterr().out)
    assert data['methods'] == ['bm25', 'graph'] and data['ks'] == [5, 10]
    with pytest.raises(SystemExit):
        parser.parse_args(['eval', 'locomo', str(locomo_slice), '--methods', 'vector'])
    dense = parser.parse_args(['eval', 'locomo', str(locomo_slice), '--methods', 'dense', '--embedding', ''])
    with pytest.raises(CliError, match='dense need --embedding MODEL'):
        dense.func(dense)
    missing = parser.parse_args(['eval', 'locomo', str(locomo_slice), '--embedding', 'onnx:/no/such/model'])
    with pytest.raises(CliError, match='/no/such/model: no such embedding model') as raised:
        missing.func(missing)
    assert raised.value.code == 2


def test_dense_methods_in_both_evaluators(
    locomo_slice: Path, longmemeval_oracle: Path, onnx_model_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = OnnxEmbeddingModel(onnx_model_path)
    report = evaluate_locomo(locomo_slice, ks=(5, 10, 50), workers=1, embedding=model)
    assert report.methods == ALL_METHODS and report.embedding_model == model.model_name
    for method in ('dense', 'hybrid'):
        values = [report.recall[method]['overall'][k] for k in report.ks]
        assert values == sorted(values) and values[-1] >= 0.6
    # the lexical methods rank as they do without a model
    plain = evaluate_locomo(locomo_slice, ks=(5, 10, 50), workers=1, methods=('fused',))
    assert plain.recall['fused'] == report.recall['fused']
    lme = evaluate_longmemeval(longmemeval_oracle, pooled=True, limit=3, workers=1, embedding=model)
    for scope in ('per-question', 'pooled'):
        for method in ('dense', 'hybrid'):
            overall = lme.scores[scope][method]['overall']
            assert overall['recall_all@10'] >= overall['recall_all@5'] and 0.0 <= overall['ndcg_any@5'] <= 1.0
    assert lme.scores['per-question']['hybrid']['overall']['recall_all@10'] >= 0.6
    parser = argparse.ArgumentParser()
    _eval_cmd.register(parser.add_subparsers())
    args = parser.parse_args(
        ['eval', 'locomo', str(locomo_slice), '--k', '10', '--methods', 'dense,hybrid', '--json', '--workers', '1',
         '--embedding', f'onnx:{onnx_model_path}']
    )  # fmt: skip
    assert args.func(args) == 0
    data = json.loads(capsys.readouterr().out)
    assert data['methods'] == ['dense', 'hybrid'] and data['embedding_model'] == model.model_name
    assert data['seconds_embed'] > 0


def test_mementos_written_and_judged_by_a_model(
    locomo_slice: Path, longmemeval_oracle: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = argparse.ArgumentParser()
    _eval_cmd.register(parser.add_subparsers())
    # pydantic-ai's `test` model stands for any model name (`openai:gpt-4o-mini`, ...)
    models = ['--compressor', 'test', '--judge', 'test']
    args = parser.parse_args(
        ['eval', 'locomo', str(locomo_slice), '--methods', 'bm25', *models, '--json', '--workers', '1']
    )
    assert args.func(args) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data['compressor'], data['judge']) == ('llm:test', 'rubric+llm:test')
    assert data['usage_tokens'] > 0 and data['mementos'] > 0
    default = evaluate_locomo(locomo_slice, methods=('bm25',), workers=1)
    assert (default.compressor, default.judge, default.usage_tokens) == ('extractive', 'rubric', 0)
    mementos = {r['source']: r for r in data['answer_retention']}['mementos']
    assert mementos['size_ratio'] != {r.name: r for r in default.retention}['mementos'].size_ratio
    # worker processes build the same engine from the names
    pooled = evaluate_longmemeval(
        longmemeval_oracle, limit=3, workers=2, methods=('bm25',), engine=EngineSpec(compressor='test')
    )
    assert pooled.compressor == 'llm:test' and pooled.usage_tokens > 0
    for option in ('--compressor', '--judge'):
        bad = parser.parse_args(['eval', 'locomo', str(locomo_slice), option, 'nosuchprovider:model'])
        with pytest.raises(CliError, match=f'{option} nosuchprovider:model: .*nosuchprovider') as raised:
            bad.func(bad)
        assert raised.value.code == 2


def test_evaluators_say_what_they_are_doing(locomo_slice: Path, longmemeval_oracle: Path) -> None:
    heard: list[str] = []
    evaluate_locomo(locomo_slice, methods=('bm25',), workers=1, progress=heard.append)
    assert heard[0] == 'ingested 1/1 dialogues' and heard[-1].startswith('ranking ') and len(heard) == 2
    heard.clear()
    evaluate_longmemeval(longmemeval_oracle, limit=3, workers=2, methods=('bm25',), progress=heard.append)
    sessions = [message for message in heard if message.startswith('ingested ')]
    total = int(sessions[-1].split('/')[1].split()[0])
    assert sessions == [f'ingested {n}/{total} dialogues' for n in range(1, total + 1)] and total >= 3
    assert heard[-1] == 'ranking 3 questions'


def test_blocks_whose_compressor_failed_are_counted_and_named(
    locomo_slice: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # without the provider's package (or, with it, without a key) every block's compressor run fails
    monkeypatch.delenv('OPENAI_API_KEY', raising=False)
    report = evaluate_locomo(locomo_slice, methods=('bm25',), workers=1, engine=EngineSpec(compressor='openai:x'))
    assert report.mementos == 0 and len(report.memento_errors) == report.blocks > 0
    data = report.to_json()
    assert data['blocks_without_memento'] == report.blocks and len(data['memento_errors']) == 1
    assert data['memento_errors'][0].startswith('llm:openai:x failed: ')
    # the blocks are still archived and ranked by their own text
    assert report.recall['bm25']['overall'][10] > 0
    assert f'{report.blocks} blocks without a memento, the compressor failed: ' in _eval_cmd._written_by(report)


def test_extractive_settings_reach_the_ingest_workers(locomo_slice: Path) -> None:
    def mementos(engine: EngineSpec) -> tuple[float, int]:
        report = evaluate_locomo(locomo_slice, methods=('bm25',), workers=2, engine=engine)
        return next(r.size_ratio for r in report.retention if r.name == 'mementos'), report.verified

    flat, flat_verified = mementos(EngineSpec())
    stretched, verified = mementos(EngineSpec(extractive=(('dialogue_stretch', 2.0),)))
    assert stretched > flat  # dense sentences past the target: larger mementos, built in the worker processes
    assert verified == flat_verified


@pytest.mark.parametrize('benchmark', ['locomo', 'longmemeval'])
def test_an_empty_benchmark_is_bad_input_and_a_count_below_one_a_bad_argument(
    benchmark: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An empty file ended in `KeyError: 'graph'` (LongMemEval) or a table of zeros (LoCoMo), and `--limit 0`,
    `--limit -1` or `--workers 0` were taken. A file with nothing to use exits 1, as `replay` of an empty
    transcript does (it exited 2 here, the code of a bad argument); with `--json` that is the error's object."""
    from mementograph.cli import main

    empty = tmp_path / 'empty.json'
    empty.write_text('[]')
    assert main(['eval', benchmark, str(empty)]) == 1
    assert 'no question to score' in capsys.readouterr().err
    assert main(['replay', str(empty)]) == 1
    assert 'no opening request' in capsys.readouterr().err
    assert main(['eval', benchmark, str(empty), '--json']) == 1
    error = json.loads(capsys.readouterr().out)['error']
    assert error['kind'] == 'error' and error['exit_code'] == 1 and 'no question to score' in error['message']
    for option, value in (('--limit', '0'), ('--limit', '-1'), ('--workers', '0')):
        with pytest.raises(SystemExit) as exited:
            main(['eval', benchmark, str(empty), option, value])
        assert exited.value.code == 2
        assert 'expected a positive integer' in capsys.readouterr().err


def test_eval_locomo_refuses_a_bad_store_uri_as_a_bad_argument(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mementograph.cli import main

    benchmark = tmp_path / 'b.json'
    benchmark.write_text('[]')
    assert main(['eval', 'locomo', str(benchmark), '--store', 'foo://x']) == 2  # was 1, after reading the file
    assert "unknown store URI 'foo://x'" in capsys.readouterr().err


def test_longmemeval_at_the_end_of_the_calendar(tmp_path: Path) -> None:
    """A question asked on 9999-12-31 has no midnight after it: the day's bound overflowed (`OverflowError`), and
    so did a session's later turns stamped seconds after a start at the calendar's last second. The bound is open
    there (no session can be dated later), the turns keep their order at the last moment."""
    sessions = {
        'gold': ('9999-12-31T23:59:59', ['I feed my sourdough starter rye flour every morning.', 'Rye suits it well.']),
        'other': ('2023/05/01 (Mon) 09:00', ['We repainted the garden shed green.', 'Green looks fresh.']),
    }
    item = {
        'question_id': 'q1',
        'question_type': 'single-session-user',
        'question': 'What flour do I feed my sourdough starter?',
        'question_date': '9999/12/31 (Fri) 23:59',
        'answer_session_ids': ['gold'],
        'haystack_session_ids': list(sessions),
        'haystack_dates': [date for date, _ in sessions.values()],
        'haystack_sessions': [
            [{'role': role, 'content': text} for role, text in zip(('user', 'assistant'), turns, strict=True)]
            for _, turns in sessions.values()
        ],
    }
    path = tmp_path / 'end.json'
    path.write_text(json.dumps([item]), encoding='utf-8')
    report = evaluate_longmemeval(path, pooled=True, methods=('bm25',), workers=1)
    assert report.questions['overall'] == 1 and report.sessions == 2
    for scope in ('per-question', 'pooled'):
        assert report.scores[scope]['bm25']['overall']['recall_all@5'] == 1.0  # the gold session was not filtered out
