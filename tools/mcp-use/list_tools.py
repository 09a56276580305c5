"""mcp-use (its own environment: it needs the MCP SDK 1.x) with its default configuration
connects to one MCP endpoint and lists its tools; prints their names, one a line."""

import asyncio
import sys

from mcp_use import MCPClient


async def main(url: str) -> None:
    client = MCPClient({"mcpServers": {"insurer": {"url": url}}})
    session = await client.create_session("insurer")
    tools = await session.list_tools()
    print("\n".join(tool.name for tool in tools))
    await client.close_all_sessions()


asyncio.run(main(sys.argv[1]))
