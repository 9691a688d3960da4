"""The unit's MCP tools over stdio, for agents that start their MCP servers themselves as child processes.

    python -m data_agent_compare.systems.mcp_stdio --unit-file <workdir>/.mcp-unit.json

An external agent (systems/external.py) finds this command in `DAC_MCP_STDIO` (a shell-quoted command line;
`{mcp_stdio}` in a command template) and configures it as a stdio MCP server. The process serves MCP on its
stdin/stdout (the official `mcp` SDK's stdio transport) and forwards every request to the unit's Streamable
HTTP tools with the unit's token, so each tool call is the same tool step of the unit's trace as over HTTP:
same tools, schemas, budgets and refusals. Its address and token come from a file in the unit's scratch folder
(stdio clients pass their child a filtered environment, and a token on the command line would be visible to
every user of the machine), readable only by the agent's user.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

# Imported on first use (kept out of the command's start); imported before units run on threads, where two
# units importing them at once could find a package half-initialized (`registry.import_lazy_dependencies`).
LAZY_IMPORTS = ("anyio", "httpx", "mcp", "mcp.client.streamable_http", "mcp.server.lowlevel", "mcp.server.stdio")


UNIT_FILE = ".mcp-unit.json"


async def serve(url: str, token: str) -> None:
    import httpx
    from mcp import ClientSession, types
    from mcp.client.streamable_http import streamable_http_client
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    server: Server[Any, Any] = Server("data-agent-compare-stdio")
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx.AsyncClient(headers=headers, timeout=None, trust_env=False) as client,
        streamable_http_client(url, http_client=client) as (read, write, _),
        ClientSession(read, write) as unit,
    ):
        await unit.initialize()

        @server.list_tools()
        async def list_tools() -> list[types.Tool]:
            return (await unit.list_tools()).tools

        @server.call_tool(validate_input=False)  # the unit's tool environment validates and traces
        async def call_tool(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
            return await unit.call_tool(name, arguments)

        async with stdio_server() as (stdin, stdout):
            await server.run(stdin, stdout, server.create_initialization_options())


def main() -> None:
    import anyio

    parser = argparse.ArgumentParser(description="The unit's MCP tools over stdio (a proxy of its HTTP endpoint).")
    parser.add_argument("--unit-file", type=Path, required=True, help=f"the unit's {UNIT_FILE} (url, token)")
    unit = json.loads(parser.parse_args().unit_file.read_text(encoding="utf-8"))
    anyio.run(serve, unit["url"], unit["token"])


if __name__ == "__main__":
    main()
