"""The deterministic entity extractor: kinds, normalisation, aliases, counts, determinism."""

from __future__ import annotations

import json

import pytest

from mementograph.knowledge_graph.entities import (
    entity_key,
    extract_entities,
    mentions_for,
    normalize_path,
    stem,
)


def keys_of(text: str) -> dict[str, str]:
    return {entity.key: entity.kind for entity in extract_entities(text)}


def test_technical_kinds_from_an_agent_block() -> None:
    text = (
        '[call bash]\ncd /repo && git diff --stat && python -m pytest tests/test_models.py -x\n'
        '[return bash]\nTraceback (most recent call last):\n  File "x.py", line 3\n'
        'django.db.utils.OperationalError: no such table\n'
        '[assistant]\nThe fix is in `QuerySet.filter()`; see https://docs.djangoproject.com/en/4.2/ref/ '
        'and numpy==1.21 (v2.3.1). It took 3.5 ms.'
    )
    keys = keys_of(text)
    assert keys['cmd:git diff'] == 'command'
    assert keys['cmd:python -m pytest'] == 'command'
    assert keys['file:tests/test_models.py'] == 'file'
    assert keys['err:operationalerror'] == 'error'
    assert keys['sym:queryset.filter'] == 'symbol'
    assert keys['url:https://docs.djangoproject.com/en/4.2/ref'] == 'url'
    assert keys['ver:numpy==1.21'] == 'version'
    assert keys['ver:2.3.1'] == 'version'
    assert keys['num:3.5 ms'] == 'number'


def test_dialogue_kinds() -> None:
    text = (
        'Caroline: I moved from Sweden 4 years ago. Dr. Smith at Stanford University said so on 8 May, 2023.\n'
        'Melanie: I read "Charlotte\'s Web" and raised $5,000 for Google Inc in June 2022.'
    )
    kinds = keys_of(text)
    assert kinds['name:caroline'] == 'person'  # a speaker
    assert kinds['name:sweden'] == 'place'
    assert kinds['name:dr. smith'] == 'person'
    assert kinds['name:stanford university'] == 'organisation'
    assert kinds['name:google inc'] == 'organisation'
    assert kinds['date:2023-05-08'] == 'date'
    assert kinds['date:2022-06'] == 'date'
    assert kinds["term:charlotte's web"] == 'term'
    assert kinds['num:$5000'] == 'number'
    assert kinds['num:4 years'] == 'number'


def test_an_identifier_after_in_is_not_a_place() -> None:
    text = '[return read_file]\n"""Module 0."""\n\ndef scale_0(value):\n    """Multiply by 3 (the constant lives in CONFIG_0)."""\n'
    assert keys_of(text)['name:config_0'] == 'name'
    assert keys_of('Caroline: I grew up in Lisbon.')['name:lisbon'] == 'place'


def test_sentence_openers_are_not_names_but_recurring_capitals_are() -> None:
    keys = keys_of('Wow, that is great. Thanks! Gonna go. Last Friday we met Jo. Jo liked it.')
    assert 'name:jo' in keys
    for word in ('wow', 'thanks', 'gonna', 'last', 'last friday'):
        assert f'name:{word}' not in keys


def test_normalisation_meets_case_path_forms_and_inflections() -> None:
    assert entity_key('file', './src//A.py') == entity_key('file', 'src/a.py') == 'file:src/a.py'
    assert normalize_path('src\\pkg\\mod.py/') == 'src/pkg/mod.py'
    assert entity_key('person', "Melanie's") == entity_key('name', 'melanie') == 'name:melanie'
    assert entity_key('term', 'The Nightingale') == 'term:nightingale'
    assert entity_key('number', '$5,000') == 'num:$5000'
    assert entity_key('version', 'v1.2.3') == 'ver:1.2.3'
    assert entity_key('error', 'django.db.utils.OperationalError') == 'err:operationalerror'
    assert stem('camped') == stem('camping') == stem('camps') == stem('camp')
    assert stem('stories') == stem('story')


def test_aliases_let_short_forms_find_long_ones() -> None:
    keys = keys_of('Edit django/db/models/base.py and call np.ndarray. Kristin Hannah wrote it.')
    assert 'file:base.py' in keys and 'file:django/db/models/base.py' in keys
    assert 'sym:ndarray' in keys and 'sym:np.ndarray' in keys
    assert 'name:hannah' in keys and 'name:kristin hannah' in keys


