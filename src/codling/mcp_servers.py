"""MCP servers a session connects to: what they are, where they come from, and how the two sources merge.

A session's servers come from the editor (ACP's ``mcpServers`` in ``session/new``, ``load``, ``resume`` and
``fork``; ``acp/server.py`` turns them into :class:`McpServerSpec`) and from ``[mcp_servers.NAME]`` tables in
config.toml (:func:`parse_servers`), which ``codling run`` uses too::

    [mcp_servers.time]                 # stdio: a program codling starts, speaking MCP on its stdin/stdout
    command = "uvx"
    args = ["mcp-server-time"]
    env = { TZ = "Europe/Paris" }      # added to a minimal environment (HOME, PATH, …), never codling's own

    [mcp_servers.docs]                 # HTTP (streamable HTTP; transport = "sse" for an SSE server)
    url = "https://example.com/mcp"
    headers = { Authorization = "Bearer …" }
    enabled = false                    # keep the entry, start nothing

An editor's entry wins over config.toml's of the same name (:func:`merged`). Values of ``env`` and ``headers``
are secrets as far as codling knows: :meth:`McpServerSpec.describe` and ``repr`` never show them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, cast
from urllib.parse import urlsplit, urlunsplit

from codling.errors import ConfigError
from codling.text import did_you_mean

McpTransport = Literal["stdio", "http", "sse"]
"""How codling reaches a server: a subprocess's stdin/stdout, streamable HTTP, or HTTP with server-sent events."""

McpSource = Literal["editor", "config"]
"""Who named the server: the ACP client, or config.toml."""

McpSandbox = Literal["off", "on", "network"]
"""Whether a stdio server runs confined: no, yes (network off), yes with the network on."""


@dataclass(frozen=True)
class McpServerSpec:
    """One MCP server as configured (nothing started)."""

    name: str
    transport: McpTransport
    command: str = ""
    """The program to start (stdio)."""
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    """Variables set for the program (stdio), on top of a minimal inherited environment."""
    url: str = field(default="", repr=False)
    """Where the server listens (http, sse); its query may hold a token, so ``repr`` leaves it out."""
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    """HTTP headers sent with every request (http, sse): often a token."""
    source: McpSource = "config"
    sandbox: McpSandbox = "off"
    """A stdio server confined as commands are (``tools/sandbox/``): not (default), with the network off
    (``sandbox = true``), or with it on (``sandbox = "network"``)."""

    def describe(self) -> str:
        """What the server is, for the user and the logs: the command line, or the URL without its query
        (which may hold a token); never an environment variable's or a header's value."""
        if self.transport == "stdio":
            return " ".join([self.command, *self.args])
        parts = urlsplit(self.url)
        host = parts.hostname or ""
        netloc = f"{host}:{parts.port}" if parts.port else host
        return f"{self.transport} {urlunsplit((parts.scheme, netloc, parts.path, '', ''))}"

    def scrub(self, text: str) -> str:
        """``text`` with this server's secrets (its env and header values, its URL's query) replaced: what a
        server or a library says about a failure may quote them."""
        secrets = [value for _, value in (*self.env, *self.headers) if len(value) >= 4]
        query = urlsplit(self.url).query if self.url else ""
        secrets += [query] if query else []
        for secret in sorted(secrets, key=len, reverse=True):
            text = text.replace(secret, "[redacted]")
        return text


def merged(editor: Iterable[McpServerSpec], config: Iterable[McpServerSpec]) -> tuple[McpServerSpec, ...]:
    """The servers of a session: the editor's, then config.toml's whose names the editor did not use (on a
    clash the editor's entry wins); of two entries with one name from the same source, the first counts."""
    result: dict[str, McpServerSpec] = {}
    for spec in (*editor, *config):
        result.setdefault(spec.name, spec)
    return tuple(result.values())


def parse_servers(data: object, path: Path) -> tuple[McpServerSpec, ...]:
    """The ``[mcp_servers.NAME]`` tables of config.toml (``data`` is the ``mcp_servers`` value), enabled ones
    only; a :class:`ConfigError` naming the file and the server for anything malformed."""
    if data is None:
        return ()
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: mcp_servers must be a table of servers ([mcp_servers.NAME])")
    specs = []
    for name, table in data.items():
        where = f"{path}: [mcp_servers.{name}]"
        if not isinstance(table, dict):
            raise ConfigError(f"{where} must be a table with a command or a url")
        spec = _parse_one(name, table, where)
        if spec is not None:
            specs.append(spec)
    return tuple(specs)


_KEYS = frozenset({"command", "args", "env", "url", "headers", "transport", "enabled", "sandbox"})


def _parse_one(name: str, table: dict[str, object], where: str) -> McpServerSpec | None:
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}{did_you_mean(unknown[0], _KEYS)}")
    enabled = table.get("enabled", True)
    if not isinstance(enabled, bool):
        raise ConfigError(f"{where}: enabled must be true or false")
    command, url = table.get("command"), table.get("url")
    if (command is None) == (url is None):
        raise ConfigError(f"{where} needs either a command (a program to start) or a url (a server to reach)")
    if command is not None:
        if not isinstance(command, str) or not command.strip():
            raise ConfigError(f"{where}: command must be a program name or path")
        args = table.get("args", [])
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise ConfigError(f'{where}: args must be a list of strings, like ["--port", "8080"]')
        if "headers" in table or "transport" in table:
            raise ConfigError(f"{where}: headers and transport are for a url, not a command")
        sandbox = table.get("sandbox", False)
        if sandbox not in (True, False, "network"):
            raise ConfigError(f'{where}: sandbox must be true, false or "network", not {sandbox!r}')
        spec = McpServerSpec(
            name,
            "stdio",
            command=command,
            args=tuple(cast(list[str], args)),
            env=_pairs(table, "env", where),
            sandbox="network" if sandbox == "network" else "on" if sandbox else "off",
        )
    else:
        if not isinstance(url, str) or urlsplit(url).scheme not in ("http", "https"):
            raise ConfigError(f"{where}: url must be an http:// or https:// address")
        transport = table.get("transport", "http")
        if transport not in ("http", "sse"):
            raise ConfigError(f'{where}: transport must be "http" or "sse", not {transport!r}')
        if "args" in table or "env" in table or "sandbox" in table:
            raise ConfigError(f"{where}: args, env and sandbox are for a command, not a url")
        spec = McpServerSpec(name, transport, url=url, headers=_pairs(table, "headers", where), source="config")
    return spec if enabled else None


def _pairs(table: dict[str, object], key: str, where: str) -> tuple[tuple[str, str], ...]:
    value = table.get(key, {})
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ConfigError(f'{where}: {key} must be a table of strings, like {{ NAME = "value" }}')
    return tuple(cast(dict[str, str], value).items())
