"""Ports over the ACP client connection: permission requests become ``session/request_permission``; where
the client offers them, files go through ``fs/*`` and commands run in its ``terminal/*``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Collection, Mapping
from pathlib import Path

from acp import RequestError, helpers
from acp.interfaces import Client
from acp.schema import (
    ContentToolCallContent,
    EnvVariable,
    FileEditToolCallContent,
    PermissionOption,
    TerminalToolCallContent,
    ToolCallUpdate,
)

from codling.acp.client_paths import ClientPaths
from codling.acp.rpc_errors import RESOURCE_NOT_FOUND, client_error
from codling.acp.translate import locations
from codling.errors import CommandError, PathError, SandboxUnavailable
from codling.secrecy import secret_names
from codling.text import plain_terminal_text
from codling.tools.paging import refuse_too_large, size_on_disk
from codling.tools.ports import CommandResult, Decision, FileSystem, PermissionRequest
from codling.tools.processes import COMMAND_ID_VARIABLE, PLAIN_OUTPUT_VARIABLES, new_command_id, stop_command
from codling.tools.reaper import UNCONFINABLE, terminal_argv
from codling.vocabulary import Location

log = logging.getLogger(__name__)


def options_for(request: PermissionRequest) -> list[PermissionOption]:
    """The choices offered for ``request``: allow, "always allow" naming what it covers (only when it would be
    remembered: never for a protected path), "always, everywhere" for a whole program (a rule the user owns),
    reject."""
    options = [PermissionOption(option_id="allow_once", name="Allow", kind="allow_once")]
    if request.always is not None:
        name = f"Always allow ({request.always}, for this session)"
        options.append(PermissionOption(option_id="allow_always", name=name, kind="allow_always"))
    if request.everywhere is not None:
        name = f"Always allow, everywhere ({request.everywhere})"
        options.append(PermissionOption(option_id="allow_everywhere", name=name, kind="allow_always"))
    options.append(PermissionOption(option_id="reject", name="Reject", kind="reject_once"))
    return options


_ALLOWING: dict[str, Decision] = {
    "allow_once": "allow_once",
    "allow_always": "allow_always",
    "allow_everywhere": "allow_everywhere",
}
"""The options that allow, by id, and what each decides."""


class AcpApprover:
    """Asks the editor's user, showing the actual command, or the path and the diff of an edit."""

    def __init__(self, client: Client, session_id: str, paths: ClientPaths | None = None) -> None:
        self._client = client
        self._session_id = session_id
        self._paths = paths or ClientPaths()

    async def ask(self, request: PermissionRequest) -> Decision:
        """Send session/request_permission and map the chosen option to a decision; an allowed call is shown
        running again (asking made it pending)."""
        content: list[ContentToolCallContent | FileEditToolCallContent | TerminalToolCallContent] = []
        if request.within is not None:  # asked under the call the editor shows, which keeps its title
            content.append(helpers.tool_content(helpers.text_block(request.title)))
        if request.diff is not None:
            d = request.diff
            content.append(helpers.tool_diff_content(self._paths(d.path), d.new_text, d.old_text))
        else:
            content.append(helpers.tool_content(helpers.text_block(request.subject)))
        shown = request.within
        tool_call = ToolCallUpdate(
            tool_call_id=shown.call_id if shown else request.tool_call_id,
            title=shown.title if shown else request.title,
            kind=shown.kind if shown else request.kind,
            status="pending",
            content=content,
            locations=None if shown else locations([Location(request.diff.path)] if request.diff else [], self._paths),
            raw_input=shown.raw_input if shown else request.raw_input,
        )
        response = await self._client.request_permission(
            session_id=self._session_id, tool_call=tool_call, options=options_for(request)
        )
        outcome = response.outcome
        if outcome.outcome == "selected" and outcome.option_id in _ALLOWING:
            running = helpers.update_tool_call(tool_call.tool_call_id, status="in_progress")
            await self._client.session_update(session_id=self._session_id, update=running)
            return _ALLOWING[outcome.option_id]
        return "reject"


