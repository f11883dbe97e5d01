"""MCP servers' tools in a session: the servers (``servers.py``), their tools' names (``names.py``), their
results as text (``results.py``), the toolset the model calls them through (``toolset.py``), and the one
module that imports pydantic-ai's MCP support (``connect.py``)."""
