"""The command line on hostile files and arguments: malformed, garbage, truncated, binary, huge, deeply nested
transcripts; corrupt, truncated and foreign store files; bad options. Every case exits non-zero with one line that
names the file (and, for JSON, the line and column), never a traceback.

The whole matrix runs through `mementograph.cli.main` (what the `mementograph` script calls); a cross-section runs
as real subprocesses of the installed script, so nothing is lost between `main` and the process boundary.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from mementograph._messages import serialize_messages
from mementograph.cli import main
from mementograph.knowledge_graph.store import open_store
from tests.builders import session_history
from tests.store.test_contract import make_eviction

SCRIPT = Path(sys.executable).with_name('mementograph')


@dataclass(frozen=True)
class Files:
    root: Path

    def __truediv__(self, name: str) -> Path:
        return self.root / name

    def store(self, name: str) -> str:
        return f'sqlite://{self.root / name}'


@pytest.fixture(scope='module')
def files(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Files]:
    root = tmp_path_factory.mktemp('hostile-cli')
    store = open_store(f'sqlite://{root / "good.db"}')
    for number in range(20):
        eviction, _, _ = make_eviction(
            session_history(3, prefix=f'p{number}'), session_id='s1', namespace='default', seq=number * 20
        )
        store.write_eviction(eviction)
    store.close()
    good = (root / 'good.db').read_bytes()
    (root / 'truncated.db').write_bytes(good[: len(good) // 2])
    (root / 'header-only.db').write_bytes(good[:100])
    (root / 'garbage.db').write_bytes(os.urandom(50_000))
    other = root / 'other-app.db'
    import sqlite3

    with sqlite3.connect(other) as conn:  # a real SQLite file of another application
        conn.execute('CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)')
    transcript = serialize_messages(session_history(5))
    (root / 'truncated.json').write_bytes(transcript[: len(transcript) // 2])
    (root / 'bad.json').write_text(
        '{"messages": [\n  {"role": "user", "content": "hi"},\n  {"role": "user" "content": "x"}]}'
    )
    (root / 'garbage.json').write_bytes(b'\x89PNG\r\n\x1a\n' + os.urandom(5_000))
    (root / 'empty.json').write_text('')
    (root / 'deep.json').write_text('[' * 100_000 + ']' * 100_000)
    (root / 'nul.json').write_bytes(b'[{"role": "user", "content": "a\x00b"}]')
    (root / 'huge.json').write_bytes(b'[{"role": "user", "content": "' + b'x' * 30_000_000 + b'"')  # 30 MB, unclosed
    (root / 'orphan.json').write_text(json.dumps([{'role': 'tool', 'tool_call_id': 'z', 'content': 'x'}]))
    (root / 'wrong-shape.json').write_text('{"messages": {"role": "user"}}')
    (root / 'bad-part.json').write_text('[{"kind": "request", "parts": [{"part_kind": "nope"}]}]')
    (root / 'directory').mkdir()
    yield Files(root)
    shutil.rmtree(root, ignore_errors=True)


def _cases(f: Files) -> dict[str, tuple[list[str], list[str]]]:
    """name -> (argv, what the error line must say)."""
    good = f.store('good.db')
    return {
        # replay: malformed transcripts, named with their position
        'replay-bad-json': (['replay', str(f / 'bad.json')], ['bad.json', 'line 3, column 19']),
        'replay-truncated': (
            ['replay', str(f / 'truncated.json')],
            ['truncated.json', 'invalid JSON at line 1, column'],
        ),
        'replay-garbage': (['replay', str(f / 'garbage.json')], ['garbage.json', 'not UTF-8 text (byte 0)']),
        'replay-empty': (['replay', str(f / 'empty.json')], ['empty.json', 'line 1, column 1']),
        'replay-deep': (['replay', str(f / 'deep.json')], ['deep.json', 'nested too deeply']),
        'replay-nul': (['replay', str(f / 'nul.json')], ['nul.json', 'line 1, column 32']),
        'replay-huge': (['replay', str(f / 'huge.json')], ['huge.json', 'line 1, column 30000032']),
        'replay-orphan-tool-result': (['replay', str(f / 'orphan.json')], ['orphan.json', 'no opening request']),
        'replay-wrong-shape': (['replay', str(f / 'wrong-shape.json')], ['wrong-shape.json', '"messages" list']),
        'replay-bad-part': (['replay', str(f / 'bad-part.json')], ['bad-part.json', 'message 0']),
        'replay-a-database': (['replay', str(f / 'good.db')], ['good.db', 'not UTF-8 text']),
        'replay-directory': (['replay', str(f / 'directory')], ['directory', 'is a directory']),
        'replay-missing': (['replay', str(f / 'absent.json')], ['absent.json', 'cannot read']),
        'replay-budget': (['replay', '--budget', '0', str(f / 'bad.json')], ['--budget must be a positive']),
        # eval: malformed benchmark files, named with their position or item
        'eval-locomo-bad-json': (['eval', 'locomo', str(f / 'bad.json'), '--json'], ['bad.json', 'line 3, column 19']),
        'eval-longmemeval-garbage': (
            ['eval', 'longmemeval', str(f / 'garbage.json'), '--json'],
            ['garbage.json', 'not UTF-8 text (byte 0)'],
        ),
        'eval-locomo-wrong-items': (
            ['eval', 'locomo', str(f / 'orphan.json'), '--json'],
            ['orphan.json', "sample 0: no field 'conversation'"],
        ),
        'eval-longmemeval-not-a-list': (
            ['eval', 'longmemeval', str(f / 'wrong-shape.json'), '--json'],
            ['wrong-shape.json', 'expected a JSON list of LongMemEval questions'],
        ),
        'eval-locomo-missing': (['eval', 'locomo', str(f / 'absent.json'), '--json'], ['absent.json', 'cannot read']),
        # the store commands on store files that are not stores
        'recall-garbage-store': (['recall', 'KeyError', '--store', f.store('garbage.db')], ['garbage.db', 'corrupt']),
        'recall-truncated-store': (['recall', 'x', '--store', f.store('truncated.db')], ['truncated.db', 'corrupt']),
        'recall-transcript-as-store': (['recall', 'x', '--store', f.store('bad.json')], ['bad.json', 'corrupt']),
        'recall-other-app-store': (
            ['recall', 'x', '--store', f.store('other-app.db')],
            ['other-app.db', 'another application'],
        ),
        'recall-directory-store': (['recall', 'x', '--store', f.store('directory')], ['directory', 'is a directory']),
        'recall-bad-since': (['recall', 'x', '--store', good, '--since', 'yesterday'], ['since', 'ISO-8601']),
        'query-header-only-store': (
            ['query', 'MATCH (n) RETURN n', '--store', f.store('header-only.db')],
            ['header-only.db', 'corrupt'],
        ),
        'query-unterminated': (
            ['query', "MATCH (n) WHERE n.x = 'abc RETURN n", '--store', good],
            ['line 1, column 23'],
        ),
        'query-write': (
            ['query', 'MATCH (n) DETACH DELETE n', '--store', good],
            ['DETACH clause at line 1, column 11', 'read-only'],
        ),
        'query-insert': (['query', 'MATCH (n) INSERT (:X)', '--store', good], ['INSERT clause at line 1, column 11']),
        'query-load-csv': (
            ['query', "LOAD CSV FROM 'file:///etc/passwd' AS l RETURN l", '--store', good],
            ['LOAD CSV at line 1, column 1'],
        ),
        'query-dbms': (['query', 'CALL dbms.components()', '--store', good], ['dbms.components', 'line 1, column 6']),
        'query-two-statements': (
            ['query', 'MATCH (n) RETURN n; MATCH (m) RETURN m', '--store', good],
            ['one statement per query'],
        ),
        'query-bad-param': (['query', 'RETURN 1', '--param', 'novalue', '--store', good], ['--param takes NAME=VALUE']),
        'recover-missing-block': (['recover', 'blk_nope', '--store', good], ['blk_nope']),
        'recover-garbage-store': (['recover', 'blk_nope', '--store', f.store('garbage.db')], ['garbage.db', 'corrupt']),
        'export-truncated-store': (
            ['export', '--jsonl', '--store', f.store('truncated.db')],
            ['truncated.db', 'corrupt'],
        ),
        'export-events-garbage-store': (
            ['export', '--jsonl', '--events', '--store', f.store('garbage.db')],
            ['garbage.db', 'corrupt'],
        ),
        'export-to-a-directory': (['export', '--jsonl', '--store', good, '-o', str(f / 'directory')], ['directory']),
        'unknown-store-scheme': (['export', '--jsonl', '--store', 'foo://bar'], ["unknown store URI 'foo://bar'"]),
    }


CASE_NAMES = sorted(_cases(Files(Path('.'))))


def _error_lines(stderr: str) -> list[str]:
    """What a failed command said, usage lines aside (argparse prints its usage before the error)."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    if lines and lines[0].startswith('usage:'):
        lines = [line for line in lines if line.startswith('mementograph')]
    return lines


