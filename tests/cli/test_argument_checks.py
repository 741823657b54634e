"""Options and settings that would do nothing, or something else than asked, are refused before any work: exit 2,
one line on stderr, and with `--json` the error object on stdout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mementograph._messages import serialize_messages
from mementograph.cli import main
from tests.builders import session_history


@pytest.mark.parametrize('command', [['recall', 'pkg/mod_3.py'], ['mcp']])
def test_no_store_vectors_without_an_embedding_model_is_a_bad_argument(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """It was taken and did nothing: nothing is embedded without a model, so there are no vectors to keep out."""
    monkeypatch.delenv('MEMENTOGRAPH_EMBEDDING_MODEL', raising=False)
    store = tmp_path / 'never-opened.db'
    assert main([*command, '--no-store-vectors', '--store', f'sqlite://{store}']) == 2
    err = capsys.readouterr().err
    assert err.startswith('mementograph: error: --no-store-vectors applies only with --embedding MODEL')
    assert '$MEMENTOGRAPH_EMBEDDING_MODEL' in err
    assert not store.exists()  # refused before the store is touched (mcp would create it)


def test_no_store_vectors_without_a_model_is_a_json_error_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv('MEMENTOGRAPH_EMBEDDING_MODEL', raising=False)
    assert main(['recall', 'x', '--no-store-vectors', '--json', '--store', f'sqlite://{tmp_path / "m.db"}']) == 2
    error = json.loads(capsys.readouterr().out)['error']
    assert error['kind'] == 'bad_argument' and error['exit_code'] == 2
    assert error['message'].startswith('--no-store-vectors applies only with --embedding MODEL')


@pytest.mark.parametrize('method', ['graph', 'bm25', 'fused'])
def test_no_store_vectors_with_a_method_that_embeds_nothing_is_a_bad_argument(
    method: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`recall --method graph --embedding X --no-store-vectors` was taken: the model is not even loaded for a method
    that uses no vectors, so the flag did nothing. It is refused, naming the methods that embed; the model comes
    from the environment too, and is never loaded (a path that does not exist is not reported)."""
    store = tmp_path / 'never-opened.db'
    missing = f'onnx:{tmp_path / "no-such-model"}'
    monkeypatch.setenv('MEMENTOGRAPH_EMBEDDING_MODEL', missing)
    for given in ([], ['--embedding', missing]):
        assert (
            main(['recall', 'x', '--method', method, *given, '--no-store-vectors', '--store', f'sqlite://{store}']) == 2
        )
        err = capsys.readouterr().err
        assert err.startswith(
            'mementograph: error: --no-store-vectors applies only to the methods that use --embedding (dense, hybrid)'
        )
        assert f'--method {method} embeds nothing' in err
    assert (
        main(['recall', 'x', '--method', method, '--no-store-vectors', '--json', '--store', f'sqlite://{store}']) == 2
    )
    error = json.loads(capsys.readouterr().out)['error']
    assert error['kind'] == 'bad_argument' and error['message'].startswith('--no-store-vectors applies only to')
    assert not store.exists()  # refused before the store is touched


