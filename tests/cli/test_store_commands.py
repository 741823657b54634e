"""`stats`, `recover`, `transcript`, `verify` and `export` as a user meets them after the demo: the ids one command
prints are the ids the next one takes, and a mistyped store or argument is an error, never an empty answer."""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from mementograph.cli import build_parser, main
from mementograph.cli._commands import COMMANDS
from mementograph.knowledge_graph.store import open_store, recover_chain, sqlite_path
from tests.builders import session_history
from tests.cli.conftest import MEMENTOGRAPH, DemoRun, fresh_home_env
from tests.store.test_contract import make_eviction


def test_stats_names_the_newest_sessions(demo_run: DemoRun, capsys: pytest.CaptureFixture[str]) -> None:
    session = demo_run.data['session_id']
    assert main(['stats', '--store', demo_run.data['store'], '--json']) == 0
    data = json.loads(capsys.readouterr().out)
    newest = data['newest_sessions']
    assert [s['id'] for s in newest] == [session] and newest[0]['blocks'] == data['blocks'] > 0
    assert main(['stats', '--store', demo_run.data['store']]) == 0
    out = capsys.readouterr().out
    assert 'newest sessions (1 of 1):' in out and f'  {session}  started ' in out


def test_recover_takes_the_memento_ids_recall_prints(demo_run: DemoRun, capsys: pytest.CaptureFixture[str]) -> None:
    store_uri = demo_run.data['store']
    assert main(['recall', 'pkg/mod_3.py', '--store', store_uri, '--json']) == 0
    hit = json.loads(capsys.readouterr().out)['hits'][0]
    memento_id = hit['memento_id']
    assert memento_id.startswith('mem_')

    assert main(['recover', memento_id, '--store', store_uri, '--json']) == 0
    data = json.loads(capsys.readouterr().out)
    assert data['memento_id'] == memento_id
    assert [block['block_id'] for block in data['blocks']] == hit['block_ids']
    assert all(block['verified_sha256'] for block in data['blocks'])

    assert main(['recover', memento_id, '--store', store_uri]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f'memento {memento_id} summarizes {len(hit["block_ids"])} block')
    assert all(f'block {block_id}  session ' in out for block_id in hit['block_ids'])

    assert main(['recover', memento_id, '--store', store_uri, '--raw']) == 0
    raw = capsys.readouterr().out.splitlines()
    store = open_store(store_uri)
    try:
        expected = [store.get_block(block_id).messages_json.decode() for block_id in hit['block_ids']]
    finally:
        store.close()
    assert raw == expected  # the archived bytes, one block a line

    assert main(['recover', 'mem_000000000000000000000000', '--store', store_uri]) == 3
    assert 'mem_000000000000000000000000' in capsys.readouterr().err


def test_transcript_says_what_a_memento_merge_did(demo_run: DemoRun, capsys: pytest.CaptureFixture[str]) -> None:
    session = demo_run.data['session_id']
    assert main(['transcript', '--session', session, '--store', demo_run.data['store']]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith('=== ')]
    merges = [line for line in lines if ' mementos merged into mem_' in line]
    assert merges, 'the demo budget makes the mementos outgrow their share'
    assert all('?' not in line for line in lines)
    assert all(line.endswith(' tokens after) ===') for line in merges)


