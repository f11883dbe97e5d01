"""A third-party MCP server from the npm registry, for tests: the MCP project's own reference server
``@modelcontextprotocol/server-everything`` (TypeScript SDK), installed once into ``.venv/mcp-npm``."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.fakes.mcp import ROOT

PACKAGE = "@modelcontextprotocol/server-everything@2026.8.31"
PREFIX = ROOT / ".venv" / "mcp-npm"
BIN = PREFIX / "node_modules" / ".bin" / "mcp-server-everything"


def everything_server() -> Path:
    """The server's executable, installed with npm on first use (a test fails, never skips, without npm)."""
    if BIN.exists():
        return BIN
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail("npm is needed to install the third-party MCP server these tests use (apt-get install npm)")
    PREFIX.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [npm, "install", "--prefix", str(PREFIX), "--no-audit", "--no-fund", "--no-save", PACKAGE],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0 and BIN.exists(), f"npm install {PACKAGE} failed:\n{done.stderr[-2000:]}"
    return BIN
