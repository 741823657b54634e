"""`_compress` -- compressors turn a block into a memento: `ExtractiveCompressor` (no LLM) and `LLMCompressor`.

A memento is plain text, result first, then the block's critical facts verbatim: formulas and values, commands
with their exit codes and outcomes, files and symbols, errors and tests, then decisions and open items, and the
definitions a file read showed or a command wrote. Section labels (`RESULT:`, `COMMANDS:`, ...) are the only words a compressor adds.

Size policy: a memento aims at `target_ratio` of its block's tokens, but **fact retention comes first**: every
critical fact is included even past the target, up to `max_ratio` of the block (0.5 by default); decisions, open
items and definitions only fill what is left of the target. Each refinement (the judge named what is missing)
raises the cap to the next of `refine_ratios`, and the facts the judge named are pinned first. A memento is always
shorter than its block; if a block's facts cannot fit under the cap, the lowest-priority facts (symbols, then short
outputs and URLs) are dropped first and the judge will say so.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Final, Protocol, runtime_checkable

from pydantic import BaseModel, Field
from pydantic_ai import Agent
from pydantic_ai.models import KnownModelName, Model
from pydantic_ai.settings import ModelSettings

from ..._text import cut_words
from ..._tokens import TokenCounter
from ._block import BlockInput, actions_for
from ._dialogue import dialogue_memento, is_dialogue, model_view, named_speakers
from ._facts import FACT_SECTIONS, Fact, command_facts, critical_facts, fact_present, output_facts
from ._merge import merge_mementos
from ._outline import outline, written_outline
from ._regions import SECTION_LABELS, Region, parse_regions, render_sections
from ._render import Action
from ._usage import record_usage

__all__ = (
    'CompressionError',
    'Compressor',
    'ExtractiveCompressor',
    'LLMCompressor',
    'MementoDraft',
    'render_draft',
)

_MAX_RESULT_CHARS: Final = 200
_FENCE_LINE = re.compile(r'^[ \t]*(?:`{3,}|~{3,})')
_HTML_COMMENT = re.compile(r'<!--.*?(?:-->|$)', re.DOTALL)
_SENTENCE_END = re.compile(r'(?<=[.!?])\s+')
# A memento's own section labels are stripped too, so a memento of mementos does not stack `RESULT: RESULT:`.
_LEADING_LABEL = re.compile(
    rf'^(?:(?:THOUGHT|Thought|REASONING|Reasoning|ANALYSIS|{"|".join(SECTION_LABELS)})\s*:\s*)+'
)
_STRONG_DECISION = re.compile(
    r'\b(?:root cause|the (?:issue|problem|bug|fix|cause|culprit) (?:is|was|should be|lies)|fix(?:ed)? (?:it|this|the)|'
    r'confirm(?:s|ed)|verified|reproduced|resolved|(?:now )?works)\b',
    re.IGNORECASE,
)
_DECISION = re.compile(
    r'\b(?:because|instead|decided?|I will|I\'ll|so I|therefore|which means|should)\b', re.IGNORECASE
)
_PLAN = re.compile(
    r"^(?:Let's|Let me|Lets|Now,? (?:I|let|we)|I will|I'll|I need to|I should|I want to|We need to|Next|First|Then|"
    r'OK,? let|Okay,? let|To do this)\b',
    re.IGNORECASE,
)
_OPEN = re.compile(r"\b(?:I need to|need to|next|TODO|still|remaining|I will|I'll|Let me|Let's|I should)\b")
PROSE_PRIORITY: Final = 4
OUTLINE_PRIORITY: Final = 5
"""Definitions a long output showed or a command wrote (`_outline`): after the causes, fixes and open item, before other decisions;
like them, only within the target size, so they never push a memento past it."""
_MISSING_ITEM = re.compile(r'^- (\w+): (.+)$')


class CompressionError(RuntimeError):
    """A compressor could not produce a memento; the block must not be evicted."""


@runtime_checkable
class Compressor(Protocol):
    """Turns a block into memento text; `feedback` and `previous` are given when refining a judged candidate."""

    name: str

    async def compress(self, block: BlockInput, *, feedback: str | None = None, previous: str | None = None) -> str:
        """The memento text for `block`."""
        ...


# ----------------------------------------------------------------------------------------------- extractive


@dataclass
class _Item:
    priority: int
    """0 pinned (result, request, facts the judge named), 1 must-keep facts, 2 files/outputs/urls, 3 symbols,
    4 causes/fixes and the open item, 5 definitions an output showed or a command wrote, and other decisions
    (4 and 5 only within the target size)."""
    section: str
    text: str
    order: int
    tokens: int
    parent: int | None = None
    """Order of the command line this output line belongs to (kept only with it)."""


def _sentences(text: str) -> Iterator[str]:
    """Sentences of prose outside fenced blocks, each a verbatim substring of `text`."""
    in_fence = False
    for line in _HTML_COMMENT.sub('\n', text).splitlines():
        if _FENCE_LINE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        stripped = _LEADING_LABEL.sub('', line.strip())
        for sentence in _SENTENCE_END.split(stripped):
            sentence = sentence.strip()
            if len(sentence.split()) >= 3:
                yield cut_words(sentence, _MAX_RESULT_CHARS)


def _claims(text: str) -> list[str]:
    """Sentences that state something: not plans ("Let me ..."), not lead-ins ending with ':'."""
    return [s for s in _sentences(text) if not s.endswith(':') and not _PLAN.match(s)]


def _first_claim(text: str) -> str | None:
    """The first of `_claims`."""
    return next(iter(_claims(text)), None)


def _said_by(sentence: str, region: Region, speakers: AbstractSet[str]) -> str:
    """`sentence`, taken from a turn (`region`) of a conversation whose turns are named (`speakers`), after its
    speaker's name (`Name: ...`) unless it starts with it already (the turn's first sentence does): a memento line
    quoting a turn says who said it, as a dialogue memento's lines do, and so does the page summary made of it."""
    name = region.text.split(':', 1)[0].strip()
    if name not in speakers or sentence.startswith(f'{name}:'):
        return sentence
    return cut_words(f'{name}: {sentence}', _MAX_RESULT_CHARS)


