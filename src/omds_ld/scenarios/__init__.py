"""The scenario checker: runs an agent on a task against MCP servers, records, grades without a model."""
