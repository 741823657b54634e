"""`_dialogue` -- mementos of conversation blocks: the informative sentences of both speakers, dates made absolute.

A block whose messages hold no tool call, tool return or text-protocol action is a conversation, not an agent
trace: it has no command, output or result line to keep, and the agent-trace selection (first sentence of the
answer as the result, first two of the request) keeps chit-chat and drops what the second speaker said. Here every
turn is split into sentences (a bracketed note such as `[shares a photo: ...]` is a sentence of its own), each
scored by what it adds -- content words, names, numbers and dates not already picked -- with greetings, thanks,
praise and questions that state nothing scoring nothing. The best sentences per token are picked within the size
target, sentences holding a must-keep fact (numbers, paths, ...) or a fact the judge named first. They are written
verbatim, in turn order, one line per turn prefixed by its speaker (the `Name: ` the turn starts with, else its
role). A conversation has no outcome to lead with, so there is no `RESULT:` label: the speaker's line is the lead
(`opens_with_speaker`). Without the label LoCoMo's mementos shrink from 24.1% to 22.8% of the dialogue with the same
answer retention (0.342) and recall; spending the saved tokens on sentences instead (a 0.23 budget: 0.356 at 24.8%)
cost LongMemEval_S one question of 12 at recall_all@5, as larger mementos shift the full-text ranking.

A run of such mementos merged into one (a long chat's mementos outgrowing their share) is pooled the same way,
sentence by sentence under each line's speaker (`merge_dialogue_mementos`).

Relative dates are anchored (`_dates`): "yesterday" becomes "yesterday (7 May 2023)", resolved against the
message's own timestamp. The judge derives the same anchors from the same messages (`derived_anchors`) and accepts
exactly those, so an anchor is never mistaken for an invented date and a wrong one is never accepted.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from pydantic_ai.messages import ModelMessage, ModelResponse, SystemPromptPart, TextPart, UserPromptPart

from ..._languages import languages_of, stopwords_of
from ..._messages import without_surrogates
from ..._text import IDEOGRAPH_RUN, IDEOGRAPHS, character_pairs, uppercase
from ..._transcripts import split_bash_action
from ._block import BlockInput
from ._dates import MONTHS, TimeZone, anchor_text, find_anchors, in_zone
from ._facts import MUST_KEEP_KINDS, Fact, critical_facts, fact_present
from ._regions import SECTION_LABELS
from ._render import is_observation

__all__ = (
    'derived_anchors',
    'dialogue_memento',
    'is_conversation_memento',
    'is_dialogue',
    'merge_dialogue_mementos',
    'model_view',
    'named_speakers',
    'opens_with_speaker',
    'strip_derived_anchors',
)

_SPEAKER: Final = re.compile(
    rf"^([{uppercase()}][\w'.-]{{0,30}}(?: [{uppercase()}][\w'.-]{{0,30}}){{0,2}}):[ \t]+(?=\S)"
)
"""A turn's speaker: `Name: ` and the text, after however many spaces (LoCoMo writes `John:  Yep` at times, and one
unnamed turn would leave every turn of its block to its role)."""
_LINE_SPEAKER: Final = re.compile(rf'{_SPEAKER.pattern}|^(user|assistant|system): (?=\S)')
"""The speaker a memento's line starts with: a name, or the role in a chat whose turns carry no names."""
_FENCE: Final = re.compile(r'^[ \t]*(?:`{3,}|~{3,})', re.MULTILINE)
_NOTE: Final = re.compile(r'\[[^\[\]\n]{3,400}\]')
# A sentence ends at . ! or ? before a space, except after a title ("Dr. Smith" stays one sentence), and at a
# Chinese or Japanese full stop, which no space follows.
_SENTENCE_END: Final = re.compile(
    r'(?<=[.!?])(?<!\bDr\.)(?<!\bMr\.)(?<!\bMs\.)(?<!\bMrs\.)(?<!\bSt\.)\s+|(?<=[\u3002\uff01\uff1f])\s*|\n+'
)
# Clauses a long sentence is cut at (a dash or a semicolon between two statements), and a leading address or
# interjection ("Yeah, ", "Wow, Caroline, ") that is trimmed: both keep the words verbatim and save tokens.
_CLAUSE: Final = re.compile(r'\s+[-\u2013\u2014]+\s+|;\s+|(?<=[\uff0c\uff1b\u3001])')
_FULLWIDTH_END: Final = re.compile(r'[\u3000-\u303f\uff00-\uffef]$')
"""A CJK or fullwidth punctuation mark (a full stop, comma, enumeration comma, ...) at the end of a text."""
_LEAD: Final = re.compile(r"^(?:[A-Za-z'\u2019]+(?: [A-Za-z'\u2019]+)?[,!]\s+)+")
# What a sentence's new words are worth: 1 each, more for a name or number and most for an absolute date (what
# temporal questions ask for), less in a photo caption (a generic description of an image) or a question.
_NAME_WEIGHT: Final = 2.0
_ANCHOR_WEIGHT: Final = 3.0
_NOTE_WEIGHT: Final = 0.4
_QUESTION_WEIGHT: Final = 0.5
"""A question states nothing (a user's question to an assistant is its request, so it is not discounted)."""
_USER_WEIGHT: Final = 4.0
"""In a user/assistant chat the user's sentences hold the personal facts; the assistant's text is generic and can
be asked for again (unweighted, it cost pooled LongMemEval 0.018 recall_all@5 through the indexed mementos)."""
_UNIT_COST: Final = 10
"""Tokens added to a sentence's own when ranking by gain per token: favours one full statement over scraps."""
_FIRST_SLACK: Final = 2.0
"""The first sentence may take this multiple of the budget (a short block's one statement can exceed it)."""
_WORD: Final = re.compile(rf"[{IDEOGRAPHS}]+|[^\W\d_{IDEOGRAPHS}](?:[^\W\d_{IDEOGRAPHS}]|['\u2019-])*|\d[\d,.:/%]*")
"""A word of any alphabet, a number, or a run of Han and Hiragana (weighed by its pairs of characters)."""
_ANCHOR_SHAPE: Final = re.compile(
    rf'\((?:\w+ \w+ (?:before|after|of) )?(?:\d{{1,2}} )?(?:(?:{"|".join(MONTHS)}) )?\d{{4}}\)', re.IGNORECASE
)


