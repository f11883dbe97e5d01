"""Files and terminals through the editor, where the ACP client offers them (fs/*, terminal/*)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from acp import PROTOCOL_VERSION, helpers
from acp.client.connection import ClientSideConnection
from acp.schema import ClientCapabilities, FileSystemCapabilities, ToolCallProgress, ToolCallStart
from pydantic_ai.messages import ModelRequest, ToolReturnPart

from codling.acp.client_ports import AcpFileSystem
from codling.acp.server import CodlingAgent
from codling.brain.events import Event, ToolCallStarted
from codling.config import Settings
from codling.errors import PathError
from codling.tools import reaper
from codling.tools.local import LocalFileSystem
from tests.fakes.acp_client import Arrivals, RecordingClient, connected
from tests.fakes.deadlines import deadline
from tests.fakes.editor import FakeEditor
from tests.fakes.scenarios import Call, Say, Script

MODEL_ID = "openai-chat:scripted"
EVERYTHING = ClientCapabilities(fs=FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=True)


@dataclass
class Harness:
    conn: ClientSideConnection
    client: RecordingClient
    editor: FakeEditor
    session_id: str
    agent: CodlingAgent

    async def say(self, text: str) -> str:
        response = await self.conn.prompt(session_id=self.session_id, prompt=[helpers.text_block(text)])
        return response.stop_reason


@asynccontextmanager
async def harness(
    home: Path,
    project: Path,
    script: Script,
    capabilities: ClientCapabilities | None = EVERYTHING,
    cwd: Path | None = None,
    arrivals: Arrivals | None = None,
) -> AsyncIterator[Harness]:
    settings = Settings(
        home=home, mode="yolo", titles=False, env={"CODLING_HOME": str(home), "CODLING_MODEL": MODEL_ID}
    )
    agent = CodlingAgent(settings_loader=lambda: settings, model_factory=script.factory(), warm_up=False)
    editor = FakeEditor()
    client = RecordingClient(editor=editor)
    try:
        async with connected(agent, client, arrivals) as conn:
            await conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=capabilities)
            session = await conn.new_session(cwd=str(cwd or project))
            yield Harness(conn, client, editor, session.session_id, agent)
    finally:
        await editor.close()
    assert client.problems == []


async def test_an_editor_refusal_reaches_the_model_with_its_details(home: Path, project: Path) -> None:
    script = Script([[Call("write_file", {"path": "locked.txt", "content": "new"}, "w1")], [Say("it is locked")]])
    async with harness(home, project, script) as h:
        h.editor.read_only.add(project / "locked.txt")
        assert await h.say("write it") == "end_turn"
    [result] = tool_results(script)
    assert "the editor could not write" in result
    assert "Internal error: locked.txt is read-only in this editor" in result
    assert not (project / "locked.txt").exists()


def tool_results(script: Script) -> list[str]:
    """What the model was told by each tool call, in order."""
    return [
        str(part.content)
        for request in script.requests
        for message in request[-1:]
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]


async def test_reads_see_unsaved_buffers_and_writes_go_through_the_editor(home: Path, project: Path) -> None:
    notes = project / "notes.txt"
    notes.write_text("saved text\n")
    script = Script(
        [
            [Call("read_file", {"path": "notes.txt"}, "r1")],
            [Call("edit_file", {"path": "notes.txt", "old_text": "unsaved", "new_text": "edited"}, "e1")],
            [Say("done")],
        ]
    )
    async with harness(home, project, script) as h:
        h.editor.buffers[notes] = "unsaved text\n"
        assert await h.say("look at notes.txt") == "end_turn"
    assert "unsaved text" in tool_results(script)[0]  # the editor's buffer, not the disk
    assert notes.read_text() == "edited text\n"  # the edit applied to the buffer, saved by the editor
    assert h.editor.calls == [
        ("fs/read_text_file", str(notes)),
        ("fs/read_text_file", str(notes)),
        ("fs/write_text_file", str(notes)),
    ]


async def test_a_read_the_editor_cannot_serve_gets_the_disk_s_precise_error(home: Path, project: Path) -> None:
    script = Script([[Call("read_file", {"path": "missing.txt"}, "r1")], [Say("no such file")]])
    async with harness(home, project, script) as h:
        await h.say("read missing.txt")
    assert "does not exist" in tool_results(script)[0]
    assert h.editor.methods() == ["fs/read_text_file"]


async def test_a_read_the_editor_refuses_is_not_made_from_disk_instead(home: Path, project: Path) -> None:
    (project / "secret.env").write_text("TOKEN=on-disk-only\n")
    script = Script(
        [
            [Call("read_file", {"path": "secret.env"}, "r1")],
            [Call("read_file", {"path": "missing.txt"}, "r2")],
            [Say("refused")],
        ]
    )
    async with harness(home, project, script) as h:
        h.editor.refused["fs/read_text_file"] = "secret.env is private in this editor"
        await h.say("read secret.env")
    refused, missing = tool_results(script)
    assert "on-disk-only" not in refused
    assert (
        f"the editor refused to read {project / 'secret.env'}: Internal error: secret.env is private in this "
        "editor. It was not read: the editor decides which files codling may read; ask the user for what you need "
        "from it"
    ) in refused
    assert "does not exist" in missing  # a refused read of a missing file still says precisely what is wrong


async def test_a_file_the_editor_does_not_have_is_read_from_disk(home: Path, project: Path) -> None:
    outside = project / "vendor.py"  # as Zed answers for a file outside its worktrees: resource not found
    outside.write_text("VENDORED = True\n")
    script = Script([[Call("read_file", {"path": "vendor.py"}, "r1")], [Say("read")]])
    async with harness(home, project, script) as h:
        h.editor.unknown.add(outside)
        await h.say("read vendor.py")
    assert "VENDORED = True" in tool_results(script)[0]
    assert h.editor.methods() == ["fs/read_text_file"]


async def test_a_command_runs_in_the_editor_s_terminal_shown_live(home: Path, project: Path) -> None:
    script = Script([[Call("run_command", {"command": "echo from-the-editor; exit 3"}, "c1")], [Say("it failed")]])
    async with harness(home, project, script) as h:
        await h.say("run it")
        updates = [u for u in h.client.conversation() if isinstance(u, ToolCallStart | ToolCallProgress)]
    assert [(type(u).__name__, u.status) for u in updates] == [
        ("ToolCallStart", "pending"),
        ("ToolCallProgress", "in_progress"),  # the work started
        ("ToolCallProgress", "in_progress"),  # its terminal
        ("ToolCallProgress", None),  # its title again, which Zed's terminal takes as its label
        ("ToolCallProgress", "completed"),
    ]
    # The terminal is shown while it runs; the final update leaves the content alone (the editor keeps
    # showing the released terminal, and would reject an update naming it), and says how the command ended.
    assert updates[2].content == [helpers.tool_terminal_ref("term-1")] and updates[4].content is None
    assert updates[3].title == "Run echo from-the-editor; exit 3" and updates[3].content is None
    assert updates[4].raw_output == {"status": "exit code 3", "output": "from-the-editor\n", "exitCode": 3}
    assert h.editor.calls[0] == ("terminal/create", "/bin/sh -c echo from-the-editor; exit 3")
    assert h.client.shown_terminal_labels() == ["Run echo from-the-editor; exit 3"]
    assert h.editor.methods()[-1] == "terminal/release"
    assert tool_results(script)[0].startswith("exit code 3\nfrom-the-editor")
    assert h.editor.terminals["term-1"].cwd == str(project)
    assert h.client.shown_before_release == {"term-1": True}  # never released before the user could see it


async def test_a_command_past_its_timeout_is_killed_and_released(home: Path, project: Path) -> None:
    script = Script(
        [[Call("run_command", {"command": "echo started; sleep 30", "timeout_seconds": 1}, "c1")], [Say("ok")]]
    )
    async with harness(home, project, script) as h:
        await asyncio.wait_for(h.say("run it"), 20)
    assert tool_results(script)[0].startswith("timed out after 1s, process group killed\nstarted")
    assert h.editor.methods()[-3:] == ["terminal/kill", "terminal/output", "terminal/release"]
    assert h.editor.terminals["term-1"].killed


async def test_cancelling_the_turn_kills_and_releases_the_terminal(home: Path, project: Path) -> None:
    script = Script([[Call("run_command", {"command": "sleep 30"}, "c1")], [Say("never")]])
    async with harness(home, project, script) as h:
        prompt = asyncio.create_task(h.say("run it"))
        await h.client.wait_for("tool_call_update")  # the terminal is attached: the command runs
        await h.conn.cancel(session_id=h.session_id)
        assert await asyncio.wait_for(prompt, deadline(10)) == "cancelled"
    assert h.editor.methods()[-2:] == ["terminal/kill", "terminal/release"]
    assert h.editor.terminals["term-1"].killed


async def test_replay_shows_the_command_output_as_text(home: Path, project: Path) -> None:
    script = Script([[Call("run_command", {"command": "echo remembered"}, "c1")], [Say("ok")]])
    async with harness(home, project, script) as h:
        await h.say("run it")
        live = RecordingClient()
    agent = CodlingAgent(
        settings_loader=lambda: Settings(home=home, env={"CODLING_HOME": str(home), "CODLING_MODEL": MODEL_ID}),
        model_factory=script.factory(),
        warm_up=False,
    )
    async with connected(agent, live) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        await conn.load_session(session_id=h.session_id, cwd=str(project))
    (finished,) = [u for u in live.of_kind("tool_call_update") if u.status == "completed"]
    # The terminal is gone with the connection that had it: the replay shows the output as a code block.
    assert finished.content == [helpers.tool_content(helpers.text_block("exit code 0\n\n```\nremembered\n```"))]
    assert finished.raw_output == {"status": "exit code 0", "output": "remembered\n"}


async def test_without_the_capabilities_files_and_commands_stay_local(home: Path, project: Path) -> None:
    (project / "a.txt").write_text("alpha\n")
    script = Script(
        [
            [Call("read_file", {"path": "a.txt"}, "r1"), Call("run_command", {"command": "echo local"}, "c1")],
            [Say("ok")],
        ]
    )
    async with harness(home, project, script, capabilities=None) as h:
        await h.say("go")
    assert h.editor.calls == []
    assert "alpha" in tool_results(script)[0] and "local" in tool_results(script)[1]


async def test_a_terminal_is_shown_before_it_is_released_even_when_delivery_lags(home: Path, project: Path) -> None:
    script = Script([[Call("run_command", {"command": "echo quick"}, "c1")], [Say("ok")]])
    async with harness(home, project, script) as h:

        async def lagging(event: Event) -> None:
            if isinstance(event, ToolCallStarted):  # holds back delivery of everything after it
                await asyncio.sleep(0.3)

        h.agent._sessions[h.session_id].brain.subscribe(lagging)
        await h.say("run it")
    assert h.client.shown_before_release == {"term-1": True}


async def test_cancelling_while_the_terminal_is_created_still_kills_and_releases_it(home: Path, project: Path) -> None:
    script = Script([[Call("run_command", {"command": "sleep 300"}, "c1")], [Say("never")]])
    arrivals = Arrivals()
    async with harness(home, project, script, arrivals=arrivals) as h:
        h.editor.create_gate = answer_create = asyncio.Event()
        prompt = asyncio.create_task(h.say("run it"))
        await h.editor.called("terminal/create")  # the editor has the request, and holds its answer
        await h.conn.cancel(session_id=h.session_id)
        await arrivals.received("session/cancel")  # the turn is cancelled before the create's answer arrives
        answer_create.set()  # the editor answers the create late
        assert await asyncio.wait_for(prompt, deadline(10)) == "cancelled"
        await h.editor.called("terminal/release")
    assert h.editor.methods() == ["terminal/create", "terminal/kill", "terminal/release"]
    assert h.editor.terminals["term-1"].killed


async def test_paths_reach_the_editor_as_it_named_the_project(home: Path, project: Path, tmp_path: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(project)
    (project / "a.txt").write_text("alpha\n")
    script = Script(
        [
            [Call("read_file", {"path": "a.txt"}, "r1")],
            [Call("write_file", {"path": "b.txt", "content": "b"}, "w1")],
            [Say("ok")],
        ]
    )
    async with harness(home, project, script, cwd=link) as h:
        await h.say("go")
    assert h.editor.calls == [
        ("fs/read_text_file", str(link / "a.txt")),
        ("fs/read_text_file", str(link / "b.txt")),  # write_file looks for what it replaces
        ("fs/write_text_file", str(link / "b.txt")),
    ]


async def test_an_editor_that_cannot_write_leaves_files_to_the_disk(home: Path, project: Path) -> None:
    (project / "a.txt").write_text("alpha\n")
    script = Script(
        [[Call("edit_file", {"path": "a.txt", "old_text": "alpha", "new_text": "beta"}, "e1")], [Say("ok")]]
    )
    read_only = ClientCapabilities(fs=FileSystemCapabilities(read_text_file=True), terminal=False)
    async with harness(home, project, script, capabilities=read_only) as h:
        h.editor.buffers[project / "a.txt"] = "alpha unsaved\n"
        await h.say("edit")
    # Reading the buffer but writing the disk would lose the user's unsaved text or the edit: disk for both.
    assert h.editor.calls == [] and (project / "a.txt").read_text() == "beta\n"


async def test_output_the_editor_cut_is_said_to_be_cut(home: Path, project: Path) -> None:
    script = Script([[Call("run_command", {"command": "seq 1 20000"}, "c1")], [Say("ok")]])
    async with harness(home, project, script) as h:
        h.editor.byte_limit = 1000  # an editor that keeps less than it was asked for
        await h.say("count")
    told = tool_results(script)[0]
    assert told.startswith("exit code 0\n[the editor kept only part of this command's output]\n")
    assert told.rstrip().endswith("20000")


async def test_a_delegate_asks_and_runs_its_commands_under_its_own_call(home: Path, project: Path) -> None:
    script = Script(
        [
            [Call("delegate", {"agent": "coder", "task": "Say hi"}, "d1")],
            [Call("run_command", {"command": "echo hi"}, "c1")],
            [Say("Said hi.")],
            [Say("Done.")],
        ]
    )
    async with harness(home, project, script) as h:
        await h.conn.set_session_mode(session_id=h.session_id, mode_id="ask")
        h.client.answers = ["allow_once"]
        await h.say("delegate it")
    (permission,) = h.client.permissions
    asked = permission.tool_call
    assert (asked.tool_call_id, asked.title, asked.kind) == ("d1", "Delegate to the coder: Say hi", "think")
    assert [c.content.text for c in asked.content or []] == ["coder: Run echo hi", "echo hi"]
    assert [c.tool_call_id for c in h.client.of_kind("tool_call")] == ["d1"]
    updates = [u for u in h.client.of_kind("tool_call_update") if u.tool_call_id == "d1"]
    # Its command ran in an editor terminal, which is not embedded in the card: the next step would replace it
    # (a released terminal cannot be named again). Its steps accumulate, with the command's exit status.
    # ... confined, as the session's own commands are: codling's reaper wraps the command line.
    kind, line = h.editor.calls[0]
    assert (kind, line.split()[:5], line.endswith("/bin/sh -c echo hi")) == (
        "terminal/create",
        [sys.executable, "-I", "-S", str(Path(reaper.__file__).resolve()), "terminal"],
        True,
    )
    assert all(getattr(c, "terminal_id", None) is None for u in updates for c in u.content or [])
    assert [c.content.text for c in updates[-1].content or []] == ["→ Run echo hi\n  exit code 0", "Said hi."]
    assert updates[-1].status == "completed"
    assert tool_results(script)[-1] == "Said hi."


async def test_an_editor_that_cannot_start_the_command_tells_the_model_why(home: Path, project: Path) -> None:
    script = Script([[Call("run_command", {"command": "make"}, "c1")], [Say("no shell")]])
    async with harness(home, project, script) as h:
        h.editor.refused["terminal/create"] = "no shell in this sandbox"
        assert await h.say("build") == "end_turn"
    assert tool_results(script) == [
        f"Error: the editor could not start the command in {project}: Internal error: no shell in this sandbox"
    ]
    assert h.editor.methods() == ["terminal/create"]


async def test_a_terminal_the_editor_loses_is_a_failed_command_and_is_still_released(home: Path, project: Path) -> None:
    script = Script([[Call("run_command", {"command": "sleep 30"}, "c1")], [Say("it was closed")]])
    async with harness(home, project, script) as h:
        h.editor.refused["terminal/wait_for_exit"] = "the user closed the terminal"
        assert await h.say("wait") == "end_turn"
    assert tool_results(script) == ["Error: the editor's terminal failed: Internal error: the user closed the terminal"]
    assert h.editor.methods() == ["terminal/create", "terminal/wait_for_exit", "terminal/release"]
    assert h.editor.terminals["term-1"].killed  # released while it ran: the editor stopped it


async def test_a_release_the_editor_refuses_leaves_the_command_s_result_alone(
    home: Path, project: Path, caplog: pytest.LogCaptureFixture
) -> None:
    script = Script([[Call("run_command", {"command": "echo done"}, "c1")], [Say("ok")]])
    async with harness(home, project, script) as h:
        h.editor.refused["terminal/release"] = "no such terminal"
        with caplog.at_level("INFO", logger="codling.acp.client_ports"):
            assert await h.say("run") == "end_turn"
    assert tool_results(script) == ["exit code 0\ndone\n"]
    assert h.editor.methods()[-1] == "terminal/release"
    assert "terminal clean-up failed: Internal error: no such terminal" in [r.getMessage() for r in caplog.records]


async def test_a_command_killed_by_a_signal_says_so(home: Path, project: Path) -> None:
    script = Script([[Call("run_command", {"command": "echo before; kill -9 $$"}, "c1")], [Say("killed")]])
    async with harness(home, project, script) as h:
        await h.say("run")
    assert tool_results(script) == ["stopped before it exited (no exit code)\nbefore\n\n[stopped by signal SIGKILL]"]


async def test_cancelling_while_the_command_runs_kills_and_releases_its_terminal(home: Path, project: Path) -> None:
    script = Script([[Call("run_command", {"command": "sleep 300"}, "c1")], [Say("never")]])
    async with harness(home, project, script) as h:
        prompt = asyncio.create_task(h.say("run it"))
        await h.editor.called("terminal/wait_for_exit")  # the command runs, and the agent waits for its end
        await h.conn.cancel(session_id=h.session_id)
        assert await asyncio.wait_for(prompt, deadline(10)) == "cancelled"
    assert h.editor.methods() == ["terminal/create", "terminal/wait_for_exit", "terminal/kill", "terminal/release"]
    assert h.editor.terminals["term-1"].killed


async def test_the_editor_is_not_asked_to_write_a_file_whose_directory_cannot_be_made(project: Path) -> None:
    editor = FakeEditor()
    files = AcpFileSystem(RecordingClient(editor=editor), "s1", local=LocalFileSystem())
    target = project / "README.md" / "notes.txt"  # README.md is a file
    with pytest.raises(PathError) as refused:
        await files.write_text(target, "x")
    assert str(refused.value) == f"cannot create the directory for {target}: File exists"
    assert editor.calls == []


async def test_the_editor_is_not_asked_for_the_whole_of_a_file_over_the_cap(project: Path) -> None:
    # (issue 29 D5) its buffer of a 10 GB file would be 10 GB in one JSON-RPC answer
    editor = FakeEditor()
    files = AcpFileSystem(RecordingClient(editor=editor), "s1", local=LocalFileSystem())
    target = project / "huge.log"
    with target.open("wb") as f:
        f.truncate(10 * 1024**3)
    with pytest.raises(PathError, match=r"is 10,737,418,240 bytes, more than the 8,388,608 bytes \(8 MiB\)"):
        await files.read_text(target)
    assert editor.calls == []
