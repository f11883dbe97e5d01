"""The editor's terminal runs commands without the agent's secrets, and stops what they started in new sessions."""

from __future__ import annotations

import os
from pathlib import Path

from acp import PROTOCOL_VERSION, helpers
from acp.schema import ClientCapabilities, FileSystemCapabilities
from pydantic_ai.messages import ModelRequest, ToolReturnPart

from codling.acp.server import CodlingAgent
from codling.config import Settings
from codling.vocabulary import PermissionMode
from tests.fakes.acp_client import RecordingClient, connected
from tests.fakes.editor import FakeEditor
from tests.fakes.processes import alive, gone
from tests.fakes.scenarios import Call, Say, Script

MODEL_ID = "openai-chat:scripted"
EVERYTHING = ClientCapabilities(fs=FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=True)
SECRETS = {
    "OPENAI_API_KEY": "sk-openai-0123456789",
    "ANTHROPIC_API_KEY": "sk-ant-0123456789",
    "GITHUB_TOKEN": "ghp_github0123456789",
    "DB_PASS": "db-pass-0123456789",
    "MY_SECRET": "my-secret-0123456789",
}


async def run_in_editor(
    home: Path,
    project: Path,
    command: str,
    allow: tuple[str, ...] = (),
    labels: list[str] | None = None,
    mode: PermissionMode = "yolo",
) -> tuple[str, Path]:
    """Run ``command`` through run_command in the fake editor's terminal, whose environment (like the agent's)
    holds the secrets; return what the model was told and the session's history file (and put the terminals'
    labels, as Zed shows them, in ``labels``)."""
    script = Script([[Call("run_command", {"command": command}, "c1")], [Say("done")]])
    env = {"CODLING_HOME": str(home), "CODLING_MODEL": MODEL_ID, **SECRETS}
    settings = Settings(home=home, mode=mode, titles=False, command_env_allow=allow, env=env)
    agent = CodlingAgent(settings_loader=lambda: settings, model_factory=script.factory(), warm_up=False)
    editor = FakeEditor(environment={**os.environ, **SECRETS})
    client = RecordingClient(editor=editor)
    try:
        async with connected(agent, client) as conn:
            await conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=EVERYTHING)
            session = await conn.new_session(cwd=str(project))
            await conn.prompt(session_id=session.session_id, prompt=[helpers.text_block("run it")])
    finally:
        await editor.close()
    assert client.problems == []
    assert editor.calls[0][0] == "terminal/create"
    if labels is not None:
        labels.extend(client.shown_terminal_labels())
    results = [
        str(part.content)
        for request in script.requests
        for message in request[-1:]
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]
    return results[0], home / "sessions" / session.session_id / "history.jsonl"


def _shown(output: str) -> list[str]:
    return [name for name, value in SECRETS.items() if value in output]


async def test_the_editor_s_terminal_runs_commands_without_secrets(home: Path, project: Path) -> None:
    output, history = await run_in_editor(home, project, "env")
    assert _shown(output) == []
    assert f"PATH={os.environ['PATH']}\n" in output and f"HOME={os.environ['HOME']}\n" in output
    assert "CODLING_COMMAND_ID=" in output
    assert _shown(history.read_text()) == []


async def test_a_terminal_card_is_labelled_with_the_command_not_the_wrapper_hiding_secrets(
    home: Path, project: Path
) -> None:
    labels: list[str] = []
    output, _ = await run_in_editor(home, project, "env", labels=labels)
    assert _shown(output) == []  # the wrapper still keeps the secrets out of the command's environment
    # Zed labels a terminal by the program and arguments it ran ("env -u OPENAI_API_KEY … /bin/sh -c env"),
    # naming every secret variable, until a later title of its call relabels it.
    assert labels == ["Run env"]


async def test_an_allowed_secret_reaches_the_command_but_not_the_history(home: Path, project: Path) -> None:
    output, history = await run_in_editor(home, project, "env", allow=("GITHUB_TOKEN",))
    assert _shown(output) == ["GITHUB_TOKEN"]
    text = history.read_text()
    assert _shown(text) == [] and "GITHUB_TOKEN=[redacted]" in text


async def stray_goes_with_its_command(home: Path, project: Path, starter: str, mode: PermissionMode) -> None:
    """Run, in the editor's terminal, a command that leaves a process started by ``starter``; it must go."""
    started = f"{starter} sh -c 'echo $$ > stray.pid; exec sleep 300' >/dev/null 2>&1 &"
    command = f"{started}\nuntil [ -s stray.pid ]; do sleep 0.01; done"  # the command waits for its stray to start
    output, _ = await run_in_editor(home, project, command, mode=mode)
    assert output.startswith("exit code 0")
    pid = int((project / "stray.pid").read_text())
    try:
        assert await gone(pid)
    finally:
        if alive(pid):
            os.kill(pid, 9)


async def test_what_a_command_started_in_a_new_session_goes_with_it(home: Path, project: Path) -> None:
    await stray_goes_with_its_command(home, project, "setsid", "yolo")


async def test_a_confined_command_s_daemon_that_sheds_every_mark_still_goes_with_it(home: Path, project: Path) -> None:
    # No CODLING_COMMAND_ID (env -i), a session of its own: only the reaper the command runs under can find it.
    await stray_goes_with_its_command(home, project, "setsid env -i", "auto")


async def test_the_editor_s_terminal_output_reaches_the_model_plain(home: Path, project: Path) -> None:
    # The editor's terminal is a real terminal: programs colour their output and draw progress bars there.
    # The command is asked for plain output, and what it prints anyway is cleaned before the model reads it.
    command = (
        "echo \"$NO_COLOR $TERM $PAGER $GIT_PAGER\"; printf '\\033[31m1 failed\\033[0m\\n'; "
        "printf 'get 10%%\\rget 100%%\\n'"
    )
    told, _ = await run_in_editor(home, project, command)
    assert told == "exit code 0\n1 dumb cat cat\n1 failed\nget 100%\n"
