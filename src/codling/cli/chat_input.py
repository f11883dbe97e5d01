"""The input line of ``codling chat``, on prompt_toolkit: history, multi-line editing, completion.

Each input line starts with the permission mode (``[ask] › ``). Enter sends. Alt-Enter (Esc then Enter), or
Enter after a trailing backslash, starts a new line; pasted text keeps its lines. (Ctrl-J stays Enter: a line
typed ahead while a turn runs reaches the prompt with the terminal's newline, and must still be sent.) Up and
Down walk the history, kept in ``$CODLING_HOME/prompt_history`` with secrets redacted as history.jsonl has
them. Typing (or Tab) completes slash commands at the start of the input and ``@paths`` anywhere. Ctrl-C clears
a line that has text; on an empty line it raises ``KeyboardInterrupt``, and Ctrl-D on an empty line raises
``EOFError`` (the chat decides what they mean).

While a turn runs (:meth:`PromptInput.watching`) the terminal leaves canonical mode, without echo, and its keys
are read: Esc alone cancels the turn; everything else typed is kept as prompt_toolkit's type-ahead, so it is the
next prompt's first input. The terminal keeps its signals: Ctrl-C stays the SIGINT that cancels a turn, Ctrl-Z
still suspends. A permission question pauses this (:meth:`PromptInput.paused`): it reads a line from the
terminal as it was.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import termios
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent, Completer, Completion, PathCompleter
from prompt_toolkit.document import Document
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.input import Input
from prompt_toolkit.input.typeahead import store_typeahead
from prompt_toolkit.key_binding import KeyBindings, KeyPress, KeyPressEvent
from prompt_toolkit.keys import Keys
from prompt_toolkit.output import create_output

from codling.secrecy import redact_credentials

PROMPT = "› "
CONTINUATION = "  "
"""What starts each further line of a multi-line input."""

HISTORY_FILE = "prompt_history"

ESCAPE_WAIT = 0.1
"""Seconds an Esc waits for more bytes before it is Esc alone (keys such as arrows start with Esc)."""


class _RedactingHistory(FileHistory):
    """A file history that stores each entry with secrets replaced (see ``codling.secrecy``): the environment's
    secret values and every key-shaped string, such as a key the user typed into the prompt."""

    def __init__(self, path: Path, redact: Callable[[str], str]) -> None:
        super().__init__(str(path))
        self._redact = redact

    def store_string(self, string: str) -> None:
        """Append the entry, redacted; a history that cannot be written is not worth failing a prompt for."""
        with contextlib.suppress(OSError):
            super().store_string(redact_credentials(self._redact(string)))


class ChatCompleter(Completer):
    """Completes ``/commands`` (with what each does) at the start of the input, and ``@paths`` under ``cwd``."""

    def __init__(self, commands: Mapping[str, str], cwd: Path) -> None:
        self._commands = commands
        self._paths = PathCompleter(get_paths=lambda: [str(cwd)], file_filter=lambda name: not name.endswith(".git"))

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterable[Completion]:
        """The completions for the text before the cursor."""
        before = document.text_before_cursor
        if before.startswith("/") and not any(c.isspace() for c in before):
            typed = before[1:]
            for name, description in self._commands.items():
                if name.startswith(typed):
                    yield Completion(name, start_position=-len(typed), display=f"/{name}", display_meta=description)
            return
        word = document.get_word_before_cursor(WORD=True)
        if word.startswith("@") and not word.startswith('@"'):
            yield from self._paths.get_completions(Document(word[1:]), complete_event)


def _bindings() -> KeyBindings:
    keys = KeyBindings()

    @Condition
    def continued() -> bool:
        from prompt_toolkit.application import get_app

        return get_app().current_buffer.document.text_before_cursor.endswith("\\")

    @keys.add("escape", "enter")
    def _newline(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    @keys.add("enter", filter=continued)
    def _continue(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        buffer.delete_before_cursor(1)
        buffer.insert_text("\n")

    @keys.add("c-c")
    def _interrupt(event: KeyPressEvent) -> None:
        if event.current_buffer.text:
            event.current_buffer.reset()
        else:
            event.app.exit(exception=KeyboardInterrupt())

    return keys


class _KeyWatch:
    """Reads the keys of a terminal while a turn runs (see the module's docstring); started and stopped by
    :class:`PromptInput`."""

    def __init__(self, input: Input, on_escape: Callable[[], None]) -> None:
        self._input = input
        self._on_escape = on_escape
        self._saved: list[Any] | None = None
        self._attached: contextlib.AbstractContextManager[None] | None = None
        self._flush: asyncio.TimerHandle | None = None

    def start(self) -> None:
        """Leave canonical mode and echo (signals stay), and read keys as they come."""
        fd = self._input.fileno()
        try:
            self._saved = termios.tcgetattr(fd)
            mode = termios.tcgetattr(fd)
            mode[3] &= ~(termios.ICANON | termios.ECHO)
            mode[6][termios.VMIN], mode[6][termios.VTIME] = 1, 0
            termios.tcsetattr(fd, termios.TCSANOW, mode)
        except termios.error:  # not a terminal after all: nothing to watch
            self._saved = None
            return
        self._attached = self._input.attach(self._read)
        self._attached.__enter__()

    def stop(self) -> None:
        """Stop reading, keep what was typed (an Esc not yet known to be alone is dropped), and put the
        terminal back as it was."""
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        if self._attached is not None:
            self._attached.__exit__(None, None, None)
            self._attached = None
        self._keep([key for key in self._input.flush_keys() if key.key != Keys.Escape])
        if self._saved is not None:
            with contextlib.suppress(termios.error):
                termios.tcsetattr(self._input.fileno(), termios.TCSANOW, self._saved)
            self._saved = None

    def _read(self) -> None:
        # An Esc followed by more in one read is part of a key (an arrow, Alt-Enter): the parser says so. An
        # Esc at the end stays in the parser until ESCAPE_WAIT passes with nothing after it.
        self._keep(self._input.read_keys())
        if self._flush is not None:
            self._flush.cancel()
        self._flush = asyncio.get_running_loop().call_later(ESCAPE_WAIT, self._flushed)

    def _flushed(self) -> None:
        self._flush = None
        keys = self._input.flush_keys()
        if keys and keys[-1].key == Keys.Escape:
            self._keep(keys[:-1])
            self._on_escape()
        else:
            self._keep(keys)

    def _keep(self, keys: list[KeyPress]) -> None:
        if keys:
            store_typeahead(self._input, keys)


def prompt_message(mode: str | None) -> FormattedText:
    """The start of the input line: the permission mode, if known, so it is always in sight (yolo in red, as it
    runs everything without asking), then the prompt sign."""
    if mode is None:
        return FormattedText([("bold", PROMPT)])
    return FormattedText([("ansired" if mode == "yolo" else "ansibrightblack", f"[{mode}] "), ("bold", PROMPT)])


class PromptInput:
    """Reads one input at a time from the terminal (see the module's docstring)."""

    def __init__(
        self,
        home: Path,
        commands: Mapping[str, str],
        cwd: Path,
        redact: Callable[[str], str],
        mode: Callable[[], str] | None = None,
        shown: Callable[[], None] | None = None,
    ) -> None:
        """``mode``, when given, names the permission mode at the start of every input line (``[ask] › ``);
        ``shown``, when given, is called once the first input line is on the screen."""
        self._mode = mode
        self._shown = shown
        history: History
        try:
            home.mkdir(parents=True, exist_ok=True)
            history = _RedactingHistory(home / HISTORY_FILE, redact)
        except OSError:
            history = InMemoryHistory()
        self._session: PromptSession[str] = PromptSession(
            history=history,
            completer=ChatCompleter(commands, cwd),
            complete_while_typing=True,
            key_bindings=_bindings(),
            prompt_continuation=CONTINUATION,
            enable_suspend=True,
            output=create_output(sys.stdout),  # the terminal as it is now, before the chat redacts sys.stdout
        )
        self._watch: _KeyWatch | None = None
        if shown is not None:
            self._session.app.after_render += self._first_render

    def _first_render(self, app: Any) -> None:
        self._session.app.after_render -= self._first_render
        if self._shown is not None:
            self._shown()

    async def read(self) -> str:
        """The next input; ``KeyboardInterrupt`` for Ctrl-C on an empty line, ``EOFError`` for Ctrl-D."""
        message = prompt_message(self._mode() if self._mode is not None else None)
        # The chat handles SIGINT itself (while a turn runs); at the prompt Ctrl-C is a key, not a signal.
        # An error elsewhere in the loop (a background task's, a stray client closed late) is logged as asyncio
        # logs it: prompt_toolkit's own handler would print it over the input line and wait for Enter, hung.
        return await self._session.prompt_async(message, handle_sigint=False, set_exception_handler=False)

    @contextlib.contextmanager
    def watching(self, on_escape: Callable[[], None]) -> Iterator[None]:
        """While a turn runs: Esc alone calls ``on_escape``, other keys are kept for the next prompt (see the
        module's docstring). Nothing is watched when stdin is not a terminal."""
        if not sys.stdin.isatty():
            yield
            return
        self._watch = _KeyWatch(self._session.input, on_escape)
        self._watch.start()
        try:
            yield
        finally:
            watch, self._watch = self._watch, None
            watch.stop()

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Inside, the terminal is as it was before :meth:`watching` (a permission question reads a line)."""
        watch = self._watch
        if watch is None:
            yield
            return
        watch.stop()
        try:
            yield
        finally:
            if self._watch is watch:
                watch.start()

    def abort(self) -> None:
        """End a read in progress with ``EOFError`` (the chat is being shut down)."""
        app = self._session.app
        if app.is_running:
            app.exit(exception=EOFError())
