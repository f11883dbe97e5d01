"""Brain events → ACP ``session/update`` payloads: a pure function per event kind."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, assert_never

from acp import helpers
from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    AgentThoughtChunk,
    ContentToolCallContent,
    Cost,
    FileEditToolCallContent,
    ToolCallLocation,
    ToolCallProgress,
    ToolCallStart,
    UsageUpdate,
    UserMessageChunk,
)
from acp.schema import Usage as PromptUsage

from codling.acp.newer import ClientExtras, CompactionStatus, CompactionUpdate, NewerUpdate
from codling.acp.notices import NOTICED, compaction_update, notice
from codling.brain.context import compaction
from codling.brain.events import (
    CompactionStarted,
    ContextCompacted,
    ContextWarning,
    Event,
    McpServerNotice,
    McpServersStarting,
    PlanUpdated,
    ProviderRetrying,
    Rewound,
    SessionTitled,
    SettingsChanged,
    SpecialTurnPersisted,
    TextDelta,
    ThoughtDelta,
    ToolCallFinished,
    ToolCallNote,
    ToolCallRunning,
    ToolCallStarted,
    ToolCallTerminal,
    TurnEnded,
    TurnFailed,
    TurnStarted,
    Usage,
    UsageUpdated,
)
from codling.tools.approval import approved_note
from codling.tools.base import PLAN_TOOL, ShownResult, command_result
from codling.tools.ports import COMMAND_TOOL
from codling.vocabulary import Location

Update = (
    AgentMessageChunk
    | AgentThoughtChunk
    | AgentPlanUpdate
    | ToolCallStart
    | ToolCallProgress
    | UsageUpdate
    | UserMessageChunk
)


Paths = Callable[[Path], str]
"""How a resolved path is named to the client (``acp/client_paths.py``); ``str`` names it as it is."""

ENDED_BY_USER = {"rejected": "Rejected.", "cancelled": "Cancelled."}
"""The note under a call the user ended (the editor already marked it: its status is left as it is)."""


def locations(items: Sequence[Location], paths: Paths = str) -> list[ToolCallLocation] | None:
    """ACP locations for tool-call locations (None when there are none); lines are 1-based, as ACP says."""
    return [ToolCallLocation(path=paths(loc.path), line=loc.line) for loc in items] or None


def fenced(text: str) -> str:
    """``text`` as a markdown code block that keeps its lines (a fence longer than any backtick run in it)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{text.rstrip()}\n{fence}"


def _text(text: str) -> ContentToolCallContent:
    return helpers.tool_content(helpers.text_block(text))


def _finished(event: ToolCallFinished, paths: Paths, replaying: bool) -> ToolCallProgress:
    """The last update of a tool call: its status, what it did, and a title that fits the result."""
    if event.ended_by is not None:
        # Live, the editor marked the call rejected or cancelled itself and a status would overwrite that with
        # "failed"; a replayed call was never marked, and without a final status it would stay pending forever.
        settled: Literal["failed"] | None = "failed" if replaying else None
        return helpers.update_tool_call(event.call_id, status=settled, content=[_text(ENDED_BY_USER[event.ended_by])])
    shown = event.shown or ShownResult()
    raw_output: dict[str, Any] | None = None
    content: list[ContentToolCallContent | FileEditToolCallContent] = []
    command = command_result(event.text) if event.tool_name == COMMAND_TOOL and event.status == "completed" else None
    if command is not None:
        status, output = command
        raw_output = {"status": status, "output": output}
        if event.shown is not None:  # (live only: a replay knows the status line alone)
            raw_output["exitCode"] = shown.exit_code
        content.append(_text(f"{status}\n\n{fenced(output)}"))
    else:
        diffs = ([event.diff] if event.diff is not None else []) + list(shown.diffs)
        if shown.steps:
            content.append(_text(shown.steps))
        content.extend(helpers.tool_diff_content(paths(d.path), d.new_text, d.old_text) for d in diffs)
        if event.text and (not diffs or event.status == "failed" or shown.steps):
            content.append(_text(event.text))  # a diff says what an edit did; its text is for the model
        content.extend(
            helpers.tool_content(
                helpers.resource_link_block(
                    link.name, link.uri, mime_type=link.mime_type, description=link.description, title=link.title
                )
            )
            for link in shown.links
        )
    if event.approved_by is not None:
        content.append(_text(approved_note(event.approved_by)))
    return helpers.update_tool_call(
        event.call_id,
        title=shown.title or None,
        status=event.status,
        # A command in the editor's terminal keeps showing it once released, and the editor would refuse an
        # update naming the released terminal: no content, the call keeps its own.
        content=content if event.terminal_id is None else None,
        locations=locations(event.locations, paths),
        raw_output=raw_output,
    )


