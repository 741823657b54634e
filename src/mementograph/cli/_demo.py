"""`mementograph demo` -- the main job, offline: a real pydantic-ai agent with real tools over a temporary
workspace, driven by a scripted policy (or a real model with `--model`), with memento compaction on the embedded
store (or any store). Live progress on stderr; afterwards a block is recovered and checked byte for byte, a recall
is answered by entity, the page index shown, Cypher run, and the sawtooth saved as PNG."""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, cast

from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import WrapperCapability
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from .._messages import serialize_messages
from .._plot import Sawtooth, save_sawtooth, sparkline
from .._tokens import TokenCounter
from ..capabilities import CompactionReport, MementoCompaction
from ..knowledge_graph import EntityRecord, MementoRecord
from ..knowledge_graph.memory import CombinedJudge, Compressor, Judge, LLMCompressor, LLMJudge, render_block
from ..knowledge_graph.recall import page_index_text, recall
from ..knowledge_graph.store import NEO4J_SCHEMES, GraphStore, NotFoundError, StoreError
from ..knowledge_graph.store._cypher import EXAMPLE_QUERIES
from ._commands import add_command
from ._common import (
    CliError,
    add_store_options,
    check_entity_model_setting,
    check_output_path,
    checked_plot_format,
    emit,
    store_from,
)
from ._interrupt import run_cancellable
from ._progress import stderr_console
from ._query import render_table

if TYPE_CHECKING:
    from pydantic_ai.models import ModelRequestContext

__all__ = ('register', 'run_demo')

MODULES: Final = 10
"""Modules of the demo package; each costs four model requests (read, test, fix, test again)."""

DEFAULT_BUDGET: Final = 2_500
DEFAULT_PLOT: Final = 'mementograph-demo.png'
_CYPHER_QUERIES: Final = ('recent_mementos', 'page_blocks')
"""Example queries the demo runs on every backend: both are scoped to the demo's session."""
_NEO4J_QUERIES: Final = ('tokens_saved',)
"""...and on Neo4j, one the embedded subset cannot run (OPTIONAL MATCH, WITH, arithmetic)."""

_MODULE = '''"""Module {i} of the demo package."""


def scale_{i}(value):
    """Multiply by {factor} (the constant lives in CONFIG_{i})."""
    return value {op} {factor}


CONFIG_{i} = {{"factor": {factor}, "path": "pkg/mod_{i}.py", "version": "1.{i}.0"}}

# calibration table for module {i}: input -> expected output
CALIBRATION_{i} = {{
{table}
}}
'''

_TEST = """import sys
sys.path.insert(0, ".")
from pkg.mod_{i} import scale_{i}

result = scale_{i}(7)
expected = 7 * {factor}
if result != expected:
    print(f"FAILED test_scale_{i}: AssertionError: scale_{i}(7) == {{result}}, expected {{expected}}")
    sys.exit(1)
print("PASSED test_scale_{i}: 1 passed")
"""


def make_workspace(root: Path, modules: int = MODULES) -> None:
    """A small package whose every module has the same bug (`+` where `*` is meant) and a test that shows it."""
    (root / 'pkg').mkdir(parents=True)
    (root / 'tests').mkdir()
    (root / 'pkg' / '__init__.py').write_text('')
    for i in range(modules):
        factor = 3 + i
        table = '\n'.join(f'    {n}: {n * factor},  # row {n} of mod_{i}' for n in range(1, 25))
        (root / 'pkg' / f'mod_{i}.py').write_text(_MODULE.format(i=i, factor=factor, op='+', table=table))
        (root / 'tests' / f'test_mod_{i}.py').write_text(_TEST.format(i=i, factor=factor))


@dataclass
class ScriptedPolicy:
    """Stands in for an LLM: for each module, read it, run its test, fix the bug, run the test again."""

    modules: int = MODULES
    step: int = 0

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        module, phase = divmod(self.step, 4)
        self.step += 1
        if module >= self.modules:
            return ModelResponse(
                parts=[TextPart(f'Fixed all {self.modules} modules: every test passes (exit code 0).')]
            )
        path, test = f'pkg/mod_{module}.py', f'tests/test_mod_{module}.py'
        calls = {
            0: ('read_file', {'path': path}, f'Reading {path}.'),
            1: ('run', {'command': f'python {test}'}, f'Running {test}.'),
            2: (
                'edit_file',
                {'path': path, 'old': 'value + ', 'new': 'value * '},
                f'{path} adds instead of multiplying.',
            ),
            3: ('run', {'command': f'python {test}'}, f'Re-running {test}.'),
        }
        tool, args, thought = calls[phase]
        return ModelResponse(parts=[TextPart(thought), ToolCallPart(tool, args, tool_call_id=f'call_{self.step}')])


