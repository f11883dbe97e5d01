"""Nothing heavy is imported before `initialize` is answered (DESIGN.md section 13)."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from codling.startup import imports_without_gc, one_malloc_arena, release_free_memory, skip_unused_modules
from tests.fakes.deadlines import deadline

HEAVY = ("pydantic_ai", "openai", "anthropic", "google", "tiktoken", "typer", "rich", "httpx")

PROBE = """
import asyncio, json, sys
import codling.__main__, codling.cli.acp_main
from codling.acp.server import CodlingAgent

async def main():
    agent = CodlingAgent(warm_up=False)
    response = await agent.initialize(protocol_version=1)
    loaded = sorted(({m.split(".")[0] for m in sys.modules} | set(sys.modules)) & set(sys.argv[1:]))
    print(json.dumps({"name": response.agent_info.name, "loaded": loaded}))

asyncio.run(main())
"""


SESSION_ONLY = ("codling.acp.translate", "codling.brain.events", "codling.tools.base")
"""Codling's own modules a session needs and initialize does not: the event vocabulary and its translation
were 55% of codling's CPU before initialize is answered (issue 33 D7); the warm-up thread imports them."""


def test_initialize_imports_no_model_or_cli_libraries_nor_the_session_path() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, *HEAVY, *SESSION_ONLY],
        capture_output=True,
        text=True,
        timeout=deadline(60),
        check=True,
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
    before = set(sys.modules)
    response = await agent.new_session(cwd=str(project))
    answered = sorted((set(sys.modules) - before) & set(sys.argv[1:]))  # what the answer itself needed
    # Live, as a request naming the session waits for (not named here: that introduces the session to the client,
    # whose usage counts tokens, and a turn's imports are not this probe's matter).
    await agent._sessions[response.session_id].ready()
    recorded = (home / "sessions" / response.session_id / "history.jsonl").is_file()
    loaded = sorted({m.split(".")[0] for m in sys.modules} & set(sys.argv[1:]))
    from codling.store.records import MessageRecord, RECORD
    from codling.store.parts import TextWire
    deferred = {
        "pin patterns": "codling.brain.context.pin_capture" not in sys.modules,
        "record validators": not (MessageRecord.__pydantic_complete__ or TextWire.__pydantic_complete__),
        "record adapter": not RECORD.pydantic_complete,
    }
    from codling.store.parts import Part
    from codling.store.records import build_records
    build_records()
    models, pending = [], [Part]
    while pending:
        models.append(pending.pop())
        pending.extend(models[-1].__subclasses__())
    unbuilt = [m.__name__ for m in models if not m.__pydantic_complete__]
    unbuilt += [] if RECORD.pydantic_complete else ["RECORD"]
    print(json.dumps({"recorded": recorded, "answered with": answered, "loaded": loaded, "deferred": deferred}))
    print(json.dumps({"models": len(models), "unbuilt after build_records": unbuilt}))

asyncio.run(main())
"""


def test_session_new_needs_no_model_stack_and_defers_what_the_first_turn_needs() -> None:
    # So it answers at once while the warm-up thread imports pydantic-ai and the provider for the first prompt;
    # nor does it compile the pin patterns or build the records' validators (half its CPU when it did, issue 33
    # D7): the warm-up does, before the first turn.
    # The answer itself needs none of the session path either: it is given from the settings, and the session's
    # brain and history are made after it (their imports were most of session/new's time, issue 33 D7).
    out = subprocess.run(
        [sys.executable, "-c", SESSION_PROBE, *HEAVY, *SESSION_ONLY, "codling.store.index"],
        capture_output=True,
        text=True,
        timeout=deadline(60),
        check=True,
    )
    session, built = map(json.loads, out.stdout.splitlines())
    deferred = {"pin patterns": True, "record validators": True, "record adapter": True}
    assert session == {"recorded": True, "answered with": [], "loaded": [], "deferred": deferred}
    assert built["models"] > 20  # every part and record kind, found through Part's subclasses
    assert built["unbuilt after build_records"] == []


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


def test_a_stretch_keeps_httpxs_command_line_client_out(monkeypatch: pytest.MonkeyPatch) -> None:
    # httpx imports its CLI (rich, click, pygments: 5 MB of an idle `codling acp`) whenever they are installed and
    # treats an ImportError as their absence (issue 33 D7).
    monkeypatch.delitem(sys.modules, "httpx._main", raising=False)
    with imports_without_gc():
        pass
    assert "httpx._main" in sys.modules
    with pytest.raises(ImportError):
        importlib.import_module("httpx._main")


def test_an_imported_unused_module_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("httpx._main")
    monkeypatch.setitem(sys.modules, "httpx._main", module)
    skip_unused_modules()
    assert sys.modules["httpx._main"] is module


def test_the_c_heap_is_tuned_on_glibc() -> None:
    # One malloc arena and free pages returned after the warm-up: about 5 MB of an idle `codling acp` (issue 33 D7).
    if not sys.platform.startswith("linux") or os.confstr("CS_GNU_LIBC_VERSION") is None:
        pytest.skip("glibc only")
    assert one_malloc_arena() is True
    release_free_memory()
