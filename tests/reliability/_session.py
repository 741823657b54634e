"""A restartable agent session for fault tests: a real `Agent`, real tools, `MementoCompaction` on a real store.

The model (`StepModel`) decides its next move from what it sees, never from a counter of its own, so a process
killed at any moment can be restarted on the session's log and carries on where the log ends. `Recorder` is the
ground truth: the outermost capability, it records every original message the agent produced (exact bytes, in
order), before any other capability touches it.

Run as a program it is the child process of the SIGKILL tests:

    python -m tests.reliability._session STORE_URI SESSION_ID WORKDIR [--tasks N] [--steps N] [--namespace NS]

It continues the session from the store's log (the durable record), runs the remaining tasks, prints `request N`
before each model request (the parent kills at one of them) and `finished` at the end, and keeps in WORKDIR:
`journal-<pid>.jsonl` (every original message it saw, in order) and `live.json` (the context after each run).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import re
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import AbstractCapability, CapabilityOrdering
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import UsageLimits

from mementograph import MementoCompaction, MementoWarning, open_store
from mementograph._messages import deserialize_messages, serialize_messages
from mementograph.capabilities._layout import MICRO_METADATA, micro_part_id, stub_info
from mementograph.knowledge_graph.store import GraphStore

_CALL = re.compile(r'^(read|test)_t(\d+)_s(\d+)$')
_TASK = re.compile(r'^Task (\d+):')
UNLIMITED = UsageLimits(request_limit=None, tool_calls_limit=None)


def task_prompt(task: int, steps: int) -> str:
    return f'Task {task}: fix the {steps} modules of package_{task}, one at a time, and run their tests.'


def final_text(task: int) -> str:
    return f'Task {task} done: every module of package_{task} passes; exit code 0.'


def file_body(task: int, step: int, lines: int) -> str:
    return '\n'.join(
        f'def handler_{task}_{step}_{i}(x):  # package_{task}/module_{step}.py line {i}\n    return x * {i + task}'
        for i in range(lines)
    )


@dataclass
class StepModel:
    """For each task: `read_file` then `run_tests` per step, then a final answer. Stateless between requests:
    the next move follows from the last user prompt or tool call the model sees."""

    steps: int = 6
    seen: list[list[ModelMessage]] = field(default_factory=list[list[ModelMessage]])
    on_request: Any = None
    """Called with the request number before each reply (the child prints progress; a test may act)."""

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(list(messages))
        if self.on_request is not None:
            self.on_request(len(self.seen))
        task, step, phase = self._next(messages)
        if step >= self.steps:
            return ModelResponse(parts=[TextPart(final_text(task))])
        if phase == 'read':
            args: dict[str, Any] = {'path': f'package_{task}/module_{step}.py'}
            return ModelResponse(
                parts=[
                    TextPart(f'Task {task}, step {step}: reading module_{step}.'),
                    ToolCallPart('read_file', args, tool_call_id=f'read_t{task}_s{step}'),
                ]
            )
        args = {'target': f'tests/package_{task}/test_module_{step}.py'}
        return ModelResponse(
            parts=[
                TextPart(f'Task {task}, step {step}: testing module_{step}.'),
                ToolCallPart('run_tests', args, tool_call_id=f'test_t{task}_s{step}'),
            ]
        )

    @staticmethod
    def _next(messages: Sequence[ModelMessage]) -> tuple[int, int, str]:
        last = messages[-1]
        if isinstance(last, ModelRequest):
            for part in last.parts:
                if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                    match = _TASK.match(part.content)
                    if match:
                        return int(match.group(1)), 0, 'read'
        for message in reversed(messages):
            if isinstance(message, ModelResponse):
                for part in message.parts:
                    if isinstance(part, ToolCallPart) and (match := _CALL.match(part.tool_call_id)):
                        kind, task, step = match.group(1), int(match.group(2)), int(match.group(3))
                        return (task, step, 'test') if kind == 'read' else (task, step + 1, 'read')
        raise AssertionError('the model cannot tell where the session is')


def is_synthetic(message: ModelMessage) -> bool:
    """Made by `MementoCompaction`: a memento stub, or a request whose parts were micro-compacted."""
    if stub_info(message) is not None:
        return True
    for part in message.parts:
        if micro_part_id(part) is not None:
            return True
        content = getattr(part, 'content', None)
        if isinstance(part, UserPromptPart) and isinstance(content, list):
            marked = (isinstance(getattr(i, 'metadata', None), dict) and MICRO_METADATA in i.metadata for i in content)
            if any(marked):
                return True
    return False


@dataclass
class Recorder(AbstractCapability[Any]):
    """Outermost: records every original message as it first appears, as exact bytes (and to a journal file)."""

    originals: list[bytes] = field(default_factory=list[bytes])
    journal: Path | None = None
    restamped: dict[int, bytes] = field(default_factory=dict[int, bytes])
    """Positions whose message pydantic-ai re-created when a run resumed from it, with the earlier bytes (see
    `resume_from`)."""
    _seen: dict[int, ModelMessage] = field(default_factory=dict[int, ModelMessage])
    _resume_at: int | None = None

    def resume_from(self, position: int) -> None:
        """The next run resumes (no new prompt) from the request at `position`: pydantic-ai sends a re-created copy
        of it, the same parts with a new `timestamp` (and the instructions in force now), which takes its place in the
        history."""
        self._resume_at = position

    def get_ordering(self) -> CapabilityOrdering | None:
        return CapabilityOrdering(position='outermost')

    async def for_run(self, ctx: RunContext[Any]) -> Recorder:
        return self  # one record across runs

    def observe(self, messages: Sequence[ModelMessage]) -> None:
        lines: list[str] = []
        for message in messages:
            if self._seen.get(id(message)) is message:
                continue
            self._seen[id(message)] = message
            if is_synthetic(message):
                continue
            data = serialize_messages([message])
            if self._resume_at is not None:
                position, self._resume_at = self._resume_at, None
                self.restamped[position] = self.originals[position]
                self.originals[position] = data
            else:
                position = len(self.originals)
                self.originals.append(data)
            lines.append(json.dumps([position, base64.b64encode(data).decode()]) + '\n')
        if lines and self.journal is not None:
            with self.journal.open('a') as out:  # survives SIGKILL: the kernel holds what was written
                out.write(''.join(lines))

    async def before_model_request(self, ctx: RunContext[Any], request_context: Any) -> Any:
        self.observe(ctx.messages)
        return request_context

    async def after_run(self, ctx: RunContext[Any], *, result: Any) -> Any:
        # every `after_run` runs before any `wrap_run` resumes, so the run's final answer is in the record before
        # `MementoCompaction` logs it on the way out (a SIGKILL in between leaves the log a prefix of the record)
        self.observe(result.all_messages())
        return result


def build_agent(model: StepModel, capabilities: Sequence[AbstractCapability[Any]], *, lines: int) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(FunctionModel(model), capabilities=list(capabilities))

    @agent.tool_plain
    def read_file(path: str) -> str:
        """Read a file."""
        match = re.match(r'package_(\d+)/module_(\d+)\.py$', path)
        assert match, path
        return file_body(int(match.group(1)), int(match.group(2)), lines)

    @agent.tool_plain
    def run_tests(target: str) -> str:
        """Run a test file."""
        return f'$ pytest {target} -q\n3 passed in 0.21s\nexit code 0'

    return agent


def capability(
    store: GraphStore, session_id: str, namespace: str, *, max_tokens: int, **settings: Any
) -> MementoCompaction[Any]:
    return MementoCompaction(store, max_tokens=max_tokens, session_id=session_id, namespace=namespace, **settings)


def log_history(store: GraphStore, session_id: str, namespace: str) -> list[ModelMessage]:
    """The session's original messages as its log holds them (empty for a new session)."""
    return [
        m
        for event in store.read_events(session_id, namespace=namespace)
        if event.kind == 'message'
        for m in deserialize_messages(event.payload)
    ]