@pytest.mark.parametrize(
    'argv',
    [['stats'], ['recall', 'x'], ['verify'], ['recover', 'blk_x'], ['pages'], ['export', '--jsonl'], ['plot']],
)
def test_a_reading_command_refuses_a_store_that_does_not_exist(
    tmp_path: Path, argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / 'typo.db'
    assert main([*argv, '--store', f'sqlite://{missing}']) == 3
    err = capsys.readouterr().err
    assert err.startswith(f'mementograph: error: no store at {missing} (from --store): nothing has been archived')
    monkeypatch.setenv('MEMENTOGRAPH_STORE', f'sqlite://{missing}')
    assert main(argv) == 3
    assert f'no store at {missing} (from $MEMENTOGRAPH_STORE)' in capsys.readouterr().err
    assert not missing.exists()


def test_a_misspelt_store_scheme_names_where_it_came_from(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv('MEMENTOGRAPH_STORE', 'postgres://db/memory')
    assert main(['stats']) == 2
    err = capsys.readouterr().err
    assert "unknown store URI 'postgres://db/memory'" in err and err.rstrip().endswith('(from $MEMENTOGRAPH_STORE)')


def test_verify_of_a_namespace_holding_nothing_is_not_found(
    demo_run: DemoRun, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(['verify', '--store', demo_run.data['store'], '--namespace', 'typo']) == 3
    err = capsys.readouterr().err
    assert "no session in namespace 'typo'" in err and 'nothing to verify' in err
    assert main(['verify', '--store', demo_run.data['store']]) == 0
    assert 'OK: every block matches' in capsys.readouterr().out


@pytest.mark.parametrize(
    ('argv', 'kind', 'code'),
    [
        (['recover', 'blk_000000000000000000000000'], 'not_found', 3),
        (['stats', '--session', 'nosuch'], 'not_found', 3),
        (['recall', 'pkg', '--k', '0'], 'bad_argument', 2),
    ],
)
def test_under_json_a_failure_is_a_json_error_on_stdout(
    demo_run: DemoRun, argv: list[str], kind: str, code: int, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*argv, '--store', demo_run.data['store'], '--json']) == code
    captured = capsys.readouterr()
    error = json.loads(captured.out)['error']
    assert error['kind'] == kind and error['exit_code'] == code
    assert error['message'] and error['message'] in captured.err  # the same line a person reads on stderr
    assert main([*argv, '--store', demo_run.data['store']]) == code
    assert capsys.readouterr().out == ''  # without --json, stdout stays empty


def test_export_writes_json_lines_with_or_without_the_flag(
    demo_run: DemoRun, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(['export', '--store', demo_run.data['store']]) == 0
    plain = capsys.readouterr().out
    assert main(['export', '--jsonl', '--store', demo_run.data['store']]) == 0
    assert capsys.readouterr().out == plain
    records = [json.loads(line) for line in plain.splitlines()]
    assert records and all(r['block_id'].startswith('blk_') for r in records)


@pytest.mark.parametrize(
    'argv', [['stats'], ['export'], ['export', '--events'], ['recall', 'pkg'], ['transcript'], ['verify'], ['pages']]
)
def test_every_command_says_an_unknown_session_is_not_found(
    demo_run: DemoRun, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*argv, '--session', 'nosuch', '--store', demo_run.data['store']]) == 3
    assert "no session 'nosuch' in namespace 'default'" in capsys.readouterr().err


def test_stats_of_an_empty_namespace_names_those_that_hold_sessions(
    demo_run: DemoRun, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(['stats', '--store', demo_run.data['store'], '--namespace', 'typo', '--json']) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data['sessions'], data['other_namespaces']) == (0, {'default': 1})
    assert main(['stats', '--store', demo_run.data['store'], '--namespace', 'typo']) == 0
    assert "namespace 'typo' holds nothing; sessions are in 'default' (1)" in capsys.readouterr().out
    assert main(['stats', '--store', demo_run.data['store'], '--json']) == 0
    assert 'other_namespaces' not in json.loads(capsys.readouterr().out)


def test_stats_of_an_empty_namespace_names_the_largest_few(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    uri = f'sqlite://{tmp_path / "team.db"}'
    store = open_store(uri)
    try:
        for team in range(12):  # team 11 holds 12 sessions, team 0 one
            for session in range(team + 1):
                store.write_eviction(
                    make_eviction(session_history(1), session_id=f's{session}', namespace=f'team-{team:02d}')[0]
                )
    finally:
        store.close()
    assert main(['stats', '--store', uri, '--namespace', 'typo']) == 0
    out = capsys.readouterr().out
    assert "sessions are in 'team-11' (12), 'team-10' (11)" in out and "'team-04' (5) and 4 more namespaces" in out
    assert "'team-03'" not in out
    assert main(['stats', '--store', uri, '--namespace', 'typo', '--json']) == 0
    assert len(json.loads(capsys.readouterr().out)['other_namespaces']) == 12


def altered_copy(demo_run: DemoRun, tmp_path: Path) -> tuple[Path, str]:
    """A copy of the demo's store with one block's bytes changed behind the store's back, and that block's id."""
    copy = tmp_path / 'altered.db'
    source = sqlite3.connect(demo_run.data['store'].removeprefix('sqlite://'))
    target = sqlite3.connect(copy)
    source.backup(target)
    source.close()
    altered: str = target.execute('SELECT id FROM blocks ORDER BY rid LIMIT 1 OFFSET 2').fetchone()[0]
    target.execute("UPDATE blocks SET messages_json = replace(messages_json, 'a', 'e') WHERE id = ?", (altered,))
    target.commit()
    target.close()
    return copy, altered


def test_export_marks_an_altered_block_and_fails(
    demo_run: DemoRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy, altered = altered_copy(demo_run, tmp_path)

    assert main(['export', '--store', f'sqlite://{copy}']) == 4
    captured = capsys.readouterr()
    records = [json.loads(line) for line in captured.out.splitlines()]
    assert [r['block_id'] for r in records if not r['verified_sha256']] == [altered]
    assert len(records) > 3  # every block is still written
    assert f'1 block(s) fail their sha256 check (written with verified_sha256 false): {altered}' in captured.err
    assert main(['export', '--store', demo_run.data['store']]) == 0
    assert all(json.loads(line)['verified_sha256'] for line in capsys.readouterr().out.splitlines())
    assert main(['recover', altered, '--store', f'sqlite://{copy}']) == 4  # a check failed, as export says
    assert 'check failed' in capsys.readouterr().err


def test_recover_of_a_memento_over_an_altered_block_prints_the_others_and_fails(
    demo_run: DemoRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy, altered = altered_copy(demo_run, tmp_path)
    store = open_store(demo_run.data['store'])
    try:
        chains = {m.id: [b.record.id for b in recover_chain(store, m.id)] for m in store.list_mementos()}
    finally:
        store.close()
    memento_id, blocks = max(((m, ids) for m, ids in chains.items() if altered in ids), key=lambda pair: len(pair[1]))
    others = [block_id for block_id in blocks if block_id != altered]
    assert others, 'a merged memento of the demo should cover the altered block and others'

    assert main(['recover', memento_id, '--store', f'sqlite://{copy}', '--json']) == 4
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert [block['block_id'] for block in data['blocks']] == others and data['failed_sha256_check'] == [altered]
    assert f'1 of {len(blocks)} blocks under memento {memento_id}' in captured.err and 'check failed' in captured.err
    assert main(['recover', memento_id, '--store', f'sqlite://{copy}']) == 4
    out = capsys.readouterr().out
    assert f'{len(blocks)} blocks; 1 failed the sha256 check and is not shown: {altered}' in out
    assert all(f'block {block_id}  session ' in out for block_id in others) and f'block {altered}  ' not in out
    assert main(['recover', memento_id, '--store', f'sqlite://{copy}', '--raw']) == 4
    assert len(capsys.readouterr().out.splitlines()) == len(others)


def test_reindex_names_an_altered_block_once_without_a_python_warning(
    demo_run: DemoRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy, altered = altered_copy(demo_run, tmp_path)
    with warnings.catch_warnings(record=True) as raised:
        warnings.simplefilter('always')
        assert main(['reindex', '--store', f'sqlite://{copy}']) == 0
    assert [str(w.message) for w in raised] == []
    out = capsys.readouterr().out
    assert f'1 block(s) fail their sha256 check and keep their edges: {altered}' in out and out.count(altered) == 1


def test_a_page_holding_an_altered_block_shows_its_other_blocks(
    demo_run: DemoRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy, altered = altered_copy(demo_run, tmp_path)
    store = open_store(f'sqlite://{copy}')
    try:
        page = next(page for page in store.list_pages() if altered in page.block_ids)
    finally:
        store.close()
    others = [block_id for block_id in page.block_ids if block_id != altered]
    assert others, 'the page should hold more than the altered block'

    assert main(['pages', '--page', page.id, '--max-tokens', '1000000', '--store', f'sqlite://{copy}']) == 0
    out = capsys.readouterr().out
    assert f'[block {altered}: not shown, block {altered} of session ' in out and 'fails its integrity check' in out
    assert all(f'[block {block_id}: messages ' in out for block_id in others)


def test_bad_output_paths_and_time_filters_are_bad_arguments(
    demo_run: DemoRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = ['--store', demo_run.data['store']]
    assert main(['export', '-o', str(tmp_path / 'no' / 'dir.jsonl'), *store]) == 2
    assert 'does not exist' in capsys.readouterr().err
    assert main(['recall', 'pkg', '--since', 'yesterday', *store]) == 2
    assert "--since: cannot read 'yesterday' as a time" in capsys.readouterr().err
    assert main(['recall', 'pkg', '--since', '2027-01-01', '--until', '2020-01-01', *store]) == 2
    assert 'is not before until' in capsys.readouterr().err
    assert main(['recall', 'pkg', '--since', '2020-01-01', '--until', '2099-01-01', *store]) == 0
    capsys.readouterr()
    assert main(['plot', '--out', str(tmp_path), *store]) == 2
    assert 'is a directory' in capsys.readouterr().err
    assert main(['stats', '--store', demo_run.data['store'] + '?busy_timeout=abc']) == 2
    assert "busy_timeout='abc' is not a number (from --store)" in capsys.readouterr().err


def test_options_are_not_abbreviated(demo_run: DemoRun, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:  # `--json` once meant `--jsonl` here, silently
        main(['export', '--json', '--store', demo_run.data['store']])
    assert exited.value.code == 2
    assert 'unrecognized arguments: --json' in capsys.readouterr().err


def test_a_closed_pipe_ends_the_command_quietly(demo_run: DemoRun) -> None:
    """`... | head`: the reader leaves after one byte, while more than a pipe's buffer (64 KB) is still unwritten."""
    session = demo_run.data['session_id']
    process = subprocess.Popen(
        [str(MEMENTOGRAPH), 'transcript', '--session', session, '--json'],
        cwd=demo_run.cwd,
        env=fresh_home_env(demo_run.home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    assert process.stdout.read(1) == b'['
    process.stdout.close()
    assert process.wait(timeout=120) == 141
    assert process.stderr.read() == b''
    process.stderr.close()


@pytest.mark.parametrize(
    'argv',
    [
        ['--help'],
        ['stats'],
        ['pages'],
        ['recall', 'pkg/mod_3.py'],
        ['query', 'MATCH (b:EvictedBlock {namespace: $namespace}) RETURN count(b) AS blocks'],
        ['export', '--jsonl'],
    ],
    ids=lambda argv: argv[0],
)
def test_reading_commands_never_load_the_agent_framework(demo_run: DemoRun, argv: list[str]) -> None:
    """pydantic-ai takes most of a second to import; a command that reads a store whose indexes are current (the
    demo's last step was a recall), or the help, answers without it."""
    program = (
        'import sys\n'
        'from mementograph.cli import main\n'
        'try:\n'
        '    code = main(sys.argv[1:])\n'
        'finally:\n'
        "    loaded = {name.split('.')[0] for name in sys.modules}\n"
        "    print(sorted(loaded & {'pydantic_ai', 'pydantic_ai_harness'}), file=sys.stderr)\n"
        'sys.exit(code)\n'
    )
    done = subprocess.run(
        [sys.executable, '-c', program, *argv],
        cwd=demo_run.cwd,
        env=fresh_home_env(demo_run.home),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()  # it answered
    assert done.stderr.splitlines()[-1] == '[]'


def _choices(parser: argparse.ArgumentParser) -> list[str]:
    subparsers = parser._subparsers
    assert subparsers is not None
    return list(subparsers._group_actions[0].choices or ())


def test_each_command_parses_with_its_own_module_alone() -> None:
    everything = [command.name for command in COMMANDS]
    assert _choices(build_parser()) == everything == _choices(build_parser('nosuch'))
    for command in COMMANDS:
        siblings = [other.name for other in COMMANDS if other.module == command.module]
        assert _choices(build_parser(command.name)) == siblings
    assert 'recover' in build_parser().format_help()
    assert build_parser('recall').parse_args(['recall', 'x', '--k', '3']).k == 3


def test_an_unknown_option_is_reported_with_its_command_s_usage(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(['stats', '--bogus'])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert (
        err.startswith('usage: mementograph stats ')
        and 'mementograph stats: error: unrecognized arguments: --bogus' in err
    )


def test_an_output_path_that_is_the_store_is_refused(
    demo_run: DemoRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`export -o` or `plot --out` naming the store's own file used to write over it (exit 0), and every later
    command found no store."""
    path = tmp_path / 'copy.db'
    source = sqlite_path(demo_run.data['store'])
    assert source is not None
    shutil.copyfile(source, path)
    before = path.read_bytes()
    store = ['--store', f'sqlite://{path}']
    for argv in (['export', '-o', str(path)], ['plot', '--out', str(path)], ['export', '-o', f'{path}-wal']):
        assert main([*argv, *store]) == 2
        assert 'is the store this command reads' in capsys.readouterr().err
    assert path.read_bytes() == before
    assert main(['stats', *store]) == 0


def test_empty_names_odd_timeouts_and_empty_files_are_refused(
    demo_run: DemoRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--namespace ''` meant `default` to `demo` and a namespace `''` to `stats`; `--session ''` meant the latest
    session to `plot` and none to `verify`; `--timeout inf` failed inside the query; an empty file became a store."""
    store = ['--store', demo_run.data['store']]
    for argv, wrong in (
        (['stats', '--namespace', ''], '--namespace: must not be empty'),
        (['verify', '--session', ' '], '--session: must not be empty'),
        (['plot', '--session', ''], '--session: must not be empty'),
        (['query', 'MATCH (m:Memento) RETURN m.id AS id', '--timeout', 'inf'], 'expected a finite number of seconds'),
        (['query', 'MATCH (m:Memento) RETURN m.id AS id', '--timeout', 'nan'], 'expected a finite number of seconds'),
    ):
        with pytest.raises(SystemExit) as exited:
            main([*argv, *store])
        assert exited.value.code == 2
        assert wrong in capsys.readouterr().err
    empty = tmp_path / 'empty.db'
    empty.touch()
    assert main(['stats', '--store', f'sqlite://{empty}']) == 3
    assert 'is an empty file, not a store' in capsys.readouterr().err
    assert empty.stat().st_size == 0  # left as it was
