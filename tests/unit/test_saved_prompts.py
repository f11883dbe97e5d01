"""A prompt too long for the window is cut, and saved whole in the session's folder for the model to read:
its middle is not just lost (issue 28)."""

from __future__ import annotations

from pathlib import Path

from codling.config import Settings
from codling.llm.catalog import ModelInfo
from codling.store.header import SessionHeader
from codling.store.ids import new_session_id
from codling.store.index import SessionStore
from codling.store.live import start_session
from tests.fakes.scenarios import Call, Say, Script

MODEL = ModelInfo("test:small", context_limit=8_000, max_output_tokens=1_000)
MIDDLE = "MIDDLE-MARKER: the failing job is shard 7 of 12"


def pasted() -> str:
    filler = "\n".join(f"2026-11-25T10:00:{i % 60:02} INFO step {i} ok" for i in range(2_000))
    return f"What broke here?\n{filler}\n{MIDDLE}\n{filler}\nEND-MARKER"


async def test_a_cut_prompt_is_saved_whole_read_back_by_the_model_restored_and_forked(
    project: Path, settings: Settings
) -> None:
    store = SessionStore(settings.home)
    header = SessionHeader(new_session_id(), project, MODEL.id, "yolo")
    saved = store.prompts_dir(header.session_id) / "turn-1.txt"
    script = Script(
        [[Call("search", {"pattern": "MIDDLE-MARKER", "path": str(saved)}, "s1")], [Say("Shard 7 of 12 failed.")]]
    )
    live = start_session(store, settings, MODEL, header, approver=None, model_factory=script.factory())
    result = await live.brain.run(pasted())
    await live.close()

    # The model got the head and the tail, a note naming the file, and could search the file for the middle.
    asked = live.brain.state.entries[0].text
    assert MIDDLE not in asked and asked.startswith("What broke here?") and asked.endswith("END-MARKER")
    assert f"the whole message is saved in {saved}: read or search it for the rest" in asked
    assert saved.read_text() == pasted()
    (call,) = result.tool_calls
    assert call.finished is not None and call.finished.status == "completed" and MIDDLE in call.finished.text

    # A restored session reads the same prompt; a fork gets its own copy of the file.
    restored = start_session(
        store, settings, MODEL, header, store.read(header.session_id), approver=None, model_factory=script.factory()
    )
    assert restored.brain.state.entries[0].text == asked
    await restored.close()
    fork_id = new_session_id()
    store.fork(header.session_id, fork_id)
    assert (store.prompts_dir(fork_id) / "turn-1.txt").read_text() == pasted()