def tasks_done(history: Sequence[ModelMessage]) -> int:
    done = 0
    for message in history:
        if isinstance(message, ModelResponse) and any(
            isinstance(p, TextPart) and p.content.startswith('Task ') and ' done:' in p.content for p in message.parts
        ):
            done += 1
    return done


async def run_session(
    store: GraphStore,
    session_id: str,
    namespace: str,
    *,
    tasks: int,
    steps: int = 6,
    lines: int = 24,
    max_tokens: int = 1_500,
    history: Sequence[ModelMessage] | None = None,
    recorder: Recorder | None = None,
    model: StepModel | None = None,
    workdir: Path | None = None,
    on_request: Any = None,
    settings: dict[str, Any] | None = None,
) -> tuple[list[ModelMessage], Recorder]:
    """Run the session until `tasks` tasks are done; returns the final context and the record of originals.

    Args:
        history: the context to continue (`message_history`, as an app keeps it between runs, with the same
            `recorder`); `None` continues from the store's log (the durable record, after a crash).
        recorder: the ground truth to extend; a new one (fed the log) when `None`.
        model: the model to use (a test reads what each request contained); a new one when `None`.
        settings: more `MementoCompaction` settings (e.g. `store_timeout`).
    """
    if recorder is None:
        journal = None if workdir is None else workdir / f'journal-{os.getpid()}.jsonl'
        recorder = Recorder(journal=journal)
    model = model or StepModel(steps=steps, on_request=on_request)
    agent = build_agent(
        model,
        [recorder, capability(store, session_id, namespace, max_tokens=max_tokens, **(settings or {}))],
        lines=lines,
    )
    current = list(history) if history is not None else log_history(store, session_id, namespace)
    recorder.observe(current)
    done = tasks_done([m for data in recorder.originals for m in deserialize_messages(data)])
    # the log may end mid-task (a crash): carry on from its last message
    pending = bool(current) and not (isinstance(current[-1], ModelResponse) and tasks_done(current[-1:]))
    while done < tasks:
        prompt = None if pending else task_prompt(done + 1, steps)
        if prompt is None and isinstance(current[-1], ModelRequest):
            recorder.resume_from(len(recorder.originals) - 1)
        result = await agent.run(prompt, message_history=current, usage_limits=UNLIMITED)
        pending = False
        current = result.all_messages()
        recorder.observe(current)
        done += 1
        if workdir is not None:
            tmp = workdir / 'live.json.tmp'
            tmp.write_bytes(serialize_messages(current))
            tmp.replace(workdir / 'live.json')
    return current, recorder


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument('store')
    parser.add_argument('session')
    parser.add_argument('workdir', type=Path)
    parser.add_argument('--namespace', default='default')
    parser.add_argument('--tasks', type=int, default=3)
    parser.add_argument('--steps', type=int, default=6)
    parser.add_argument('--lines', type=int, default=24)
    parser.add_argument('--max-tokens', type=int, default=1_500)
    args = parser.parse_args(argv)
    warnings.simplefilter('ignore', MementoWarning)
    store = open_store(args.store)

    def progress(number: int) -> None:
        print(f'request {number}', flush=True)

    try:
        asyncio.run(
            run_session(
                store, args.session, args.namespace, tasks=args.tasks, steps=args.steps, lines=args.lines,
                max_tokens=args.max_tokens, workdir=args.workdir, on_request=progress,
            )
        )  # fmt: skip
    finally:
        store.close()
    print('finished', flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