def _last_outcome(actions: Sequence[Action]) -> str | None:
    """The last error or test line of the block's last answered command."""
    for action in reversed(actions):
        if action.output is None:
            continue
        salient = [fact.text for fact in output_facts(action.output) if fact.kind in ('error', 'test')]
        return salient[-1] if salient else None
    return None


def _pinned(feedback: str | None) -> set[str]:
    """Fact texts a judge's feedback names as missing (lines `- kind: text` of its MISSING list)."""
    if not feedback:
        return set()
    pinned: set[str] = set()
    in_missing = False
    for line in feedback.splitlines():
        if line.startswith('MISSING'):
            in_missing = True
        elif line.startswith(('INVENTED', 'SIZE', 'RESULT')):
            in_missing = False
        elif in_missing:
            match = _MISSING_ITEM.match(line)
            if match:
                text = match.group(2)
                pinned.add(text)
                command = re.match(r'`(.+)` -> .*$', text)  # an exit code line names its command
                if command:
                    pinned.add(command.group(1))
    return pinned


_KIND_ORDER: Final = ('formula', 'number', 'version', 'exit_code', 'error', 'test', 'command', 'output', 'path', 'url')


@dataclass
class ExtractiveCompressor:
    """The default compressor: no LLM, deterministic, every word taken verbatim from the block.

    It writes a result line (the first sentence of the assistant's latest text that states something rather than
    a plan, plus the last command's error or test outcome), the user's request when the block holds one, each
    command with its exit code and the critical lines of its output, then the remaining critical facts grouped by
    kind, then, while the target size allows, decision and open-item sentences and the definitions a long output
    showed or a command wrote (a file read's `13: def total; 46: async def checkout`, under its command).

    A conversation block (prose turns only, no tool calls) gets a dialogue memento instead (`_dialogue`): the
    informative sentences of both speakers, each line prefixed by its speaker, relative dates anchored (one it cannot
    fit takes the path above, where a line quoting a named turn starts with the name too). A run of mementos
    (`BlockInput.merges`) gets their items pooled, each once, within `BlockInput.max_tokens` (`_merge`).
    """

    target_ratio: float = 0.15
    """Aimed-at memento size as a fraction of the block's tokens (facts may push past it, up to `max_ratio`)."""
    max_ratio: float = 0.5
    """Hard cap for the first candidate; facts beyond it are dropped lowest priority first."""
    refine_ratios: tuple[float, ...] = (0.7, 0.9)
    """Caps for successive refinements (each must stay below 1.0: a memento is always shorter than its block)."""
    counter: TokenCounter | None = None
    """Counts tokens; a default `TokenCounter()` is made on first use."""
    dialogue_ratio: float = 0.21
    """Aimed-at size of a conversation block's memento (`_dialogue`: prose turns only, no tool calls); sentences
    holding must-keep facts may push past it, up to the cap."""
    dialogue_stretch: float = 1.0
    """How far past `dialogue_ratio` (a multiple of it) a conversation memento may grow with sentences worth at
    least `dialogue_dense_value`; 1.0 (the default) never. Above 1 the room follows how much a block says: small
    talk gets less of it and a block of facts more, which keeps more answers at the same size but changes the
    full-text ranking of the mementos (LoCoMo, `ratio / stretch / dense value`: 0.21 / 1 (default): answer retention
    0.342 at 22.8% of the dialogue, fused R@10 0.717; 0.21 / 2 / 0.25: 0.363 at 24.3%, 0.714; 0.16 / 2 / 0.2: 0.372
    at 24.5%, 0.705; see BENCHMARKS.md)."""
    dialogue_dense_value: float = 0.2
    """New content weight per token a sentence needs to go past `dialogue_ratio` (a word 1, a name or number 2, an
    anchored date 3, over the sentence's tokens plus 10); used only when `dialogue_stretch` is above 1."""
    name: str = 'extractive'
    """Recorded on each memento (`MementoRecord.compressor`)."""

    def __post_init__(self) -> None:
        ratios = (self.target_ratio, self.max_ratio, self.dialogue_ratio, *self.refine_ratios)
        if not all(0 < ratio < 1 for ratio in ratios) or self.target_ratio > self.max_ratio:
            raise ValueError(f'ratios must be in (0, 1) with target_ratio <= max_ratio, got {ratios}')
        if not self.dialogue_stretch >= 1 or not self.dialogue_dense_value >= 0:
            raise ValueError(
                'dialogue_stretch must be >= 1 and dialogue_dense_value >= 0, '
                f'got {self.dialogue_stretch} and {self.dialogue_dense_value}'
            )

    def _tokens(self, text: str) -> int:
        if self.counter is None:
            self.counter = TokenCounter()
        return self.counter.count_text(text)

    async def compress(self, block: BlockInput, *, feedback: str | None = None, previous: str | None = None) -> str:
        """Build the memento; when refining, raise the size cap and pin the facts the feedback names."""
        return self.extract(block, feedback=feedback, previous=previous)

    def extract(self, block: BlockInput, *, feedback: str | None = None, previous: str | None = None) -> str:
        """Synchronous `compress` (the extractive path never waits on anything)."""
        block_tokens = block.tokens or self._tokens(block.text)
        cap = self.max_ratio
        if feedback is not None:
            previous_ratio = self._tokens(previous) / block_tokens if previous and block_tokens else self.max_ratio
            cap = next(
                (ratio for ratio in self.refine_ratios if ratio > previous_ratio + 0.01), max(self.refine_ratios)
            )
        if block.max_tokens is not None and block_tokens:  # the room the caller has, refinements included
            cap = min(cap, block.max_tokens / block_tokens)
        if block.merges:
            merged = merge_mementos(
                block.merges,
                limit=min(block.max_tokens or int(block_tokens * cap), block_tokens - 1),
                prose_limit=int(block_tokens * self.target_ratio),
                count=self._tokens,
                pinned=_pinned(feedback),
            )
            if merged:
                return merged
        if is_dialogue(block):
            memento = dialogue_memento(
                block,
                budget=int(block_tokens * self.dialogue_ratio),
                stretch=self.dialogue_stretch,
                dense_value=self.dialogue_dense_value,
                limit=min(int(block_tokens * cap), block_tokens - 1),
                pinned=_pinned(feedback),
                count=self._tokens,
            )
            if memento:
                return memento
        items = self._items(block, _pinned(feedback))
        return self._select_and_render(items, block_tokens, cap)

    # -- building --------------------------------------------------------------------------------------------

    def _items(self, block: BlockInput, pinned: set[str]) -> list[_Item]:
        items: list[_Item] = []
        covered: list[str] = []

        def add(priority: int, section: str, text: str, parent: int | None = None, *, covers: bool = True) -> int:
            order = len(items)
            if any(fact in text for fact in pinned):
                priority = 0  # the judge named it as missing: it goes in first
            items.append(_Item(priority, section, text, order, self._tokens(text) + 1, parent))
            if covers:
                covered.append(text)
            return order

        def is_covered(fact: Fact) -> bool:
            return fact_present(fact, '\n'.join(covered))

        facts = critical_facts(block.text)
        actions = actions_for(block)
        regions = parse_regions(block.text)
        speakers = named_speakers(block)  # a conversation the dialogue path could not fit: its lines name speakers
        add(0, 'RESULT', self._result_line(regions, actions, speakers))
        for region in regions:
            if region.label == 'user':
                claims = [claim for claim in _claims(region.text)[:2] if claim not in covered[0]]
                request = _said_by(' '.join(claims), region, speakers) if claims else ''
                if request and request not in covered:
                    add(0, 'REQUEST', request)

        for action in actions:
            lines = [fact.text for fact in command_facts(action.command) if fact.kind == 'command']
            if not lines:
                continue
            for line in lines[:-1]:
                add(1, 'COMMANDS', f'$ {line}')
            last = f'$ {lines[-1]}'
            if action.exit_code is not None:
                last += f' -> exit {action.exit_code}'
            elif action.output is None:
                last += ' -> no output in this block'
            parent = add(1, 'COMMANDS', last)
            # a heredoc's file, a script, a write_file tool's content
            written = [str(definition) for definition in written_outline(action.command)]
            if written:
                add(OUTLINE_PRIORITY, 'COMMANDS', f'  {"; ".join(written)}', parent, covers=False)
            if action.output is None:
                continue
            outcomes: list[str] = []
            for fact in output_facts(action.output):
                if fact.kind in ('error', 'test'):
                    outcomes.append(fact.text)
                if fact.kind == 'exit_code' or is_covered(fact):
                    continue
                add(1 if fact.kind in ('error', 'test') else 2, 'COMMANDS', f'  {fact.text}', parent)
            shown = [
                str(definition)
                for definition in outline(action.output)
                # a failing test's source: the outcome line names it already
                if definition.name is None or not any(re.search(rf'\b{definition.name}\b', line) for line in outcomes)
            ]
            if shown:  # kept only if the target size leaves room; the facts it holds still get items of their own
                add(OUTLINE_PRIORITY, 'COMMANDS', f'  {"; ".join(shown)}', parent, covers=False)

        by_kind = {kind: [fact for fact in facts if fact.kind == kind] for kind in (*_KIND_ORDER, 'identifier')}
        for kind in (*_KIND_ORDER, 'identifier'):
            section, priority = FACT_SECTIONS[kind]
            for fact in by_kind[kind]:
                if is_covered(fact):
                    continue
                add(priority, section, f'$ {fact.text}' if kind == 'command' else fact.text)

        strong, other = self._decisions(regions, speakers)
        open_item = self._open_item(regions, speakers)
        for priority, sentences in ((4, strong), (4, [open_item] if open_item else []), (5, other)):
            for sentence in sentences:
                if sentence not in covered:
                    add(priority, 'OPEN' if sentence == open_item else 'DECISIONS', sentence)
        return items

    def _result_line(
        self, regions: Sequence[Region], actions: Sequence[Action], speakers: AbstractSet[str] = frozenset()
    ) -> str:
        """The first claim of the latest assistant text that states one (not a plan such as "Let me ..."); else
        of the latest user or system text; plus the last command's error or test outcome. In a conversation whose
        turns are named (`speakers`), the claim says who made it."""
        assistant = [region for region in regions if region.label in ('assistant', 'thinking')]
        others = [region for region in regions if region.kind == 'prose']
        found = next(((claim, region) for region in reversed(assistant) if (claim := _first_claim(region.text))), None)
        if found is None:
            found = next(
                ((first, region) for region in reversed(assistant) if (first := next(_sentences(region.text), None))),
                None,
            )
        if found is None:
            found = next(((claim, region) for region in reversed(others) if (claim := _first_claim(region.text))), None)
        sentence = None if found is None else _said_by(*found, speakers)
        if sentence is None and actions:
            # A block of tool calls without prose: its last command is the most telling verbatim line.
            sentence = cut_words(actions[-1].command.strip(), _MAX_RESULT_CHARS)
        result = sentence or 'no prose in this block'
        outcome = _last_outcome(actions)
        if outcome and outcome not in result:
            result += f' Last outcome: {outcome}'
        return result

    def _decisions(
        self, regions: Sequence[Region], speakers: AbstractSet[str] = frozenset()
    ) -> tuple[list[str], list[str]]:
        """Sentences of the assistant that state a cause, a fix or a confirmation (strong), or a choice (other);
        in a conversation whose turns are named (`speakers`), each after its speaker."""
        strong: list[str] = []
        other: list[str] = []
        for region in regions:
            if region.label not in ('assistant', 'thinking'):
                continue
            for raw in _sentences(region.text):
                sentence = _said_by(raw, region, speakers)
                if _STRONG_DECISION.search(raw) and sentence not in strong:
                    strong.append(sentence)
                elif _DECISION.search(raw) and sentence not in other:
                    other.append(sentence)
        return strong, other

    def _open_item(self, regions: Sequence[Region], speakers: AbstractSet[str] = frozenset()) -> str | None:
        """What the assistant said it would do next, in its latest text (after its speaker, as `_decisions`)."""
        assistant = [region for region in regions if region.label == 'assistant']
        if not assistant:
            return None
        found = next((s for s in _sentences(assistant[-1].text) if _OPEN.search(s)), None)
        return None if found is None else _said_by(found, assistant[-1], speakers)

    # -- selecting -------------------------------------------------------------------------------------------

    def _select_and_render(self, items: list[_Item], block_tokens: int, cap_ratio: float) -> str:
        cap = int(block_tokens * cap_ratio)
        target = int(block_tokens * self.target_ratio)
        selected = self._select(items, cap, target)
        text = _render(items, selected)
        # the per-item estimate can be off by a few tokens: drop the least important items until the text fits
        limit = min(cap, block_tokens - 1)
        ranked = sorted(selected, key=lambda order: (items[order].priority, order))
        while self._tokens(text) > limit and len(ranked) > 1:
            dropped = ranked.pop()
            selected.discard(dropped)
            selected -= {item.order for item in items if item.parent == dropped}
            ranked = [order for order in ranked if order in selected]
            text = _render(items, selected)
        return text

    def _select(self, items: list[_Item], cap: int, target: int) -> set[int]:
        selected: set[int] = set()
        used = 0
        for item in sorted(items, key=lambda item: (item.priority, item.order)):
            if item.parent is not None and item.parent not in selected:
                continue
            budget = target if item.priority >= PROSE_PRIORITY else cap
            if item.priority == 0 or used + item.tokens <= budget:
                selected.add(item.order)
                used += item.tokens
        return selected


