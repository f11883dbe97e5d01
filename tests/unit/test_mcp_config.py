"""MCP server specs: config.toml's tables, the editor's entries winning on a name, names safe for providers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from codling.config import load_settings
from codling.errors import ConfigError
from codling.mcp_servers import McpServerSpec, merged, parse_servers
from codling.tools.mcp.names import MAX_NAME, tool_name

CONFIG = """
[mcp_servers.time]
command = "uvx"
args = ["mcp-server-time", "--local-timezone", "UTC"]
env = { TZ = "UTC", TIME_TOKEN = "secret-env-value" }

[mcp_servers.docs]
url = "https://docs.example.com/mcp?key=secret-query"
headers = { Authorization = "Bearer secret-header" }

[mcp_servers.events]
url = "http://127.0.0.1:9000/sse"
transport = "sse"

[mcp_servers.off]
command = "never-started"
enabled = false
"""


def test_config_toml_servers_are_read(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(CONFIG)
    settings = load_settings({"CODLING_HOME": str(tmp_path)})
    assert settings.mcp_servers == (
        McpServerSpec(
            "time",
            "stdio",
            command="uvx",
            args=("mcp-server-time", "--local-timezone", "UTC"),
            env=(("TZ", "UTC"), ("TIME_TOKEN", "secret-env-value")),
        ),
        McpServerSpec(
            "docs",
            "http",
            url="https://docs.example.com/mcp?key=secret-query",
            headers=(("Authorization", "Bearer secret-header"),),
        ),
        McpServerSpec("events", "sse", url="http://127.0.0.1:9000/sse"),
    )


def test_what_is_shown_of_a_server_holds_no_secret(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(CONFIG)
    shown = "\n".join(f"{s!r} {s.describe()}" for s in load_settings({"CODLING_HOME": str(tmp_path)}).mcp_servers)
    for secret in ("secret-env-value", "secret-header", "secret-query"):
        assert secret not in shown
    assert "uvx mcp-server-time --local-timezone UTC" in shown
    assert "http https://docs.example.com/mcp" in shown


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("[mcp_servers.x]\nargs = []", "needs either a command"),
        ('[mcp_servers.x]\ncommand = "a"\nurl = "http://h"', "needs either a command"),
        ('[mcp_servers.x]\ncommand = "a"\nargs = "b"', "args must be a list of strings"),
        ('[mcp_servers.x]\ncommand = "a"\nenv = { A = 1 }', "env must be a table of strings"),
        ('[mcp_servers.x]\nurl = "ftp://h"', "url must be an http:// or https:// address"),
        ('[mcp_servers.x]\nurl = "http://h"\ntransport = "ws"', 'transport must be "http" or "sse"'),
        ('[mcp_servers.x]\ncommand = "a"\nheaders = {}', "headers and transport are for a url"),
        ('[mcp_servers.x]\ncommand = "a"\ncwd = "/"', "unknown key 'cwd'"),
        ('mcp_servers = "x"', "mcp_servers must be a table"),
    ],
)
def test_a_malformed_server_is_a_config_error_naming_it(tmp_path: Path, table: str, message: str) -> None:
    (tmp_path / "config.toml").write_text(table)
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_settings({"CODLING_HOME": str(tmp_path)})


def test_the_editors_server_wins_on_a_name_clash() -> None:
    config = parse_servers({"a": {"command": "config-a"}, "b": {"command": "config-b"}}, Path("config.toml"))
    editor = (McpServerSpec("a", "http", url="http://editor", source="editor"),)
    assert [(s.name, s.source, s.transport) for s in merged(editor, config)] == [
        ("a", "editor", "http"),
        ("b", "config", "stdio"),
    ]


def test_tool_names_are_safe_unique_and_never_codlings_own() -> None:
    taken: set[str] = set()
    names = []
    for server, tool in [
        ("fake", "echo"),
        ("fake", "../../read_file; rm -rf"),
        ("fake", "read_file__rm_rf"),
        ("my server!", "ünïcode tool"),
        ("fake", "x" * 300),
        ("fake", "x" * 301),
        ("fake", ""),
    ]:
        name = tool_name(server, tool, taken)
        taken.add(name)
        names.append(name)
    assert names[0] == "mcp__fake__echo"
    assert len(set(names)) == len(names)
    for name in names:
        assert re.fullmatch(r"mcp__[A-Za-z0-9_-]+", name) and len(name) <= MAX_NAME, name
        assert name.count("__") >= 2
    assert tool_name("fake", "echo", {"mcp__fake__echo"}) not in {"mcp__fake__echo"}


def test_a_servers_secrets_are_scrubbed_from_what_it_says() -> None:
    spec = McpServerSpec(
        "docs",
        "http",
        url="https://h/mcp?key=q-secret",
        headers=(("Authorization", "Bearer h-secret"),),
        env=(("A", "e-secret"),),
    )
    said = "401 for https://h/mcp?key=q-secret with Bearer h-secret (env e-secret)"
    assert spec.scrub(said) == "401 for https://h/mcp?[redacted] with [redacted] (env [redacted])"
