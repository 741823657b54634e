"""The outline of a long tool output: the definitions it shows, where the command numbered them."""

from __future__ import annotations

from mementograph.knowledge_graph.memory._outline import MAX_DEFINITIONS, Definition, outline, without_outlines

NUMBERED = """\
     1\timport json
     2\t
     3\tfrom .models import Item
     4\t
     5\t
     6\tclass Cart(Base):
     7\t    \"\"\"A shopping cart.\"\"\"
     8\t
     9\t    def __init__(self, owner: str) -> None:
    10\t        self.owner = owner
    11\t        self.items: list[Item] = []
    12\t
    13\t    def total(self) -> float:
    14\t        definition = sum(item.price for item in self.items)
    15\t        return definition
    16\t
    17\t    async def checkout(self, payment) -> dict:
    18\t        return json.loads(payment.charge(self.total()))
"""


def shown(output: str, **kwargs: int) -> list[str]:
    return [str(definition) for definition in outline(output, **kwargs)]


def test_a_numbered_listing_gives_each_definition_with_its_line_number() -> None:
    assert outline(NUMBERED)[0] == Definition('6', 'class Cart', 'Cart')
    assert shown(NUMBERED) == ['6: class Cart', '9: def __init__', '13: def total', '17: async def checkout']


def test_file_viewers_line_numbers_are_read_too() -> None:
    arrows = '\n'.join(
        f'{n:6d}\u2192{line}' for n, line in enumerate(['import os', '', 'class Loader:', '    def load(self):'], 1)
    )
    pipes = '\n'.join(
        f'{n} | {line}' for n, line in enumerate(['import os', '', 'class Loader:', '    def load(self):'], 1)
    )
    assert shown(arrows) == shown(pipes) == ['3: class Loader', '4: def load']


def test_grep_hits_keep_their_path_and_line_and_plain_code_keeps_none() -> None:
    grep = 'src/cart.py:6:class Cart:\nsrc/cart.py:13:    def total(self):\nsrc/io.py:2:import os\nsrc/io.py:9:def load(path):'
    assert shown(grep) == ['src/cart.py:6: class Cart', 'src/cart.py:13: def total', 'src/io.py:9: def load']
    plain = 'import os\n\ndef load(path):\n    return open(path).read()\n\nclass Loader:\n    pass\n'
    assert shown(plain) == ['def load', 'class Loader']


def test_other_languages_definitions_are_found() -> None:
    code = '\n'.join(
        [
            'export async function loadUser(id) {',
            '  const user = await db.get(id);',
            '}',
            'pub fn parse(input: &str) -> Result<Ast, Error> {',
            'impl<T> Display for Tree<T> {',
            'func (s *Server) Start() error {',
            'public sealed class Order {',
            'type Config struct {',
        ]
    )
    assert shown(code) == [
        'export async function loadUser',
        'pub fn parse',
        'impl<T> Display for Tree<T>',
        'func (s *Server) Start',
        'public sealed class Order',
    ]
    assert [definition.name for definition in outline(code)] == ['loadUser', 'parse', None, 'Start', 'Order']


def test_short_outputs_give_none_and_long_ones_are_capped() -> None:
    assert outline('def f():\n    return 1\n') == []  # kept whole as a critical fact already
    many = '\n'.join(f'def handler_{i}(event):\n    return {i}' for i in range(30))
    assert shown(many) == [f'def handler_{i}' for i in range(MAX_DEFINITIONS)]
    assert shown(many, limit=2) == ['def handler_0', 'def handler_1']


def test_prose_that_starts_with_a_keyword_is_no_definition() -> None:
    log = '\n'.join(
        [
            'function returns the cached value when the key is known',
            'record the time of each request',
            'class of 2020 results follow',
            'interface with the payment API',
            'public class Order extends Base {',
            'mod parser;',
        ]
    )
    assert shown(log) == ['public class Order', 'mod parser']


def test_a_definition_shown_twice_is_given_once() -> None:
    source = 'def build(x):\n    pass\n\nclass Builder:\n    def build(self):\n        pass\n'
    assert shown(source + source) == ['def build', 'class Builder']


def test_without_outlines_drops_only_outline_lines() -> None:
    memento = '\n'.join(
        [
            'RESULT: The cart computes totals.',
            'COMMANDS:',
            "$ nl -ba src/cart.py | sed -n '1,80p' -> exit 0",
            '  6: class Cart; 9: def __init__; 13: def total',
            '$ grep -rn checkout src',
            '  src/cart.py:46: async def checkout; func (s *Server) Start; impl<T> Display for Tree<T>',
            '$ pytest tests -> exit 1',
            '  FAILED tests/test_cart.py::test_total',
            '  def total is wrong here',
            'VALUES: 13',
        ]
    )
    assert without_outlines(memento).split('\n') == [
        'RESULT: The cart computes totals.',
        'COMMANDS:',
        "$ nl -ba src/cart.py | sed -n '1,80p' -> exit 0",
        '$ grep -rn checkout src',
        '$ pytest tests -> exit 1',
        '  FAILED tests/test_cart.py::test_total',
        '  def total is wrong here',
        'VALUES: 13',
    ]


def test_definitions_shown_by_outputs_and_written_by_commands() -> None:
    from mementograph.knowledge_graph.memory import definitions_shown, definitions_written

    text = (
        "[call bash]\ncat <<'EOF' > repro.py\nimport cart\n\ndef reproduce():\n    return cart.total()\nEOF\n"
        f'[return bash]\n<returncode>0</returncode>\n[call bash]\nnl -ba src/cart.py\n[return bash]\n{NUMBERED}'
    )
    assert [str(d) for d in definitions_written(text)] == ['def reproduce']
    assert [str(d) for d in definitions_shown(text)][:2] == ['6: class Cart', '9: def __init__']


def test_a_tools_multi_line_string_arguments_are_outlined_as_written_code() -> None:
    import json

    from mementograph.knowledge_graph.memory._outline import written_outline

    content = 'import os\n\nclass Loader:\n    def load(self, path):\n        return open(path).read()\n'
    call = f'write_file({json.dumps({"path": "src/loader.py", "content": content})})'
    assert [str(d) for d in written_outline(call)] == ['class Loader', 'def load']
    assert written_outline('write_file({"path": "notes.txt", "content": "one line"})') == []
    assert written_outline('write_file({"path": broken') == []  # not JSON: read as a command, which defines nothing