class AcpFileSystem:
    """Files through the editor (``fs/read_text_file``, ``fs/write_text_file``): reads see unsaved buffers, and
    writes go through the editor, which saves and shows them. Used only when the client offers both (reading
    a buffer and writing the disk would lose the user's unsaved changes or the agent's edit). A file the editor
    does not have (resource not found: Zed knows only its worktrees' files) is read from disk. For any other
    error the disk says precisely what is wrong with the path (missing, a directory, not text); a file the disk
    could read was refused by the editor (its policy), and stays unread.

    Paths reach the editor as the client named its directories: ``paths`` maps each resolved root back
    to the path the client gave (a project opened through a symbolic link, or macOS's ``/tmp``)."""

    def __init__(self, client: Client, session_id: str, *, local: FileSystem, paths: ClientPaths | None = None) -> None:
        self._client = client
        self._session_id = session_id
        self._local = local
        self.client_path = paths or ClientPaths()
        """A resolved path as the editor knows it."""

    async def read_text(self, path: Path) -> str:
        """The file's text as the editor has it (unsaved changes included); a file whose copy on disk is over
        ``paging.WHOLE_FILE_MAX_BYTES`` is refused before the editor is asked for all of it."""
        size = await asyncio.to_thread(size_on_disk, path)
        if size is not None:
            refuse_too_large(path, size)
        try:
            response = await self._client.read_text_file(session_id=self._session_id, path=self.client_path(path))
        except RequestError as e:
            if e.code == RESOURCE_NOT_FOUND:  # the editor has no such file (Zed: one outside its worktrees)
                log.info("the client has no file %s (%s); reading it from disk", path, client_error(e))
                return await self._local.read_text(path)
            # The disk says precisely what is wrong with a path (missing, a directory, not text); a file the disk
            # would read is one the editor refused (a policy, a path outside what it shares): it stays unread.
            log.info("the client refused to read %s (%s); asking the disk why", path, client_error(e))
            await self._local.read_text(path)
            raise PathError(
                f"the editor refused to read {path}: {client_error(e)}. It was not read: the editor decides which "
                "files codling may read; ask the user for what you need from it"
            ) from e
        return response.content

    async def write_text(self, path: Path, content: str) -> None:
        """Create or replace the file through the editor."""
        try:
            # The editor opens the file's buffer; a new file's directory must exist first.
            await asyncio.to_thread(path.parent.mkdir, parents=True, exist_ok=True)
            await self._client.write_text_file(
                session_id=self._session_id, path=self.client_path(path), content=content
            )
        except OSError as e:
            raise PathError(f"cannot create the directory for {path}: {e.strerror or e}") from e
        except RequestError as e:
            raise PathError(f"the editor could not write {path}: {client_error(e)}") from e


_ENV = next((path for path in ("/usr/bin/env", "/bin/env") if os.path.exists(path)), "env")
"""env by its path: found on the editor's PATH, a workspace's .venv/bin could hold another, run unconfined."""

OUTPUT_BYTES_PER_CHAR = 4
"""The byte limit a terminal is asked for, per character of the output limit (UTF-8 needs at most four)."""


