"""The reference ACP client library from the npm registry, for tests: ``@agentclientprotocol/sdk`` (the
TypeScript SDK, whose package also ships the protocol's JSON schemas), installed once into ``.venv/acp-npm``."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from tests.fakes.mcp import ROOT
from tests.fakes.npm import npm_install

PACKAGE = "@agentclientprotocol/sdk@2.4.0"
PREFIX = ROOT / ".venv" / "acp-npm"
SDK = PREFIX / "node_modules" / "@agentclientprotocol" / "sdk"
CLIENT = Path(__file__).with_name("acp_ts_client.mjs")


def sdk_dir() -> Path:
    """The installed package, installed with npm on first use."""
    return npm_install(PACKAGE, PREFIX, SDK / "package.json").parent


def client_script() -> Path:
    """The TypeScript-SDK client, copied next to the installed package so Node resolves the SDK."""
    sdk_dir()
    target = PREFIX / CLIENT.name
    target.write_text(CLIENT.read_text())
    return target


REQUESTS = {
    "initialize": ("InitializeRequest", "InitializeResponse"),
    "authenticate": ("AuthenticateRequest", "AuthenticateResponse"),
    "session/new": ("NewSessionRequest", "NewSessionResponse"),
    "session/load": ("LoadSessionRequest", "LoadSessionResponse"),
    "session/resume": ("ResumeSessionRequest", "ResumeSessionResponse"),
    "session/close": ("CloseSessionRequest", "CloseSessionResponse"),
    "session/delete": ("DeleteSessionRequest", "DeleteSessionResponse"),
    "logout": ("LogoutRequest", "LogoutResponse"),
    "session/list": ("ListSessionsRequest", "ListSessionsResponse"),
    "session/set_mode": ("SetSessionModeRequest", "SetSessionModeResponse"),
    "session/set_config_option": ("SetSessionConfigOptionRequest", "SetSessionConfigOptionResponse"),
    "session/prompt": ("PromptRequest", "PromptResponse"),
    "session/request_permission": ("RequestPermissionRequest", "RequestPermissionResponse"),
    "fs/read_text_file": ("ReadTextFileRequest", "ReadTextFileResponse"),
    "fs/write_text_file": ("WriteTextFileRequest", "WriteTextFileResponse"),
    "terminal/create": ("CreateTerminalRequest", "CreateTerminalResponse"),
    "terminal/output": ("TerminalOutputRequest", "TerminalOutputResponse"),
    "terminal/wait_for_exit": ("WaitForTerminalExitRequest", "WaitForTerminalExitResponse"),
    "terminal/kill": ("KillTerminalRequest", "KillTerminalResponse"),
    "terminal/release": ("ReleaseTerminalRequest", "ReleaseTerminalResponse"),
}
NOTIFICATIONS = {"session/update": "SessionNotification", "session/cancel": "CancelNotification"}


@cache
def _schema(name: str) -> dict[str, Any]:
    return json.loads((sdk_dir() / "schema" / "v1" / name).read_text())


def schema_violations(traffic: list[dict[str, Any]], schema_file: str = "schema.json") -> list[str]:
    """Every message of ``traffic`` (``{"from", "message"}`` in order) that the ACP schema rejects: params by
    method, results by the method of the request they answer, errors as JSON-RPC errors."""
    from jsonschema import Draft202012Validator

    schema = _schema(schema_file)
    methods: dict[tuple[str, Any], str] = {}
    problems: list[str] = []
    for entry in traffic:
        message, sender = entry["message"], entry["from"]
        if "method" in message:
            method = message["method"]
            if "id" in message:
                methods[(sender, message["id"])] = method
            name = REQUESTS[method][0] if "id" in message else NOTIFICATIONS.get(method)
            value = message.get("params")
        else:
            method = methods.get(("agent" if sender == "client" else "client", message["id"]), "")
            name = "Error" if "error" in message else REQUESTS[method][1]
            value = message.get("error", message.get("result"))
        if name is None:
            problems.append(f"{sender}: no schema for {method}")
            continue
        validator = Draft202012Validator({"$defs": schema["$defs"], "$ref": f"#/$defs/{name}"})
        problems += [f"{sender} {method or name}: {e.message[:300]}" for e in validator.iter_errors(value)]
    return problems
