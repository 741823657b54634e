"""Critical facts: what counts, what deliberately does not, and how presence is matched."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart

from mementograph.knowledge_graph.memory import Fact, critical_facts, fact_present, fact_retention, render_block
from mementograph.knowledge_graph.memory._facts import shell_lines
from mementograph.knowledge_graph.memory._regions import parse_regions

from ._build import bash, observation, say, user


def kinds(text: str) -> dict[str, str]:
    return {fact.text: fact.kind for fact in critical_facts(text)}


def test_prose_facts_by_kind() -> None:
    facts = kinds(
        'See https://example.org/issue/7. In `src/app/models.py` the `len(data.dtype) > 1` check raises TypeError '
        'for numpy==1.21 on 3.9.7; it took 3.5 ms (12%) on line 1244. test_structured_column fails; exit code 2. '
        'The `NdarrayMixin` and np.ndarray and data_is_mixin names matter.'
    )
    assert facts['https://example.org/issue/7'] == 'url'
    assert facts['src/app/models.py'] == 'path'
    assert facts['len(data.dtype) > 1'] == 'formula'
    assert facts['TypeError'] == 'error'
    assert facts['numpy==1.21'] == 'version'
    assert facts['3.9.7'] == 'version'
    assert facts['3.5 ms'] == 'number'
    assert facts['12%'] == 'number'
    assert facts['1244'] == 'number'
    assert facts['test_structured_column'] == 'test'
    assert facts['exit code 2'] == 'exit_code'
    assert facts['NdarrayMixin'] == 'identifier'
    assert facts['np.ndarray'] == 'identifier'
    assert facts['data_is_mixin'] == 'identifier'


def test_not_facts_single_digits_plain_words_html_comments_and_quoted_code() -> None:
    text = (
        '<!-- Please read https://example.org/CONTRIBUTING.md before filing -->\n'
        'I tried 2 times and it failed.\n'
        '```python\nvalue = compute_total(items)  # quoted code is data\n```\n'
    )
    assert critical_facts(text) == []


def test_quoted_traceback_keeps_its_error_line() -> None:
    text = 'It crashes:\n```\nTraceback (most recent call last):\n  File "x.py", line 3\nValueError: bad value 7\n```'
    assert Fact('ValueError: bad value 7', 'error') in critical_facts(text)


def test_command_facts_skip_heredoc_bodies_and_quoted_scripts() -> None:
    command = (
        "cat <<'EOF' > reproduce.py\nimport secret_module\nprint(compute_thing(42))\nEOF\n"
        'python reproduce.py && python -c "\nimport json\nprint(1)\n" && echo done\nls src/app'
    )
    assert shell_lines(command) == ["cat <<'EOF' > reproduce.py", 'python reproduce.py && python -c "', 'ls src/app']
    block = render_block([bash(command, 'c1'), observation(0, 'done', 'c1')])
    facts = kinds(block)
    assert facts["cat <<'EOF' > reproduce.py"] == 'command'
    assert facts['reproduce.py'] == 'path'
    assert 'secret_module' not in facts and 'compute_thing(42)' not in facts and '42' not in facts


def test_long_output_contributes_only_exit_code_errors_and_test_outcomes() -> None:
    listing = '\n'.join(f'src/pkg/module_{i}.py: def handler_{i}(x): return x * {i}' for i in range(200))
    warnings = '\n'.join('  /x/y.py:3: DeprecationWarning: old api' for _ in range(30))
    output = (
        f'{listing}\n{warnings}\nFAILED tests/test_a.py::test_one - AssertionError\n'
        'Traceback (most recent call last):\n  File "t.py", line 1\nKeyError: \'missing\'\n'
        '========= 1 failed, 12 passed, 30 warnings in 1.75s ========='
    )
    block = render_block([bash('pytest -q', 'c1'), observation(1, output, 'c1')])
    facts = critical_facts(block)
    assert [(fact.kind, fact.text) for fact in facts] == [
        ('command', 'pytest -q'),
        ('exit_code', '<returncode>1</returncode>'),
        ('test', 'FAILED tests/test_a.py::test_one'),
        ('error', "KeyError: 'missing'"),
        ('test', '1 failed, 12 passed, 30 warnings in 1.75s'),
    ]


def test_short_output_lines_are_values() -> None:
    block = render_block([bash('python -c "print(2**10)"', 'c1'), observation(0, '1024', 'c1')])
    assert Fact('1024', 'output') in critical_facts(block)


def test_text_protocol_observation_is_output() -> None:
    block = render_block(
        [
            say('THOUGHT: check\n\n```bash\nls -la /srv/data\n```'),
            user('<returncode>2</returncode><output>\nls: x\n</output>'),
        ]
    )
    facts = kinds(block)
    assert facts['ls -la /srv/data'] == 'command'
    assert facts['<returncode>2</returncode>'] == 'exit_code'


def test_presence_is_verbatim_at_word_boundaries() -> None:
    assert fact_present(Fact('OK', 'test'), 'result: OK (skipped=1)')
    assert not fact_present(Fact('OK', 'test'), 'TOKEN is set')
    assert not fact_present(Fact('3.5 ms', 'number'), 'about 3.5ms')
    assert fact_present(Fact('src/a.py', 'path'), 'FILES: src/a.py, src/b.py')


def test_exit_codes_are_values_in_any_form() -> None:
    fact = Fact('<returncode>1</returncode>', 'exit_code')
    for form in ('$ make -> exit 1', 'exit code 1', 'rc=1', '<returncode>1</returncode>', 'exited with status 1'):
        assert fact_present(fact, form), form
    assert not fact_present(fact, '$ make -> exit 0')
    assert not fact_present(fact, 'make failed')


def test_fact_retention() -> None:
    assert fact_retention('no facts here at all', '') == 1.0
    block = 'Edit src/a.py and src/b.py.'
    assert fact_retention(block, 'FILES: src/a.py') == 0.5
    assert fact_retention(block, 'FILES: src/a.py, src/b.py') == 1.0


def test_facts_are_deduplicated_in_order() -> None:
    facts = critical_facts('src/a.py then src/b.py then src/a.py again')
    assert [fact.text for fact in facts] == ['src/a.py', 'src/b.py']


def test_render_block_heads_each_part_and_quotes_shell_commands_raw() -> None:
    messages: list[ModelMessage] = [
        user('Count the lines.'),
        bash('grep -c "def " src/app.py', 'c1', thought='THOUGHT: count them'),
        observation(0, '12', 'c1'),
        ModelResponse(parts=[ToolCallPart('read_file', {'path': 'src/app.py'}, tool_call_id='c2')]),
    ]
    text = render_block(messages)
    assert text.splitlines()[:5] == [
        '[user]',
        'Count the lines.',
        '[assistant]',
        'THOUGHT: count them',
        '[call bash]',
    ]
    assert 'grep -c "def " src/app.py' in text  # raw, not JSON-escaped
    assert [(r.kind, r.label) for r in parse_regions(text)] == [
        ('prose', 'user'),
        ('prose', 'assistant'),
        ('call', 'call bash'),
        ('output', 'return bash'),
        ('call', 'call read_file'),
    ]
    facts = kinds(text)
    assert facts['read_file({"path":"src/app.py"})'] == 'command'
    assert facts['grep -c "def " src/app.py'] == 'command'
    assert facts['12'] == 'output'


def test_a_fact_cut_from_a_long_line_is_found_in_that_line() -> None:
    # a real failing test line (django-16950): its only space is too early to cut at, so the 160-character limit
    # fell inside the dotted name, and the cut fact matched nowhere -- not even the line it was cut from
    test = 'test_deleting_inline_with_protected_delete_does_not_validate'
    line = f'ERROR: {test} (admin_inlines.tests.TestInlineProtectedOnDelete.{test})'
    for text in (line, f'ERROR: {"x" * 200}', f'ERROR: {"a/" * 120}end'):
        output = f'{"=" * 70}\n{text}\n{"-" * 70}\nTraceback (most recent call last):\n'
        rendered = render_block([bash('./runtests.py admin_inlines', 'c1'), observation('c1', output, 1)])
        cut = [fact for fact in critical_facts(rendered) if text.startswith(fact.text) and fact.text != text]
        assert cut and all(len(fact.text) <= 160 for fact in cut)
        assert all(fact_present(fact, text) and fact_present(fact, rendered) for fact in cut)
    # cut after a separator of the name: a memento copying the whole line carries it
    rendered = render_block([bash('./runtests.py', 'c1'), observation('c1', f'{line}\n', 1)])
    (fact,) = (f for f in critical_facts(rendered) if line.startswith(f.text) and f.text != line)
    assert fact.text.endswith('.') and fact_present(fact, f'RESULT: failed\n{line}')


_WORDY = st.text(alphabet=st.sampled_from('ab_1 .-/éß²\n'), max_size=12)


@given(fact=_WORDY.filter(bool), before=_WORDY, after=_WORDY, noise=_WORDY)
def test_presence_agrees_with_the_word_boundary_pattern(fact: str, before: str, after: str, noise: str) -> None:
    # the definition `fact_present` implements without a regex (a look-behind is tried at every position)
    start = r'(?<!\w)' if fact[:1].isalnum() or fact[:1] == '_' else ''
    end = r'(?!\w)' if fact[-1:].isalnum() or fact[-1:] == '_' else ''
    pattern = re.compile(start + re.escape(fact) + end)
    for text in (before + fact + after, noise + before + fact + fact + after, noise):
        expected = pattern.search(text) is not None
        assert fact_present(Fact(fact, 'value'), text) is expected, (fact, text)


def test_facts_written_against_chinese_or_japanese_text_end_where_they_do() -> None:
    """No space sets a path or name apart in Chinese or Japanese, and `\\w` matches their characters too: the path
    read `migrate.py里面` (an identifier), so the judge missed it from a memento and fact retention counted a fact
    that was never in the text."""
    chinese = kinds('迁移脚本放在scripts/migrate.py里面，备份命令是pg_dump -Fc orders > orders.dump，用了十二分钟。')
    japanese = kinds('移行スクリプトはscripts/migrate.pyにあり、コマンドはorders.dumpです。')
    for facts in (chinese, japanese):
        assert facts['scripts/migrate.py'] == 'path'
        assert facts['orders.dump'] == 'identifier'
        assert not any(re.search('[\u3040-\u309f\u4e00-\u9fff]', fact) for fact in facts)