class AcpTerminal:
    """Commands in the editor's terminals (``terminal/*``): the user watches them run inside the tool call.

    ``sh -c`` runs the command line, as locally. On timeout the terminal is killed and its output so far
    returned; on cancellation (even while it is being created) it is killed too; it is always released, and
    the editor keeps showing its output in the tool call. What the command started in new sessions (setsid,
    nohup), which the editor's kill misses, is then stopped here, found by its ``CODLING_COMMAND_ID``.

    The command runs in the editor's environment, which ``terminal/create`` can only add to (its ``env``),
    not take from; so the command line is ``env -u NAME … sh -c <command>``, unsetting the secret variables
    (``codling.secrecy``, the providers' credentials included) but those in ``allow``. Their names are taken
    from ``environment``: this process's, inherited from the editor that started it.
    """

    def __init__(
        self,
        client: Client,
        session_id: str,
        *,
        shell: str = "/bin/sh",
        environment: Mapping[str, str] | None = None,
        allow: Collection[str] = (),
        kill_grace: float = 2.0,
    ) -> None:
        from codling.llm.providers import credential_names

        self._client = client
        self._session_id = session_id
        self._shell = shell
        env = os.environ if environment is None else environment
        self._hidden = sorted(secret_names(env, credential_names()) - set(allow))
        self._kill_grace = kill_grace

    def argv(self, command: str, sandbox: str | None = None) -> list[str]:
        """The program and arguments the editor is asked to run for ``command``, confined to ``sandbox`` under
        codling's reaper (``tools/reaper.py`` terminal mode; None: unconfined, as the command line alone)."""
        argv = [self._shell, "-c", command]
        if sandbox is not None:
            argv = terminal_argv(self._kill_grace, sandbox, argv)
        if not self._hidden:
            return argv
        return [_ENV, *(arg for name in self._hidden for arg in ("-u", name)), *argv]

    async def run(
        self,
        command: str,
        *,
        cwd: Path,
        timeout: float,
        output_limit: int,
        on_terminal: Callable[[str], Awaitable[None]] | None = None,
        sandbox: str | None = None,
    ) -> CommandResult:
        """Run ``command`` in a new terminal of the editor and wait for it (at most ``timeout`` seconds),
        confined to ``sandbox`` (codling's reaper wraps the command line; the card shows the command)."""
        if sandbox is not None and not sys.platform.startswith("linux"):
            raise SandboxUnavailable(f"the sandbox needs Linux; this is {sys.platform}")
        command_id = new_command_id()
        try:
            result = await self._run(
                self.argv(command, sandbox),
                command_id,
                cwd=cwd,
                timeout=timeout,
                output_limit=output_limit,
                on_terminal=on_terminal,
            )
            if sandbox is not None and result.exit_code == 126 and result.output.startswith(UNCONFINABLE):
                raise SandboxUnavailable(result.output.removeprefix(UNCONFINABLE).strip())
            return result
        finally:
            # The editor killed (or saw the end of) the terminal's process group; setsid'd strays remain.
            await stop_command(command_id, None, self._kill_grace)

    async def _run(
        self,
        argv: list[str],
        command_id: str,
        *,
        cwd: Path,
        timeout: float,
        output_limit: int,
        on_terminal: Callable[[str], Awaitable[None]] | None,
    ) -> CommandResult:
        terminal_id = await self._create(argv, command_id, cwd, output_limit)
        client, session_id = self._client, self._session_id
        try:
            if on_terminal is not None:
                await on_terminal(terminal_id)
            exit_code: int | None = None
            signal: str | None = None
            timed_out = False
            try:
                waited = client.wait_for_terminal_exit(session_id=session_id, terminal_id=terminal_id)
                exited = await asyncio.wait_for(waited, timeout)
                exit_code, signal = exited.exit_code, exited.signal
            except TimeoutError:
                timed_out = True
                await client.kill_terminal(session_id=session_id, terminal_id=terminal_id)
            output = await client.terminal_output(session_id=session_id, terminal_id=terminal_id)
        except asyncio.CancelledError:
            await _quietly(client.kill_terminal(session_id=session_id, terminal_id=terminal_id))
            raise
        except RequestError as e:
            raise CommandError(f"the editor's terminal failed: {client_error(e)}") from e
        finally:
            await _quietly(client.release_terminal(session_id=session_id, terminal_id=terminal_id))
        # A real terminal: programs colour and draw progress bars there; the model reads plain text.
        text = plain_terminal_text(output.output)
        if signal:
            text += f"\n[stopped by signal {signal}]"
        return CommandResult(exit_code, text, output.truncated, timed_out, terminal_id)

    async def _create(self, argv: list[str], command_id: str, cwd: Path, output_limit: int) -> str:
        """Start the terminal; a cancellation that arrives meanwhile still gets the terminal killed and
        released once the editor has answered (else the command would run on unseen)."""
        client, session_id = self._client, self._session_id
        creating = asyncio.ensure_future(
            client.create_terminal(
                session_id=session_id,
                command=argv[0],
                args=argv[1:],
                cwd=str(cwd),
                env=[
                    *(EnvVariable(name=name, value=value) for name, value in PLAIN_OUTPUT_VARIABLES.items()),
                    EnvVariable(name=COMMAND_ID_VARIABLE, value=command_id),
                ],
                output_byte_limit=output_limit * OUTPUT_BYTES_PER_CHAR,
            )
        )
        try:
            created = await asyncio.shield(creating)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                terminal_id = (await creating).terminal_id
                await _quietly(client.kill_terminal(session_id=session_id, terminal_id=terminal_id))
                await _quietly(client.release_terminal(session_id=session_id, terminal_id=terminal_id))
            raise
        except RequestError as e:
            raise CommandError(f"the editor could not start the command in {cwd}: {client_error(e)}") from e
        return created.terminal_id


async def _quietly(request: Awaitable[object]) -> None:
    """Send a clean-up request that must go out even if the caller is cancelled meanwhile (the shield keeps it
    going; the cancellation still propagates); its failure (the client is gone, the terminal already
    released) only gets logged."""
    try:
        await asyncio.shield(request)
    except (RequestError, ConnectionError) as e:
        log.info("terminal clean-up failed: %s", client_error(e) if isinstance(e, RequestError) else e)
