"""The input line of ``codling chat``, on prompt_toolkit: history, multi-line editing, completion.

Enter sends. Alt-Enter (Esc then Enter), or Enter after a trailing backslash, starts a new line; pasted text
keeps its lines. (Ctrl-J stays Enter: a line typed ahead while a turn runs reaches the prompt with the
terminal's newline, and must still be sent.) Up and Down walk the history, kept in
``$CODLING_HOME/prompt_history`` with secrets redacted as history.jsonl has them. Typing (or Tab) completes
slash commands at the start of the input and ``@paths`` anywhere. Ctrl-C clears a line that has text; on an
empty line it raises ``KeyboardInterrupt``, and Ctrl-D on an empty line raises ``EOFError`` (the chat decides
what they mean).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent, Completer, Completion, PathCompleter
from prompt_toolkit.document import Document
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.output import create_output

PROMPT = "› "
CONTINUATION = "  "
"""What starts each further line of a multi-line input."""

HISTORY_FILE = "prompt_history"


class _RedactingHistory(FileHistory):
    """A file history that stores each entry with secrets replaced (see ``codling.secrecy``)."""

    def __init__(self, path: Path, redact: Callable[[str], str]) -> None:
        super().__init__(str(path))
        self._redact = redact

    def store_string(self, string: str) -> None:
        """Append the entry, redacted; a history that cannot be written is not worth failing a prompt for."""
        with contextlib.suppress(OSError):
            super().store_string(self._redact(string))


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


class PromptInput:
    """Reads one input at a time from the terminal (see the module's docstring)."""

    def __init__(self, home: Path, commands: Mapping[str, str], cwd: Path, redact: Callable[[str], str]) -> None:
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

    async def read(self) -> str:
        """The next input; ``KeyboardInterrupt`` for Ctrl-C on an empty line, ``EOFError`` for Ctrl-D."""
        message = FormattedText([("bold", PROMPT)])
        # The chat handles SIGINT itself (while a turn runs); at the prompt Ctrl-C is a key, not a signal.
        return await self._session.prompt_async(message, handle_sigint=False)

    def abort(self) -> None:
        """End a read in progress with ``EOFError`` (the chat is being shut down)."""
        app = self._session.app
        if app.is_running:
            app.exit(exception=EOFError())