def _special(event: SpecialTurnPersisted) -> list[Update]:
    """What a special turn added to the conversation (a greeting), shown as a turn shows it: its messages,
    thoughts, and each tool call as one finished call holding its result. A replacing summary is not a message
    (compaction shows its own tool call)."""
    if event.persistence == "replace-above":
        return []
    updates: list[Update] = []
    call: tuple[int, str] | None = None  # the position and title of a tool call whose result may follow
    for index, item in enumerate(event.interactions):
        if call is not None and item.kind != "tool_result":
            updates.append(_recorded_call(event, *call))
            call = None
        if item.kind == "tool_call":
            call = (index, item.text)
        elif item.kind == "tool_result":
            # The result's summary starts with the call's title ("- Read a.txt (done): ...").
            at, title = call or (index, item.text.partition("\n")[0].removeprefix("- ").rstrip(":") or "tool call")
            updates.append(_recorded_call(event, at, title, item.text))
            call = None
        elif item.kind == "thought":
            updates.append(helpers.update_agent_thought_text(item.text))
        elif item.kind in ("user", "assistant"):
            updates.append(_message(item.kind, item.text))
    if call is not None:
        updates.append(_recorded_call(event, *call))
    return updates


def _recorded_call(event: SpecialTurnPersisted, index: int, title: str, result: str = "") -> ToolCallStart:
    # A recorded special turn keeps no call ids: one from the record itself, the same at every replay.
    call_id = hashlib.sha1(f"{event.special_id}/{event.turn_type}/{index}/{title}".encode()).hexdigest()[:16]
    content = [helpers.tool_content(helpers.text_block(result))] if result else None
    return helpers.start_tool_call(call_id, title, status="completed", content=content)


def _message(kind: str, text: str) -> AgentMessageChunk | UserMessageChunk:
    if kind == "user":
        return helpers.update_user_message_text(text)
    return helpers.update_agent_message_text(text)


def prompt_usage(usage: Usage | None) -> PromptUsage | None:
    """A turn's tokens as session/prompt's ``usage`` (an unstable part of ACP). None when nothing was spent or
    the provider reported no tokens: an editor would show zeros as a count."""
    if usage is None or usage.input_tokens + usage.output_tokens == 0:
        return None
    return PromptUsage(
        total_tokens=usage.input_tokens + usage.output_tokens,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cached_read_tokens=usage.cache_read_tokens or None,
        cached_write_tokens=usage.cache_write_tokens or None,
    )


def error_text(message: str) -> str:
    """How a failed turn's error reply reads in the client."""
    return f"\n\n**Error:** {message}\n"


def translate(event: Event, paths: Paths = str, *, replaying: bool = False) -> list[Update]:
    """The session/update payloads a client receives for one brain event (possibly none); ``paths`` names
    files as the client knows them; ``replaying``: the event is recorded history a client is shown again.
    Stateless: a session's updates go through :class:`ToolCards`, which keeps every update after its call.
    Which kinds are sent is ``brain/event_contract.py``'s ``translated``."""
    match event:
        case TextDelta():
            return [helpers.update_agent_message_text(event.text)]
        case ThoughtDelta():
            return [helpers.update_agent_thought_text(event.text)]
        case ToolCallStarted() | ToolCallRunning() | ToolCallNote() | ToolCallTerminal() | ToolCallFinished():
            return _tool_call(event, paths, replaying)
        case PlanUpdated():
            entries = [helpers.plan_entry(s.step, priority=s.priority, status=s.status) for s in event.steps]
            return [helpers.update_plan(entries)]
        case CompactionStarted() | ContextCompacted():
            return [_compaction(event)]
        case ProviderRetrying() | McpServersStarting() | McpServerNotice() | ContextWarning():
            return [_aside(event)]
        case UsageUpdated():
            cost = Cost(amount=round(event.cost, 6), currency="USD") if event.cost is not None else None
            return [UsageUpdate(session_update="usage_update", used=event.used, size=event.size, cost=cost)]
        case SpecialTurnPersisted():
            return _special(event)
        case TurnFailed():
            # Live, the prompt's JSON-RPC error says it (an editor shows an error with a retry); a replay shows
            # the recorded error as text (``replay.py``), since no response carries it then.
            return []
        case TurnStarted() | TurnEnded() | SessionTitled() | SettingsChanged() | Rewound():
            # The client sent the prompt; the prompt's response ends the turn; a title reaches the client as
            # session_info_update, from the recorder; the agent sends the pickers' new state (server.py); a
            # rewind's command says in its reply what it did.
            return []
        case _:
            assert_never(event)


