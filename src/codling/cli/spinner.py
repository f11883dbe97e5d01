"""The spinner ``codling run`` shows while the model or a tool works: a label and how long the wait has lasted."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:  # rich loads when a spinner first shows: the chat's input line does not wait for it
    from rich.console import RenderableType
    from rich.live import Live
    from rich.spinner import Spinner as RichSpinner

WORKING = "working…"

Clock = Callable[[], float]


def waited(seconds: float) -> str:
    """How long a wait has lasted, for the spinner: nothing under a second, then ``4s``, ``1m 05s``."""
    whole = int(seconds)
    if whole < 1:
        return ""
    minutes, rest = divmod(whole, 60)
    return f"{minutes}m {rest:02d}s" if minutes else f"{rest}s"


class Spinner:
    """A transient spinner with a label and the time since it appeared; it erases itself when stopped, so the
    cursor is back where it started. Without ``color`` it is drawn in plain characters (NO_COLOR still gets
    progress). A label change keeps the count: it is the same wait."""

    def __init__(self, stream: TextIO, *, color: bool, clock: Clock = time.monotonic) -> None:
        self._stream = stream
        self._color = color
        self._clock = clock
        self._live: Live | None = None
        self._spinner: RichSpinner | None = None
        self._label = WORKING
        self._since = 0.0

    def frame(self) -> RenderableType:
        """What the spinner shows now: the animation, the label, and the time waited so far."""
        from rich.spinner import Spinner as RichSpinner
        from rich.text import Text

        if self._spinner is None:
            self._spinner = RichSpinner("dots", style="cyan")
        elapsed = waited(self._clock() - self._since)
        self._spinner.update(text=Text(f"{self._label} {elapsed}".rstrip(), style="dim"))
        return self._spinner

    def start(self, label: str = WORKING) -> None:
        """Show the spinner with ``label``, or change the label of the running spinner in place."""
        self._label = label
        if self._live is not None:
            return
        from rich.console import Console
        from rich.live import Live

        self._since = self._clock()
        console = Console(
            file=self._stream,
            force_terminal=True,
            color_system="standard" if self._color else None,
            no_color=not self._color,
            highlight=False,
            soft_wrap=True,
        )
        # No stdout/stderr redirection: the renderer and the approver write to the real streams themselves.
        self._live = Live(
            get_renderable=self.frame,
            console=console,
            transient=True,
            refresh_per_second=12.5,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self._live.start()

    def stop(self) -> None:
        """Erase the spinner."""
        live, self._live = self._live, None
        if live is not None:
            live.stop()
