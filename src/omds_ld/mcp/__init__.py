"""The MCP server of the norm: one instance per insurer, tools from the norm's OpenAPI file."""
