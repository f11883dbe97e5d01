"""Telling a user who switched windows that the terminal waits: a permission question, or a long turn's end.

config.toml's ``notify`` says how: ``"bell"`` (BEL; every terminal and tmux mark the window), ``"osc"`` (a
desktop notification: OSC 777 on foot and rxvt, OSC 9 elsewhere) or ``"off"``; ``notify_command`` names a
program run too, with the title and body appended to its arguments and in ``CODLING_NOTIFY_TITLE``,
``CODLING_NOTIFY_BODY`` and ``CODLING_NOTIFY_EVENT`` — never through a shell, without codling's secret
variables, in the background (the chat does not wait for it), its failure logged. Only on a terminal
(:func:`terminal_notifier`): never in piped or ``--json`` output.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TextIO, assert_never

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
    UsageUpdated,
)
from codling.cli.draw import is_terminal, one_line
from codling.config import NotifyStyle, Settings

if TYPE_CHECKING:
    from codling.tools.ports import Answer, Approver, PermissionRequest

log = logging.getLogger(__name__)

NOTIFY_AFTER_SECONDS = 5.0
"""A turn that ends sooner after the user last acted (sent it, answered a question) is not announced: they are
still watching."""

TITLE = "codling"
_MAX_BODY = 200
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
"""Characters that would end the notification's escape sequence early (BEL, ESC, ST) or act on the terminal."""

NoticeKind = Literal["question", "turn_ended"]


@dataclass(frozen=True)
class Notice:
    """What one notification says."""

    kind: NoticeKind
    body: str
    title: str = TITLE


def clean(text: str) -> str:
    """``text`` on one line, without control characters or ``;`` (OSC 777's separator), at most 200
    characters: model-made text (a command's title) must not end the escape sequence and write to the terminal."""
    text = _CONTROL.sub(" ", one_line(text)).replace(";", ",")
    return text if len(text) <= _MAX_BODY else text[: _MAX_BODY - 1] + "…"


def sequence(style: NotifyStyle, notice: Notice, env: Mapping[str, str]) -> str:
    """The bytes written to the terminal for ``notice`` ("" for ``off``)."""
    match style:
        case "off":
            return ""
        case "bell":
            return "\a"
        case "osc":
            title, body = clean(notice.title), clean(notice.body)
            if _osc_777(env):
                return f"\x1b]777;notify;{title};{body}\a"
            return f"\x1b]9;{title}: {body}\a"
        case _:
            assert_never(style)


def _osc_777(env: Mapping[str, str]) -> bool:
    """Whether the terminal takes OSC 777 rather than OSC 9 (foot, rxvt-unicode: 9 means nothing there)."""
    term = env.get("TERM", "")
    return term.startswith(("foot", "rxvt"))