def _word_set(words: str) -> frozenset[str]:
    return frozenset(words.split())


_STOP: Final = _word_set(
    """a about above after again against all also am an and any are aren't as at be because been before being
    below between both but by can can't could couldn't did didn't do does doesn't doing don't down during each few
    for from further get gets getting got gonna had hadn't has hasn't have haven't having he he'd he'll he's her
    here here's hers herself him himself his how how's i i'd i'll i'm i've if in into is isn't it it's its itself
    just let's me more most much must my myself no nor not now of off on once only or other ought our ours
    ourselves out over own same she she'd she'll she's should shouldn't so some such than that that's the their
    theirs them themselves then there there's these they they'd they'll they're they've this those through to too
    under until up very was wasn't we we'd we'll we're we've were weren't what what's when when's where where's
    which while who who's whom why why's will with won't would wouldn't you you'd you'll you're you've your yours
    yourself yourselves yeah yep yes oh ok okay hey hi hello bye wow haha lol hah woah whoa ya btw anyway though
    still even ever really totally definitely absolutely sure thing things stuff lot lots kinda sorta pretty super
    way well like"""
)
_GENERIC: Final = _word_set(
    """thanks thank thankful grateful appreciate appreciated great awesome amazing cool nice good glad happy
    wonderful fantastic incredible awesome love loved lovely sweet beautiful gorgeous fun proud inspiring inspired
    impressive sounds sound seems looks look looking mean means meant words kind congrats congratulations
    agree glad excited exciting stoked cheers hope hoping wish wishes luck care feel feeling felt know knew think
    thought guess tell telling told talk talking chat chatting catch catching see seeing saw keep going doing
    done said say says wanted want wants time times day long"""
)


@dataclass
class _Unit:
    """One sentence (or bracketed note) of a turn, already anchored."""

    turn: int
    order: int
    text: str
    words: frozenset[str]
    weights: dict[str, float]
    tokens: int
    question: bool
    forced: bool = False


@dataclass(frozen=True)
class _Turn:
    speaker: str
    body: str
    stamp: datetime | None


