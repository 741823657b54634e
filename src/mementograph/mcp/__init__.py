"""MCP server: the archived memory, read-only, for any MCP client (Claude Desktop, IDEs, other agents).

`mementograph mcp` serves it over stdio (the default) or streamable HTTP on 127.0.0.1 (`--http`); from Python,
`create_server(store)` then `run_stdio(server)` or `run_http(server, ...)`. See docs/mcp.md.

This subpackage is `mementograph.mcp`; the MCP SDK it uses is the top-level `mcp` package.
"""

from ._server import OUTPUT_CHARS, MemoryScope, MemoryTools, create_server
from ._transport import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    MCP_PATH,
    TOKEN_ENV,
    BearerTokenMiddleware,
    http_app,
    is_loopback,
    run_http,
    run_stdio,
)

__all__ = (
    'DEFAULT_HOST',
    'DEFAULT_PORT',
    'MCP_PATH',
    'OUTPUT_CHARS',
    'TOKEN_ENV',
    'BearerTokenMiddleware',
    'MemoryScope',
    'MemoryTools',
    'create_server',
    'http_app',
    'is_loopback',
    'run_http',
    'run_stdio',
)
