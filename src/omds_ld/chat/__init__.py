"""The chatbot: the insurers' MCP servers in a browser, followed by hand (and, later, a model)."""
