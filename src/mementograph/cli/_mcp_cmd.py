"""`mcp`: serve the archived memory to MCP clients, over stdio or streamable HTTP."""

from __future__ import annotations

import argparse
import os
import socket
import sys

from ._commands import add_command
from ._common import (
    CliError,
    add_embedding_option,
    add_store_options,
    add_store_vectors_option,
    check_store_vectors,
    load_embedding,
    non_empty,
    store_from,
)

__all__ = ('register',)


def _mcp(args: argparse.Namespace) -> int:
    check_store_vectors(args)  # before the SDK loads: a bad argument is refused at once
    # Imported here: the MCP SDK (starlette, uvicorn) adds a second to start-up, which no other command should pay.
    from ..mcp import DEFAULT_HOST, DEFAULT_PORT, MCP_PATH, TOKEN_ENV, create_server, is_loopback, run_http, run_stdio

    if not args.http:
        given = [
            flag
            for flag, value in (('--host', args.host), ('--port', args.port), ('--token', args.token))
            if value is not None
        ]
        if given:
            verb = 'applies' if len(given) == 1 else 'apply'
            raise CliError(f'{", ".join(given)} only {verb} with --http (stdio needs no address or token)', code=2)
    host = (args.host or DEFAULT_HOST).strip()
    port = DEFAULT_PORT if args.port is None else args.port
    token = args.token or os.environ.get(TOKEN_ENV) or None
    if args.http:
        if not 0 <= port <= 65535:
            raise CliError(f'--port must be 0-65535, got {port}', code=2)
        if not token and not is_loopback(host):
            raise CliError(
                f'--host {host} is reachable from other machines: set a bearer token (--token or ${TOKEN_ENV}) so '
                f'clients must authenticate, or bind {DEFAULT_HOST}',
                code=2,
            )
    if args.http:
        _check_port(host, port)
    embedding = load_embedding(args.embedding)
    # served even when new: an agent may start archiving there later
    with store_from(args, create='mementograph mcp: no store at {path} yet; created it empty, served until something '
                    'is archived there') as store:  # fmt: skip
        if args.session and all(s.id != args.session for s in store.list_sessions(namespace=args.namespace)):
            print(f'mementograph mcp: no session {args.session!r} in namespace {args.namespace!r} yet; serving it '
                  'empty until something is archived there', file=sys.stderr, flush=True)  # fmt: skip
        server = create_server(
            store,
            namespace=args.namespace,
            session_id=args.session,
            embedding=embedding,
            store_vectors=args.store_vectors,
            store_timeout=args.store_timeout,
        )
        where = f'namespace {args.namespace!r}' + (f', session {args.session!r}' if args.session else '')
        try:
            if args.http:
                shown = f'[{host}]' if ':' in host else host
                auth = 'bearer token required' if token else 'no token, loopback only'
                print(
                    f'mementograph mcp: serving {store.uri} ({where}) at http://{shown}:{port}{MCP_PATH} ({auth}); '
                    'Ctrl-C stops',
                    file=sys.stderr,
                    flush=True,
                )
                run_http(server, host=host, port=port, token=token)
            else:
                run_stdio(server)  # stdout is the protocol channel: nothing else may be printed there
        finally:
            if embedding is not None:  # its embedding threads read the store: stopped before it closes
                from ..knowledge_graph.dense import BackgroundSync

                BackgroundSync.stop_all()
    return 0


def _check_port(host: str, port: int) -> None:
    """Fail with one line before announcing anything when the address cannot be bound (a port in use), instead
    of the web server's own log line and its exit code."""
    family = socket.AF_INET6 if ':' in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise CliError(f'cannot listen on {host}:{port}: {exc.strerror or exc}; choose another --port') from None


def _seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = 0.0
    if not seconds > 0:
        raise argparse.ArgumentTypeError(f'must be a positive number of seconds, got {value!r}')
    return seconds


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `mcp` command."""
    parser = add_command(
        commands,
        'mcp',
        description='Serve the archived memory read-only over the Model Context Protocol: tools recall, '
        'recover_block, list_pages, retrieve_page, query_memory and stats, scoped to one namespace (and one '
        'session with --session). Stdio by default; --http serves streamable HTTP at http://HOST:PORT/mcp. '
        'Client configuration: docs/mcp.md.',
    )
    add_store_options(parser, json_flag=False)
    parser.add_argument(
        '--session', type=non_empty, help='serve only this session (default: every session of the namespace)'
    )
    parser.add_argument('--http', action='store_true', help='serve streamable HTTP instead of stdio')
    parser.add_argument(
        '--host',
        help='address to bind with --http (default: 127.0.0.1); any non-loopback address needs a token',
    )
    parser.add_argument('--port', type=int, help='port with --http (default: 8765)')
    add_embedding_option(parser, 'recall then ranks hybrid (entities, words and meaning)')
    add_store_vectors_option(parser)
    parser.add_argument(
        '--store-timeout',
        type=_seconds,
        default=30.0,
        metavar='SECONDS',
        help='how long a tool call waits for the store (default: 30); past it the call fails with a message, and '
        'so does every call until the store answers again',
    )
    parser.add_argument(
        '--token',
        help='bearer token HTTP clients must send (default: $MEMENTOGRAPH_MCP_TOKEN; prefer the variable, '
        'command lines are visible to other users)',
    )
    parser.set_defaults(func=_mcp)
