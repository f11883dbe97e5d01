"""The tools as one pydantic-ai toolset: their code (the tool modules) joined with their descriptors
(``tools/specs.py``).

Every result the toolset returns is a :class:`pydantic_ai.messages.ToolReturn` whose ``return_value`` is the
text for the model and whose ``metadata`` is a :class:`~codling.tools.base.ToolReport` (diff, locations,
error) for the user interface. pydantic-ai copies it to ``ToolReturnPart.metadata``, which observers see on
``FunctionToolResultEvent.part.metadata`` and which is never sent to the model.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from functools import cache
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.messages import BinaryContent, ToolReturn
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset, WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool

from codling.errors import RejectedError, ToolError
from codling.llm.tokens import count_tokens, tail_tokens, truncate_to_tokens
from codling.text import counted_omission, omission_note
from codling.tools.base import ToolOutput, ToolReport
from codling.tools.delegate import delegate
from codling.tools.deps import ToolDeps
from codling.tools.files import edit_file, read_file, write_file
from codling.tools.patch import apply_patch
from codling.tools.plan import update_plan
from codling.tools.ports import DELEGATE_TOOL
from codling.tools.search import list_files, search
from codling.tools.shell import run_command
from codling.tools.specs import TOOLS


class ReportingToolset(WrapperToolset[ToolDeps]):
    """Turns tool outputs and tool errors into ``ToolReturn`` values carrying a :class:`ToolReport`.

    A :class:`~codling.errors.ToolError` becomes an ordinary result whose text starts with ``Error:``, so the
    model reads the message and the run goes on without using up pydantic-ai's retries. Any other exception
    (and cancellation) propagates.
    """

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[ToolDeps], tool: ToolsetTool[ToolDeps]
    ) -> Any:
        """Run the wrapped tool (after a checkpoint of the workspace, if it may change files) and wrap its
        output (or its :class:`ToolError`) for the model and the UI."""
        keeper = ctx.deps.checkpoints
        checkpoint = await keeper.mark() if keeper is not None and name in _CHANGING else None
        ctx.deps.progress.running(ctx.tool_call_id or "")
        try:
            result = await self.wrapped.call_tool(name, tool_args, ctx, tool)
        except ToolError as e:
            ctx.deps.permissions.approved_by(ctx.tool_call_id or "")
            message = valid_text(str(e))
            text = await _off_the_loop(capped_error, f"Error: {message}", ctx.deps.output_tokens)
            report = ToolReport(None, error=message, rejected=isinstance(e, RejectedError), checkpoint=checkpoint)
            return ToolReturn(return_value=text, metadata=report)
        approved = ctx.deps.permissions.approved_by(ctx.tool_call_id or "")
        if isinstance(result, ToolOutput):
            text = await _off_the_loop(capped, valid_text(result.text), ctx.deps.output_tokens)
            output = replace(result, text=text, summary=valid_text(result.summary))
            if output.images:  # sent in the tool's result, after the text that names them
                images = [BinaryContent(image.data, media_type=image.mime_type) for image in output.images]
                report = ToolReport(replace(output, images=()), checkpoint=checkpoint, approved_by=approved)
                return ToolReturn(return_value=[output.text, *images], metadata=report)
            report = ToolReport(output, checkpoint=checkpoint, approved_by=approved)
            return ToolReturn(return_value=output.text, metadata=report)
        return result


_CHANGING = frozenset(spec.name for spec in TOOLS if not spec.read_only)
"""The tools whose calls may change files: each is preceded by a checkpoint (``ToolDeps.checkpoints``)."""


LARGE_TEXT_CHARS = 65_536
"""A result longer than this is capped in a thread: counting and cutting it takes tens of milliseconds (an MCP
server's 10 MB answer), which other sessions' requests and a cancel should not wait for (issue 29 D1)."""


async def _off_the_loop(cap: Callable[[str, int], str], text: str, max_tokens: int) -> str:
    if len(text) <= LARGE_TEXT_CHARS:
        return cap(text, max_tokens)
    return await asyncio.to_thread(cap, text, max_tokens)


def capped(text: str, max_tokens: int) -> str:
    """``text`` within ``max_tokens`` tokens: whole, or its head and tail around a note that names the cap and
    how to see the rest."""
    if len(text) <= max_tokens:  # a token is at least one character
        return text
    tokens = count_tokens(text)
    if tokens <= max_tokens:
        return text

    def note(omitted: str) -> str:
        return (
            f"\n[… about {tokens - max_tokens:,} tokens cut here ({omitted}): a tool result may hold at most "
            f"{max_tokens:,} tokens with this model. Read a line range, search for something narrower, or filter the "
            "command's output (| tail -n 50, | grep …) to see the rest …]\n"
        )

    # Room is measured with the largest counts the note could carry, so the real one fits too.
    room = max(0, max_tokens - count_tokens(note(counted_omission(len(text), text.count("\n")))))
    head, tail = truncate_to_tokens(text, room // 2), tail_tokens(text, room - room // 2)
    # (Token boundaries may not fall on characters: then the count is of the text between the kept lengths.)
    removed = text[len(head) : len(text) - len(tail)] if len(head) + len(tail) <= len(text) else ""
    return head + note(omission_note(removed)) + tail


def capped_error(text: str, max_tokens: int) -> str:
    """An error message within ``max_tokens`` tokens, but never cut inside its first line (which says what
    went wrong): the rest is cut like any result, in the room the first line leaves."""
    first, newline, rest = text.partition("\n")
    if not newline or len(text) <= max_tokens or count_tokens(text) <= max_tokens:
        return text
    room = max_tokens - count_tokens(first) - 1
    if room <= _MIN_ERROR_REST_TOKENS:
        return first
    return f"{first}\n{capped(rest, room)}"


_IMPLEMENTATIONS = (
    read_file,
    list_files,
    search,
    update_plan,
    delegate,
    edit_file,
    write_file,
    apply_patch,
    run_command,
)
"""The tools' code; each function's name is its descriptor's (``build_toolset`` orders them as ``TOOLS`` does)."""

_MIN_ERROR_REST_TOKENS = 100
"""Below this, an error's first line comes back alone: a cut note would take most of the room."""


def valid_text(text: str) -> str:
    """``text`` as valid Unicode: a file name that is not UTF-8 reaches Python as lone surrogates, which
    neither JSON-RPC clients nor history.jsonl accept; they become U+FFFD."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


@cache
def build_toolset() -> AbstractToolset[ToolDeps]:
    """The tools (see :data:`~codling.tools.specs.TOOLS`) as one toolset for an agent whose deps are
    :class:`ToolDeps`.

    Built once per process and shared by every session, delegate and special turn: it holds no state (each
    call brings its deps), and generating the tools' schemas takes ~50 ms, which each new session would pay."""
    return ReportingToolset(_functions())


def _functions() -> FunctionToolset[ToolDeps]:
    code = {function.__name__: function for function in _IMPLEMENTATIONS}
    functions = FunctionToolset[ToolDeps](docstring_format="google", require_parameter_descriptions=True)
    for spec in TOOLS:
        prepare = _when_delegating if spec.name == DELEGATE_TOOL else None
        functions.add_function(code[spec.name], prepare=prepare, sequential=spec.sequential)
    return functions


async def _when_delegating(ctx: RunContext[ToolDeps], tool_def: Any) -> Any:
    """Offer ``delegate`` only where delegating is allowed (not inside a delegate)."""
    return tool_def if ctx.deps.delegator is not None else None