ToolCallEvent = ToolCallStarted | ToolCallRunning | ToolCallNote | ToolCallTerminal | ToolCallFinished
"""The events of one tool call, from its start to its result."""


def _tool_call(event: ToolCallEvent, paths: Paths, replaying: bool) -> list[Update]:
    """A tool call's card: started pending, running, its progress, its terminal, its result."""
    match event:
        case ToolCallStarted() | ToolCallFinished() if event.tool_name == PLAN_TOOL:
            return _plan_call(event)
        case ToolCallStarted():
            return [
                helpers.start_tool_call(
                    event.call_id,
                    event.title,
                    kind=event.tool_kind,
                    status="pending",
                    locations=locations(event.locations, paths),
                    raw_input=event.raw_input,
                )
            ]
        case ToolCallRunning():
            return [helpers.update_tool_call(event.call_id, status="in_progress")]
        case ToolCallNote():
            note = [helpers.tool_content(helpers.text_block(event.text))]
            return [helpers.update_tool_call(event.call_id, status="in_progress", content=note)]
        case ToolCallTerminal():
            terminal = [helpers.tool_terminal_ref(event.terminal_id)]
            return [helpers.update_tool_call(event.call_id, status="in_progress", content=terminal)]
        case ToolCallFinished():
            return [_finished(event, paths, replaying)]
        case _:
            assert_never(event)


def _plan_call(event: ToolCallStarted | ToolCallFinished) -> list[Update]:
    """The plan tool's call is not shown: the plan is (``PlanUpdated``). A rejected plan is shown as the failed
    call it is, with its start, which was not sent."""
    if isinstance(event, ToolCallStarted) or event.status != "failed":
        return []
    content = [helpers.tool_content(helpers.text_block(event.text))]
    return [helpers.start_tool_call(event.call_id, "Update the plan", kind="think", status="failed", content=content)]


def _compaction(event: CompactionStarted | ContextCompacted) -> Update:
    """A compaction as a tool call of its own: in progress, then completed with the summary the history keeps."""
    match event:
        case CompactionStarted():
            title = f"Compacting context ({event.tokens_before:,} tokens)"
            return helpers.start_tool_call(event.call_id, title, kind="think", status="in_progress")
        case ContextCompacted():
            return helpers.update_tool_call(
                event.call_id,
                title=compaction.title(event.tokens_before, event.tokens_after, event.fallback, event.note),
                status="completed",
                content=[helpers.tool_content(helpers.text_block(event.summary))],
            )
        case _:
            assert_never(event)


def _aside(event: ProviderRetrying | McpServersStarting | McpServerNotice | ContextWarning) -> Update:
    """What happens beside the model's work (a wait, a failed server, a warning) as a card of kind ``other`` of
    its own: an editor shows it at once and keeps it in the thread, where a thought chunk would be folded into
    the model's reasoning and read as the model's words. (Notices replace them where the client takes those:
    ``ToolCards``.)"""
    match event:
        case ContextWarning():
            return helpers.start_tool_call(event.call_id, event.message, kind="other", status="completed")
        case McpServerNotice():
            # A failed card, with the server's last words as its content.
            detail = [helpers.tool_content(helpers.text_block(event.detail))] if event.detail else None
            return helpers.start_tool_call(event.call_id, event.message, kind="other", status="failed", content=detail)
        case McpServersStarting():
            return _servers_starting(event)
        case ProviderRetrying() if event.status == "waiting":
            return helpers.start_tool_call(event.call_id, event.title, kind="other", status="in_progress")
        case ProviderRetrying():
            return helpers.update_tool_call(
                event.call_id, status="completed" if event.status == "retrying" else "failed"
            )
        case _:
            assert_never(event)


