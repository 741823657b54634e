"""`_plot` -- the sawtooth: context tokens per model request, with memento compaction and without it.

`sawtooth_from_log` rebuilds the curve of a stored session from its event log alone (messages in order, and the
compactions between them), so `mementograph plot` works on any session, also one recorded by another process.
The rebuild is exact wherever the log states the size of the context: every compaction step (eviction, merge of
mementos, micro-compaction) records `tokens_after`. Logs from before merges and micro-compactions recorded it
fall back to the archived memento sizes plus the stub overhead measured at the last eviction there, so they can
be off by a few tokens per stub.

`save_sawtooth` writes the PNG (or SVG or PDF, by the file's extension) with matplotlib, imported only when a plot
is drawn (with the `Agg` backend: no display needed), so importing mementograph never pays for matplotlib.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from pydantic_ai.messages import ModelRequest

from ._messages import deserialize_messages
from ._tokens import TokenCounter
from .knowledge_graph import DEFAULT_NAMESPACE, SessionEvent
from .knowledge_graph.store import GraphStore, NotFoundError

__all__ = (
    'PLOT_FORMATS',
    'Sawtooth',
    'latest_session',
    'plot_format',
    'save_sawtooth',
    'sawtooth_from_log',
    'sparkline',
)

_STUB_OVERHEAD_GUESS: Final = 40
"""Tokens a memento stub adds to its memento's text (framing, the block id), until an eviction measures it."""

_SPARKS: Final = '▁▂▃▄▅▆▇█'

PLOT_FORMATS: Final = ('png', 'svg', 'pdf')
"""The formats a plot is saved in, named by the file's extension: those matplotlib writes with no extra package."""


def plot_format(path: str | Path) -> str:
    """The format `path`'s extension names (`.png`, `.svg`, `.pdf`, in any case).

    Raises:
        ValueError: another extension, or none: the file would hold a format its name does not say (a `.txt` of PNG
            bytes), so it is refused before anything is drawn.
    """
    suffix = Path(path).suffix.lower().lstrip('.')
    if suffix not in PLOT_FORMATS:
        given = f'has the extension .{suffix}' if suffix else 'has no extension'
        raise ValueError(f'{path} {given}; a plot is saved as {", ".join("." + f for f in PLOT_FORMATS)}')
    return suffix


@dataclass(frozen=True)
class Sawtooth:
    """Context tokens per model request of one session."""

    session_id: str
    context_tokens: tuple[int, ...]
    """Tokens of each request the model received, with memento compaction."""
    baseline_tokens: tuple[int, ...] = ()
    """Tokens each request would have had without any compaction (every message so far); empty if unknown."""
    compactions: tuple[int, ...] = ()
    """1-based numbers of the requests a compaction ran before (the drops of the sawtooth)."""
    budget: int | None = None
    """The high-water mark, when known (drawn as a dashed line)."""
    measured: bool = True
    """True when counted live; False when rebuilt from the event log."""

    @property
    def peak(self) -> int:
        return max(self.context_tokens, default=0)

    @property
    def peak_baseline(self) -> int:
        return max(self.baseline_tokens, default=0)

    def to_json(self) -> dict[str, Any]:
        return {
            'session_id': self.session_id,
            'requests': len(self.context_tokens),
            'context_tokens': list(self.context_tokens),
            'baseline_tokens': list(self.baseline_tokens),
            'compactions': list(self.compactions),
            'peak_tokens': self.peak,
            'peak_tokens_baseline': self.peak_baseline,
            'budget': self.budget,
            'measured': self.measured,
        }


@dataclass
class _Unit:
    """A stretch of the live context: one message, or a stub standing in for log messages `first..last`."""

    first: int
    last: int
    tokens: int
    memento_id: str | None = None


