"""Nothing heavy is imported before `initialize` is answered (DESIGN.md section 13)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.fakes.deadlines import deadline

HEAVY = ("pydantic_ai", "openai", "anthropic", "google", "tiktoken", "typer", "rich", "httpx")

PROBE = """
import asyncio, json, sys
import codling.__main__, codling.cli.acp_main
from codling.acp.server import CodlingAgent

async def main():
    agent = CodlingAgent(warm_up=False)
    response = await agent.initialize(protocol_version=1)
    loaded = sorted({m.split(".")[0] for m in sys.modules} & set(sys.argv[1:]))
    print(json.dumps({"name": response.agent_info.name, "loaded": loaded}))

asyncio.run(main())
"""


def test_initialize_imports_no_model_or_cli_libraries() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, *HEAVY], capture_output=True, text=True, timeout=deadline(60), check=True
    )
    assert json.loads(out.stdout) == {"name": "codling", "loaded": []}


SESSION_PROBE = """
import asyncio, json, sys, tempfile
from pathlib import Path
from codling.acp.server import CodlingAgent
from codling.config import Settings
from tests.fakes.acp_client import RecordingClient

async def main():
    home, project = Path(tempfile.mkdtemp()), Path(tempfile.mkdtemp())
    env = {"CODLING_HOME": str(home), "CODLING_MODEL": "openai-chat:m", "OPENAI_BASE_URL": "http://127.0.0.1:9"}
    agent = CodlingAgent(settings_loader=lambda: Settings(home=home, env=env), warm_up=False)
    agent.on_connect(RecordingClient())
    await agent.initialize(protocol_version=1)
    response = await agent.new_session(cwd=str(project))
    loaded = sorted({m.split(".")[0] for m in sys.modules} & set(sys.argv[1:]))
    print(json.dumps({"session": bool(response.session_id), "loaded": loaded}))

asyncio.run(main())
"""


def test_session_new_needs_no_model_stack() -> None:
    # So it answers at once while the warm-up thread imports pydantic-ai and the provider for the first prompt.
    out = subprocess.run(
        [sys.executable, "-c", SESSION_PROBE, *HEAVY], capture_output=True, text=True, timeout=deadline(60), check=True
    )
    assert json.loads(out.stdout) == {"session": True, "loaded": []}


LIGHT_COMMANDS = (["--version"], ["--help"], ["models"], ["sessions", "list"], ["sessions", "--help"])


def test_the_light_commands_import_no_model_stack(tmp_path: Path) -> None:
    """``--version``, ``--help``, ``models`` and ``sessions …`` stay fast: no pydantic-ai, no provider SDK."""
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "CODLING_HOME": str(tmp_path)}
    for command in LIGHT_COMMANDS:
        result = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "codling", *command],
            env=env,
            capture_output=True,
            text=True,
            timeout=deadline(60),
            check=False,
        )
        assert result.returncode == 0, (command, result.stderr[-2000:])
        imported = {line.split("|")[-1].strip().split(".")[0] for line in result.stderr.splitlines() if "|" in line}
        assert imported & {*HEAVY, "httpx2"} - {"typer", "rich"} == set(), command
