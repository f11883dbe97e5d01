"""Context over ACP: usage updates, the /compact command, compaction shown as a tool call, and compacted
sessions surviving load and resume."""

from __future__ import annotations

import json
from pathlib import Path

from acp import PROTOCOL_VERSION, helpers
from pydantic_ai.messages import ModelMessage, UserPromptPart

from codling.acp.server import CodlingAgent
from codling.brain.context import compaction
from codling.brain.state import SUMMARY_PREFIX
from codling.config import Settings
from tests.fakes.acp_client import RecordingClient, connected
from tests.fakes.scenarios import Say, Script, user_prompt
from tests.fakes.summarizer import is_summary_request

MODEL_ID = "openai-chat:small-scripted"
SUMMARY = "## Goal\nA parser.\n## User constraints and preferences\nThe user's lucky number is 42."


def small_model_home(home: Path) -> Settings:
    (home / "models.json").write_text(
        json.dumps({"models": {MODEL_ID: {"context_limit": 8000, "max_output_tokens": 1000}}})
    )
    return Settings(home=home, mode="yolo", env={"CODLING_HOME": str(home), "CODLING_MODEL": MODEL_ID})


def respond(messages: list[ModelMessage]) -> list[Say]:
    if is_summary_request(messages):
        return [Say(SUMMARY)]
    return [Say("ok")]


def user_texts(messages: list[ModelMessage]) -> list[str]:
    return [str(p.content) for m in messages for p in m.parts if isinstance(p, UserPromptPart)]


async def test_usage_commands_and_compaction_are_visible_and_survive_load(home: Path, project: Path) -> None:
    settings = small_model_home(home)
    script = Script([], fallback=respond)
    agent = CodlingAgent(settings_loader=lambda: settings, model_factory=script.factory(), warm_up=False)
    client = RecordingClient()
    async with connected(agent, client) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        session = await conn.new_session(cwd=str(project))
        sid = session.session_id
        await client.wait_for("available_commands_update")
        (commands,) = client.of_kind("available_commands_update")
        assert [(c.name, c.input is not None) for c in commands.available_commands] == [
            ("compact", True),
            ("init", False),
            ("model", True),
            ("mode", True),
            ("usage", False),
            ("context", False),
            ("pin", True),
            ("pins", False),
            ("unpin", True),
            ("undo", False),
            ("rewind", True),
            ("permissions", True),
            ("help", False),
        ]
        await conn.prompt(session_id=sid, prompt=[helpers.text_block("My lucky number is 42.")])
        # At session/new (sent again once the client named the session: it may have dropped the first), and
        # after the turn.
        introduced, again, usage = client.of_kind("usage_update")
        assert introduced == again and introduced.used < usage.used
        assert usage.size == 8000 and 0 < usage.used < 8000
        for i in range(6):
            await conn.prompt(session_id=sid, prompt=[helpers.text_block(f"part {i}: " + "context " * 900)])
        titles = [u.title for u in client.of_kind("tool_call_update") if u.title]
        assert titles and titles[0].startswith("Compacted context: ")
        before, after = (
            int(n.replace(",", ""))
            for n in titles[0].removeprefix("Compacted context: ").removesuffix(" tokens").split(" → ")
        )
        assert after < before
        starts = [u for u in client.of_kind("tool_call") if u.title.startswith("Compacting context")]
        assert starts and starts[0].kind == "think"
        await conn.prompt(session_id=sid, prompt=[helpers.text_block("/compact keep the number")])
        assert "keep the number" in user_texts(script.requests[-1])[-1]
        # Through the summarize special turn, laid out as the user turns' requests (a prefix cache serves it):
        # their instructions and tools, switched off; the history, then the summary request.
        turn, summarize = script.infos[-2:]
        assert script.tools[-1] == script.tools[-2] and summarize.instructions == turn.instructions
        assert (summarize.model_settings or {}).get("tool_choice") == "none"
        assert user_texts(script.requests[-1])[-1].startswith(compaction.compaction_prompt())
        assert all(SUMMARY not in u.content.text for u in client.of_kind("agent_message_chunk"))  # not a message

    records = [json.loads(line) for line in (home / "sessions" / sid / "history.jsonl").read_text().splitlines()]
    compactions = [r for r in records if r["kind"] == "compaction"]
    assert len(compactions) >= 2 and compactions[-1]["reason"] == "command"
    # Every turn's recap is persisted with it; the /compact command turn has none.
    starts = [r for r in records if r["kind"] == "turn_start"]
    ends = [r for r in records if r["kind"] == "turn_end"]
    assert len(starts) == len(ends) == 8
    for start, end in zip(starts, ends, strict=True):
        prompt = start["prompt"][0]["text"]
        if prompt.startswith("/compact"):
            assert end["summary"] is None
        else:
            assert end["summary"]["request"].startswith(prompt[:20])

    for method in ("load", "resume"):
        later = Script([[Say("42")]])
        fresh = CodlingAgent(settings_loader=lambda: settings, model_factory=later.factory(), warm_up=False)
        replay_client = RecordingClient()
        async with connected(fresh, replay_client) as conn:
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            if method == "load":
                await conn.load_session(cwd=str(project), session_id=sid)
                replayed = [u.title for u in replay_client.of_kind("tool_call_update") if u.title]
                assert any(t.startswith("Compacted context") for t in replayed)
            else:
                await conn.resume_session(session_id=sid, cwd=str(project))
            # How full the restored context is, right away (a replay itself carries no usage).
            await replay_client.wait_for("usage_update")
            (restored_usage,) = replay_client.of_kind("usage_update")
            assert restored_usage.size == 8000 and 0 < restored_usage.used <= 8000
            await conn.prompt(session_id=sid, prompt=[helpers.text_block("what is my lucky number?")])
        texts = user_texts(later.requests[0])
        summaries = [t for t in texts if SUMMARY_PREFIX in t]
        assert len(summaries) == 1 and "lucky number is 42" in summaries[0]
        assert user_prompt(texts[-1]) == "what is my lucky number?"
        assert not any(t.startswith("part 0") for t in texts)  # compacted away
