"""`_transport` -- serve the memory server over stdio (the default for desktop clients) or streamable HTTP.

HTTP binds 127.0.0.1 unless told otherwise, and any other address needs a bearer token: memory holds whole
conversations, so it is never offered to the network unauthenticated. The token check is a small ASGI wrapper
(constant-time compare) in front of the SDK's app rather than the SDK's OAuth resource-server machinery, which
needs an authorization server this single-secret setup does not have.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import os
import signal
import sys
import threading
from typing import Any, Final

import anyio
from mcp.server.mcpserver import MCPServer
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = (
    'DEFAULT_HOST',
    'DEFAULT_PORT',
    'MCP_PATH',
    'TOKEN_ENV',
    'BearerTokenMiddleware',
    'http_app',
    'is_loopback',
    'run_http',
    'run_stdio',
)

DEFAULT_HOST: Final = '127.0.0.1'
DEFAULT_PORT: Final = 8765
MCP_PATH: Final = '/mcp'
TOKEN_ENV: Final = 'MEMENTOGRAPH_MCP_TOKEN'


def is_loopback(host: str) -> bool:
    """Whether binding `host` keeps the server on this machine (`localhost`, 127.0.0.0/8, ::1)."""
    name = host.strip().strip('[]').lower()
    if name == 'localhost':
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class BearerTokenMiddleware:
    """Answers 401 to every HTTP request without `Authorization: Bearer <token>`; lifespan events pass through (the
    app has no websocket route, so those are turned away behind it)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        if not token:
            raise ValueError('the bearer token is empty')
        self.app = app
        self._expected = token.encode('utf-8')

    def _authorized(self, scope: Scope) -> bool:
        for name, value in scope.get('headers', ()):
            if name.lower() == b'authorization':
                scheme, _, credentials = bytes(value).strip().partition(b' ')
                if scheme.lower() == b'bearer':
                    return hmac.compare_digest(credentials.strip(), self._expected)
        return False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope['type'] == 'http' and not self._authorized(scope):
            body = json.dumps({'error': 'unauthorized', 'error_description': 'send Authorization: Bearer <token>'})
            await send(
                {
                    'type': 'http.response.start',
                    'status': 401,
                    'headers': [
                        (b'content-type', b'application/json'),
                        (b'www-authenticate', b'Bearer realm="mementograph"'),
                        (b'content-length', str(len(body)).encode()),
                    ],
                }
            )
            await send({'type': 'http.response.body', 'body': body.encode()})
            return
        await self.app(scope, receive, send)


def _check_exposure(host: str, token: str | None) -> None:
    if not token and not is_loopback(host):
        raise ValueError(
            f'refusing to serve memory on {host!r} without a bearer token: bind 127.0.0.1, or set a token '
            f'(--token or ${TOKEN_ENV})'
        )


def http_app(server: MCPServer[Any], *, host: str = DEFAULT_HOST, token: str | None = None) -> ASGIApp:
    """The streamable HTTP ASGI app (endpoint `/mcp`), behind a bearer-token check when `token` is set.

    `host` is where it will be bound: on a loopback address the SDK also checks Host/Origin headers (DNS
    rebinding protection).

    Raises:
        ValueError: `host` is not a loopback address and there is no token.
    """
    _check_exposure(host, token)
    app: ASGIApp = server.streamable_http_app(streamable_http_path=MCP_PATH, host=host)
    return BearerTokenMiddleware(app, token) if token else app


def run_http(
    server: MCPServer[Any], *, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, token: str | None = None
) -> None:
    """Serve streamable HTTP at `http://host:port/mcp` until interrupted.

    Raises:
        ValueError: `host` is not a loopback address and there is no token.
    """
    import uvicorn

    app = http_app(server, host=host, token=token)
    uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level='warning', lifespan='on')).run()


def run_stdio(server: MCPServer[Any]) -> None:
    """Serve over stdin/stdout until the client closes the pipe (stdout carries only protocol messages).

    Ctrl-C ends the process at once. The SDK reads stdin in a worker thread that shutdown waits for, so an
    interrupt left the server alive and deaf until the next line of input. Every write the server makes (an index
    brought up to date, vectors) is one transaction: exiting between two loses nothing.
    """
    if threading.current_thread() is not threading.main_thread():  # signals are the main thread's to handle
        anyio.run(server.run_stdio_async)
        return
    previous = signal.signal(signal.SIGINT, _exit_interrupted)
    try:
        anyio.run(server.run_stdio_async)
    finally:
        signal.signal(signal.SIGINT, previous)


def _exit_interrupted(signum: int, frame: object) -> None:
    print('mementograph: interrupted', file=sys.stderr, flush=True)
    os._exit(130)