class _Rebuild:
    """Replays a session log: the live context as units, and its size at each model request."""

    def __init__(self, store: GraphStore, session_id: str, namespace: str, counter: TokenCounter) -> None:
        self.store = store
        self.session_id = session_id
        self.namespace = namespace
        self.counter = counter
        self.units: list[_Unit] = []
        self.all_tokens = 0
        self.stub_overhead = _STUB_OVERHEAD_GUESS
        self.context: list[int] = []
        self.baseline: list[int] = []
        self.compactions: list[int] = []

    def total(self) -> int:
        return sum(unit.tokens for unit in self.units)

    def message(self, event: SessionEvent) -> bool:
        """Add a logged message; True when it is a request (a model call follows it)."""
        messages = deserialize_messages(event.payload)
        tokens = self.counter.count_messages(messages)
        index = (
            event.message_index if event.message_index is not None else (self.units[-1].last + 1 if self.units else 0)
        )
        self.units.append(_Unit(index, index, tokens))
        self.all_tokens += tokens
        return any(isinstance(message, ModelRequest) for message in messages)

    def _replace(self, first: int, last: int, unit: _Unit) -> bool:
        """Put `unit` where the units inside `first..last` were; False when none was live."""
        inside = [i for i, u in enumerate(self.units) if first <= u.first and u.last <= last]
        if not inside:
            return False
        at, drop = inside[0], set(inside)
        self.units = [u for i, u in enumerate(self.units) if i not in drop]
        self.units.insert(at, unit)
        return True

    def _memento_tokens(self, memento_id: str) -> int:
        try:
            return self.store.get_memento(memento_id, namespace=self.namespace, session_id=self.session_id).tokens
        except NotFoundError:
            return 0

    def compaction(self, event: SessionEvent, new_units: list[_Unit]) -> None:
        """Apply one compaction event (micro stubs, an eviction, or a merge of mementos)."""
        try:
            report = json.loads(event.payload)
        except ValueError:
            report = {}
        if not isinstance(report, dict):
            report = {}
        if 'merged' in report and 'into' in report:
            merged = set(report['merged'])
            spans = [u for u in self.units if u.memento_id in merged]
            if spans:
                unit = _Unit(
                    min(u.first for u in spans),
                    max(u.last for u in spans),
                    self._memento_tokens(str(report['into'])) + self.stub_overhead,
                    str(report['into']),
                )
                if self._replace(unit.first, unit.last, unit):
                    new_units.append(unit)
            self._calibrate(report, new_units)
            return
        if event.kind == 'micro':
            for part_id in event.block_ids:
                try:
                    block = self.store.get_block(part_id, namespace=self.namespace, session_id=self.session_id)
                except NotFoundError:
                    continue
                unit = _Unit(block.first_message, block.last_message, self.stub_overhead)
                if self._replace(block.first_message, block.last_message, unit):
                    new_units.append(unit)
            self._calibrate(report, new_units)
            return
        memento_ids = report.get('memento_ids') or []
        for position, block_id in enumerate(event.block_ids):
            try:
                block = self.store.get_block(block_id, namespace=self.namespace, session_id=self.session_id)
            except NotFoundError:
                continue
            memento_id = memento_ids[position] if position < len(memento_ids) else None
            tokens = (self._memento_tokens(memento_id) if memento_id else 0) + self.stub_overhead
            unit = _Unit(block.first_message, block.last_message, tokens, memento_id)
            if self._replace(block.first_message, block.last_message, unit):
                new_units.append(unit)
        self._calibrate(report, new_units)

    def _calibrate(self, report: dict[str, Any], new_units: list[_Unit]) -> None:
        """Where the log states the context size, spread the difference over the new stubs since the last statement.

        Logs written before merges and micro-compactions recorded `tokens_after` keep the estimate until the next
        eviction states it.
        """
        after = report.get('tokens_after')
        if not isinstance(after, int) or not new_units:
            return
        residual = after - self.total()
        share, extra = divmod(residual, len(new_units))
        for i, unit in enumerate(new_units):
            unit.tokens += share + (1 if i < extra else 0)
        stubs = [u for u in new_units if u.memento_id is not None]
        if stubs:
            overheads = [u.tokens - self._memento_tokens(u.memento_id or '') for u in stubs]
            self.stub_overhead = max(0, round(sum(overheads) / len(overheads)))
        new_units.clear()


