"""Who may do what: the permission mode, the approver, and what the user allowed for the whole session.

Only actions that change something are gated: ``edit``, ``delete``, ``move`` and ``execute``. Reading and
searching are always allowed (paths are already confined to the workspace).

=============  ====================  ==========================  ==============================
mode           edit / delete / move  ... of a protected path     execute, and MCP tool calls
=============  ====================  ==========================  ==============================
read-only      refused               refused                     refused
ask (default)  ask the approver      ask, every time             ask the approver
accept-edits   allowed               ask, every time             ask the approver
auto           allowed               ask, every time             commands in the sandbox: allowed;
                                                                 MCP tool calls: ask the approver
yolo           allowed               allowed                     allowed
=============  ====================  ==========================  ==============================

Commands run in the sandbox (``tools/sandbox/``) in every mode but yolo. A call that asks to lift it
(``PermissionRequest.lift``: the network, or all of it, with the model's reason) is asked about in every
mode, yolo with ``sandbox = "always"`` included, whatever the rules allow; "always" then covers the network
for that program, or the exact command run outside the sandbox.

An MCP server's tool (``PermissionRequest.mcp_tool``) is gated like a command whatever it says of itself: a
server's "read-only" hint is its author's claim, and the call runs code codling cannot see.

Protected paths (:mod:`codling.tools.protected`: files that make git, a shell, an editor or another agent run
programs without anyone choosing to, in the project, the user's home or codling's) are those of an edit, move
(either end) or delete; such a change is asked about whatever was "always allowed", and "always" given to it
counts as "once". The question's title says that the path is protected and why.

An "allow always" answer is remembered for the session: for edits the whole kind is allowed from then on;
for an MCP tool that tool of that server is; for a simple command its program (the first shell word) is,
so "always" on ``pytest -q`` also allows
``pytest tests/unit``; for git, its subcommand (``git status``). A command with shell syntax that can chain or
redirect (``;``, ``&&``, ``|``, ``>``, ``$(...)``, a second line...) is remembered only as that exact command
line, so ``pytest; rm -rf x`` never rides on an earlier "always allow pytest", and so is a command running a
destructive program (:data:`DESTRUCTIVE_PROGRAMS`, :data:`DESTRUCTIVE_GIT`): "always" on ``rm -rf NOTES.md``
does not allow every ``rm``. The answers are the session's: its store records each (``listen``) and a restored
or forked session starts with them (``remember``).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path

from codling.errors import PermissionDenied, RejectedError
from codling.permission_rules import PROJECT_RULES, USER_RULES, Rules, is_rules_file, save_allowed
from codling.tools.ports import Approver, PermissionRequest, Rejection
from codling.tools.protected import Protection
from codling.vocabulary import PermissionMode, ToolKind

GATED_KINDS: frozenset[ToolKind] = frozenset({"edit", "delete", "move", "execute"})


SHELL_SYNTAX = re.compile(r"[;&|<>`\n\r]|\$\(")
"""Anything that can chain, substitute or redirect: it makes a command more than "run this program"."""


class Permissions:
    """Decides, per tool call, whether it may run: by mode, by remembered answers, or by asking."""

    def __init__(
        self,
        mode: PermissionMode,
        approver: Approver | None,
        protection: Protection | None = None,
        rules: Rules | None = None,
        rules_home: Path | None = None,
    ) -> None:
        self._mode: PermissionMode = mode
        self._approver = approver
        self._protection = protection or Protection()
        self._rules = rules or Rules()
        """The user's rules for commands (``codling/permission_rules.py``)."""
        self._rules_home = rules_home
        """Where ``save_always`` writes (``$CODLING_HOME``; None: nowhere)."""
        """What is protected besides the paths protected in any directory (default: nothing more)."""
        self._always: set[tuple[str, str]] = set()
        self._listener: Callable[[tuple[str, str]], None] | None = None
        self._approved: dict[str, str] = {}
        """The calls a rule or an "always" answer let through without a question, with which (until taken)."""
        self._of: Permissions | None = None
        """The permissions these are a view of (their mode is read and set live, their answers shared)."""

    @property
    def approver(self) -> Approver | None:
        """Who is asked (None: no one can be; what needs a question is refused)."""
        return self._approver

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
        is_command = request.kind == "execute" or request.mcp_tool is not None
        rule = self.rules.verdict(request.subject) if request.kind == "execute" and request.mcp_tool is None else None
        if rule is not None and rule.verdict == "deny":
            raise PermissionDenied(
                f"{request.title} was not run: {rule.describe()} denies it. Do it another way, or tell the user, "
                "who owns the rule"
            )
        if not is_command and any(is_rules_file(Path(path)) for path in request.paths):
            raise PermissionDenied(
                f"{request.title} was not done: {PROJECT_RULES} holds the user's permission rules, which only the "
                "user may change; tell the user what you would change"
            )
        if request.kind not in GATED_KINDS and not is_command:
            return
        if self.mode == "yolo" and request.lift is None and (rule is None or rule.verdict != "ask"):
            return
        if self.mode == "read-only":
            raise PermissionDenied(
                f"codling is in read-only mode, so {request.title} was not run; tell the user, who can "
                "switch the mode to ask, accept-edits, auto or yolo"
            )
        if request.lift is not None:  # no rule and no mode lifts the sandbox: only the user, asked
            where = "with the network on" if request.lift == "network" else "outside the sandbox"
            what = f"running `{request.subject}` {where}"
            request = replace(request, title=f"{request.title} — {lift_words(request.lift, request.reason)}")
            key: tuple[str, str] | None = _lift_key(request)
            if rule is not None and rule.verdict == "ask":
                key = None
            elif key in self._always:
                (self._of or self)._approved[request.tool_call_id] = f"your “always” for {always_covers(key)}"
                return
            return await self._ask(request, key, what)
        if rule is not None and rule.verdict == "allow":
            (self._of or self)._approved[request.tool_call_id] = rule.describe()
            return
        if self.mode == "auto" and request.sandboxed and rule is None:
            return  # confined: what it can touch is the workspace, and the network is off
        guarded = None if is_command else await self._protection.find(request.paths)
        if rule is not None:  # an ask rule: asked every time, and an "always" answer is not remembered
            request = replace(request, title=f"{request.title} ({rule.describe()} asks)")
            key = None
        elif guarded is not None:
            request = replace(request, title=f"{request.title} (protected path: {guarded.why})")
            key = None  # asked every time, and an "always" answer is not remembered
        else:
            if self.mode in ("accept-edits", "auto") and not is_command:
                return
            key = _remember_key(request)
            if key is not None and key in self._always:
                (self._of or self)._approved[request.tool_call_id] = f"your “always” for {always_covers(key)}"
                return
        await self._ask(request, key)

    async def _ask(self, request: PermissionRequest, key: tuple[str, str] | None, lifting: str | None = None) -> None:
        """Ask the approver about ``request`` (remembering an "always" answer under ``key``); raise if refused.
        ``lifting`` names a lift of the sandbox in words (``running `pip install x` with the network on``)."""
        if self._approver is None:
            if lifting is not None:
                raise PermissionDenied(
                    f"Not run: {lifting} needs the user's approval, and no one can be asked in this session. Do "
                    "without it, or say in your answer what you needed and why"
                )
            raise PermissionDenied(
                f"{request.title} needs the user's permission in {self.mode} mode, but no one can be asked "
                "in this session; tell the user, who can switch the mode to allow it"
            )
        base = self._of or self
        everywhere = None
        if key is not None and key[0] == "execute" and base._rules_home is not None:
            everywhere = f"every `{key[1]}` command, in every session: an allow rule in $CODLING_HOME/{USER_RULES}"
        decision = await self._approver.ask(replace(request, always=always_covers(key), everywhere=everywhere))
        rejected = lifting or request.title
        if isinstance(decision, Rejection):
            raise RejectedError(
                f"The user rejected {rejected}, saying: {decision.reason}\nDo not retry it as it was; "
                "do what they said instead, or ask them."
            )
        if decision == "reject":
            raise RejectedError(
                f"The user rejected {rejected}. Do not retry it; ask the user what to do instead "
                "or continue with something else."
            )
        if decision == "allow_everywhere" and everywhere is not None and key is not None:
            self._promote([key[1]])
        elif decision in ("allow_always", "allow_everywhere") and key is not None and key not in self._always:
            self._always.add(key)
            if base._listener is not None:
                base._listener(key)

    def approved_by(self, tool_call_id: str) -> str | None:
        """What let the call through without a question, in words (the user's rule, or their "always" answer
        and what it covers), taken once; None when nothing did (it was asked, or the mode allows it)."""
        return (self._of or self)._approved.pop(tool_call_id, None)

    def remember(self, keys: Iterable[tuple[str, str]]) -> None:
        """Take "always" answers given before (a restored session's), as if given now (no listener is told)."""
        self._always.update(keys)

    def listen(self, listener: Callable[[tuple[str, str]], None] | None) -> None:
        """Tell ``listener`` each new "always" answer (the session records it, so it outlives the process)."""
        (self._of or self)._listener = listener

    @property
    def rules(self) -> Rules:
        """The user's rules in force."""
        return (self._of or self)._rules

    def save_always(self) -> tuple[list[str], Path] | None:
        """Make this session's "always" answers for whole programs (``pytest``, ``git status``) allow rules in
        every session: added to ``$CODLING_HOME/permissions.toml`` and in force here at once; what was added and
        where (None: this session has nowhere to save them). Exact commands stay the session's."""
        commands = sorted(value for kind, value in (self._of or self)._always if kind == "execute")
        path = self._promote(commands)
        return None if path is None else (commands, path)

    def _promote(self, commands: list[str]) -> Path | None:
        """Save ``commands`` as allow rules in ``$CODLING_HOME/permissions.toml``, in force here at once; the
        file (None: this session has nowhere to save them)."""
        base = self._of or self
        if base._rules_home is None:
            return None
        path = save_allowed(base._rules_home, commands)
        base._rules = base._rules + Rules.parse({"allow": commands}, f"$CODLING_HOME/{USER_RULES}", path)
        return path

    @property
    def remembered(self) -> frozenset[tuple[str, str]]:
        """The "always" answers in force: (kind, what) pairs, as ``always_covers`` describes them."""
        return frozenset(self._always)

    def view(self, approver: Approver | None) -> Permissions:
        """A view with the same mode (read live: a change applies at once) and remembered answers, asking
        ``approver`` (a delegate's session wraps its own approver without touching these)."""
        permissions = Permissions(self.mode, approver, self._protection, self._rules, self._rules_home)
        permissions._of = self
        permissions._always = self._always
        return permissions

    def unattended(self) -> Permissions:
        """A view with no one to ask, for work the user does not watch (a special turn): what would need a
        question is refused, with a message saying so."""
        return self.view(None)


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


