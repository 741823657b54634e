"""Token counting offline: a missing or unknown encoding is a clear error that says how to fix it, never a silent
switch to an estimate."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic_ai.messages import ModelRequest, UserPromptPart

from mementograph._tokens import TokenCounter, TokenizerUnavailableError


def test_an_unknown_encoding_names_the_known_ones() -> None:
    with pytest.raises(TokenizerUnavailableError) as raised:
        TokenCounter(encoding='nonsense')
    message = str(raised.value)
    assert message.startswith("unknown tiktoken encoding 'nonsense': use one of ")
    assert 'o200k_base' in message and 'estimate' in message
    assert '\n' not in message  # tiktoken's own multi-line text is not passed on


def test_bpe_files_out_of_reach_say_how_to_fix_it(tmp_path: Path) -> None:
    # A fresh process: tiktoken keeps an encoding it loaded once, and this one must look for its files.
    env = {**os.environ, 'TIKTOKEN_CACHE_DIR': str(tmp_path)}
    env.pop('MEMENTOGRAPH_ENCODING', None)
    code = 'from mementograph._tokens import TokenCounter\nTokenCounter()'
    done = subprocess.run([sys.executable, '-c', code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "cannot load the tiktoken encoding 'o200k_base'" in done.stderr
    assert f"TIKTOKEN_CACHE_DIR='{tmp_path}' does not hold it" in done.stderr
    assert 'MEMENTOGRAPH_ENCODING=estimate' in done.stderr


def test_the_estimator_is_chosen_only_by_name() -> None:
    assert TokenCounter(encoding='estimate').count_text('x' * 40) == 10
    exact = TokenCounter(encoding='o200k_base')
    assert exact.count_text('hello world') == 2


def test_a_growing_history_is_counted_once_per_message() -> None:
    counter = TokenCounter()
    tokenized: list[str] = []
    count = counter._count

    def recording(text: str) -> int:
        tokenized.append(text)
        return count(text)

    counter._count = recording
    history = [ModelRequest(parts=[UserPromptPart(f'message {i} ' * 50)]) for i in range(3)]
    first = counter.count_messages(history)
    assert len(tokenized) == 3
    history.append(ModelRequest(parts=[UserPromptPart('one more')]))
    assert counter.count_messages(history) > first
    assert len(tokenized) == 4 and 'one more' in tokenized[-1]  # only the new message was tokenized


def test_the_advice_works_for_the_capability_offline(tmp_path: Path) -> None:
    """`MEMENTOGRAPH_ENCODING=estimate`, as the error advises, is what `MementoCompaction` counts with too."""
    env = {**os.environ, 'TIKTOKEN_CACHE_DIR': str(tmp_path), 'MEMENTOGRAPH_ENCODING': 'estimate'}
    code = (
        'import asyncio\n'
        'from mementograph import MementoCompaction, open_store\n'
        'from tests.scripted import ScriptedModel, scripted_agent\n'
        "store = open_store('memory://')\n"
        "capability = MementoCompaction(store, max_tokens=1_500, session_id='s')\n"
        "asyncio.run(scripted_agent(ScriptedModel(steps=8), [capability]).run('Fix the modules.'))\n"
        "print(len(store.list_blocks(session_id='s')))\n"
    )
    done = subprocess.run(
        [sys.executable, '-W', 'error::UserWarning', '-c', code],
        env={**env, 'PYTHONPATH': str(Path(__file__).parents[1])},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout.strip()) > 0  # it compacted, counting with the estimator
