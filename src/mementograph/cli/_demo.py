"""`mementograph demo` -- the main job, offline: a real pydantic-ai agent with real tools over a temporary
workspace, driven by a scripted policy, with memento compaction on the embedded store."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from .._messages import serialize_messages
from .._tokens import TokenCounter
from ..capabilities import MementoCompaction
from ..knowledge_graph.store import GraphStore, open_store, resolve_store_uri
from ._common import add_store_options

__all__ = ('register', 'run_demo')

MODULES = 8

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


def make_workspace(root: Path) -> None:
    """A small package whose every module has the same bug (`+` where `*` is meant) and a test that shows it."""
    (root / 'pkg').mkdir(parents=True)
    (root / 'tests').mkdir()
    (root / 'pkg' / '__init__.py').write_text('')
    for i in range(MODULES):
        factor = 3 + i
        table = '\n'.join(f'    {n}: {n * factor},  # row {n} of mod_{i}' for n in range(1, 25))
        (root / 'pkg' / f'mod_{i}.py').write_text(_MODULE.format(i=i, factor=factor, op='+', table=table))
        (root / 'tests' / f'test_mod_{i}.py').write_text(_TEST.format(i=i, factor=factor))


@dataclass
class ScriptedPolicy:
    """Stands in for an LLM: for each module, read it, run its test, fix the bug, run the test again."""

    counter: TokenCounter
    context_tokens: list[int] = field(default_factory=list[int])
    step: int = 0

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.context_tokens.append(self.counter.count_messages(messages))
        module, phase = divmod(self.step, 4)
        self.step += 1
        if module >= MODULES:
            return ModelResponse(parts=[TextPart(f'Fixed all {MODULES} modules: every test passes (exit code 0).')])
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


def build_agent(
    workspace: Path, policy: ScriptedPolicy | None, model: str | None, capability: MementoCompaction[None]
) -> Agent[None, str]:
    """A real agent with real tools; the scripted policy unless a real model is named."""
    llm: Any = model if policy is None else FunctionModel(policy)
    agent: Agent[None, str] = Agent(
        llm,
        capabilities=[capability],
        instructions=f'Fix the failing tests of the package in {workspace}. Use the tools.',
    )

    @agent.tool_plain
    def read_file(path: str) -> str:
        """Read a file of the workspace."""
        return (workspace / path).read_text()

    @agent.tool_plain
    def edit_file(path: str, old: str, new: str) -> str:
        """Replace `old` with `new` in a file of the workspace."""
        target = workspace / path
        text = target.read_text()
        if old not in text:
            return f'{old!r} not found in {path}; file unchanged'
        target.write_text(text.replace(old, new, 1))
        return f'edited {path}: {old!r} -> {new!r}'

    @agent.tool_plain
    def run(command: str) -> str:
        """Run a command in the workspace (python only) and return its exit code and output."""
        argv = command.split()
        if not argv or argv[0] != 'python':
            return 'only `python ...` commands are allowed in the demo'
        done = subprocess.run([sys.executable, *argv[1:]], cwd=workspace, capture_output=True, text=True, timeout=60)
        return f'$ {command}\nexit code {done.returncode}\n{done.stdout}{done.stderr}'

    return agent


def run_demo(
    store: GraphStore, *, model: str | None = None, budget: int = 2_500, quiet: bool = False
) -> dict[str, Any]:
    """Run the demo session against `store` and return its summary."""

    def say(text: str) -> None:
        if not quiet:
            print(text, flush=True)

    counter = TokenCounter()
    session = f'demo-{uuid.uuid4().hex[:8]}'
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix='mementograph-demo-') as tmp:
        workspace = Path(tmp)
        make_workspace(workspace)
        policy = None if model else ScriptedPolicy(counter)
        capability: MementoCompaction[None] = MementoCompaction(store, max_tokens=budget, session_id=session)
        agent = build_agent(workspace, policy, model, capability)
        say(f'mementograph demo: session {session}, store {store.uri}, high-water mark {budget} tokens')
        result = agent.run_sync('Make every test under tests/ pass.')
    tokens = policy.context_tokens if policy is not None else []
    for number, size in enumerate(tokens, 1):
        bar = '#' * max(1, size * 40 // max(budget, 1))
        say(f'  request {number:>3}  {size:>6} tokens  {bar}')

    blocks = store.list_blocks(session_id=session)
    mementos = store.list_mementos(session_id=session)
    say(f'\n{len(blocks)} blocks evicted, {len(mementos)} mementos written '
        f'({sum(m.verified for m in mementos)} verified by the judge)')  # fmt: skip
    for memento in mementos[:3]:
        first_line = memento.text.splitlines()[0] if memento.text else ''
        say(f'  {memento.id}  score {memento.score}  {first_line[:90]}')

    recovered_exact = False
    recovered_id = None
    if blocks:
        block = blocks[0]
        recovered = store.recover_block(block.id, session_id=session)
        log = [e for e in store.read_events(session) if e.kind == 'message']
        logged = [e.payload for e in log if block.first_message <= (e.message_index or 0) <= block.last_message]
        recovered_exact = serialize_messages(recovered.messages) == block.messages_json and logged == [
            serialize_messages([m]) for m in recovered.messages
        ]
        recovered_id = block.id
        say(f'\nrecover_block("{block.id}"): {len(recovered.messages)} messages, sha256 {block.sha256[:16]}..., '
            f'byte-exact: {recovered_exact}')  # fmt: skip

    hits = store.search_text('mod_3', k=3, session_id=session)
    say('\nrecall "mod_3": ' + (', '.join(f'{h.id} ({h.score:.2f})' for h in hits) or 'nothing'))
    summary = {
        'session_id': session,
        'store': store.uri,
        'budget': budget,
        'requests': len(tokens),
        'context_tokens': tokens,
        'peak_tokens': max(tokens, default=0),
        'evictions': len(blocks),
        'mementos': len(mementos),
        'verified_mementos': sum(m.verified for m in mementos),
        'recovered_block': recovered_id,
        'recovered_exact': recovered_exact,
        'recall_hits': [h.id for h in hits],
        'output': result.output,
        'seconds': round(time.perf_counter() - started, 2),
    }
    say(f'\n{result.output}  ({summary["seconds"]} s)')
    return summary


def _demo(args: argparse.Namespace) -> int:
    store = open_store(resolve_store_uri(args.store))
    try:
        summary = run_demo(store, model=args.model, budget=args.budget, quiet=args.json)
    finally:
        store.close()
    if args.json:
        json.dump(summary, sys.stdout, indent=2)
        sys.stdout.write('\n')
    return 0 if summary['recovered_exact'] or summary['evictions'] == 0 else 1


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `demo`."""
    demo = commands.add_parser('demo', help='run an agent session with memento compaction (offline, embedded store)')
    add_store_options(demo)
    demo.add_argument('--budget', type=int, default=2_500, help='high-water mark in tokens (default: %(default)s)')
    demo.add_argument('--model', help='provider:name of a real model instead of the scripted policy')
    demo.set_defaults(func=_demo)