def approved_note(approved_by: str) -> str:
    """What a card or a terminal line says of a call a rule or an "always" answer let through without a
    question (``approved_by``: which, in words)."""
    return f"Allowed without asking: {approved_by}"


def always_covers(key: tuple[str, str] | None) -> str | None:
    """What remembering ``key`` allows, in words for the prompt's "always" choice; None for nothing."""
    if key is None:
        return None
    kind, value = key
    if kind == "mcp":
        return f"every call of the MCP tool {value}"
    if kind == "execute":
        return f"every `{value}` command"
    if kind == "execute-exact":
        return "this exact command"
    if kind == "lift-network":
        return f"every `{value}` command with the network on"
    if kind == "lift-network-exact":
        return "this exact command with the network on"
    if kind == "lift-all":
        return f"every `{value}` command outside the sandbox"
    if kind == "lift-all-exact":
        return "this exact command, outside the sandbox"
    return "every edit" if kind == "edit" else f"every {kind} of a file"


DESTRUCTIVE_PROGRAMS = frozenset(
    {
        *("rm", "rmdir", "unlink", "shred", "truncate", "dd", "mkfs", "wipefs", "fdisk", "sfdisk", "parted"),
        *("chmod", "chown", "chgrp", "kill", "killall", "pkill", "reboot", "shutdown", "halt", "poweroff"),
        *("sudo", "su", "doas", "xargs"),
    }
)
"""Programs an "always" answer never covers beyond the exact command it was given for: ``rm -rf NOTES.md``
allowed always does not allow ``rm -rf src``."""