def test_concepts_are_stemmed_counted_and_capped() -> None:
    entities = {e.key: e for e in extract_entities('I went camping. Camping again! We camped by the lake.')}
    assert entities['concept:camp'].count == 3
    long_text = ' '.join(f'word{chr(97 + i % 26)}{chr(97 + i // 26)}' for i in range(200))
    concepts = [e for e in extract_entities(long_text, max_concepts=10) if e.kind == 'concept']
    assert len(concepts) == 10


def test_memento_labels_and_headers_are_not_entities() -> None:
    keys = keys_of('[user]\nRESULT: the build passed\nCOMMANDS:\n$ make test -> exit 0\n[assistant]\nok')
    assert not any(key.endswith((':result', ':commands', ':user', ':assistant')) for key in keys)
    assert 'cmd:make test' in keys


@pytest.mark.parametrize('text', ['', 'the and of', '   '])
def test_empty_and_stopword_texts(text: str) -> None:
    assert extract_entities(text) == []


def test_mentions_are_deterministic_edges() -> None:
    text = 'Yesterday Caroline went to the LGBTQ support group in Boston on 8 May, 2023.'
    first = mentions_for('blk_1', text)
    assert first == mentions_for('blk_1', text)
    assert all(m.source_id == 'blk_1' and m.count >= 1 for m in first)
    assert [m.entity.key for m in first] == sorted(m.entity.key for m in first)
    assert {'name:caroline', 'name:lgbtq', 'name:boston', 'date:2023-05-08'} <= {m.entity.key for m in first}


def test_a_long_tool_output_is_read_whole_and_counted_across_its_pieces() -> None:
    """A multi-megabyte output is read in line-aligned pieces (one pass over it would be quadratic): an entity
    anywhere in it is found, and counts and the concept cap are over the whole text, not per piece."""
    lines = [f'INFO worker handled request {i} from src/app/handler_{i % 50}.py' for i in range(20_000)]
    lines[10_000] = 'ERROR ValueError: bad shard in /var/data/shard_17.bin'
    lines[-1] = 'see https://example.org/runbook for the fix'
    text = '\n'.join(lines)
    assert len(text) > 20 * 32_768
    entities = {e.key: e for e in extract_entities(text, max_concepts=3)}
    assert {'err:valueerror', 'file:/var/data/shard_17.bin', 'url:https://example.org/runbook'} <= set(entities)
    assert entities['file:src/app/handler_7.py'].count == 400
    concepts = [e for e in entities.values() if e.kind == 'concept']
    assert len(concepts) == 3 and entities['concept:worker'].count == 19_998


def test_a_test_line_names_its_tests_and_their_file_not_itself() -> None:
    text = (
        '[call bash]\npytest tests/test_cart.py\n[return bash]\n<returncode>1</returncode>\n<output>\n'
        'FAILED tests/test_cart.py::TestCart::test_total[2-3] - assert 0 == 3\n'
        'FAIL: test_refund (shop.tests.TestRefund)\n'
        '1 failed, 12 passed in 0.40s\n</output>'
    )
    keys = keys_of(text)
    assert keys['sym:test_total'] == keys['sym:testcart'] == 'test'
    assert keys['sym:test_refund'] == keys['sym:testrefund'] == 'test'
    assert keys['file:tests/test_cart.py'] == 'file'
    assert not any('failed' in key or 'passed' in key for key in keys)  # lines and run summaries are no entities


LISTING = '\n'.join(
    f'{number:6d}\t{line}'
    for number, line in enumerate(
        [
            'from decimal import Decimal',
            '',
            'class Cart:',
            '    def apply_discount(self, percent: int) -> Decimal:',
            '        return self.total * (100 - percent) / 100',
            '',
            'def checkout(cart: Cart) -> None:',
            '    cart.pay()',
        ],
        start=1,
    )
)


