"""Who may do what: the permission mode, the approver, and what the user allowed for the whole session.

Only actions that change something are gated: ``edit``, ``delete``, ``move`` and ``execute``. Reading and
searching are always allowed (paths are already confined to the workspace).

=============  ==========================  ==============================
mode           edit / delete / move        execute
=============  ==========================  ==============================
read-only      refused                     refused
ask (default)  ask the approver            ask the approver
accept-edits   allowed                     ask the approver
yolo           allowed                     allowed
=============  ==========================  ==============================

An "allow always" answer is remembered for the session: for edits the whole kind is allowed from then on;
for a simple command its program (the first shell word) is, so "always" on ``pytest -q`` also allows
``pytest tests/unit``. A command with shell syntax that can chain or redirect (``;``, ``&&``, ``|``, ``>``,
``$(...)``...) is remembered only as that exact command line, so ``pytest; rm -rf x`` never rides on an
earlier "always allow pytest", and "always" on ``rm -rf build && make`` does not allow every ``rm``.
"""

from __future__ import annotations

import re
import shlex

from codling.errors import PermissionDenied
from codling.tools.base import PermissionMode
from codling.tools.ports import Approver, PermissionRequest, ToolKind

GATED_KINDS: frozenset[ToolKind] = frozenset({"edit", "delete", "move", "execute"})

# Anything that can chain, substitute or redirect makes a command more than "run this program".
_SHELL_SYNTAX = re.compile(r"[;&|<>`\n\r]|\$\(")


class Permissions:
    """Decides, per tool call, whether it may run: by mode, by remembered answers, or by asking."""

    def __init__(self, mode: PermissionMode, approver: Approver | None) -> None:
        self._mode: PermissionMode = mode
        self.approver = approver
        self._always: set[tuple[str, str]] = set()
        self._of: Permissions | None = None
        """The session's permissions, when these are an unattended view of them (their mode is read live)."""

    @property
    def mode(self) -> PermissionMode:
        """The permission mode now (an unattended view reads the session's)."""
        return self._of.mode if self._of is not None else self._mode

    @mode.setter
    def mode(self, mode: PermissionMode) -> None:
        if self._of is not None:
            self._of.mode = mode
        else:
            self._mode = mode

    async def check(self, request: PermissionRequest) -> None:
        """Return if ``request`` may go ahead; else raise :class:`PermissionDenied` saying why, for the model.

        ``asyncio.CancelledError`` from the approver propagates.
        """
        if request.kind not in GATED_KINDS or self.mode == "yolo":
            return
        if self.mode == "read-only":
            raise PermissionDenied(
                f"codling is in read-only mode, so {request.title} was not run; tell the user, who can "
                "switch the mode to ask, accept-edits or yolo"
            )
        if self.mode == "accept-edits" and request.kind != "execute":
            return
        key = _remember_key(request)
        if key is not None and key in self._always:
            return
        if self.approver is None:
            raise PermissionDenied(
                f"{request.title} needs the user's permission in {self.mode} mode, but no one can be asked "
                "in this session; tell the user, who can switch the mode to allow it"
            )
        decision = await self.approver.ask(request)
        if decision == "reject":
            raise PermissionDenied(
                f"The user rejected {request.title}. Do not retry it; ask the user what to do instead "
                "or continue with something else."
            )
        if decision == "allow_always" and key is not None:
            self._always.add(key)

    def view(self, approver: Approver | None) -> Permissions:
        """A view with the same mode (read live: a change applies at once) and remembered answers, asking
        ``approver`` (a delegate's session wraps its own approver without touching these)."""
        permissions = Permissions(self.mode, approver)
        permissions._of = self
        permissions._always = self._always
        return permissions

    def unattended(self) -> Permissions:
        """A view with no one to ask, for work the user does not watch (a special turn): what would need a
        question is refused, with a message saying so."""
        return self.view(None)

    @property
    def always_allowed(self) -> frozenset[tuple[str, str]]:
        """What the user allowed for the session: ``("edit", "*")``, ``("execute", "pytest")``, or
        ``("execute-exact", "make && make test")`` for a command with shell syntax."""
        return frozenset(self._always)


def command_program(command: str) -> str | None:
    """The program a shell command runs first (``pytest`` for ``pytest -q``), or ``None`` if there is none.

    Leading ``NAME=value`` assignments are skipped; a path stays whole (``./run.sh`` is not ``run.sh``).
    """
    try:
        words = shlex.split(command, comments=True)
    except ValueError:  # unbalanced quotes: fall back to plain words
        words = command.split()
    for word in words:
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", word, flags=re.DOTALL):
            continue
        return word
    return None


def _remember_key(request: PermissionRequest) -> tuple[str, str] | None:
    if request.kind != "execute":
        return (request.kind, "*")
    command = request.subject.strip()
    if _SHELL_SYNTAX.search(command):
        return ("execute-exact", command)
    program = command_program(command)
    return None if program is None else ("execute", program)