DESTRUCTIVE_GIT = frozenset(
    {
        *("push", "reset", "clean", "checkout", "restore", "switch", "rm", "rebase", "branch", "tag", "stash"),
        *("filter-branch", "filter-repo", "update-ref", "reflog", "gc", "prune", "worktree", "config", "remote"),
    }
)
"""git commands that can lose work or reach another machine: "always" covers the exact command only. Other git
commands are remembered by their subcommand (``git status``, ``git diff``), never as ``git``."""

_FIND_ACTIONS = re.compile(r"(^|\s)-(delete|exec|execdir|ok|okdir|fprint|fprintf|fls)\b")


def lift_words(lift: str, reason: str | None) -> str:
    """What lifting ``lift`` of the sandbox allows, in words for the question, with the model's reason."""
    what = (
        "with the network on (writes stay in the workspace, secrets stay hidden)"
        if lift == "network"
        else "outside the sandbox: it may write anywhere, read your secrets and use the network"
    )
    return f"{what}; the model says: {reason or 'no reason given'}"


def _lift_key(request: PermissionRequest) -> tuple[str, str]:
    """What an "always" answer to a lift covers: the network for that program (the exact command if it is
    more than one simple command, or a destructive one); the whole sandbox for a git command that only
    writes the repository (``git commit``, ``git add``: ``.git`` is read-only in the sandbox), else for that
    exact command only. An answer for the network never covers a whole lift."""
    kind, value = _remember_key(replace(request, lift=None)) or ("execute-exact", request.subject.strip())
    if request.lift == "network":
        return ("lift-network", value) if kind == "execute" else ("lift-network-exact", value)
    if kind == "execute" and value.startswith("git "):
        return ("lift-all", value)
    return ("lift-all-exact", request.subject.strip())


