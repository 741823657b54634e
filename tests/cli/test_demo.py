"""`mementograph demo`: the main job end to end, in a fresh HOME, on the embedded default and on Neo4j."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mementograph.cli import main
from mementograph.cli._demo import _engine_parts
from mementograph.knowledge_graph.memory import CombinedJudge, LLMCompressor, LLMJudge
from mementograph.knowledge_graph.store import open_store
from tests.cli.conftest import DemoRun
from tests.conftest import neo4j_uri_with_auth

PNG_MAGIC = b'\x89PNG\r\n\x1a\n'


def assert_png(path: Path) -> None:
    """A real PNG that matplotlib reads back as an image of plausible size."""
    import matplotlib.image

    assert path.is_file()
    assert path.read_bytes()[:8] == PNG_MAGIC
    image = matplotlib.image.imread(path)
    assert image.ndim == 3 and image.shape[0] > 200 and image.shape[1] > 400


def test_demo_json_in_a_fresh_home(demo_run: DemoRun) -> None:
    assert demo_run.returncode == 0, demo_run.stderr
    data = demo_run.data  # stdout is nothing but the JSON summary
    assert 'Traceback' not in demo_run.stderr
    assert 'request ' not in demo_run.stderr  # no progress lines with --json when stderr is not a terminal

    # the embedded default, under the new HOME's user data directory
    assert data['store'].startswith(f'sqlite://{demo_run.home}')
    assert data['model'] == 'scripted' and data['output'].startswith('Fixed all')

    # the sawtooth: the context stays under the budget while the session grows far past it
    assert data['evictions'] > 0 and data['compactions']
    assert data['requests'] == len(data['context_tokens']) == len(data['baseline_tokens'])
    assert max(data['context_tokens']) <= data['budget'] < max(data['baseline_tokens'])
    assert data['peak_tokens'] == max(data['context_tokens'])

    # mementos judged, with their scores reported
    assert data['mementos'] == len(data['memento_scores']) > 0
    assert all(m['score'] is not None for m in data['memento_scores'])
    assert data['verified_mementos'] == sum(m['verified'] for m in data['memento_scores']) > 0

    # the recovered block is identical to what the agent held, to the log, and to its hash
    recovery = data['recovery']
    assert data['recovered_exact'] is True and recovery['block_id'] == data['recovered_block']
    assert recovery['sha256_ok'] and recovery['exact_vs_run'] and recovery['exact_vs_log']
    assert recovery['messages'] > 0 and len(recovery['sha256']) == 64

    # recall by an entity of the evicted blocks finds evicted blocks; pages and Cypher report rows
    assert data['recall']['query'] and data['recall_hits']
    assert data['page_index'].startswith('MEMORY INDEX') and data['pages']
    assert data['cypher']['backend'] == 'embedded'
    assert [q['name'] for q in data['cypher']['queries']] == ['recent_mementos', 'page_blocks']
    assert all(q.get('rows') for q in data['cypher']['queries'])

    # the PNG, in the working directory by default
    assert data['plot'] == str(demo_run.cwd / 'mementograph-demo.png')
    assert_png(Path(data['plot']))

    store = open_store(data['store'])
    try:
        session = data['session_id']
        blocks = {b.id for b in store.list_blocks(session_id=session)}
        assert len(blocks) == data['evictions'] and set(data['recall_hits']) <= blocks
        assert store.recover_block(data['recovered_block'], session_id=session).record.sha256 == recovery['sha256']
    finally:
        store.close()


def test_demo_text_shows_the_whole_job(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plot = tmp_path / 'saw.png'
    code = main(['demo', '--store', f'sqlite://{tmp_path / "m.db"}', '--plot', str(plot)])
    out, err = capsys.readouterr()
    assert code == 0
    # progress on stderr (plain lines: not a terminal), one per request, with compactions and judge scores
    assert 'request   1' in err and 'compaction before request' in err and 'judge' in err and 'verified' in err
    # the report on stdout
    assert 'identical to the messages the agent held: yes; to the session log: yes' in out
    # the demo's merges are cut to their room: their being unverified is explained, not left to look like a fault
    counts = re.search(r'(\d+) mementos, (\d+) verified by the judge', out)
    assert counts is not None
    explained = 'of mementos: cut to the room mementos have in the context' in out
    assert explained == (int(counts[1]) > int(counts[2]))
    assert 'recall(' in out and 'MEMORY INDEX' in out and 'Cypher on the embedded store' in out
    assert f'sawtooth plot saved to {plot}' in out
    assert '\x1b[' not in out + err  # no colour codes when not a terminal
    assert_png(plot)


def test_demo_with_a_real_model_wires_up(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--model test` (pydantic-ai's TestModel): the agent runs on that model, calling the demo's real tools."""
    code = main(['demo', '--model', 'test', '--store', 'memory://', '--json', '--no-plot'])
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    assert data['model'] == 'test' and data['plot'] is None
    assert data['requests'] >= 2 and len(data['context_tokens']) == data['requests']
    # TestModel calls every tool once: the demo's tools answered (a missing file is a message, not a crash)
    assert 'no such file in the workspace' in data['output'] and 'only `python ...` commands' in data['output']


