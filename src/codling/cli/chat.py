"""``codling chat``: a multi-turn session at the terminal, recorded like every other.

Each input is a turn drawn as ``codling run`` draws it (``cli/render.py``) and asked about as it asks
(``cli/approve.py``). ``@path`` mentions attach files (``cli/mentions.py``). An input that is a slash command
is either the chat's own (``cli/chat_commands.py``: ``/new``, ``/resume``, ``/help``, ``/exit``) or a session
command an editor gets too (``/compact``, ``/model``, ``/mode``, ``/usage``, ``/init``, ``/pin``…), which the
session runs and records as a turn. Ctrl-C (or Esc, ``cli/chat_ports.TurnKeys``) cancels a running turn; Ctrl-C again at
the empty prompt, or Ctrl-D, leaves. The session is created at the first turn, so opening the chat and leaving
records nothing.

The input line is injected (``cli/chat_ports.ChatInput``; ``cli/chat_input.py`` is prompt_toolkit's), so the loop runs
in tests without a terminal.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import signal
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from codling import __version__
from codling.brain.images import may_see_images
from codling.brain.prompt import ImageBlock, PromptBlock, TextBlock
from codling.cli.chat_commands import ChatCommand, Prompt, UnknownCommand, describe_chat, parse_line
from codling.cli.chat_ports import ChatInput, ChatViews, Loading, PausingApprover, TurnKeys, notifying
from codling.cli.draw import StyledWriter
from codling.cli.mentions import attach
from codling.cli.oneshot import context_meter
from codling.cli.session_plan import (
    EXIT_OK,
    EXIT_USAGE,
    SessionPlan,
    open_live,
    plan_session,
    restored_mode_note,
    resumable,
    unknown_model,
)
from codling.config import Settings
from codling.errors import CodlingError
from codling.llm.catalog import Catalog
from codling.shutdown import exit_after_grace, handling
from codling.vocabulary import PermissionMode

if TYPE_CHECKING:
    from codling.brain.host import ModelFactory
    from codling.cli.picker import Listing
    from codling.store.live import LiveSession

EXIT_HINT = "(Ctrl-C again or Ctrl-D to leave)"


class Chat:
    """The chat loop: reads inputs, runs them as turns of the current session, switches sessions.

    ``views`` makes, at the first turn, what draws the turns and asks about tool calls for every session of the
    chat; the chat's own lines go to ``out``. ``mode`` is the permission mode of new
    sessions (None: the configured one); a resumed session keeps its own. ``keys`` (None: none) are watched
    while a turn runs, so Esc cancels it. ``preload`` (None: nothing to wait for) loads the model stack
    (``cli/preload.py``): turns start it, if the input line has not, and wait for it; the error it may end in
    ends the chat at once, with exit 2.
    """

    def __init__(
        self,
        settings: Settings,
        catalog: Catalog,
        plan: SessionPlan,
        mode: PermissionMode | None,
        *,
        input: ChatInput,
        views: Callable[[], ChatViews],
        out: TextIO,
        color: bool,
        model_factory: ModelFactory | None = None,
        keys: TurnKeys | None = None,
        preload: Loading | None = None,
    ) -> None:
        self._settings = settings
        self._catalog = catalog
        self._plan = plan
        self._mode = mode
        self._input = input
        self._make_views = views
        self._views: ChatViews | None = None
        self._keys = keys
        self._out = StyledWriter(out, color=color)
        self._model_factory = model_factory
        self._live: LiveSession | None = None
        self._offered: Listing | None = None
        """What the last ``/resume`` listed: its numbers, and the sessions ``/resume more`` shows next."""
        self._armed = False
        """A Ctrl-C was the last thing typed: another one leaves."""
        self._cancelling = False
        self._leaving = False
        self._terminated: int | None = None
        self._preload = preload
        self._unusable: CodlingError | None = None
        """Why the model cannot be used (the chat then leaves, exit 2)."""

    async def run(self, first: str | None = None) -> int:
        """Run the chat (``first``, if given, is its first input) until the user leaves; the exit code."""
        loop = asyncio.get_running_loop()
        if self._preload is not None:
            self._preload.done.add_done_callback(lambda done: loop.call_soon_threadsafe(self._model_loaded, done))
        signals = {
            signal.SIGINT: self._interrupt,
            signal.SIGTERM: lambda: self._terminate(signal.SIGTERM),
            signal.SIGHUP: lambda: self._terminate(signal.SIGHUP),
        }
        with handling(signals):
            await self._converse(first)
        if self._unusable is not None:
            self._note(f"codling: {self._unusable}", "red")
            return EXIT_USAGE
        return EXIT_OK if self._terminated is None else 128 + self._terminated

    async def _converse(self, first: str | None) -> None:
        """Introduce the session, run ``first`` and every input after it until the user leaves, then close."""
        try:
            self._introduce()
            if first is not None:
                await self._handle(first)
            while not self._leaving:
                try:
                    line = await self._input.read()
                except EOFError:
                    break
                except KeyboardInterrupt:
                    if self._armed:
                        break
                    self._armed = True
                    self._note(EXIT_HINT)
                    continue
                self._armed = False
                await self._handle(line)
        finally:
            await self._close()

    def _model_loaded(self, done: concurrent.futures.Future[CodlingError | None]) -> None:
        """The model stack is loaded; if the model cannot be used, leave (the read in progress ends)."""
        if (failure := done.result()) is not None and self._unusable is None:
            self._unusable = failure
            self._leaving = True
            self._input.abort()

    # -- signals -------------------------------------------------------------------------------------------

    def _interrupt(self) -> None:
        """Ctrl-C while no input is being read: cancel the running turn; a second one leaves after it."""
        if self._live is not None and self._live.brain.running:
            if self._cancelling:
                self._leaving = True
            self._cancelling = True
            self._live.brain.cancel()
        elif self._armed:
            self._leaving = True
            self._input.abort()
        else:
            self._armed = True

    def _escape(self) -> None:
        """Esc while a turn runs: cancel it, as a first Ctrl-C does, without arming a second to leave."""
        if self._live is not None and self._live.brain.running:
            self._live.brain.cancel()

    def _terminate(self, sig: int) -> None:
        """SIGTERM or SIGHUP: end the turn as Ctrl-C does and leave (exit 128 + N; past the grace, at once)."""
        if self._terminated is None:
            self._terminated = sig
            exit_after_grace(sig)
        self._leaving = True
        if self._live is not None:
            self._live.brain.cancel()
            self._live.brain.cancel_background()
        self._input.abort()

    # -- inputs --------------------------------------------------------------------------------------------

    async def _handle(self, line: str) -> None:
        match parse_line(line):
            case None:
                return
            case UnknownCommand(name):
                self._note(f"/{name} is not a command; /help lists them.", "yellow")
            case ChatCommand("exit" | "quit"):
                self._leaving = True
            case ChatCommand("help"):
                self._out.markdown(describe_chat())
            case ChatCommand("new"):
                model = self._live.brain.state.model.id if self._live is not None else self._plan.model.id
                mode = self._live.brain.state.mode if self._live is not None else self._mode
                await self._switch(self._new_plan(model), mode)
            case ChatCommand("resume", argument):
                await self._resume(argument)
            case Prompt(text, command):
                await self._send(text, command)

    def _new_plan(self, model: str | None) -> SessionPlan:
        cwd = self._plan.header.cwd
        return plan_session(self._settings, self._catalog, model, cwd, None, False, False)

    async def _resume(self, argument: str) -> None:
        """``/resume``: list this directory's sessions (else every directory's) a page at a time; ``/resume more``
        the next page, ``/resume WORDS`` those whose title or id holds the words, ``/resume N`` continues the one
        listed last as N, ``/resume ID`` the one with that id (or start of one)."""
        from codling.cli.picker import MORE, NUMBER_DIGITS, show_page

        argument = argument.strip()
        shown = self._offered
        if argument.lower() in MORE and shown is not None:
            if not shown.remaining:
                self._note(f"That is all of them ({len(shown.sessions)}); /resume WORDS lists those holding the words.")
                return
            self._offered = show_page(shown, self._out.stream, datetime.now(UTC))
            self._resume_hint()
            return
        if argument.isdigit() and len(argument) <= NUMBER_DIGITS:  # a number of the list (longer: an id's start)
            summary = shown.chosen(int(argument)) if shown is not None else None
            if summary is None:
                self._note(f"{argument} is not one of the numbers /resume listed; /resume lists them.", "yellow")
                return
            argument = summary.session_id
        elif not argument or argument.lower() in MORE or not self._names_a_session(argument):
            self._list_sessions("" if argument.lower() in MORE else argument)
            return
        try:
            plan = plan_session(self._settings, self._catalog, None, self._plan.header.cwd, argument, False, False)
        except CodlingError as e:
            self._note(f"Not resumed: {e}", "yellow")
            return
        if self._live is not None and plan.header.session_id == self._live.id:
            self._note("That is this session.")
            return
        await self._switch(plan, None)

    def _list_sessions(self, words: str) -> None:
        """The first page of the sessions to resume (those holding ``words``, if any), its numbers kept."""
        from codling.cli.home import open_store
        from codling.cli.picker import listing, no_match, show_page

        try:
            sessions, where = resumable(self._settings, self._plan.header.cwd)
        except CodlingError as e:
            self._note(str(e), "yellow")
            return
        first_request = open_store(self._settings).first_request
        found = listing(sessions, where, words, lambda session: first_request(session.session_id))
        if not found.sessions:
            self._note(f"{no_match(found)} /resume lists them all.", "yellow")
            return
        self._offered = show_page(found, self._out.stream, datetime.now(UTC))
        self._resume_hint()

    def _resume_hint(self) -> None:
        shown = self._offered
        assert shown is not None
        more = f"; /resume more shows {shown.remaining} more" if shown.remaining else ""
        self._note(f"Continue one with /resume NUMBER (or /resume ID){more}; /resume WORDS lists those holding them.")

    def _names_a_session(self, argument: str) -> bool:
        """Whether ``/resume argument`` names a session by its id (a whole one, even unknown: resuming says so) or by
        the start of one that some session has (ambiguous counts: resuming says which it matches); else the
        argument is words to look for."""
        from codling.cli.home import open_store
        from codling.cli.session_plan import could_be_id
        from codling.errors import UnknownSessionError
        from codling.store.ids import is_session_id

        if is_session_id(argument):
            return True
        if not could_be_id(argument):
            return False
        try:
            open_store(self._settings).resolve(argument)
        except UnknownSessionError:
            return False
        except CodlingError:
            return True
        return True

    async def _switch(self, plan: SessionPlan, mode: PermissionMode | None) -> None:
        await self._close()
        self._plan, self._mode = plan, mode
        self._introduce()

    async def _send(self, text: str, command: bool) -> None:
        if self._preload is not None:
            self._preload.start()
            if await asyncio.wrap_future(self._preload.done) is not None:
                return  # the model cannot be used: _model_loaded ends the chat
        live = self._session()
        if live is None:
            return
        blocks: tuple[PromptBlock, ...] = (TextBlock(text),)
        if not command:
            attached = await attach(text, live.brain.deps.workspace, live.brain.deps.fs)
            for note in attached.notes:
                self._note(note)
            blocks = attached.blocks
            model = live.brain.state.model
            if not may_see_images(model) and any(isinstance(block, ImageBlock) for block in blocks):
                self._note(f"{model.id} cannot see images; it is only told their names.", "yellow")
        self._cancelling = False
        watching = self._keys.watching(self._escape) if self._keys is not None else contextlib.nullcontext()
        try:
            with watching:
                result = await live.brain.run(blocks)
        finally:
            self.views().renderer.close()
        if result.stop_reason == "cancelled" and self._cancelling and not self._leaving:
            self._armed = True
            self._note(EXIT_HINT)
        elif result.context is not None and result.error is None and not command:
            self._note(context_meter(result.context.used, result.context.size))

    # -- sessions ------------------------------------------------------------------------------------------

    def _session(self) -> LiveSession | None:
        """The live session, started at the first turn that needs it (None, said why, if it cannot start)."""
        if self._live is None:
            views = self.views()
            try:
                self._live = open_live(
                    self._settings,
                    self._plan,
                    self._mode,
                    views.approver,
                    model_titles=True,  # in the background, while the user reads and types
                    catalog=self._catalog,
                    model_factory=self._model_factory,
                )
            except CodlingError as e:  # e.g. another codling process is writing the session
                self._note(f"The session cannot start: {e}", "red")
                return None
            self._live.brain.subscribe(views.renderer)
            if views.notifier is not None:
                self._live.brain.subscribe(views.notifier)
        return self._live

    def views(self) -> ChatViews:
        """The chat's views, made on first use; the approver announces its questions through the notifier and
        pauses the watch for Esc while it asks."""
        if self._views is None:
            views = self._make_views()
            approver = notifying(views.approver, views.notifier)
            if approver is not None and self._keys is not None:
                approver = PausingApprover(approver, self._keys)
            self._views = replace(views, approver=approver)
        return self._views

    async def _close(self) -> None:
        """Close the live session, if one was started, and say how to come back to it."""
        live, self._live = self._live, None
        if live is None:
            return
        await live.close()
        named = f" “{live.recorder.title}”" if live.recorder.title else ""
        self._note(f"Session {live.id}{named} is recorded; continue it with: codling chat --resume {live.id}")

    def mode(self) -> PermissionMode:
        """The permission mode the next turn runs in: the live session's (``/mode`` changes it), else the one it
        will open in — ``--mode``, else a resumed session's own, else the configured default."""
        if self._live is not None:
            return self._live.brain.state.mode
        if self._mode is not None:
            return self._mode
        return self._plan.stored.mode if self._plan.stored is not None else self._settings.mode

    def _introduce(self) -> None:
        """Say which session the chat is in: for a resumed one, its last turn first."""
        plan, out = self._plan, self._out
        mode = self.mode()
        where = _home_relative(plan.header.cwd)
        if plan.stored is not None:
            from codling.brain.events import TurnStarted
            from codling.cli.transcript import print_transcript

            events = plan.stored.events
            starts = [i for i, event in enumerate(events) if isinstance(event, TurnStarted)]
            if starts:
                out.line("The last turn of this session:", "dim")
                print_transcript(events[starts[-1] :], out.stream, color=out.color, first_turn=len(starts))
            title = f" “{plan.stored.title}”" if plan.stored.title else ""
            turns = f"{len(starts)} turn{'s' if len(starts) != 1 else ''}"
            out.line(f"Resumed session {plan.header.session_id}{title} ({turns})", "bold")
        else:
            out.line(f"codling {__version__}", "bold")
        out.line(f"{plan.model.id} · {mode} mode · {where}", "dim")
        if plan.stored is not None and self._mode is None and mode != self._settings.mode:
            out.line(restored_mode_note(mode, self._settings.mode, "/mode"), "yellow")
        if plan.note is not None:
            out.line(plan.note[:1].upper() + plan.note[1:] + ".", "dim")
        if (warning := unknown_model(plan.model)) is not None:
            out.line(f"Warning: {warning}.", "yellow")
        out.line("/help lists the commands and keys; Ctrl-D leaves.", "dim")

    def _note(self, text: str, style: str = "dim") -> None:
        self._out.end_line()
        self._out.line(text, style)


def _home_relative(path: Path) -> str:
    home = Path.home()
    return f"~/{path.relative_to(home)}" if path.is_relative_to(home) and path != home else str(path)
