"""Local ports: files on this machine's disk and commands in local subprocesses."""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
from collections.abc import Awaitable, Callable, Collection, Mapping
from pathlib import Path

from codling.errors import CommandError, MissingPathError, PathError, SandboxUnavailable
from codling.secrecy import scrubbed
from codling.text import TerminalText, counted_omission
from codling.tools.atomic import replace_file
from codling.tools.encoding import decode, encode
from codling.tools.paging import refuse_too_large
from codling.tools.ports import CommandResult
from codling.tools.processes import (
    CANNOT_FIND_STRAYS,
    COMMAND_ID_VARIABLE,
    PLAIN_OUTPUT_VARIABLES,
    can_find_strays,
    new_command_id,
    stop_command,
)
from codling.tools.reaper import KILL_SECONDS, can_reap, reaper_argv

_KILL_GRACE_SECONDS = 2.0
"""How long a process group gets between SIGTERM and SIGKILL."""

_PIPE_LINGER_SECONDS = 1.0
"""How long to keep reading after the shell exits, for output of children that still hold the pipe."""

_CHUNK = 65536


class LocalFileSystem:
    """Reads and writes text files on the local disk: UTF-8, or a legacy 8-bit encoding kept as it was
    (``tools/encoding.py``).

    Line endings are kept as they are (no newline translation), so editing a CRLF file keeps it CRLF. Writes
    are atomic (``tools/atomic.py``): a temporary file beside the target, fsynced, renamed over it, so a failed
    write (a full disk) or a crash leaves the old content, never a truncated file. The old file's mode and,
    where possible, owner are kept. A symbolic link keeps pointing at its file, which is replaced; a hard link
    is never written through: the path gets a new file and the file's other names keep the old content.
    """

    async def read_text(self, path: Path) -> str:
        """Return the file's text; raise ``PathError`` if it is missing, a directory, binary, or over
        ``paging.WHOLE_FILE_MAX_BYTES``."""
        return await asyncio.to_thread(_read_text, path)

    async def write_text(self, path: Path, content: str) -> None:
        """Create or replace the file, creating parent directories; raise ``PathError`` on failure."""
        await asyncio.to_thread(_write_text, path, content)


def _read_text(path: Path) -> str:
    import stat

    try:
        # Non-blocking, then checked: opening a named pipe to read would wait for a writer that never comes.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        try:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                raise IsADirectoryError(path)
            if not stat.S_ISREG(st.st_mode):
                raise PathError(f"{path} is not a regular file (a named pipe, socket or device), so it is not read")
            refuse_too_large(path, st.st_size)
            with open(fd, "rb", closefd=False) as f:
                data = f.read()
        finally:
            os.close(fd)
    except FileNotFoundError as e:
        raise MissingPathError(f"file {path} does not exist; use list_files to find the right path") from e
    except IsADirectoryError as e:
        raise PathError(f"{path} is a directory, not a file; use list_files to see what it contains") from e
    except PermissionError as e:
        raise PathError(f"{path} cannot be read: permission denied") from e
    except OSError as e:
        raise PathError(f"{path} cannot be read: {e.strerror or e}") from e
    return decode(data, path)


def _existing_bytes(path: Path) -> bytes | None:
    """What the regular file at ``path`` holds now (None if there is none), to write in its encoding."""
    try:
        return path.read_bytes() if path.is_file() else None
    except OSError:
        return None  # unreadable: the write itself will say why


def _write_text(path: Path, content: str) -> None:
    data = encode(content, path, _existing_bytes(path))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_file(path, data)
    except IsADirectoryError as e:
        raise PathError(f"{path} is a directory; give a file path to write") from e
    except (FileExistsError, NotADirectoryError) as e:
        raise PathError(f"cannot create {path}: a parent of it is a file, not a directory") from e
    except PermissionError as e:
        raise PathError(
            f"{path} cannot be written: permission denied (codling writes a new file beside it and renames it, "
            "so its directory must be writable too)"
        ) from e
    except OSError as e:
        raise PathError(f"{path} cannot be written: {e.strerror or e}; the file was not changed") from e


