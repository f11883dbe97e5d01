"""The chat's seams (``cli/chat.py``): what it reads inputs from (:class:`ChatInput`), what draws and asks for it
(:class:`ChatViews`), the model stack loading behind it (:class:`Loading`), the keys watched while a turn runs
(:class:`TurnKeys`), and the wrappers it puts around them."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from codling.errors import CodlingError

if TYPE_CHECKING:
    from codling.cli.notify import Notifier
    from codling.cli.render import TerminalRenderer
    from codling.tools.ports import Answer, Approver, PermissionRequest


@dataclass(frozen=True)
class ChatViews:
    """What draws a chat's turns (``renderer``), asks about its tool calls (``approver``; None: nobody, the mode
    decides) and rings when one waits or ends (``notifier``; None: nothing does). Made at the chat's first turn:
    their modules load the brain's events, which the input line does not wait for."""

    renderer: TerminalRenderer
    approver: Approver | None = None
    notifier: Notifier | None = None


class ChatInput(Protocol):
    """Where the chat reads its inputs."""

    async def read(self) -> str:
        """The next input; ``KeyboardInterrupt`` for Ctrl-C on an empty line, ``EOFError`` at the end."""
        ...

    def abort(self) -> None:
        """End a read in progress with ``EOFError``."""
        ...


class Loading(Protocol):
    """The model stack, loading in the background (``cli/preload.Preload``)."""

    done: concurrent.futures.Future[CodlingError | None]
    """Resolves to the error that makes the model unusable, or None."""

    def start(self) -> None:
        """Start loading, unless it has started."""
        ...


class TurnKeys(Protocol):
    """The keys of the terminal while a turn runs (``cli/chat_input.PromptInput`` on a terminal)."""

    def watching(self, on_escape: Callable[[], None]) -> AbstractContextManager[None]:
        """Inside, Esc calls ``on_escape``; anything else typed is kept for the next input."""
        ...

    def paused(self) -> AbstractContextManager[None]:
        """Inside, the terminal is as it was before :meth:`watching` (a question reads a line from it)."""
        ...


@dataclass(frozen=True)
class PausingApprover:
    """An approver whose questions read the terminal with ``keys`` paused, as they read it between turns."""

    inner: Approver
    keys: TurnKeys

    async def ask(self, request: PermissionRequest) -> Answer:
        """``inner``'s answer."""
        with self.keys.paused():
            return await self.inner.ask(request)


@dataclass(frozen=True)
class SettledInput:
    """A :class:`ChatInput` that runs ``settle`` before each read: the chat's output is redacted
    (``oneshot.redacted_output``), which keeps back the end of a text that may start a secret until the next
    write says; before the chat waits for the user, that end is written out."""

    inner: ChatInput
    settle: Callable[[], None]

    async def read(self) -> str:
        """The next input of ``inner``, once the output is settled."""
        self.settle()
        return await self.inner.read()

    def abort(self) -> None:
        """End ``inner``'s read in progress."""
        self.inner.abort()


def notifying(approver: Approver | None, notifier: Notifier | None) -> Approver | None:
    """``approver``, announcing its questions through ``notifier`` (``cli/notify.py``) when there is one."""
    if approver is None or notifier is None:
        return approver
    from codling.cli.notify import NotifyingApprover

    return NotifyingApprover(approver, notifier)
