"""A third-party MCP server from the npm registry, for tests: the MCP project's own reference server
``@modelcontextprotocol/server-everything`` (TypeScript SDK), installed once into ``.venv/mcp-npm``."""

from __future__ import annotations

from pathlib import Path

from tests.fakes.mcp import ROOT
from tests.fakes.npm import npm_install

PACKAGE = "@modelcontextprotocol/server-everything@2026.8.31"
PREFIX = ROOT / ".venv" / "mcp-npm"
BIN = PREFIX / "node_modules" / ".bin" / "mcp-server-everything"


def everything_server() -> Path:
    """The server's executable, installed with npm on first use."""
    return npm_install(PACKAGE, PREFIX, BIN)