def is_dialogue(block: BlockInput) -> bool:
    """A block of prose turns only: messages without tool calls, tool returns, retries, thinking, text-protocol
    actions and observations, or fenced code (an agent's task statement or a plan with code is a trace, not a
    chat). A text-only block (no messages) is not: its turns and timestamps are unknown."""
    if not block.messages or _FENCE.search(block.text):
        return False
    prose = False
    for message in block.messages:
        for part in message.parts:
            if isinstance(part, UserPromptPart):
                if not isinstance(part.content, str) or is_observation(part):
                    return False
                prose = True
            elif isinstance(part, TextPart):
                if split_bash_action(part.content) is not None:
                    return False
                prose = True
            elif not isinstance(part, SystemPromptPart):
                return False
    return prose


def _prose(messages: Sequence[ModelMessage], zone: TimeZone) -> Iterator[tuple[str, str, datetime | None]]:
    """`(role, text, time)` of each prose part: user prompts (not tool observations), the model's text, system
    prompts; the time is the part's, or its response's for the model's text, on `zone`'s clock."""
    for message in messages:
        for part in message.parts:
            if isinstance(part, UserPromptPart) and isinstance(part.content, str) and not is_observation(part):
                yield 'user', without_surrogates(part.content), _on_clock(part.timestamp, zone)
            elif isinstance(part, TextPart) and isinstance(message, ModelResponse):
                yield 'assistant', without_surrogates(part.content), _on_clock(message.timestamp, zone)
            elif isinstance(part, SystemPromptPart):
                yield 'system', without_surrogates(part.content), _on_clock(part.timestamp, zone)


def _on_clock(moment: datetime | None, zone: TimeZone) -> datetime | None:
    """`moment` on `zone`'s clock; `None` (no anchors) without one, or when that day is outside the calendar."""
    return None if moment is None else in_zone(moment, zone)


def _turns(messages: Sequence[ModelMessage], zone: TimeZone) -> list[_Turn]:
    """Each prose part with its speaker (the `Name: ` it starts with, else its role) and its message's time."""
    turns = [_Turn(role, text.strip(), stamp) for role, text, stamp in _prose(messages, zone) if text.strip()]
    # Names are read only when every turn starts with one (LoCoMo's "Caroline: ..."); otherwise a leading
    # "Note: ..." would pass for a speaker.
    named = [_SPEAKER.match(turn.body) for turn in turns]
    if turns and all(named):
        return [
            _Turn(match.group(1), turn.body[match.end() :], turn.stamp)
            for turn, match in zip(turns, named, strict=True)
            if match
        ]
    return turns


def named_speakers(block: BlockInput) -> frozenset[str]:
    """The names a conversation block's turns start with (`Caroline: ...`), read as `_turns` reads them: none for
    an agent trace or for a chat whose turns do not all carry a name (their speakers are their roles)."""
    if not is_dialogue(block):
        return frozenset()
    speakers = {turn.speaker for turn in _turns(block.messages, block.zone)}
    return frozenset() if speakers & {'user', 'assistant', 'system'} else frozenset(speakers)


def derived_anchors(messages: Sequence[ModelMessage], zone: TimeZone = None) -> frozenset[str]:
    """Every `expression (anchor)` the resolver derives for these messages' prose, each against its own message's
    timestamp read on `zone`'s clock: exactly what a dialogue memento may add to the block's words."""
    return frozenset(
        anchor.anchored
        for _, text, stamp in _prose(messages, zone)
        if stamp is not None
        for anchor in find_anchors(text, stamp)
    )


def model_view(block: BlockInput) -> str:
    """What an LLM compressor or judge reads of a block: its rendered text, or for a conversation its turns as
    `Speaker: text` lines with each relative date followed by its anchor ("yesterday (7 May 2023)"). The rendered
    block carries no timestamps: a compressing model could not date "yesterday" itself (a date it worked out
    another way is one the rubric cannot check), and a judging model would take the anchors of a dialogue memento
    for inventions."""
    if not is_dialogue(block):
        return block.text
    return '\n'.join(
        f'{turn.speaker}: {anchor_text(turn.body, turn.stamp)}' for turn in _turns(block.messages, block.zone)
    )