@pytest.mark.parametrize('method', ['graph', 'bm25', 'fused'])
def test_an_embedding_model_with_a_method_that_embeds_nothing_is_a_bad_argument(
    method: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`recall --method graph --embedding X` was taken, and the model never loaded: the user who named one got a
    ranking without it. Refused, naming the methods that use it, before the store is opened. A model from the
    environment is a default for the methods that use one: with it set, `--method graph` still recalls."""
    monkeypatch.delenv('MEMENTOGRAPH_EMBEDDING_MODEL', raising=False)
    store = tmp_path / 'never-opened.db'
    missing = f'onnx:{tmp_path / "no-such-model"}'  # never loaded: its absence is not what is reported
    argv = ['recall', 'x', '--method', method, '--embedding', missing, '--store', f'sqlite://{store}']
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        'mementograph: error: --embedding applies only to the methods that use it (dense, hybrid): '
        f'--method {method} embeds nothing'
    )
    assert main([*argv, '--json']) == 2
    error = json.loads(capsys.readouterr().out)['error']
    assert error['kind'] == 'bad_argument' and error['message'].startswith('--embedding applies only to')
    assert not store.exists()  # refused before the store is touched

    monkeypatch.setenv('MEMENTOGRAPH_EMBEDDING_MODEL', missing)
    assert main(['recall', 'x', '--method', method, '--store', 'memory://', '--json']) == 0
    assert json.loads(capsys.readouterr().out) == {'query': 'x', 'method': method, 'hits': []}


@pytest.mark.parametrize('benchmark', ['locomo', 'longmemeval'])
def test_an_embedding_model_with_eval_methods_that_embed_nothing_is_a_bad_argument(
    benchmark: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`eval locomo PATH --methods graph,bm25 --embedding X` was taken: the model was loaded (a local one run once)
    and never used, the report naming no model. Refused as `recall --method graph --embedding X` is, before the
    model is loaded or the run announced; from the environment it is a default, and `--methods graph` still runs
    without loading it (here to the empty file's own error)."""
    monkeypatch.delenv('MEMENTOGRAPH_EMBEDDING_MODEL', raising=False)
    path = tmp_path / 'empty.json'
    path.write_text('[]')
    missing = f'onnx:{tmp_path / "no-such-model"}'  # never loaded: its absence is not what is reported
    argv = ['eval', benchmark, str(path), '--methods', 'graph,bm25', '--embedding', missing, '--workers', '1']
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err == (
        'mementograph: error: --embedding applies only to the methods that use it (dense, hybrid): '
        '--methods graph,bm25 embeds nothing\n'
    )
    assert main([*argv, '--json']) == 2
    error = json.loads(capsys.readouterr().out)['error']
    assert error['kind'] == 'bad_argument' and error['message'].startswith('--embedding applies only to')

    monkeypatch.setenv('MEMENTOGRAPH_EMBEDDING_MODEL', missing)
    assert main(['eval', benchmark, str(path), '--methods', 'graph', '--workers', '1', '--json']) == 1
    error = json.loads(capsys.readouterr().out)['error']
    assert 'no question to score' in error['message']
    # with a method that embeds, the model from the environment is used: loaded, and so its absence reported
    assert main(['eval', benchmark, str(path), '--methods', 'graph,hybrid', '--workers', '1', '--json']) == 2
    assert 'no such embedding model' in json.loads(capsys.readouterr().out)['error']['message']


def test_a_misspelt_entity_model_is_refused_by_reindex(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """It was warned about once per run while the archive was reindexed without the model: the run's purpose."""
    monkeypatch.setenv('MEMENTOGRAPH_ENTITY_MODEL', 'opnai:gpt-4o-mini')
    store = tmp_path / 'never-opened.db'
    assert main(['reindex', '--store', f'sqlite://{store}', '--json']) == 2
    out, err = capsys.readouterr()
    error = json.loads(out)['error']
    assert error['kind'] == 'bad_argument' and error['exit_code'] == 2 and error['message'] in err
    message = error['message']
    assert "cannot use 'opnai:gpt-4o-mini' as the entity model" in message
    assert 'provider:model' in message and 'openai:gpt-4o-mini' in message  # the valid forms
    assert '$MEMENTOGRAPH_ENTITY_MODEL' in message and 'unset it' in message
    assert not store.exists()


def test_a_misspelt_entity_model_is_refused_by_demo_and_replay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both run the capability, which refuses the setting when it is made: a bad setting, before any work."""
    monkeypatch.setenv('MEMENTOGRAPH_ENTITY_MODEL', 'gpt-4o')
    transcript = tmp_path / 'session.json'
    transcript.write_bytes(serialize_messages(session_history(4)))
    for argv in (
        ['demo', '--store', 'memory://', '--no-plot'],
        ['replay', str(transcript), '--jobs', '1'],
    ):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("mementograph: error: cannot use 'gpt-4o' as the entity model"), argv
        assert "Did you mean 'openai-chat:gpt-4o'?" in err  # pydantic-ai's suggestion for a near miss


def test_demo_refuses_a_plot_file_it_would_write_in_another_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / 'sawtooth.txt'
    assert main(['demo', '--store', 'memory://', '--plot', str(out)]) == 2
    err = capsys.readouterr().err
    assert f'--plot {out} has the extension .txt; a plot is saved as .png, .svg, .pdf' in err
    assert not out.exists()
