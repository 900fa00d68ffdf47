"""Baton and the Model Context Protocol (the `mcp` extra: `pip install 'baton-relay[mcp]'`)."""