def _servers_starting(event: McpServersStarting) -> Update:
    """Like a retry's wait: a card of its own while the turn waits, retitled as servers settle."""
    match event.status:
        case "waiting":
            return helpers.start_tool_call(event.call_id, event.title, kind="other", status="in_progress")
        case "progress":
            return helpers.update_tool_call(event.call_id, title=event.title)
        case "ready":
            return helpers.update_tool_call(event.call_id, title=event.title, status="completed")
        case "cancelled":
            return helpers.update_tool_call(event.call_id, title=event.title, status="failed")
        case _:
            assert_never(event.status)


class ToolCards:
    """One session's updates as a client may receive them: a ``tool_call_update`` only for a call whose
    ``tool_call`` it was sent (Zed shows an update for any other id as a red "Tool call not found" card), and a
    command's title again once its terminal is attached (Zed labels a terminal by the program and arguments
    ``terminal/create`` ran, the secret-hiding ``env -u …`` wrapper included, and relabels it from a later
    title only). Where the client advertised them (``extras``), notices and compaction updates instead of the
    cards for what is not a tool call (``acp/notices.py``); every compaction it was told of ends."""

    def __init__(self, paths: Paths = str, *, replaying: bool = False, extras: ClientExtras | None = None) -> None:
        self._paths = paths
        self._replaying = replaying
        self._extras = extras or ClientExtras()
        self._titles: dict[str, str] = {}
        self._compacting: dict[str, None] = {}
        """Compactions the client was told started and not yet told ended, in order."""

    def translate(self, event: Event) -> list[Update | NewerUpdate]:
        """The updates for ``event`` the client can place (possibly none)."""
        if self._extras.notices and isinstance(event, NOTICED):
            shown = notice(event)
            return [shown] if shown is not None else []
        if self._extras.compaction:
            if isinstance(event, CompactionStarted | ContextCompacted):
                update = compaction_update(event, replaying=self._replaying)
                if update is None:
                    return []
                if update.status == "in_progress":
                    self._compacting[update.compaction_id] = None
                else:
                    self._compacting.pop(update.compaction_id, None)
                return [update]
            if isinstance(event, ToolCallFinished) and event.call_id in self._compacting:
                # Compaction's own end when it was cut short (``compactor.compact``): the history was not compacted.
                del self._compacting[event.call_id]
                cut: CompactionStatus = "cancelled" if event.text.startswith("cancelled") else "failed"
                return [CompactionUpdate(event.call_id, cut, error=event.text)]
            if isinstance(event, TurnFailed | TurnEnded) and self._compacting:
                return [*self._end_compactions(event), *self._cards(event)]
        return [*self._cards(event)]

    def _end_compactions(self, event: TurnFailed | TurnEnded) -> list[CompactionUpdate]:
        """The end of every compaction still open when the turn failed or ended: nothing else will end it."""
        if isinstance(event, TurnFailed):
            status: CompactionStatus = "failed"
            error = f"The turn failed before the compaction finished: {event.message}"
        elif event.stop_reason == "cancelled":
            status, error = "cancelled", "The turn was cancelled: the history was not compacted."
        else:
            status, error = "failed", "The turn ended before the compaction finished: the history was not compacted."
        ended = [CompactionUpdate(compaction_id, status, error=error) for compaction_id in self._compacting]
        self._compacting.clear()
        return ended

    def _cards(self, event: Event) -> list[Update]:
        """The SDK's updates for ``event`` that the client can place."""
        updates: list[Update] = []
        for update in translate(event, self._paths, replaying=self._replaying):
            if isinstance(update, ToolCallStart):
                self._titles[update.tool_call_id] = update.title
            elif isinstance(update, ToolCallProgress):
                if update.tool_call_id not in self._titles:
                    continue  # a call the client was not shown (the plan tool's: the plan is shown instead)
                if update.title is not None:
                    self._titles[update.tool_call_id] = update.title
            updates.append(update)
        if isinstance(event, ToolCallTerminal) and updates:
            # Separate from the terminal's update: Zed applies a title before the content that attaches it.
            updates.append(helpers.update_tool_call(event.call_id, title=self._titles[event.call_id]))
        return updates