def sawtooth_from_log(
    store: GraphStore,
    session_id: str,
    *,
    namespace: str = DEFAULT_NAMESPACE,
    counter: TokenCounter | None = None,
    budget: int | None = None,
) -> Sawtooth:
    """Rebuild a session's context tokens per request (and without compaction) from its event log.

    Raises:
        NotFoundError: the session has no log in this namespace.
    """
    events = store.read_events(session_id, namespace=namespace)
    if not events:
        raise NotFoundError(f'no session {session_id!r} in namespace {namespace!r}')
    rebuild = _Rebuild(store, session_id, namespace, counter or TokenCounter())
    pending = False  # a request was logged and its size is not taken yet (compactions may still follow it)
    compacted = False
    new_units: list[_Unit] = []
    for event in events:
        if event.kind == 'message':
            if pending:
                rebuild.context.append(rebuild.total())
                rebuild.baseline.append(rebuild.all_tokens)
                if compacted:
                    rebuild.compactions.append(len(rebuild.context))
            new_units.clear()
            compacted = False
            pending = rebuild.message(event)
        elif event.kind != 'archive':  # blocks archived at a run's end stay in the context
            rebuild.compaction(event, new_units)
            compacted = True
    if pending:
        rebuild.context.append(rebuild.total())
        rebuild.baseline.append(rebuild.all_tokens)
        if compacted:
            rebuild.compactions.append(len(rebuild.context))
    return Sawtooth(
        session_id=session_id,
        context_tokens=tuple(rebuild.context),
        baseline_tokens=tuple(rebuild.baseline),
        compactions=tuple(rebuild.compactions),
        budget=budget,
        measured=False,
    )


def latest_session(store: GraphStore, *, namespace: str = DEFAULT_NAMESPACE) -> str | None:
    """The id of the namespace's most recently created session, if any."""
    sessions = store.list_sessions(namespace=namespace)
    if not sessions:
        return None
    return max(enumerate(sessions), key=lambda item: (item[1].created_at, item[0]))[1].id


def sparkline(values: Sequence[int], *, top: int | None = None, width: int = 60) -> str:
    """Values as a line of block characters (the last `width`), scaled to `top` (default: their maximum)."""
    shown = list(values)[-width:]
    scale = max(top or 0, max(shown, default=0), 1)
    return ''.join(_SPARKS[min(len(_SPARKS) - 1, value * len(_SPARKS) // (scale + 1))] for value in shown)


def save_sawtooth(curve: Sawtooth, path: str | Path, *, title: str | None = None) -> Path:
    """Draw the sawtooth at `path` (parent directories must exist), as PNG, SVG or PDF by its extension, and return
    the path.

    Raises:
        ValueError: the extension is none of `PLOT_FORMATS`.
        OSError: the file could not be written.
    """
    kind = plot_format(path)
    import matplotlib

    matplotlib.use('Agg')  # no display, no GUI toolkit: works headless and in CI
    import matplotlib.pyplot as plt

    out = Path(path)
    requests = range(1, len(curve.context_tokens) + 1)
    fig, ax = plt.subplots(figsize=(10, 5), dpi=110)
    try:
        if curve.baseline_tokens:
            ax.plot(
                range(1, len(curve.baseline_tokens) + 1),
                curve.baseline_tokens,
                color='#888888',
                linewidth=1.2,
                label='without compaction',
            )
        ax.plot(requests, curve.context_tokens, color='#d62728', linewidth=2.0, label='with MementoCompaction')
        if curve.compactions:
            xs = [n for n in curve.compactions if 1 <= n <= len(curve.context_tokens)]
            ax.scatter(
                xs,
                [curve.context_tokens[n - 1] for n in xs],
                color='#d62728',
                marker='v',
                s=28,
                zorder=3,
                label='compaction (blocks archived, mementos in context)',
            )
        if curve.budget:
            ax.axhline(curve.budget, color='black', linewidth=0.8, linestyle='--', label=f'budget {curve.budget:,}')
        ax.set_xlabel('model request')
        ax.set_ylabel('context tokens')
        how = 'measured' if curve.measured else 'rebuilt from the session log'
        ax.set_title(title or f'Context per request, session {curve.session_id} ({how})')
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(loc='upper left', fontsize=8)
        fig.tight_layout()
        fig.savefig(out, format=kind)
    finally:
        plt.close(fig)
    return out
