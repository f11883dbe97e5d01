"""Nothing heavy is imported before `initialize` is answered (DESIGN.md section 13)."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("pydantic_ai", "openai", "anthropic", "tiktoken", "typer", "rich", "httpx")

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
    out = subprocess.run([sys.executable, "-c", PROBE, *HEAVY], capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(out.stdout) == {"name": "codling", "loaded": []}