@pytest.mark.parametrize('name', CASE_NAMES)
def test_hostile_input_is_one_line_with_file_and_position(
    files: Files, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv, expected = _cases(files)[name]
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse
        code = exc.code if isinstance(exc.code, int) else 2
    # (any other exception escaping `main` fails the test: it would be a traceback)
    captured = capsys.readouterr()
    lines = _error_lines(captured.err)
    assert code != 0
    assert len(lines) == 1, captured.err
    assert lines[0].startswith('mementograph'), lines[0]
    for fragment in expected:
        assert fragment in lines[0], (fragment, lines[0])
    if '--json' in argv:  # the same failure as one JSON object, for a script reading stdout
        error = json.loads(captured.out)['error']
        assert error['exit_code'] == code and error['message'] in lines[0]
    else:
        assert captured.out == ''


@pytest.mark.parametrize(
    ('argv', 'expected'),
    [
        (['replay', '--budget', 'abc', 'x.json'], "argument --budget: invalid int value: 'abc'"),
        (['query', 'RETURN 1', '--timeout', 'soon'], "argument --timeout: invalid float value: 'soon'"),
        (['recall'], 'the following arguments are required: query'),
        (['recover', 'blk_x', '--no-such-option'], 'unrecognized arguments: --no-such-option'),
        (['no-such-command'], "invalid choice: 'no-such-command'"),
    ],
)
def test_bad_arguments_are_one_error_line(argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    lines = _error_lines(capsys.readouterr().err)
    assert len(lines) == 1 and expected in lines[0], lines


SUBPROCESS_CASES = [
    'replay-truncated', 'replay-deep', 'recall-garbage-store', 'query-write', 'recover-garbage-store',
    'export-truncated-store',
]  # fmt: skip


def test_the_installed_script_on_hostile_input(files: Files) -> None:
    """The real process boundary: exit code, stderr, no traceback (run side by side: each start costs a second)."""
    cases = _cases(files)
    env = {**os.environ, 'MEMENTOGRAPH_STORE': files.store('unused.db')}

    def run(name: str) -> tuple[str, subprocess.CompletedProcess[str]]:
        argv, _ = cases[name]
        return name, subprocess.run([str(SCRIPT), *argv], capture_output=True, text=True, timeout=300, env=env)

    with ThreadPoolExecutor(max_workers=3) as pool:
        results = list(pool.map(run, SUBPROCESS_CASES))
    for name, done in results:
        expected = cases[name][1]
        assert done.returncode not in (0, None), (name, done.stdout[-500:])
        assert 'Traceback' not in done.stderr, (name, done.stderr[-3000:])
        lines = _error_lines(done.stderr)
        assert len(lines) == 1 and all(fragment in lines[0] for fragment in expected), (name, done.stderr)