def _remember_key(request: PermissionRequest) -> tuple[str, str] | None:
    if request.mcp_tool is not None:
        return ("mcp", request.mcp_tool)
    if request.kind != "execute":
        return (request.kind, "*")
    command = request.subject.strip()
    if SHELL_SYNTAX.search(command):
        return ("execute-exact", command)
    program = command_program(command)
    if program is None:
        return None
    name = program.rsplit("/", 1)[-1]
    if name in DESTRUCTIVE_PROGRAMS or name.startswith("mkfs.") or (name == "find" and _FIND_ACTIONS.search(command)):
        return ("execute-exact", command)
    if name == "git":
        subcommand = _git_subcommand(command)
        if subcommand is None or subcommand in DESTRUCTIVE_GIT:
            return ("execute-exact", command)
        return ("execute", f"{program} {subcommand}")
    return ("execute", program)


def _git_subcommand(command: str) -> str | None:
    """The subcommand of a git command line (``status`` for ``git -C x status``); None when options before it
    make it unclear."""
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        return None
    words = [w for w in words if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", w, flags=re.DOTALL)][1:]
    while words and words[0].startswith("-"):
        if words[0] in ("-C", "-c") and len(words) > 1:
            words = words[2:]
        elif words[0] in ("--no-pager", "--paginate", "-p", "--no-optional-locks"):
            words = words[1:]
        else:
            return None
    return words[0] if words else None