def strip_derived_anchors(memento: str, block: BlockInput) -> tuple[str, list[str]]:
    """`(memento without the anchors derived from the block's messages, anchors it holds that are not derived)`.

    A derived anchor is removed only where it follows its own expression. A date-shaped parenthesis that is left
    and is not in the block's text is reported: the judge counts it as invented. A memento without a date-shaped
    parenthesis (every agent-trace memento, nearly) holds no anchor: the block's messages are not scanned then.
    """
    if not _ANCHOR_SHAPE.search(memento):
        return memento, []
    for anchored in sorted(derived_anchors(block.messages, block.zone), key=len, reverse=True):
        expression = anchored[: anchored.rindex(' (')]
        memento = memento.replace(anchored, expression)
    wrong = [match.group(0) for match in _ANCHOR_SHAPE.finditer(memento) if match.group(0) not in block.text]
    return memento, wrong


def _names(turns: Sequence[_Turn]) -> set[str]:
    return {part.lower() for turn in turns for part in turn.speaker.split()}


def _is_name(word: str, names: set[str]) -> bool:
    """A speaker's name or a short form of it ("Mel" for Melanie): vocatives, not facts."""
    lowered = word.lower()
    return any(name.startswith(lowered) and len(lowered) >= 2 for name in names)


def _units(turns: Sequence[_Turn], count: Callable[[str], int], stopwords: frozenset[str]) -> list[_Unit]:
    names = _names(turns)
    units: list[_Unit] = []
    for index, turn in enumerate(turns):
        body = anchor_text(turn.body, turn.stamp)
        pieces: list[str] = []
        cursor = 0
        for note in _NOTE.finditer(body):
            pieces.extend(_SENTENCE_END.split(body[cursor : note.start()]))
            pieces.append(note.group(0))
            cursor = note.end()
        pieces.extend(_SENTENCE_END.split(body[cursor:]))
        for piece in _clauses(pieces):
            text = _trim_lead(piece.strip(), names)
            if not text:
                continue
            weights = _weights(text, names, stopwords)
            factor = 1.0
            if _NOTE.fullmatch(text):  # a photo caption: a generic description, cheap words worth less
                factor = _NOTE_WEIGHT
            elif turn.speaker == 'user':  # a user/assistant chat: the user's own facts are what is asked later
                factor = _USER_WEIGHT
            if factor != 1.0:
                weights = {word: weight * factor for word, weight in weights.items()}
            units.append(
                _Unit(
                    turn=index,
                    order=len(units),
                    text=text,
                    words=frozenset(weights),
                    weights=weights,
                    tokens=count(text) + 1,
                    question=text.endswith('?') and turn.speaker != 'user',
                )
            )
    return units


def _clauses(pieces: Sequence[str]) -> list[str]:
    out: list[str] = []
    for piece in pieces:
        if _NOTE.fullmatch(piece.strip()):
            out.append(piece)
        else:
            out.extend(_CLAUSE.split(piece))
    return out


def _trim_lead(text: str, names: set[str]) -> str:
    """`text` without a leading address or interjection made only of stop words, chat words and names."""
    match = _LEAD.match(text)
    if not match:
        return text
    words = re.findall(r"[A-Za-z'\u2019]+", match.group(0))
    if all(word.lower() in _STOP or word.lower() in _GENERIC or _is_name(word, names) for word in words):
        return text[match.end() :]
    return text


def _weights(text: str, names: set[str], stopwords: frozenset[str]) -> dict[str, float]:
    """What each content word of a sentence is worth: 1, 2 for a name or a number, 3 for an anchored date
    (`stopwords`: those of the conversation's other languages, beside the English `_STOP`)."""
    weights: dict[str, float] = {}
    for anchor in _ANCHOR_SHAPE.finditer(text):
        weights[anchor.group(0).lower()] = _ANCHOR_WEIGHT
    plain = _ANCHOR_SHAPE.sub(' ', text)
    for position, match in enumerate(_WORD.finditer(plain)):
        word = match.group(0).strip("'\u2019-.,")
        if IDEOGRAPH_RUN.fullmatch(word):  # no spaces to find words at: each pair of characters counts, as in search
            for pair in character_pairs(word):
                weights[pair] = max(weights.get(pair, 0.0), 1.0)
            continue
        lowered = word.lower()
        if not word or lowered in _STOP or lowered in stopwords or lowered in _GENERIC or _is_name(word, names):
            continue
        if word[0].isdigit() or (word[0].isupper() and position > 0):  # a number or a name
            weight = _NAME_WEIGHT
        elif len(word) <= 2:
            continue
        else:
            weight = 1.0
        weights[lowered] = max(weights.get(lowered, 0.0), weight)
    return weights