class LocalTerminal:
    """Runs commands with ``/bin/sh -c`` in their own process group, without the secrets of the environment.

    The command's environment is this process's (or ``env``) without its secret variables (``codling.secrecy``; the
    providers' credentials included), except those in ``allow``, plus ``CODLING_COMMAND_ID`` and the plain-output hints
    (``NO_COLOR``, ``TERM=dumb``, no pager: see ``tools/processes.py``). Output is cleaned as it arrives
    (``text.TerminalText``). stdin is ``/dev/null`` and stdout and stderr share one pipe. Output beyond ``output_limit``
    characters is dropped from the middle (the head and the tail are kept) while the pipe is still drained, so a chatty
    command never blocks. On timeout or cancellation, and when the command exits, everything it started still running
    (its process group, and where /proc exists what it started in new sessions: setsid, nohup, daemons) gets SIGTERM
    and, after a short grace, SIGKILL."""

    def __init__(
        self,
        shell: str = "/bin/sh",
        kill_grace: float = _KILL_GRACE_SECONDS,
        *,
        allow: Collection[str] = (),
        env: Mapping[str, str] | None = None,
        reaper: bool | None = None,
    ) -> None:
        self.shell = shell
        self.reaper = can_reap() if reaper is None else reaper
        """Whether commands run under a subreaper (``tools/reaper.py``); by default where there are any."""
        self.kill_grace = kill_grace
        self.allow = tuple(allow)
        """Secret variables commands may still see (``command_env_allow`` in config.toml)."""
        self._env = env

    def environment(self, command_id: str) -> dict[str, str]:
        """The environment a command runs in (see the class docstring)."""
        from codling.llm.providers import credential_names

        base = os.environ if self._env is None else self._env
        return {
            **scrubbed(base, self.allow, credential_names()),
            **PLAIN_OUTPUT_VARIABLES,
            COMMAND_ID_VARIABLE: command_id,
        }

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
        """Run ``command`` in ``cwd``, confined to ``sandbox`` by the reaper; see the class docstring for how
        output and stopping work (a local subprocess has no terminal to announce: ``on_terminal`` is never
        called)."""
        if sandbox is not None and not self.reaper:
            raise SandboxUnavailable("the sandbox needs Linux, with /proc")
        loop = asyncio.get_running_loop()
        command_id = new_command_id()
        env = self.environment(command_id)
        argv = [self.shell, "-c", command]
        read_fd, write_fd = os.pipe()
        control_r = control_w = status_r = status_w = -1
        if self.reaper:
            control_r, control_w = os.pipe()
            status_r, status_w = os.pipe()
            argv = reaper_argv(status_w, self.kill_grace, env.get("LC_CTYPE"), argv, sandbox)
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                cwd=cwd,
                env=env,
                stdin=control_r if self.reaper else asyncio.subprocess.DEVNULL,
                stdout=write_fd,
                stderr=write_fd,
                start_new_session=True,
                pass_fds=(status_w,) if self.reaper else (),
            )
        except OSError as e:
            for fd in (read_fd, control_w, status_r):
                if fd >= 0:
                    os.close(fd)
            raise CommandError(f"could not start the command in {cwd}: {e.strerror or e}") from e
        finally:
            # The child has its own copies; ours must go or the pipes never report EOF.
            for fd in (write_fd, control_r, status_w):
                if fd >= 0:
                    os.close(fd)
        shell = _Shell(proc, control_w, status_r)

        pipe = os.fdopen(read_fd, "rb", buffering=0)
        capture = _Capture(output_limit)
        transport: asyncio.BaseTransport | None = None
        drain: asyncio.Task[None] | None = None
        timed_out = False
        exit_code: int | None = None
        try:
            await shell.started(cwd)
            # Our own pipe (not asyncio's) so we can stop reading while background children still hold it.
            reader = asyncio.StreamReader(limit=_CHUNK)
            transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
            drain = asyncio.create_task(_drain(reader, capture))
            try:
                exit_code = await asyncio.wait_for(shell.wait(), timeout)
            except TimeoutError:
                timed_out = True
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(drain), _PIPE_LINGER_SECONDS)
            # Whatever the command left running in the background goes with it, as documented for run_command.
            await self._stop(shell, drain, command_id)
        except BaseException:  # cancellation above all: nothing of the command may outlive the call
            await self._stop(shell, drain, command_id)
            raise
        finally:
            shell.close()
            if drain is not None:
                drain.cancel()
                await asyncio.wait([drain])  # unlike awaiting it, never swallows our own cancellation
            if transport is not None:
                transport.close()  # closes the pipe too
            else:
                pipe.close()
        output, truncated = capture.result()
        if timed_out and not can_find_strays():
            output = f"{output}\n{CANNOT_FIND_STRAYS}" if output else CANNOT_FIND_STRAYS
        return CommandResult(exit_code=exit_code, output=output, truncated=truncated, timed_out=timed_out)

    async def _stop(self, shell: _Shell, drain: asyncio.Task[None] | None, command_id: str) -> None:
        """Stop everything of the command: the reaper stops what is below it (SIGTERM, a grace, SIGKILL);
        then, as a second net, the process group and whatever carries the command's id."""
        proc = shell.proc
        try:
            if shell.release():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(proc.wait()), self.kill_grace + KILL_SECONDS + 1)
            # Settled once the shell (or its reaper) was reaped and every holder of the pipe closed it.
            await stop_command(
                command_id,
                shell.pgid,
                self.kill_grace,
                lambda: proc.returncode is not None and (drain is None or drain.done()),
            )
        finally:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(proc.wait()), self.kill_grace)


