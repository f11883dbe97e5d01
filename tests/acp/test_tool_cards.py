"""Tool cards as an editor shows them: running once work starts, diffs as diffs only, commands as fenced
output with their exit status, multi-file patches with every diff and a fitting title, delegates that end with
their steps, diffs and answer, user decisions left as the editor marked them, paths in the editor's form."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, helpers
from acp.schema import FileEditToolCallContent

from codling.acp.client_paths import ClientPaths
from codling.acp.server import CodlingAgent
from codling.config import Settings
from tests.fakes.acp_client import RecordingClient, connected
from tests.fakes.deadlines import deadline
from tests.fakes.scenarios import Call, Say, Script

MODEL = "openai-chat:scripted"

PATCH = """*** Begin Patch
*** Update File: src/app.py
@@ def greet():
-    return 'hello'
+    return 'hi'
*** Add File: docs/NOTES.md
+notes
*** End Patch"""


def agent(home: Path, script: Script, mode: str = "yolo") -> CodlingAgent:
    settings = Settings(home=home, mode=mode, titles=False, env={"CODLING_HOME": str(home), "CODLING_MODEL": MODEL})  # type: ignore[arg-type]
    return CodlingAgent(settings_loader=lambda: settings, model_factory=script.factory(), warm_up=False)


async def run(home: Path, cwd: Path, script: Script, prompt: str = "go", **kw: Any) -> RecordingClient:
    client = kw.pop("client", None) or RecordingClient()
    async with connected(agent(home, script, **kw), client) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        sid = (await conn.new_session(cwd=str(cwd))).session_id
        await conn.prompt(session_id=sid, prompt=[helpers.text_block(prompt)])
    return client


def card(client: RecordingClient, call_id: str) -> list[Any]:
    """The updates of one tool call, its start first."""
    return [u for _, u in client.updates if getattr(u, "tool_call_id", None) == call_id]


async def test_a_multi_file_patch_ends_with_every_diff_and_a_title_saying_what_it_did(
    home: Path, project: Path
) -> None:
    script = Script([[Call("apply_patch", {"patch": PATCH}, "p1")], [Say("Patched.")]])
    client = await run(home, project, script, mode="ask", client=RecordingClient(answers=["allow_once"] * 2))
    start, *updates, last = card(client, "p1")
    assert start.title == "Patch src/app.py, docs/NOTES.md"
    assert len(client.permissions) == 2  # one per file, each retitling the card in Zed
    assert last.status == "completed" and last.title == "Patched src/app.py and docs/NOTES.md"
    assert all(isinstance(c, FileEditToolCallContent) for c in last.content)
    assert [(c.path, c.old_text, c.new_text) for c in last.content] == [
        (str(project / "src/app.py"), "def greet():\n    return 'hello'\n", "def greet():\n    return 'hi'\n"),
        (str(project / "docs/NOTES.md"), None, "notes\n"),
    ]
    assert [u.status for u in updates] == ["in_progress", "in_progress", "in_progress"]  # started, then each "allow"


async def test_a_local_command_shows_fenced_output_and_its_exit_status(home: Path, project: Path) -> None:
    command = "printf 'one\\n```\\ntwo\\n'; exit 3"
    script = Script([[Call("run_command", {"command": command}, "c1")], [Say("It failed.")]])
    client = await run(home, project, script)
    start, running, last = card(client, "c1")
    assert start.title == f"Run {command}" and "`" not in start.title.replace(command, "")
    assert (start.status, running.status, last.status) == ("pending", "in_progress", "completed")
    # A fence longer than the output's own backtick run keeps every line as it is.
    assert [c.content.text for c in last.content] == ["exit code 3\n\n````\none\n```\ntwo\n````"]
    assert last.raw_output == {"status": "exit code 3", "output": "one\n```\ntwo\n", "exitCode": 3}


async def test_a_delegate_ends_with_its_steps_diffs_and_answer(home: Path, project: Path) -> None:
    script = Script(
        [
            [Call("delegate", {"agent": "coder", "task": "Rename the greeting"}, "d1")],
            [Call("edit_file", {"path": "src/app.py", "old_text": "'hello'", "new_text": "'hey'"}, "e1")],
            [Call("edit_file", {"path": "src/app.py", "old_text": "'hey'", "new_text": "'hi'"}, "e2")],
            [Call("run_command", {"command": "exit 1"}, "c1")],
            [Say("Renamed it; the check failed.")],
            [Say("Done.")],
        ]
    )
    client = await run(home, project, script)
    updates = card(client, "d1")
    notes = [u.content[0].content.text for u in updates if u.status == "in_progress" and u.content]
    # Each note holds every step so far: nothing a step showed vanishes at the next.
    assert all(later.startswith(earlier) for earlier, later in itertools.pairwise(notes))
    last = updates[-1]
    steps = "→ Edit src/app.py\n→ Edit src/app.py\n→ Run exit 1\n  exit code 1"
    assert [getattr(c, "path", None) or c.content.text for c in last.content] == [
        steps,
        str(project / "src/app.py"),
        "Renamed it; the check failed.",
    ]
    diff = last.content[1]  # both edits as one diff: before the first, after the last
    assert (diff.old_text, diff.new_text) == ("def greet():\n    return 'hello'\n", "def greet():\n    return 'hi'\n")


async def test_cancelled_calls_keep_the_editor_s_mark(home: Path, project: Path) -> None:
    script = Script([[Call("run_command", {"command": "sleep 30"}, "c1")], [Say("never")]])
    client = RecordingClient()
    async with connected(agent(home, script), client) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        sid = (await conn.new_session(cwd=str(project))).session_id
        prompt = asyncio.create_task(conn.prompt(session_id=sid, prompt=[helpers.text_block("go")]))
        await client.wait_for("tool_call_update")  # running
        client.cancelled()  # as Zed does when the user presses stop
        await conn.cancel(session_id=sid)
        assert (await asyncio.wait_for(prompt, deadline(10))).stop_reason == "cancelled"
    last = card(client, "c1")[-1]
    assert last.status is None and [c.content.text for c in last.content] == ["Cancelled."]
    # The fake editor (connected) checks that no later update overwrote the user's decision.


async def test_paths_are_named_as_the_editor_opened_them(home: Path, project: Path, tmp_path: Path) -> None:
    linked = tmp_path / "linked-project"
    linked.symlink_to(project)
    script = Script(
        [
            [Call("read_file", {"path": "src/app.py", "start_line": 2}, "r1")],
            [Call("edit_file", {"path": "src/app.py", "old_text": "'hello'", "new_text": "'hi'"}, "e1")],
            [Say("ok")],
        ]
    )
    client = await run(home, linked, script)
    [read] = [u for u in card(client, "r1") if u.session_update == "tool_call"]
    assert [(loc.path, loc.line) for loc in read.locations] == [(str(linked / "src/app.py"), 2)]  # 1-based, as ACP
    edited = card(client, "e1")[-1]
    assert [c.path for c in edited.content] == [str(linked / "src/app.py")]
    assert [loc.path for loc in edited.locations] == [str(linked / "src/app.py")]


def test_a_path_in_a_sibling_whose_name_extends_the_opened_directory_s_keeps_its_own_form(tmp_path: Path) -> None:
    """The editor opened tmp/ws through the link tmp/linked-ws: a path in tmp/ws-secrets is not under it."""
    ws, secrets, linked = tmp_path / "ws", tmp_path / "ws-secrets", tmp_path / "linked-ws"
    ws.mkdir()
    secrets.mkdir()
    linked.symlink_to(ws)
    for directories in ([str(linked)], [str(linked), str(secrets)]):
        paths = ClientPaths(directories)
        assert [paths(p) for p in (ws / "a.py", ws, secrets / "key.txt", secrets)] == [
            str(linked / "a.py"),
            str(linked),
            str(secrets / "key.txt"),
            str(secrets),
        ]


async def test_a_plan_is_shown_as_the_plan_with_no_update_for_a_call_the_editor_never_saw(
    home: Path, project: Path
) -> None:
    steps = [{"step": "Read app.py", "status": "in_progress"}, {"step": "Fix it", "status": "pending"}]
    script = Script([[Call("update_plan", {"steps": steps}, "p1")], [Say("Planned.")]])
    client = await run(home, project, script)
    (plan,) = client.of_kind("plan")
    assert [(e.content, e.status) for e in plan.entries] == [("Read app.py", "in_progress"), ("Fix it", "pending")]
    # Zed shows an update for an id it never saw start as a red "Tool call not found" card.
    assert card(client, "p1") == []


async def test_a_replay_settles_the_calls_the_user_rejected_or_cancelled(home: Path, project: Path) -> None:
    script = Script(
        [
            [Call("run_command", {"command": "make deploy"}, "r1")],
            [Say("OK, I won't.")],
            [Call("run_command", {"command": "sleep 30"}, "c1")],
            [Say("never")],
        ]
    )
    live = RecordingClient(answers=["reject", "allow_once"])
    async with connected(agent(home, script, mode="ask"), live) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        sid = (await conn.new_session(cwd=str(project))).session_id
        await conn.prompt(session_id=sid, prompt=[helpers.text_block("deploy")])
        prompt = asyncio.create_task(conn.prompt(session_id=sid, prompt=[helpers.text_block("wait")]))
        await live.wait_for("tool_call_update", count=4)  # the second call allowed and running
        live.cancelled()
        await conn.cancel(session_id=sid)
        assert (await asyncio.wait_for(prompt, deadline(10))).stop_reason == "cancelled"
    assert live.statuses == {"r1": "rejected", "c1": "cancelled"}
    replayed = RecordingClient()
    async with connected(agent(home, Script([])), replayed) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        await conn.load_session(cwd=str(project), session_id=sid)
    # No editor marks them this time: without a final status Zed would show them pending forever.
    for call_id, note in (("r1", "Rejected."), ("c1", "Cancelled.")):
        last = card(replayed, call_id)[-1]
        assert (last.status, [c.content.text for c in last.content]) == ("failed", [note])
    # The fake editor (connected) checks every replayed call settles.
