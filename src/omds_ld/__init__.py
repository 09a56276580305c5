"""OMDS LD for AI agents: the norm's files, example insurers and the MCP server of the norm."""

__version__ = "0.1.0"