class _Shell:
    """The shell of one command: run directly (``proc`` is the shell) or under the reaper (``tools/reaper.py``),
    which tells the shell's pid and status on the status pipe and stops everything when its control pipe
    closes."""

    def __init__(self, proc: asyncio.subprocess.Process, control: int, status: int) -> None:
        self.proc = proc
        self.pgid: int | None = proc.pid if control < 0 else None
        """The shell's process group (``start_new_session`` or the reaper's ``setsid`` makes it the leader)."""
        self._control = control
        self._pipe = os.fdopen(status, "rb", buffering=0) if status >= 0 else None
        self._status: asyncio.StreamReader | None = None
        self._transport: asyncio.BaseTransport | None = None

    async def started(self, cwd: Path) -> None:
        """Learn the shell's pid from the reaper; raise ``CommandError`` if it could not start the shell."""
        if self._pipe is None:
            return
        self._status = status = asyncio.StreamReader()
        loop = asyncio.get_running_loop()
        self._transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(status), self._pipe)
        line = (await status.readline()).split()
        if line[:1] == [b"pid"]:
            self.pgid = int(line[1])
        elif line[:1] == [b"error"]:
            raise CommandError(f"could not start the command in {cwd}: {os.strerror(int(line[1]))}")
        elif line[:1] == [b"unconfinable"]:
            raise SandboxUnavailable(b" ".join(line[1:]).decode(errors="replace"))

    async def wait(self) -> int:
        """The shell's exit code, or minus the signal that killed it."""
        if self._status is not None:
            line = (await self._status.readline()).split()
            if line[:1] == [b"exit"]:
                return os.waitstatus_to_exitcode(int(line[1]))
        # The shell itself; or the reaper ended without a word (killed): its own status is all there is.
        return await self.proc.wait()

    def release(self) -> bool:
        """Tell the reaper the command is over (it stops everything below it and exits); whether there is one."""
        if self._control < 0:
            return False
        os.close(self._control)
        self._control = -1
        return True

    def close(self) -> None:
        """Let go of the pipes (end of file tells the reaper to stop, if not told yet)."""
        self.release()
        if self._transport is not None:
            self._transport.close()  # closes the pipe too
        elif self._pipe is not None:
            self._pipe.close()


async def _drain(reader: asyncio.StreamReader, capture: _Capture) -> None:
    while chunk := await reader.read(_CHUNK):
        capture.feed(chunk)
    capture.finish()


class _Capture:
    """Decodes output incrementally as plain text (``TerminalText``: no colours or progress-bar rewrites, which
    would cost the model tokens and show as escapes), keeping the first and last parts once it exceeds the
    limit."""

    def __init__(self, limit: int) -> None:
        self.limit = max(limit, 0)
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._plain = TerminalText()
        self._head = ""
        self._tail = ""
        self._total = 0
        self._breaks = 0

    def feed(self, data: bytes) -> None:
        self._add(self._plain.feed(self._decoder.decode(data)))

    def finish(self) -> None:
        self._add(self._plain.feed(self._decoder.decode(b"", final=True)) + self._plain.finish())

    def _add(self, text: str) -> None:
        if not text:
            return
        self._total += len(text)
        self._breaks += text.count("\n")
        room = self.limit - len(self._head)
        if room > 0:
            self._head += text[:room]
            text = text[room:]
        if text:
            self._tail = (self._tail + text)[-self.limit :] if self.limit else ""

    def result(self) -> tuple[str, bool]:
        """The captured text (head, an omission note, tail) and whether anything was dropped."""
        if self._total <= self.limit:
            return self._head + self._tail, False
        longest = f"\n[... {counted_omission(self._total, self._breaks)} ...]\n"
        budget = self.limit - len(longest)
        if budget <= 0:
            return self._head[: self.limit], True
        head = self._head[: budget - budget // 2]
        # The stream's last part may begin inside the head when little was dropped.
        tail = (self._head + self._tail)[-(budget // 2) :] if budget // 2 else ""
        # The note says how many line breaks were dropped too, so the lines before a shown tail can be counted.
        breaks = self._breaks - head.count("\n") - tail.count("\n")
        note = counted_omission(self._total - len(head) - len(tail), breaks)
        return f"{head}\n[... {note} ...]\n{tail}", True