def _gain(unit: _Unit, seen: set[str]) -> float:
    gain = sum(weight for word, weight in unit.weights.items() if word not in seen)
    return gain * (_QUESTION_WEIGHT if unit.question else 1.0)


def dialogue_memento(
    block: BlockInput,
    *,
    budget: int,
    limit: int,
    pinned: set[str],
    count: Callable[[str], int],
    min_gain: float = 2.0,
    stretch: float = 1.0,
    dense_value: float = math.inf,
) -> str:
    """The memento of a dialogue block: forced sentences (must-keep facts, pinned facts) first, then the best gain
    per token within `budget` tokens, and past it, up to `stretch` times `budget`, sentences worth at least
    `dense_value` (new content weight per token, `_UNIT_COST` included); the rendered text is cut to `limit` tokens,
    least useful sentence first.

    Returns `''` when the result would not fit `limit` or lacks a must-keep fact (the caller then uses the
    agent-trace path, which never loses a fact to sentence boundaries)."""
    turns = _turns(block.messages, block.zone)
    must_keep = [fact for fact in critical_facts(block.text) if fact.kind in MUST_KEEP_KINDS]
    text = _select(
        turns,
        block.text,
        must_keep,
        pinned,
        budget=budget,
        limit=limit,
        count=count,
        min_gain=min_gain,
        stretch=stretch,
        dense_value=dense_value,
    )
    if not text or count(text) > limit or not all(fact_present(fact, text) for fact in must_keep):
        # a fact no sentence carries whole, or too many facts for the cap: the agent-trace path lists facts
        # one by one, so the caller falls back to it
        return ''
    return text


def _line_speaker(line: str) -> tuple[str, str] | None:
    """`(speaker, the rest)` of a memento's line: a name, a role, or a section label (`VALUES`); `None` else."""
    match = _LINE_SPEAKER.match(line)
    return None if match is None else (match.group(1) or match.group(2), line[match.end() :])


def is_conversation_memento(text: str) -> bool:
    """Whether every line of a memento is a speaker's (`Name: ...`, or a role's), none a section: a conversation's."""
    speakers = [_line_speaker(line) for line in text.split('\n') if line.strip()]
    return bool(speakers) and all(speaker is not None and speaker[0] not in SECTION_LABELS for speaker in speakers)


def merge_dialogue_mementos(
    mementos: Sequence[str],
    *,
    limit: int,
    count: Callable[[str], int],
    pinned: set[str] | frozenset[str] = frozenset(),
) -> str:
    """One memento of conversation mementos (oldest first), their lines' sentences pooled within `limit` tokens.

    Each line of a child (`Name: ...`, or a labelled line such as `VALUES: ...` of a block that took the
    agent-trace path) is a turn; its sentences compete as a block's do: those holding a must-keep fact or a pinned
    one first, then the best gain per token -- words, names, numbers and anchored dates the picked ones do not
    already say -- until the room is filled. When the must-keep sentences alone outgrow the room, the oldest stay.
    A sentence is kept verbatim under its own line's speaker, so a merge adds nothing a child did not say, and the
    anchors a child carries ("yesterday (7 May 2023)") stay as written. Compressing the joined text as if it were a
    block instead kept about a fifth of it at every merge: after four merges of a 600-turn conversation, 291
    messages were two lines, one sentence and a list of bare numbers.

    Returns `''` when a child has a line that is neither (a command's indented output: the sections' merge or the
    block path takes it) or nothing fits `limit`.
    """
    turns: list[_Turn] = []
    for memento in mementos:
        for line in memento.split('\n'):
            if not line.strip():
                continue
            speaker = _line_speaker(line)
            if speaker is None:
                return ''
            turns.append(_Turn(*speaker, None))
    joined = '\n'.join(mementos)
    must_keep = [fact for fact in critical_facts(joined) if fact.kind in MUST_KEEP_KINDS]
    text = _select(turns, joined, must_keep, set(pinned), budget=limit, limit=limit, count=count, min_gain=2.0)
    return text if text and count(text) <= limit else ''