class Notifier:
    """Announces :class:`Notice` s on ``out`` as ``style`` says and through ``command``.

    Subscribed to a session's events it announces a turn's end when more than ``after`` seconds of ``clock``
    passed since the user last acted; :class:`NotifyingApprover` announces questions at once and counts the
    answer as acting. ``env`` is the terminal's environment (which OSC) and ``command_env`` the command's.
    """

    def __init__(
        self,
        style: NotifyStyle,
        out: TextIO,
        *,
        command: tuple[str, ...] = (),
        env: Mapping[str, str] | None = None,
        command_env: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        after: float = NOTIFY_AFTER_SECONDS,
    ) -> None:
        self._style = style
        self._out = out
        self._command = command
        self._env = dict(env or {})
        self._command_env = dict(command_env or {})
        self._clock = clock
        self._after = after
        self._since: float | None = None
        self._running: set[asyncio.Task[None]] = set()

    async def __call__(self, event: Event) -> None:
        """A session event: a turn's start is the user acting; its end, long after, is announced."""
        match event:
            case TurnStarted():
                self.acted()
            case TurnEnded():
                self._ended(event)
            case (
                TextDelta()
                | ThoughtDelta()
                | ToolCallStarted()
                | ToolCallTerminal()
                | ToolCallNote()
                | ToolCallRunning()
                | ToolCallFinished()
                | PlanUpdated()
                | CompactionStarted()
                | ContextCompacted()
                | ProviderRetrying()
                | ContextWarning()
                | McpServersStarting()
                | McpServerNotice()
                | SettingsChanged()
                | UsageUpdated()
                | SpecialTurnPersisted()
                | SessionTitled()
                | TurnFailed()
                | Rewound()
            ):
                pass  # questions are announced by the approver (NotifyingApprover); a failure ends its turn
            case _:
                assert_never(event)

    def _ended(self, event: TurnEnded) -> None:
        since, self._since = self._since, None
        if event.stop_reason == "cancelled" or since is None or self._clock() - since <= self._after:
            return  # the user cancelled it, or is still watching
        if event.error:
            body = "The turn failed: the terminal says why."
        elif event.stop_reason == "end_turn":
            body = "The reply is ready."
        else:
            body = f"The turn stopped ({event.stop_reason.replace('_', ' ')})."
        self.notify(Notice("turn_ended", body))

    def acted(self) -> None:
        """The user did something at the terminal: a turn's end is measured from now."""
        self._since = self._clock()

    def notify(self, notice: Notice) -> None:
        """Announce ``notice`` now; the command runs in the background."""
        if text := sequence(self._style, notice, self._env):
            try:
                self._out.write(text)
                self._out.flush()
            except (OSError, ValueError) as e:  # the terminal is gone: nothing to tell
                log.warning("notification not written: %s", e)
        if self._command:
            task = asyncio.get_running_loop().create_task(self._run(notice))
            self._running.add(task)
            task.add_done_callback(self._running.discard)

    async def wait(self) -> None:
        """Until the commands started so far have ended (tests; the chat never waits for them)."""
        while self._running:
            await asyncio.gather(*self._running, return_exceptions=True)

    async def _run(self, notice: Notice) -> None:
        title, body = clean(notice.title), clean(notice.body)
        env = {
            **self._command_env,
            "CODLING_NOTIFY_EVENT": notice.kind,
            "CODLING_NOTIFY_TITLE": title,
            "CODLING_NOTIFY_BODY": body,
        }
        try:
            process = await asyncio.create_subprocess_exec(
                *self._command,
                title,
                body,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
                env=env,
                start_new_session=True,  # Ctrl-C at the chat is not the notifier's
            )
            _, err = await process.communicate()
        except OSError as e:
            log.warning("notify_command %s could not start: %s; fix notify_command in config.toml", self._command[0], e)
            return
        if process.returncode:
            said = err.decode(errors="replace").strip()[-500:]
            log.warning(
                "notify_command %s exited with %s%s", self._command[0], process.returncode, f": {said}" if said else ""
            )


@dataclass(frozen=True)
class NotifyingApprover:
    """An approver that announces each question before ``inner`` asks it."""

    inner: Approver
    notifier: Notifier

    async def ask(self, request: PermissionRequest) -> Answer:
        """``inner``'s answer; the time after it counts from the answer."""
        self.notifier.notify(Notice("question", f"Permission needed: {request.title}"))
        try:
            return await self.inner.ask(request)
        finally:
            self.notifier.acted()


def terminal_notifier(settings: Settings, out: TextIO, env: Mapping[str, str]) -> Notifier | None:
    """The notifier for a chat or run writing to ``out`` (None: ``out`` is not a terminal, or nothing to do)."""
    if not is_terminal(out) or (settings.notify == "off" and not settings.notify_command):
        return None
    command_env: dict[str, str] = {}
    if settings.notify_command:
        from codling.llm.providers import credential_names
        from codling.secrecy import scrubbed

        command_env = scrubbed(env, settings.command_env_allow, credential_names())
    return Notifier(settings.notify, out, command=settings.notify_command, env=env, command_env=command_env)