def test_the_definitions_a_tool_output_shows_or_a_command_writes_are_symbols() -> None:
    read = keys_of(f'[call bash]\nnl -ba shop/cart.py\n[return bash]\n{LISTING}')
    assert read['sym:apply_discount'] == read['sym:checkout'] == read['sym:cart'] == 'symbol'
    wrote = keys_of(
        f"[call bash]\ncat <<'EOF' > shop/cart.py\n{LISTING}\nEOF\n[return bash]\n<returncode>0</returncode>"
    )
    assert wrote['sym:apply_discount'] == wrote['sym:checkout'] == 'symbol'
    tool = keys_of(f'[call write_file]\nwrite_file({json.dumps({"path": "shop/cart.py", "content": LISTING})})')
    assert tool['sym:apply_discount'] == tool['sym:checkout'] == 'symbol'  # a JSON string argument's code
    said = keys_of(f'[assistant]\n{LISTING}')  # the same words in prose define nothing
    assert 'sym:checkout' not in said


def test_the_words_people_wrote_come_before_a_tool_outputs_words_under_the_cap() -> None:
    code = '\n'.join(
        f'    self.{word}_value = compute_{word}(self, {word}) + offset' for word in ['alpha', 'beta'] * 30
    )
    text = (
        '[assistant]\nThe serializer mangles the timezone, so I will inspect the adapter.\n'
        f'[call bash]\ncat src/adapter.py\n[return bash]\n<returncode>0</returncode>\n<output>\n{code}\n</output>'
    )
    concepts = [e for e in extract_entities(text, max_concepts=4) if e.kind == 'concept']
    assert {e.key for e in concepts} == {
        entity_key('concept', w) for w in ('serializer', 'mangles', 'timezone', 'inspect')
    }
    everything = {e.key for e in extract_entities(text, max_concepts=100)}
    assert {'concept:returncod', 'concept:output'}.isdisjoint(everything)  # an observation's tags are structure
    assert entity_key('concept', 'offset') in everything  # the output's words still fill what the cap leaves


def test_the_files_a_search_found_are_files_of_its_block() -> None:
    hits = '\n'.join(
        [
            'src/shop/cart.py:12:    total = apply_discount(total, 10)',
            'src/shop/cart.py:40:def apply_discount(total, percent):',
            'tests/test_cart.py:7-    assert apply_discount(100, 10) == 90',
            '12:30:45 worker started',
        ]
    )
    keys = keys_of(f'[call bash]\ngrep -rn apply_discount src tests\n[return bash]\n{hits}')
    assert keys['file:src/shop/cart.py'] == keys['file:tests/test_cart.py'] == 'file'
    assert not any(key.startswith('file:12') for key in keys)  # a time of day is no hit


def test_the_middle_of_a_long_tool_output_is_read_as_output() -> None:
    """A text longer than a piece is read piece by piece; a piece that continues a tool output is output too, so a
    source dump gives its first definitions, not every name in it (read as prose: 79,707 symbols for 8 MB)."""
    source = '\n'.join(f'def handler_{i}(event_{i}):\n    return event_{i}.payload_{i}' for i in range(4_000))
    assert len(source) > 5 * 32_768
    for text in (f'[call bash]\ncat app.py\n[return bash]\n{source}', f'<returncode>0</returncode>\n{source}'):
        symbols = [e.key for e in extract_entities(text) if e.kind == 'symbol']
        assert 0 < len(symbols) <= 32 and 'sym:handler_0' in symbols
        assert 'sym:handler_3999' not in symbols and 'sym:event_3999' not in symbols


def test_line_numbers_are_not_years() -> None:
    listing = '\n'.join(f'{n:6d}\t    total += row_{n}' for n in range(1998, 2003))
    grep = '2001:    total = 0\nsrc/report.py:2002:    return total\n2003\u2192    pass\n2004 | done'
    keys = keys_of(
        f'[call bash]\nnl -ba report.py\n[return bash]\n{listing}\n{grep}\n[assistant]\nWritten in 2023: it ran 1999 times.'
    )
    assert {key for key in keys if key.startswith('date:')} == {'date:2023', 'date:1999'}


def test_a_korean_noun_is_one_entity_whatever_particle_it_carries() -> None:
    keys = set(keys_of('서울에서 회의가 있습니다. 회의를 마치고 서울로 돌아갑니다.'))
    assert {'concept:서울', 'concept:회의'} <= keys
    assert not {'concept:서울에서', 'concept:회의가', 'concept:회의를', 'concept:서울로'} & keys