def _select(
    turns: Sequence[_Turn],
    source: str,
    must_keep: Sequence[Fact],
    pinned: set[str],
    *,
    budget: int,
    limit: int,
    count: Callable[[str], int],
    min_gain: float,
    stretch: float = 1.0,
    dense_value: float = math.inf,
) -> str:
    """The turns' sentences rendered as a memento: forced ones (the first holder of each must-keep or pinned fact),
    then the best gain per token within `budget` (past it, up to `stretch` times `budget`, only sentences worth
    `dense_value` per token), then cut to `limit` tokens, least useful first; `''` without sentences. `source` is
    the whole text, whose languages' stop words weigh nothing."""
    units = _units(turns, count, stopwords_of(languages_of(source)))
    if not units:
        return ''
    # each must-keep fact (and each fact the judge named) forces the first sentence that holds it, and only that
    wanted = [*must_keep, *(Fact(fact, 'identifier') for fact in sorted(pinned))]
    for unit in units:
        held = [fact for fact in wanted if fact_present(fact, unit.text)]
        if held:
            unit.forced = True
            wanted = [fact for fact in wanted if fact not in held]
    selected: dict[int, float] = {}
    seen: set[str] = set()
    used = 0
    picked = 0  # sentences chosen for their gain (not forced): the first may exceed the budget
    for unit in units:
        if unit.forced:
            selected[unit.order] = 1e9
            seen |= unit.words
            used += unit.tokens
    while True:
        best: _Unit | None = None
        best_value = 0.0
        for unit in units:
            room = budget * (_FIRST_SLACK if not picked else stretch)
            if unit.order in selected or used + unit.tokens > room:
                continue
            gain = _gain(unit, seen)
            value = gain / (unit.tokens + _UNIT_COST)
            if picked and used + unit.tokens > budget and value < dense_value:
                continue  # past the target only a dense sentence goes in: a block of facts keeps more than chat
            if gain >= min_gain and value > best_value:
                best, best_value = unit, value
        if best is None:
            break
        selected[best.order] = best_value
        picked += 1
        seen |= best.words
        used += best.tokens
    if not selected:  # nothing informative: keep the most substantial sentence so the memento says something
        first = max(units, key=lambda unit: (len(unit.weights), -unit.order))
        selected[first.order] = 0.0
    rendered = _render(turns, units, selected)
    ranked = sorted(selected, key=lambda order: (selected[order], -order), reverse=True)
    while count(rendered) > limit and len(ranked) > 1:
        del selected[ranked.pop()]
        rendered = _render(turns, units, selected)
    return rendered


def _render(turns: Sequence[_Turn], units: Sequence[_Unit], selected: dict[int, float]) -> str:
    lines: list[str] = []
    current = -1
    for unit in units:
        if unit.order not in selected:
            continue
        if unit.turn != current:
            current = unit.turn
            lines.append(f'{turns[unit.turn].speaker}: {unit.text}')
        else:  # after a CJK full stop or comma Chinese and Japanese write no space: the turn's bytes, as kept
            lines[-1] += ('' if _FULLWIDTH_END.search(lines[-1]) else ' ') + unit.text
    return '\n'.join(lines)


def opens_with_speaker(block: BlockInput, memento: str) -> bool:
    """Whether `memento`'s first line is a line of one of the block's speakers (`Name: ...`, or the role when the
    turns carry no names): how a dialogue memento leads, where an agent trace's leads with `RESULT:`."""
    first = next((line.strip() for line in memento.splitlines() if line.strip()), '')
    if block.merges:  # a memento of mementos: the speakers of its children's lines (not their section labels)
        speakers = {
            speaker[0] for child in block.merges for line in child.split('\n') if (speaker := _line_speaker(line))
        } - set(SECTION_LABELS)
    else:
        speakers = {turn.speaker for turn in _turns(block.messages, block.zone)}
    return any(first.startswith(f'{speaker}: ') for speaker in speakers)
