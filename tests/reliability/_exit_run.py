"""One short agent run on a SQLite store, as its own process, for the tests of exiting while the store hangs.

    python -m tests.reliability._exit_run STORE_PATH OUT_JSON [--store-timeout S] [--release MARKER]
        [--history IN_JSON]

The model calls a tool twice, then answers (6 messages; with `--history`, the run continues that conversation).
The store waits up to ten minutes for a write lock, so only `store_timeout` bounds the waits. When the run has
returned, the program writes every message of the run to OUT_JSON, prints `returned AT N CONVERSATION` (the wall
clock, the number of messages, the conversation id), creates MARKER if given, and ends.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from mementograph import MementoCompaction, open_store

TOOL_CALLS = 2


def _model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    calls = sum(isinstance(part, ToolCallPart) for message in messages for part in message.parts)
    if calls % (TOOL_CALLS + 1) < TOOL_CALLS:
        return ModelResponse(parts=[ToolCallPart('note', {'text': f'step {calls}'})])
    return ModelResponse(parts=[TextPart(f'done after {calls} steps')])


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument('store_path', type=Path)
    parser.add_argument('out_json', type=Path)
    parser.add_argument('--store-timeout', type=float, default=2.0)
    parser.add_argument('--release', type=Path)
    parser.add_argument('--history', type=Path)
    args = parser.parse_args(argv)

    store = open_store(f'sqlite://{args.store_path}?busy_timeout=600')
    agent = Agent(
        FunctionModel(_model), capabilities=[MementoCompaction(store=store, store_timeout=args.store_timeout)]
    )

    @agent.tool_plain
    def note(text: str) -> str:
        return f'noted: {text}'

    history = None if args.history is None else ModelMessagesTypeAdapter.validate_json(args.history.read_bytes())
    result = agent.run_sync('Take two notes, then say done.', message_history=history)
    messages = result.all_messages()
    args.out_json.write_bytes(ModelMessagesTypeAdapter.dump_json(messages))
    print(f'returned {time.time()} {len(messages)} {result.conversation_id}', flush=True)
    if args.release is not None:
        args.release.touch()


if __name__ == '__main__':
    main(sys.argv[1:])
