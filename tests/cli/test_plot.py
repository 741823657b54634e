"""`mementograph plot`: the sawtooth of a stored session, rebuilt from its event log; progress helpers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mementograph._plot import Sawtooth, latest_session, save_sawtooth, sawtooth_from_log, sparkline
from mementograph.cli import main
from mementograph.cli._progress import progress_bar, wants_progress
from mementograph.knowledge_graph.store import NotFoundError, open_store
from tests.cli.conftest import DemoRun
from tests.cli.test_demo import assert_png


def test_plot_rebuilds_the_demo_session_from_its_log(
    demo_run: DemoRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    demo = demo_run.data
    out = tmp_path / 'rebuilt.png'
    code = main(['plot', '--store', demo['store'], '--out', str(out), '--budget', str(demo['budget']), '--json'])
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    assert data['session_id'] == demo['session_id']  # the latest session by default
    assert data['plot'] == str(out) and data['measured'] is False and data['budget'] == demo['budget']
    # what the run measured live, rebuilt from the log alone, exactly: every compaction step records the context
    # size after it, and messages between them are counted the same way the run counted them
    assert data['requests'] == demo['requests']
    assert data['baseline_tokens'] == demo['baseline_tokens']
    assert data['compactions'] == demo['compactions']
    assert data['context_tokens'] == demo['context_tokens']
    assert_png(out)


def test_plot_text_names_the_file(demo_run: DemoRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    demo = demo_run.data
    out = tmp_path / 'saw.png'
    assert main(['plot', '--store', demo['store'], '--session', demo['session_id'], '--out', str(out)]) == 0
    text = capsys.readouterr().out
    assert text.startswith(f'session {demo["session_id"]}: {demo["requests"]} requests')
    assert f'sawtooth plot saved to {out}' in text
    assert_png(out)


def test_plot_user_errors(tmp_path: Path, demo_run: DemoRun, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / 'missing.db'
    assert main(['plot', '--store', f'sqlite://{missing}']) == 3
    assert f'no store at {missing} (from --store)' in capsys.readouterr().err
    assert not missing.exists()  # reading never creates a store
    empty = f'sqlite://{tmp_path / "empty.db"}'
    open_store(empty).close()
    assert main(['plot', '--store', empty]) == 3
    assert 'no session in namespace' in capsys.readouterr().err
    assert main(['plot', '--store', demo_run.data['store'], '--session', 'nope']) == 3
    assert "no session 'nope'" in capsys.readouterr().err
    assert main(['plot', '--store', demo_run.data['store'], '--out', str(tmp_path / 'missing' / 'x.png')]) == 2
    err = capsys.readouterr().err
    assert err.startswith('mementograph: error: --out') and 'Traceback' not in err


def test_plot_writes_the_format_its_extension_names(
    demo_run: DemoRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--out x.txt` wrote PNG bytes under that name; now the extension picks PNG, SVG or PDF, and any other is
    refused before the store is read."""
    store = demo_run.data['store']
    for name, given in (('saw.txt', 'has the extension .txt'), ('saw', 'has no extension')):
        out = tmp_path / name
        assert main(['plot', '--store', store, '--out', str(out), '--json']) == 2
        captured = capsys.readouterr()
        error = json.loads(captured.out)['error']
        assert error['kind'] == 'bad_argument' and error['exit_code'] == 2
        assert error['message'] == f'--out {out} {given}; a plot is saved as .png, .svg, .pdf'
        assert error['message'] in captured.err and not out.exists()
    for name, magic in (('saw.svg', b'<?xml'), ('saw.pdf', b'%PDF-')):
        out = tmp_path / name
        assert main(['plot', '--store', store, '--out', str(out)]) == 0
        assert f'sawtooth plot saved to {out}' in capsys.readouterr().out
        assert out.read_bytes().startswith(magic)
    assert b'<svg' in (tmp_path / 'saw.svg').read_bytes()
    assert main(['plot', '--store', store, '--out', str(tmp_path / 'saw.PNG')]) == 0
    assert_png(tmp_path / 'saw.PNG')


def test_sawtooth_from_log_of_an_unknown_session_is_not_found(tmp_path: Path) -> None:
    store = open_store(f'sqlite://{tmp_path / "m.db"}')
    try:
        assert latest_session(store) is None
        with pytest.raises(NotFoundError):
            sawtooth_from_log(store, 'nope')
    finally:
        store.close()


def test_save_sawtooth_draws_what_it_is_given(tmp_path: Path) -> None:
    curve = Sawtooth('s', (100, 900, 400, 950, 420), (100, 900, 1400, 1950, 2420), compactions=(3, 5), budget=1000)
    assert curve.peak == 950 and curve.peak_baseline == 2420
    assert_png(save_sawtooth(curve, tmp_path / 'c.png'))
    with pytest.raises(OSError):
        save_sawtooth(curve, tmp_path / 'missing' / 'c.png')
    assert save_sawtooth(curve, tmp_path / 'c.svg').read_bytes().startswith(b'<?xml')
    with pytest.raises(ValueError, match=r'c\.jpg has the extension \.jpg; a plot is saved as \.png, \.svg, \.pdf'):
        save_sawtooth(curve, tmp_path / 'c.jpg')
    assert not (tmp_path / 'c.jpg').exists()


def test_sparkline() -> None:
    assert sparkline([0, 50, 100], top=100) == '▁▄█'
    assert sparkline([200], top=100) == '█'  # over the top is the top
    assert sparkline(list(range(100)), width=10) == sparkline(list(range(90, 100)), top=99)
    assert sparkline([]) == ''


def test_progress_is_quiet_when_nobody_watches(capsys: pytest.CaptureFixture[str]) -> None:
    assert not wants_progress(json_output=True)
    assert not wants_progress()  # pytest captures stderr: not a terminal
    with progress_bar('work', 3, enabled=False) as advance:
        for _ in range(3):
            advance()
    with progress_bar('work', None, enabled=True) as advance:  # on a non-terminal rich draws nothing
        advance(0, 'relabelled')
        advance()
    out, err = capsys.readouterr()
    assert out == '' and 'work' not in err
