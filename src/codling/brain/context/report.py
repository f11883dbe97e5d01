"""``/context``: what the next request holds, part by part, with the share of the window each part takes.

The parts are counted the way ``ContextEngine`` counts the request (``context_used``): the system prompt and
the context block as JSON strings (``count_wire_tokens``), the tool definitions from their JSON, the history
from its entries' counts. A part is split into smaller parts by counting each of those and giving what is
left (quotes, seams, the message's own overhead, codling's headings) to the part codling wrote, so the rows
always add up to the engine's own estimate.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from codling.brain.context import tools
from codling.brain.context.budget import Budget
from codling.brain.context.digests import display_path
from codling.brain.context.engine import ContextEngine, EngineOwner
from codling.brain.context.layout import RECENT_FILES
from codling.brain.prompt import (
    INSTRUCTIONS_TOTAL_MAX_BYTES,
    InstructionFile,
    find_project_instructions,
    instructions_section,
)
from codling.llm.tokens import count_tokens, count_wire_tokens

if TYPE_CHECKING:
    from codling.brain.state import HistoryEntry

_INSTRUCTIONS_HEADING = "\n\n# Project instructions ("
_ENVIRONMENT_HEADING = "\n\n# Environment\n"


@dataclass(frozen=True)
class ContextRow:
    """One row of the report: what it counts and its tokens; ``part`` marks a part of the group row above it
    (the parts of a group add up to it, the groups to the total)."""

    label: str
    tokens: int
    part: bool = False


@dataclass(frozen=True)
class ContextReport:
    """What the next request holds (``rows``), codling's count of it (``estimate``: what the rows add up to),
    the provider's count of the latest request (``reported``, 0: none) and the model's budgets."""

    model: str
    rows: tuple[ContextRow, ...]
    estimate: int
    reported: int
    budget: Budget
    notes: tuple[str, ...] = ()

    @property
    def used(self) -> int:
        """What the context counts as (``ContextEngine.context_used``): the larger of the two counts."""
        return max(self.estimate, self.reported)


def context_report(session: EngineOwner) -> ContextReport:
    """The parts of the next request of ``session`` with their tokens (see the module's docstring)."""
    # A fresh engine counts exactly as the session's own (the counts are pure functions of the session), and
    # the report needs nothing of the session but its protocol.
    engine = ContextEngine(session)
    state = session.state
    system, notes = _system_rows(session, engine.system_tokens())
    block = engine.turn_block()
    rows = (
        *system,
        *_tool_rows(session, engine),
        *_history_rows(state.entries, state.history_tokens),
        *_block_rows(session, block, count_wire_tokens(block) if block else 0),
    )
    estimate = sum(row.tokens for row in rows if not row.part)
    return ContextReport(state.model.id, rows, estimate, state.reported_input_tokens, engine.budget, tuple(notes))


def describe_context(session: EngineOwner) -> str:
    """/context's answer: the report as a markdown table (aligned, so it reads as plain text too), the
    budgets below the total, and notes (instruction files left out, the provider's larger count)."""
    return render_report(context_report(session))


def render_report(report: ContextReport) -> str:
    """``report`` as /context shows it (see ``describe_context``)."""
    budget = report.budget
    window = budget.window
    used = report.used
    table: list[tuple[str, int]] = [(f"· {r.label}" if r.part else r.label, r.tokens) for r in report.rows]
    table.append(("Total (codling's count)", report.estimate))
    if report.reported > report.estimate:
        table.append(("Provider's count of the latest request and reply (used)", report.reported))
    table += [
        (f"Compaction point ({budget.threshold:.0%} of the input limit)", budget.compact_at),
        ("Free before compaction", max(0, budget.compact_at - used)),
        (
            f"Input limit (window - {budget.reserved_output:,} for the answer - "
            f"{window - budget.reserved_output - budget.input_limit:,} margin)",
            budget.input_limit,
        ),
        ("Free before the input limit", max(0, budget.input_limit - used)),
        (f"Window of {report.model}", window),
    ]
    cells = [(label, f"{tokens:,}", f"{tokens / window:.1%}" if window else "-") for label, tokens in table]
    header = ("Part", "Tokens", "Window")
    widths = [max(len(row[i]) for row in (header, *cells)) for i in range(3)]

    def line(row: tuple[str, str, str]) -> str:
        return f"| {row[0].ljust(widths[0])} | {row[1].rjust(widths[1])} | {row[2].rjust(widths[2])} |"

    rule = f"|{'-' * (widths[0] + 2)}|{'-' * (widths[1] + 1)}:|{'-' * (widths[2] + 1)}:|"
    lines = [
        f"What the next request holds: {used:,} of {window:,} tokens ({used / window if window else 0:.1%}).",
        "",
        line(header),
        rule,
        *(line(cell) for cell in cells),
    ]
    if report.notes:
        lines += ["", *report.notes]
    return "\n".join(lines)


def _carried(text: str) -> int:
    """``text``'s tokens as a part of a longer JSON string: escaped as the request carries it, no quotes."""
    return count_tokens(json.dumps(text, ensure_ascii=False)[1:-1]) if text else 0


def _group(label: str, total: int, parts: Sequence[tuple[str, int | None]]) -> list[ContextRow]:
    """A group row and its parts; a part without tokens (None) is what the others leave of ``total``."""
    rest = total - sum(tokens or 0 for _, tokens in parts)
    return [
        ContextRow(label, total),
        *(ContextRow(name, rest if tokens is None else tokens, part=True) for name, tokens in parts),
    ]


def _system_rows(session: EngineOwner, total: int) -> tuple[list[ContextRow], list[str]]:
    """The system prompt: the instruction files (each), the environment block, a delegate's role, and what
    is left: codling's own prompt (its headings, the message's overhead)."""
    text = session.models.instructions()
    state = session.state
    parts: list[tuple[str, int | None]] = []
    notes: list[str] = []
    role = (session.options.role_instructions or "").strip()
    if role and text.endswith(f"\n{role}\n"):
        text = text[: -len(role) - 2]
        parts.append(("Role instructions", _carried(role)))
    environment = text.rfind(_ENVIRONMENT_HEADING)
    if environment >= 0:
        parts.insert(0, ("Environment", _carried(text[environment + 2 :].rstrip("\n"))))
    else:
        environment = len(text)
    start = text.find(_INSTRUCTIONS_HEADING)
    if 0 <= start < environment:
        shown = text[start + 2 : environment]
        instructions = find_project_instructions(state.cwd)
        if instructions_section(instructions) == shown:
            files = [
                (_file_label(f, state.cwd), _carried(f"## {f.path}\n\n{f.text.strip()}")) for f in instructions.files
            ]
            parts[:0] = files
            if instructions.left_out:
                left = ", ".join(_file_label(f, state.cwd) for f in instructions.left_out)
                notes.append(
                    f"Instruction files left out (all of them together may take "
                    f"{INSTRUCTIONS_TOTAL_MAX_BYTES:,} bytes, the nearest kept first): {left}."
                )
        else:  # the system prompt is built once per session; the files changed on disk since
            parts.insert(0, ("Instruction files (as the session started)", _carried(shown)))
            notes.append("The instruction files changed since the session started: a new session reads them again.")
    return _group("System prompt", total, [("codling's own prompt", None), *parts]), notes


def _file_label(file: InstructionFile, cwd: Path) -> str:
    """A project's file relative to the cwd when inside it; the user's own under ``~`` when there."""
    if not file.user:
        return display_path(file.path, cwd)
    shown = str(file.path)
    try:
        if file.path.is_relative_to(home := Path.home()):
            shown = f"~/{file.path.relative_to(home).as_posix()}"
    except RuntimeError:  # no home directory to speak of
        pass
    return f"{shown} (yours)"


def _tool_rows(session: EngineOwner, engine: ContextEngine) -> list[ContextRow]:
    """The tool definitions a user turn offers: codling's own tools, and the MCP servers' (counted as what the
    engine counts beyond codling's own)."""
    options = session.options
    total = engine.tool_tokens()
    if not options.run_tools:
        return [ContextRow("Tool definitions (this session offers none)", 0)]
    defs = tools.offered_definitions(options.tool_names, delegates=options.delegates, lean=engine.lean)
    own = tools.definitions_tokens(defs)
    lean = ", lean: a small window" if engine.lean else ""
    parts: list[tuple[str, int | None]] = [(f"codling's tools ({len(defs)}{lean})", own)]
    mcp = session.deps.mcp
    if mcp is not None and options.tool_names is None:
        offered = mcp.tools()  # only ready servers' tools are offered (and counted)
        ready, count = sum(1 for server in mcp.servers if server.status == "ready"), len(mcp.servers)
        where = f"{ready} of {count} servers ready" if ready < count else f"{count} server{'' if count == 1 else 's'}"
        parts.append((f"MCP tools ({len(offered)}, {where})", None))
    return _group("Tool definitions", total, parts)


def _history_rows(entries: Sequence[HistoryEntry], total: int) -> list[ContextRow]:
    """The history: the prompts the latest compaction kept and its summary (when there was one), then the
    prompts and replies since, and the session context notes those prompts carry."""
    if not entries:
        return [ContextRow("History (no messages yet)", total)]
    summary = next((i for i, e in enumerate(entries) if e.role == "summary"), None)
    parts: list[tuple[str, int | None]] = []
    rest = entries
    since = ""
    if summary is not None:
        # A compaction rebuilds the history as the prompts it keeps, then its summary (compaction.rebuild).
        kept = entries[:summary]
        parts += [
            (f"Prompts kept by compaction ({len(kept)})", sum(e.tokens for e in kept)),
            ("Compaction summary", entries[summary].tokens),
        ]
        rest = entries[summary + 1 :]
        since = " since"
    prompts = [e for e in rest if e.role == "user"]
    replies = [e for e in rest if e.role != "user"]
    notes = [_carried(e.context) for e in prompts if e.context]
    parts += [
        (f"Prompts{since} ({len(prompts)})", sum(e.tokens for e in prompts) - sum(notes)),
        (f"Session context notes in them ({len(notes)})", sum(notes)),
        (f"Replies{since} ({len(replies)})", sum(e.tokens for e in replies)),
    ]
    return _group(f"History ({len(entries)} messages)", total, parts)


def _block_rows(session: EngineOwner, block: str, total: int) -> list[ContextRow]:
    """The context block the next prompt carries: what the notes in the history do not say yet (see
    ``layout.py``) of the pins and facts and the recently edited files; what is left is the block's own text
    (its tags, the note that codling wrote it, the date)."""
    if not block:
        return [ContextRow("Session context (the notes in the history say it all)", 0)]
    lines = block.splitlines()
    pins = [line for line in lines if line.startswith("- ")]
    said = [line for line in lines if line.startswith(("- ", "# "))]
    files = [line for line in lines if line.startswith(RECENT_FILES)]
    parts: list[tuple[str, int | None]] = []
    if said:
        parts.append((f"Pins and facts ({len(pins)} new of {len(session.state.pins)})", _carried("\n".join(said))))
    if files:
        parts.append(("Recently edited files", _carried(files[0])))
    label = "Session context (new with the next prompt)"
    return _group(label, total, [*parts, ("Its frame, note and date", None)]) if parts else [ContextRow(label, total)]