def _render(items: Sequence[_Item], selected: set[int]) -> str:
    sections: dict[str, list[str]] = {label: [] for label in SECTION_LABELS}
    for item in items:
        if item.order in selected:
            sections[item.section].append(item.text)
    return render_sections(sections)


# ----------------------------------------------------------------------------------------------- LLM


class MementoDraft(BaseModel):
    """What an LLM compressor returns; `render_draft` turns it into memento text deterministically."""

    result: str = Field(description='The outcome of the block in one or two sentences: what is now known or done.')
    formulas_and_values: list[str] = Field(
        default_factory=list, description='Formulas, numbers with units, versions and values, copied verbatim.'
    )
    commands: list[str] = Field(
        default_factory=list,
        description='Each command verbatim (first line), then "-> exit N" and its outcome, e.g. the failing test.',
    )
    files_and_symbols: list[str] = Field(
        default_factory=list, description='Paths, URLs and code identifiers touched or found, verbatim.'
    )
    errors: list[str] = Field(
        default_factory=list, description='Error and exception lines and failing tests, verbatim.'
    )
    decisions: list[str] = Field(default_factory=list, description='Decisions taken and why, tersely.')
    open_items: list[str] = Field(default_factory=list, description='What is still open or planned next.')


def render_draft(draft: MementoDraft) -> str:
    """Plain-text memento from a draft: fixed section order and labels, one item per line, empty sections left out."""

    def clean(values: Sequence[str]) -> list[str]:
        return [value.strip() for value in values if value.strip()]

    lines = [f'RESULT: {" ".join(draft.result.split())}']
    sections = (
        ('VALUES', clean(draft.formulas_and_values)),
        ('COMMANDS', clean(draft.commands)),
        ('FILES', clean(draft.files_and_symbols)),
        ('ERRORS', clean(draft.errors)),
        ('DECISIONS', clean(draft.decisions)),
        ('OPEN', clean(draft.open_items)),
    )
    for label, values in sections:
        if values:
            lines.append(f'{label}:')
            lines.extend(values)
    return '\n'.join(lines)