def test_llm_compressor_and_judge_use_the_model() -> None:
    compressor, judge = _engine_parts('test', llm_compressor=True, llm_judge=True)
    assert isinstance(compressor, LLMCompressor) and compressor.model == 'test'
    assert isinstance(judge, CombinedJudge) and isinstance(judge.llm, LLMJudge) and judge.llm.model == 'test'
    assert _engine_parts('test', llm_compressor=False, llm_judge=False) == (None, 'default')


@pytest.mark.parametrize(
    ('argv', 'message'),
    [
        (['--llm-judge'], '--llm-compressor and --llm-judge need --model'),
        (['--model', 'nosuch:model'], '--model nosuch:model: Unknown model'),
        (['--budget', '0'], '--budget must be a positive number'),
        (['--plot', '/nonexistent-dir/x.png'], 'directory /nonexistent-dir does not exist'),
    ],
)
def test_user_errors_are_one_line(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(['demo', '--store', 'memory://', *argv]) == 2
    out, err = capsys.readouterr()
    assert out == '' and err.startswith('mementograph: error: ') and message in err and 'Traceback' not in err


@pytest.mark.neo4j
def test_demo_on_neo4j_runs_cypher(
    neo4j_server: dict[str, str], unique_namespace: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = neo4j_uri_with_auth(neo4j_server)
    plot = tmp_path / 'neo4j.png'
    code = main(['demo', '--store', uri, '--namespace', unique_namespace, '--json', '--plot', str(plot)])
    data = json.loads(capsys.readouterr().out)
    store = open_store(uri)
    try:
        assert code == 0
        assert data['namespace'] == unique_namespace and data['evictions'] > 0 and data['recovered_exact']
        assert data['cypher']['backend'] == 'neo4j'
        queries = {q['name']: q for q in data['cypher']['queries']}
        assert set(queries) == {'recent_mementos', 'page_blocks', 'tokens_saved'}
        assert len(queries['recent_mementos']['rows']) == 5
        assert {row['memento'] for row in queries['recent_mementos']['rows']} <= {
            m['id'] for m in data['memento_scores']
        }
        assert queries['page_blocks']['rows'][0]['first_message'] >= 0
        (saved,) = queries['tokens_saved']['rows']  # the only session of this namespace: the demo's
        assert saved['session'] == data['session_id'] and saved['saved'] > 0
        assert data['recall_hits'] and data['page_index']
        assert_png(plot)
        assert len(store.list_blocks(namespace=unique_namespace, session_id=data['session_id'])) == data['evictions']
    finally:
        store.delete_session(data['session_id'], namespace=unique_namespace)
        store.close()
