"""Token counting offline: a missing or unknown encoding is a clear error that says how to fix it, never a silent
switch to an estimate."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from PIL import Image
from pydantic_ai.messages import BinaryContent, ImageUrl, ModelRequest, ToolReturnPart, UserPromptPart

from mementograph._media import IMAGE_TOKENS, PDF_PAGE_TOKENS, attachment_tokens, image_tokens
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


def _image(size: tuple[int, int], fmt: str) -> bytes:
    buffer = io.BytesIO()
    Image.new('RGB', size, (200, 30, 30)).save(buffer, fmt)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ('size', 'fmt', 'tokens'),
    [
        ((1280, 800), 'PNG', 1_366),  # under both limits: 1,024,000 pixels / 750
        ((1000, 1000), 'JPEG', 1_334),
        ((4000, 3000), 'WEBP', 1_534),  # scaled to 1.15 megapixels first
        ((3000, 200), 'GIF', 219),  # scaled to a long edge of 1,568 first
        ((64, 64), 'PNG', 6),
    ],
)
def test_an_image_costs_what_its_pixels_cost_the_provider(size: tuple[int, int], fmt: str, tokens: int) -> None:
    counter = TokenCounter()
    image = BinaryContent(_image(size, fmt), media_type=f'image/{fmt.lower()}')
    with_image = ModelRequest(parts=[UserPromptPart(['Look at this.', image])])
    # the same text, the image's placeholder as a string: what the count was before images cost their pixels
    as_text = ModelRequest(
        parts=[UserPromptPart(['Look at this.', f'[binary {image.media_type}, {len(image.data)} bytes]'])]
    )
    assert image_tokens(*size) == tokens
    assert counter.count_message(with_image) == counter.count_message(as_text) + tokens


def test_attachments_are_counted_in_tool_returns_too() -> None:
    counter = TokenCounter()
    pdf = b'%PDF-1.4\n' + b''.join(b'%d 0 obj << /Type /Page /Parent 2 0 R >>\n' % i for i in range(3))
    pdf += b'2 0 obj << /Type /Pages /Count 3 >>\n'
    text = 'The report says the build took 41 seconds. ' * 20
    parts = [
        ToolReturnPart('shot', BinaryContent(_image((1280, 800), 'PNG'), media_type='image/png'), tool_call_id='a'),
        ToolReturnPart('read', [BinaryContent(pdf, media_type='application/pdf')], tool_call_id='b'),
        ToolReturnPart('cat', BinaryContent(text.encode(), media_type='text/plain'), tool_call_id='c'),
        UserPromptPart([ImageUrl('https://example.com/a.png'), 'and this']),
        UserPromptPart([BinaryContent(b'not an image at all', media_type='image/png')]),
    ]
    message = ModelRequest(parts=parts)
    assert attachment_tokens(message, counter.count_text) == (
        1_366 + 3 * PDF_PAGE_TOKENS + counter.count_text(text) + IMAGE_TOKENS + IMAGE_TOKENS
    )
    assert attachment_tokens(message) == 1_366 + 3 * PDF_PAGE_TOKENS + len(text.encode()) + 2 * IMAGE_TOKENS


def test_a_huge_image_is_measured_without_a_warning() -> None:
    buffer = io.BytesIO()
    Image.new('1', (12_000, 9_000)).save(buffer, 'PNG')  # 108 megapixels: past Pillow's decompression-bomb warning
    message = ModelRequest(parts=[UserPromptPart([BinaryContent(buffer.getvalue(), media_type='image/png')])])
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        assert attachment_tokens(message) == image_tokens(12_000, 9_000) == 1_534


def test_a_run_without_its_tokenizer_still_logs_every_message(tmp_path: Path) -> None:
    """The capability needs the tokenizer only to compact: the session log is written without it (nothing was
    recorded at all before), and compaction is skipped with the warning that says how to fix it."""
    env = {**os.environ, 'TIKTOKEN_CACHE_DIR': str(tmp_path / 'empty'), 'HTTPS_PROXY': 'http://127.0.0.1:9'}
    env.pop('MEMENTOGRAPH_ENCODING', None)  # a closed proxy port: no download, online or not
    code = f"""
import warnings
from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel
from mementograph import MementoCompaction, open_store

uri = 'sqlite:///{tmp_path / 'memory.db'}'
agent = Agent(TestModel(), capabilities=[MementoCompaction(uri, session_id='s', max_tokens=500)])

@agent.tool_plain
def read_log(day: int) -> str:
    return 'build failed on day 3: exit 2 ' * 200

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter('always')
    messages = agent.run_sync('Read the build log.').all_messages()
with open_store(uri) as store:
    print(len(messages), len(store.read_events('s')))
print(sum("cannot load the tiktoken encoding 'o200k_base'" in str(w.message) for w in caught))
"""
    done = subprocess.run([sys.executable, '-c', code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    (sent, logged), (warned,) = (line.split() for line in done.stdout.splitlines())
    assert logged == sent and int(logged) >= 4  # request, tool call, tool return, answer
    assert int(warned) >= 1