DEFAULT_COMPRESSOR_INSTRUCTIONS: Final = """\
You compress one completed block of an agent's working context into a memento. This is state compression, not
summarization: the agent will continue from your memento alone, without the block.
Rules:
- result first: what is now known or done;
- copy verbatim, never paraphrase: formulas, numbers with units, versions, paths, URLs, code identifiers,
  commands (first line) with their exit codes ("-> exit N"), error and exception lines, test names and outcomes;
- every item must come from the block: invent nothing, do not guess values, do not fix typos;
- no process narrative ("first I looked at ..."): facts, decisions and open items only;
- plain ASCII text; stay within the token target given with the block.
"""


_DIALOGUE_GUIDANCE: Final = """\
This block is a conversation. Keep who said what (name the speaker of each fact), and the facts the speakers state
about themselves and others: events, plans, names, places, numbers, preferences; drop greetings, thanks and praise.
A date in parentheses after a relative expression ("yesterday (7 May 2023)") is resolved for you from the message's
time: copy the expression with its date exactly as written, and add no other dates."""


@dataclass
class LLMCompressor:
    """Compresses with any pydantic-ai model, asking for a structured `MementoDraft` (async, one run per call)."""

    model: Model | KnownModelName | str
    """The model (an instance, or a name like `'openai:gpt-4o-mini'`)."""
    target_ratio: float = 0.15
    """Memento size asked for, as a fraction of the block's tokens."""
    instructions: str = DEFAULT_COMPRESSOR_INSTRUCTIONS
    """System instructions of the compressing agent."""
    model_settings: ModelSettings | None = None
    """Passed to every run (e.g. temperature 0)."""
    name: str = ''
    """Recorded on each memento; defaults to `llm:<model name>`."""
    tokens_spent: int = field(default=0, init=False)
    """Tokens (input + output) spent by this compressor so far, over all blocks."""
    _agent: Agent[None, MementoDraft] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not 0 < self.target_ratio < 1:
            raise ValueError(f'target_ratio must be in (0, 1), got {self.target_ratio}')
        if not self.name:
            self.name = f'llm:{_model_name(self.model)}'

    def _get_agent(self) -> Agent[None, MementoDraft]:
        if self._agent is None:
            self._agent = Agent(
                self.model,
                output_type=MementoDraft,
                instructions=self.instructions,
                name='memento_compressor',
                defer_model_check=True,
            )
        return self._agent

    async def compress(self, block: BlockInput, *, feedback: str | None = None, previous: str | None = None) -> str:
        """Run the model once and render its draft.

        Raises:
            CompressionError: The model failed, or its output did not validate after pydantic-ai's retries.
        """
        target = max(16, int(block.tokens * self.target_ratio))
        dialogue = is_dialogue(block)
        prompt = [
            *([f'<context>\n{block.context}\n</context>'] if block.context else []),
            f'<block tokens="{block.tokens}">\n{model_view(block)}\n</block>',
            *([_DIALOGUE_GUIDANCE] if dialogue else []),
            f'Write the memento for this block in at most {target} tokens.',
        ]
        if previous is not None:
            prompt.append(f'<previous_memento>\n{previous}\n</previous_memento>')
        if feedback is not None:
            prompt.append(
                f'<judge_feedback>\n{feedback}\n</judge_feedback>\n'
                'Revise the previous memento: add exactly what the feedback names as missing (verbatim from the '
                'block), remove what it names as invented, keep everything else.'
            )
        try:
            result = await self._get_agent().run('\n\n'.join(prompt), model_settings=self.model_settings)
        except Exception as exc:
            raise CompressionError(f'{self.name} failed: {type(exc).__name__}: {exc}') from exc
        spent = result.usage.total_tokens
        self.tokens_spent += spent
        record_usage(spent)
        text = render_draft(result.output)
        if not result.output.result.strip():
            raise CompressionError(f'{self.name} returned a memento without a result')
        return text


def _model_name(model: Model | KnownModelName | str) -> str:
    if isinstance(model, Model):
        return model.model_name
    return str(model)