def build_agent(workspace: Path, policy: ScriptedPolicy | None, model: str | None, capability: Any) -> Agent[None, str]:
    """A real agent with real tools; the scripted policy unless a real model is named.

    The tools answer a bad request (a missing file, a path outside the workspace, a command other than
    `python ...`) with a message, as a tool for a real model should, instead of failing the run.
    """
    llm: Any = model if policy is None else FunctionModel(policy)
    agent: Agent[None, str] = Agent(
        llm,
        capabilities=[capability],
        instructions=f'Fix the failing tests of the package in {workspace}. Use the tools.',
    )
    root = workspace.resolve()

    def resolve(path: str) -> Path | None:
        target = (root / path).resolve()
        return target if target.is_relative_to(root) else None

    @agent.tool_plain
    def read_file(path: str) -> str:
        """Read a file of the workspace (a path relative to its root, e.g. `pkg/mod_0.py`)."""
        target = resolve(path)
        if target is None or not target.is_file():
            return f'no such file in the workspace: {path}'
        return target.read_text()

    @agent.tool_plain
    def edit_file(path: str, old: str, new: str) -> str:
        """Replace the first `old` with `new` in a file of the workspace."""
        target = resolve(path)
        if target is None or not target.is_file():
            return f'no such file in the workspace: {path}'
        text = target.read_text()
        if not old or old not in text:
            return f'{old!r} not found in {path}; file unchanged'
        target.write_text(text.replace(old, new, 1))
        return f'edited {path}: {old!r} -> {new!r}'

    @agent.tool_plain
    def run(command: str) -> str:
        """Run a command in the workspace (`python ...` only) and return its exit code and output."""
        argv = command.split()
        if not argv or argv[0] != 'python':
            return 'only `python ...` commands are allowed in the demo'
        try:
            done = subprocess.run([sys.executable, *argv[1:]], cwd=root, capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired:
            return f'$ {command}\ntimed out after 60 s'
        return f'$ {command}\nexit code {done.returncode}\n{done.stdout}{done.stderr}'

    return agent


# -- live measurement ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One model request: what the model received, what it would have received without compaction, and the
    compaction that ran just before it (if any)."""

    number: int
    tokens: int
    baseline: int
    reports: tuple[CompactionReport, ...] = ()
    mementos: tuple[MementoRecord, ...] = ()
    """Mementos written by those compactions (with their judge scores)."""

    @property
    def compacted(self) -> bool:
        return any(report.changed for report in self.reports)


@dataclass
class Recorder:
    """Collects the run's original messages (the objects the agent held, before any edit) and one `Step` per
    request, and tells `on_step` as they happen."""

    store: GraphStore
    session_id: str
    namespace: str
    counter: TokenCounter
    on_step: Callable[[Step], None] = lambda step: None
    originals: list[ModelMessage] = field(default_factory=list[ModelMessage])
    steps: list[Step] = field(default_factory=list[Step])
    _seen: dict[int, ModelMessage] = field(default_factory=dict[int, ModelMessage])
    _baseline: int = 0

    def observe(self, messages: Sequence[ModelMessage], *, original: bool) -> None:
        """Remember messages by identity; unseen ones are originals when `original` (the history before
        compaction ran in this request only grew by appending), else stubs the compaction made."""
        for message in messages:
            if self._seen.get(id(message)) is message:
                continue
            self._seen[id(message)] = message  # holding it keeps its id from being reused
            if original:
                self.originals.append(message)
                self._baseline += self.counter.count_message(message)

    def _memento(self, memento_id: str) -> MementoRecord | None:
        try:
            return self.store.get_memento(memento_id, namespace=self.namespace, session_id=self.session_id)
        except (NotFoundError, StoreError):
            return None

    def step(self, tokens: int, reports: Sequence[CompactionReport]) -> None:
        ids = [i for report in reports for i in (*report.memento_ids, *report.merged_memento_ids)]
        mementos = tuple(m for m in (self._memento(i) for i in dict.fromkeys(ids)) if m is not None)
        step = Step(len(self.steps) + 1, tokens, self._baseline, tuple(reports), mementos)
        self.steps.append(step)
        self.on_step(step)


@dataclass
class MeteredCompaction(WrapperCapability[Any]):
    """Wraps `MementoCompaction` to see each request before and after it compacts: the originals (before), the
    tokens the model receives and the compaction reports (after)."""

    recorder: Recorder = field(kw_only=True)

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        self.recorder.observe(ctx.messages, original=True)
        inner = cast('MementoCompaction[Any]', self.wrapped)  # built that way by `run_demo`
        done = len(inner.reports)
        request_context = await inner.before_model_request(ctx, request_context)
        self.recorder.observe(ctx.messages, original=False)
        tokens = self.recorder.counter.count_messages(request_context.messages)
        self.recorder.step(tokens, inner.reports[done:])
        return request_context


# -- progress -----------------------------------------------------------------------------------------------------

ProgressMode = Literal['live', 'plain', 'off']


class Progress:
    """Per-request lines on stderr: rich (colours, a bar and a live footer) on a terminal, short plain lines
    otherwise, nothing when `off`."""

    def __init__(self, mode: ProgressMode, budget: int) -> None:
        self.mode = mode
        self.budget = budget
        self.tokens: list[int] = []
        self.evicted = 0
        self.mementos = 0
        self.verified = 0
        self._console = stderr_console() if mode == 'live' else None
        self._live: Any = None

    def __enter__(self) -> Progress:
        if self._console is not None:
            from rich.live import Live

            self._live = Live(self._footer(), console=self._console, refresh_per_second=8, transient=True)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)
            self._live = None
        if self._console is not None and self.tokens:
            self._console.print(self._footer())

    def say(self, text: str) -> None:
        if self.mode == 'live' and self._console is not None:
            self._console.print(text, highlight=False, no_wrap=True, overflow='ellipsis')
        elif self.mode == 'plain':
            print(_plain(text), file=sys.stderr, flush=True)

    def _footer(self) -> Any:
        from rich.text import Text

        stats = (
            f'  peak {max(self.tokens, default=0):,}/{self.budget:,} · {self.evicted} evicted · '
            f'{self.mementos} mementos ({self.verified} verified)'
        )
        prefix = f'{len(self.tokens)} requests  '
        room = (self._console.width if self._console is not None else 80) - len(prefix) - len(stats) - 1
        line = Text()
        line.append(prefix, style='bold')
        line.append(sparkline(self.tokens, top=self.budget, width=max(8, min(48, room))), style='red')
        line.append(stats)
        return line

    def step(self, step: Step) -> None:
        self.tokens.append(step.tokens)
        for report in step.reports:
            self.evicted += len(report.block_ids)
        self.mementos += len(step.mementos)
        self.verified += sum(1 for m in step.mementos if m.verified)
        if self.mode == 'off':
            return
        for report in step.reports:
            if report.changed:
                self.say(_compaction_line(step.number, report))
        for memento in step.mementos:
            self.say(_memento_line(memento))
        self.say(_request_line(step, self.budget))
        if self._live is not None:
            self._live.update(self._footer())


def _bar(tokens: int, budget: int, width: int = 24) -> str:
    filled = min(width, round(width * tokens / max(budget, 1)))
    colour = 'green' if tokens < budget * 0.8 else 'yellow' if tokens <= budget else 'red'
    return f'[{colour}]{"█" * filled}[/][dim]{"·" * (width - filled)}[/]'


def _request_line(step: Step, budget: int) -> str:
    saved = f'  [dim](uncompacted {step.baseline:,})[/]' if step.baseline > step.tokens else ''
    return f'request {step.number:>3}  {step.tokens:>6,} tokens  {_bar(step.tokens, budget)}{saved}'


def _compaction_line(number: int, report: CompactionReport) -> str:
    parts = []
    if report.block_ids:
        parts.append(f'{len(report.block_ids)} blocks evicted')
    if report.micro_part_ids:
        parts.append(f'{len(report.micro_part_ids)} tool results stubbed')
    if report.merged_memento_ids:
        count = len(report.merged_memento_ids)
        parts.append(f'older mementos merged into {count} memento{"s" if count != 1 else ""} of mementos')
    return (
        f'[bold magenta]  compaction before request {number}:[/] {report.tokens_before:,} -> '
        f'{report.tokens_after:,} tokens, {", ".join(parts)} (archived first)'
    )


def _memento_line(memento: MementoRecord) -> str:
    score = '  -' if memento.score is None else f'{memento.score:4.1f}'
    mark = '[green]verified[/]' if memento.verified else '[red]unverified[/]'
    first = (memento.text.splitlines() or [''])[0]
    first = first if len(first) <= 70 else first[:69] + '…'
    kind = '' if memento.level == 1 else f' (level {memento.level})'
    return f'    {memento.id}{kind}  judge {score} {mark}  [dim]{_escape(first)}[/]'


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def _plain(markup: str) -> str:
    from rich.text import Text

    return Text.from_markup(markup).plain


# -- after the run ------------------------------------------------------------------------------------------------


def _recover(
    store: GraphStore, blocks: Sequence[Any], originals: Sequence[ModelMessage], namespace: str, session: str
) -> tuple[dict[str, Any], list[str]]:
    """Recover the first evicted block and compare it byte for byte with the run's own messages and the log."""
    block = blocks[0]
    lines = ['', f'[bold]Recovering block {block.id}[/] (log messages {block.first_message}-{block.last_message})']
    data: dict[str, Any] = {'block_id': block.id, 'sha256': block.sha256}
    try:
        recovered = store.recover_block(block.id, namespace=namespace, session_id=session)
    except StoreError as exc:  # e.g. BlockIntegrityError: the store refuses bytes that fail their hash
        data.update(exact=False, error=str(exc))
        lines.append(f'  [red]recovery failed: {_escape(str(exc))}[/]')
        return data, lines
    data_bytes = serialize_messages(recovered.messages)
    sha_ok = hashlib.sha256(recovered.record.messages_json).hexdigest() == block.sha256
    run_slice = list(originals[block.first_message : block.last_message + 1])
    vs_run = bool(run_slice) and data_bytes == serialize_messages(run_slice)
    log = [
        e.payload
        for e in store.read_events(session, namespace=namespace)
        if e.kind == 'message'
        and e.message_index is not None
        and block.first_message <= e.message_index <= block.last_message
    ]
    vs_log = log == [serialize_messages([m]) for m in recovered.messages]
    exact = sha_ok and vs_run and vs_log and data_bytes == block.messages_json
    data.update(
        messages=len(recovered.messages),
        bytes=len(data_bytes),
        sha256_ok=sha_ok,
        exact_vs_run=vs_run,
        exact_vs_log=vs_log,
        exact=exact,
    )

    def mark(ok: bool) -> str:
        return '[green]yes[/]' if ok else '[red]NO[/]'

    lines.append(f'  sha256 {block.sha256}  recomputed over the archived bytes: {mark(sha_ok)}')
    lines.append(
        f'  {len(recovered.messages)} messages, {len(data_bytes):,} bytes; identical to the messages the agent held: '
        f'{mark(vs_run)}; to the session log: {mark(vs_log)}'
    )
    memento = store.memento_of(block.id, namespace=namespace, session_id=session)
    if memento is not None:
        lines.append(f'  its memento {memento.id} (judge {memento.score}, verified {memento.verified}):')
        lines += [f'    [dim]{_escape(line)}[/]' for line in memento.text.splitlines()[:6]]
    original = render_block(recovered.messages).splitlines()
    lines.append('  the original, recovered:')
    lines += [f'    {_escape(line[:110])}' for line in original[:8]]
    if len(original) > 8:
        lines.append(f'    [dim]... {len(original) - 8} more lines[/]')
    return data, lines


def _entity_for_recall(store: GraphStore, blocks: Sequence[Any], namespace: str) -> EntityRecord | None:
    """An entity an evicted block mentions, preferring file paths (what an agent asks about most)."""
    fallback: EntityRecord | None = None
    for block in blocks:
        for entity, _count in store.entities_of(block.id, namespace=namespace):
            if entity.kind == 'file' and '/' in entity.name:
                return entity
            if fallback is None and entity.kind != 'concept':
                fallback = entity
    return fallback


def _recall(store: GraphStore, blocks: Sequence[Any], namespace: str, session: str) -> tuple[dict[str, Any], list[str]]:
    entity = _entity_for_recall(store, blocks, namespace)
    if entity is None:
        return {'query': None, 'hits': []}, ['', 'recall: no entity in the evicted blocks']
    hits = recall(store, entity.name, k=3, namespace=namespace, session_id=session)
    called = _escape(f'recall({entity.name!r})')
    lines = ['', f'[bold]{called}[/] -- entity {_escape(entity.key)} ({entity.kind}), graph + BM25:']
    for rank, hit in enumerate(hits, 1):
        first = (hit.memento.splitlines() or [''])[0][:80]
        lines.append(f'  {rank}. recover_block("{hit.block_id}")  score {hit.score:.3f}  [dim]{_escape(first)}[/]')
        if hit.reasons:
            lines.append(f'     [dim]why: {_escape(", ".join(hit.reasons[:3]))}[/]')
    if not hits:
        lines.append('  nothing found')
    data = {
        'query': entity.name,
        'entity': entity.key,
        'hits': [{'block_id': h.block_id, 'memento_id': h.memento_id, 'score': h.score} for h in hits],
    }
    return data, lines


def _pages(store: GraphStore, namespace: str, session: str) -> tuple[dict[str, Any], list[str]]:
    pages = store.list_pages(namespace=namespace, session_id=session)
    index = page_index_text(store, session_id=session, namespace=namespace)
    lines = ['', '[bold]Page index[/] (what the agent sees of its archive):']
    lines += [f'  {_escape(line)}' for line in (index or '(no page closed yet)').splitlines()]
    for page in pages:
        state = 'closed' if page.summary else 'open'
        lines.append(f'  [dim]page {page.number} {page.id}: {len(page.block_ids)} blocks, {state}[/]')
    data = {
        'page_index': index,
        'pages': [
            {'id': p.id, 'number': p.number, 'blocks': len(p.block_ids), 'closed': bool(p.summary)} for p in pages
        ],
    }
    return data, lines


def _cypher(store: GraphStore, namespace: str, session: str) -> tuple[dict[str, Any], list[str]]:
    backend = 'neo4j' if store.uri.split(':', 1)[0] in NEO4J_SCHEMES else 'embedded'
    how = 'on Neo4j' if backend == 'neo4j' else 'on the embedded store (grand-cypher subset; Neo4j runs any read)'
    lines = ['', f'[bold]Cypher[/] {how}:']
    results: list[dict[str, Any]] = []
    wanted = _CYPHER_QUERIES + (_NEO4J_QUERIES if backend == 'neo4j' else ())
    for query in EXAMPLE_QUERIES:
        if query.name not in wanted:
            continue
        params: dict[str, Any] = {'page': 1} if 'page' in query.params else {}
        entry: dict[str, Any] = {'name': query.name, 'cypher': query.cypher}
        try:
            rows = store.query(query.cypher, params, session_id=session, namespace=namespace)
        except StoreError as exc:
            entry['error'] = str(exc)
            lines.append(f'  {query.title}: [red]{_escape(str(exc))}[/]')
        else:
            entry['rows'] = rows
            lines.append(f'  {query.title}:')
            lines += [f'    [dim]{_escape(line)}[/]' for line in query.cypher.splitlines()]
            lines += [f'    {_escape(line)}' for line in render_table(rows).splitlines()]
        results.append(entry)
    return {'backend': backend, 'queries': results}, lines


# -- the demo -----------------------------------------------------------------------------------------------------


def _engine_parts(
    model: str | None, llm_compressor: bool, llm_judge: bool
) -> tuple[Compressor | None, Judge | Literal['default']]:
    compressor: Compressor | None = LLMCompressor(model) if model and llm_compressor else None
    judge: Judge | Literal['default'] = CombinedJudge(llm=LLMJudge(model)) if model and llm_judge else 'default'
    return compressor, judge


def run_demo(
    store: GraphStore,
    *,
    model: str | None = None,
    budget: int = DEFAULT_BUDGET,
    namespace: str | None = None,
    plot: str | Path | None = DEFAULT_PLOT,
    llm_compressor: bool = False,
    llm_judge: bool = False,
    progress: ProgressMode = 'off',
    report: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run the demo session against `store` and return its summary.

    Args:
        store: where to archive (the caller closes it).
        model: `provider:name` of a real model; `None` runs the scripted policy (offline, deterministic).
        budget: high-water mark in tokens.
        namespace: namespace of the session (default: the default namespace).
        plot: where to save the sawtooth (PNG, or SVG or PDF by the extension); `None` for no plot.
        llm_compressor: compress with `model` instead of the extractive compressor.
        llm_judge: judge with the rubric and `model` (the stricter wins) instead of the rubric alone.
        progress: per-request progress on stderr.
        report: receives the rich-markup lines of the report after the run (`None`: no report).
    """
    from ..knowledge_graph import DEFAULT_NAMESPACE

    namespace = namespace or DEFAULT_NAMESPACE
    counter = TokenCounter()
    session = f'demo-{uuid.uuid4().hex[:8]}'
    show = report or (lambda line: None)
    started = time.perf_counter()
    compressor, judge = _engine_parts(model, llm_compressor, llm_judge)
    capability: MementoCompaction[None] = MementoCompaction(
        store,
        max_tokens=budget,
        session_id=session,
        namespace=namespace,
        compressor=compressor,
        judge=judge,
        archive_at_run_end=False,  # the report counts the blocks compaction evicted
    )
    display = Progress(progress, budget)
    recorder = Recorder(store, session, namespace, counter, on_step=display.step)
    display.say(
        f'[bold]mementograph demo[/]: session {session}, {"model " + model if model else "scripted policy (offline)"}, '
        f'high-water mark {budget:,} tokens'
    )
    display.say(_escape(f'  store {store.uri}, namespace {namespace}'))
    with tempfile.TemporaryDirectory(prefix='mementograph-demo-') as tmp:
        workspace = Path(tmp)
        make_workspace(workspace)
        policy = None if model else ScriptedPolicy()
        try:
            agent = build_agent(workspace, policy, model, MeteredCompaction(capability, recorder=recorder))
            with display:
                result = run_cancellable(agent.run('Make every test under tests/ pass.'))
        except Exception as exc:
            if model is None:
                raise  # the scripted run failing is a bug: keep the traceback
            raise CliError(f'the run with --model {model} failed: {type(exc).__name__}: {exc}') from exc
        recorder.observe(result.all_messages(), original=True)  # the final answer arrived after the last request
    seconds_run = time.perf_counter() - started

    steps = recorder.steps
    tokens = [s.tokens for s in steps]
    curve = Sawtooth(
        session_id=session,
        context_tokens=tuple(tokens),
        baseline_tokens=tuple(s.baseline for s in steps),
        compactions=tuple(s.number for s in steps if s.compacted),
        budget=budget,
    )
    blocks = store.list_blocks(namespace=namespace, session_id=session)
    mementos = store.list_mementos(namespace=namespace, session_id=session)
    verified = sum(m.verified for m in mementos)
    scores = [m.score for m in mementos if m.score is not None]
    show('')
    merged_unverified = sum(not m.verified and m.level > 1 for m in mementos)
    show(
        f'[bold]{len(steps)} requests[/], peak {curve.peak:,} tokens (without compaction {curve.peak_baseline:,}); '
        f'{len(curve.compactions)} compactions evicted {len(blocks)} blocks; {len(mementos)} mementos, '
        f'{verified} verified by the judge' + (f' (scores {min(scores):.1f}-{max(scores):.1f})' if scores else '')
    )
    if merged_unverified:  # fail closed, and why: a merge keeps what fits its room, its children keep the rest
        show(
            f'  unverified, {merged_unverified} memento{"s" * (merged_unverified != 1)} of mementos: cut to the room '
            'mementos have in the context, they leave out what their children keep (recover_block walks to the blocks)'
        )
    show(f'agent: {_escape(result.output)}')

    summary: dict[str, Any] = {
        'session_id': session,
        'store': store.uri,
        'namespace': namespace,
        'model': model or 'scripted',
        'budget': budget,
        'requests': len(steps),
        'context_tokens': tokens,
        'baseline_tokens': list(curve.baseline_tokens),
        'peak_tokens': curve.peak,
        'peak_tokens_baseline': curve.peak_baseline,
        'compactions': list(curve.compactions),
        'evictions': len(blocks),
        'mementos': len(mementos),
        'verified_mementos': verified,
        'memento_scores': [{'id': m.id, 'score': m.score, 'verified': m.verified, 'level': m.level} for m in mementos],
        'recovered_block': None,
        'recovered_exact': False,
        'recovery': None,
    }
    if blocks:
        recovery, lines = _recover(store, blocks, recorder.originals, namespace, session)
        summary.update(recovered_block=recovery['block_id'], recovered_exact=recovery['exact'], recovery=recovery)
        for line in lines:
            show(line)
    else:
        show('no block was evicted (a longer session or a lower --budget would evict some)')
    recall_data, lines = _recall(store, blocks, namespace, session) if blocks else ({'query': None, 'hits': []}, [])
    summary['recall'] = recall_data
    summary['recall_hits'] = [hit['block_id'] for hit in recall_data['hits']]
    for line in lines:
        show(line)
    page_data, lines = _pages(store, namespace, session)
    summary.update(page_data)
    for line in lines:
        show(line)
    cypher, lines = _cypher(store, namespace, session)
    summary['cypher'] = cypher
    for line in lines:
        show(line)

    summary['plot'] = None
    if plot is not None:
        path = save_sawtooth(curve, plot, title=f'mementograph demo: context per request (budget {budget:,} tokens)')
        summary['plot'] = str(Path(path).resolve())
        show('')
        show(f'sawtooth plot saved to [bold]{_escape(summary["plot"])}[/]')
    summary['output'] = result.output
    summary['seconds_run'] = round(seconds_run, 2)
    summary['seconds'] = round(time.perf_counter() - started, 2)
    show(f'[dim]{summary["seconds"]} s (agent run {summary["seconds_run"]} s)[/]')
    return summary


def _progress_mode(args: argparse.Namespace) -> ProgressMode:
    if args.quiet:
        return 'off'
    if sys.stderr.isatty():
        return 'live'
    return 'off' if args.json else 'plain'


def _demo(args: argparse.Namespace) -> int:
    if args.budget <= 0:
        raise CliError(f'--budget must be a positive number of tokens, not {args.budget}', code=2)
    if (args.llm_compressor or args.llm_judge) and not args.model:
        raise CliError('--llm-compressor and --llm-judge need --model provider:name', code=2)
    plot: Path | None = None if args.no_plot else Path(args.plot)
    if plot is not None:
        check_output_path(args, plot, '--plot')
        checked_plot_format(plot, '--plot')
    if args.model:
        _check_model(args.model)
    check_entity_model_setting()
    console = None if args.json else stdout_console()

    def report(line: str) -> None:
        if console is not None:
            console.print(line, highlight=False, soft_wrap=True)

    with store_from(args, create=True) as store:
        summary = run_demo(
            store,
            model=args.model,
            budget=args.budget,
            namespace=args.namespace,
            plot=plot,
            llm_compressor=args.llm_compressor,
            llm_judge=args.llm_judge,
            progress=_progress_mode(args),
            report=report,
        )
    if args.json:
        emit(args, summary, '')
    return 0 if summary['recovered_exact'] or summary['evictions'] == 0 else 1


def _check_model(name: str) -> None:
    """Fail with one line before any work when pydantic-ai cannot make the model (unknown provider, missing
    package or API key)."""
    from pydantic_ai.models import infer_model

    try:
        infer_model(name)
    except Exception as exc:
        raise CliError(f'--model {name}: {exc}', code=2) from exc


def stdout_console() -> Any:
    """A rich console on stdout; plain text (no colour codes) when stdout is not a terminal."""
    from rich.console import Console

    return Console(highlight=False)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `demo`."""
    demo = add_command(
        commands,
        'demo',
        description='Run a real pydantic-ai agent with real tools (read files, run tests, edit) over a temporary '
        'workspace, driven by a scripted policy unless --model names a real model, with MementoCompaction. Shows '
        'context tokens per request (the sawtooth), evictions and the judge scores of the mementos as it runs; '
        'then recovers an evicted block and checks it byte for byte, answers a recall by entity, shows the page '
        'index, runs Cypher, and saves the sawtooth as PNG. Exit 1 if the recovered block is not identical.',
    )
    add_store_options(demo)
    demo.add_argument(
        '--budget', type=int, default=DEFAULT_BUDGET, help='high-water mark in tokens (default: %(default)s)'
    )
    demo.add_argument(
        '--model',
        metavar='PROVIDER:NAME',
        help="a real model instead of the scripted policy, e.g. 'openai:gpt-4o-mini'",
    )
    demo.add_argument('--llm-compressor', action='store_true', help='write mementos with --model (LLMCompressor)')
    demo.add_argument(
        '--llm-judge', action='store_true', help='judge mementos with the rubric and --model (CombinedJudge)'
    )
    demo.add_argument(
        '--plot',
        default=DEFAULT_PLOT,
        metavar='PATH',
        help='where to save the sawtooth: .png, .svg or .pdf (default: %(default)s)',
    )
    demo.add_argument('--no-plot', action='store_true', help='do not save a plot')
    demo.add_argument('-q', '--quiet', action='store_true', help='no progress on stderr')
    demo.set_defaults(func=_demo)
