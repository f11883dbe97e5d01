"""The editor side of ACP's fs/* and terminal/* methods, for a RecordingClient that offers them.

Files are the real files on disk with unsaved buffers on top (a read sees a buffer first; a write saves to
disk and drops the buffer). Terminals run their command in a real subprocess (its own process group), collect
its output, and keep it after they are released, as an editor keeps showing a terminal in a tool call.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp import RequestError
from acp.schema import (
    CreateTerminalResponse,
    EnvVariable,
    ReadTextFileResponse,
    TerminalExitStatus,
    TerminalOutputResponse,
    WaitForTerminalExitResponse,
)

from tests.fakes.deadlines import deadline


@dataclass
class Terminal:
    """One terminal: its process, the output so far, and whether the agent released it."""

    command: list[str]
    cwd: str | None
    limit: int | None
    process: asyncio.subprocess.Process
    output: bytearray = field(default_factory=bytearray)
    reader: asyncio.Task[None] | None = None
    killed: bool = False
    released: bool = False

    def text(self) -> tuple[str, bool]:
        """The output as the client returns it: cut from the beginning to ``limit`` bytes."""
        data = bytes(self.output)
        truncated = self.limit is not None and len(data) > self.limit
        if self.limit is not None and truncated:
            data = data[-self.limit :]
        return data.decode("utf-8", "ignore"), truncated

    def status(self) -> TerminalExitStatus | None:
        code = self.process.returncode
        if code is None:
            return None
        return TerminalExitStatus(exit_code=None, signal="SIGKILL") if code < 0 else TerminalExitStatus(exit_code=code)


@dataclass
class FakeEditor:
    """Serves fs/* and terminal/* and records each call as ``(method, detail)``."""

    buffers: dict[Path, str] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)
    terminals: dict[str, Terminal] = field(default_factory=dict)
    create_gate: asyncio.Event | None = None
    """When given, terminal/create answers only once it is set (the command already runs meanwhile)."""
    read_gate: asyncio.Event | None = None
    """When given, fs/read_text_file answers only once it is set."""
    byte_limit: int | None = None
    """Output bytes a terminal keeps at most, whatever the agent asked for."""
    environment: dict[str, str] | None = None
    """The editor's own environment, which its terminals inherit (None: this process's)."""
    read_only: set[Path] = field(default_factory=set)
    """Files whose fs/write_text_file the editor refuses (with an error whose data says why)."""
    unknown: set[Path] = field(default_factory=set)
    """Files the editor answers resource-not-found for though they exist (Zed: files outside its worktrees)."""
    refused: dict[str, str] = field(default_factory=dict)
    """Methods the editor answers with an internal error, by name (e.g. "terminal/create"), with its details (as
    when the user closed the terminal, or the editor cannot start a process)."""
    _called: asyncio.Event = field(default_factory=asyncio.Event, init=False, repr=False)

    def _record(self, method: str, detail: str) -> None:
        self.calls.append((method, detail))
        self._called.set()
        if method in self.refused:
            raise RequestError.internal_error({"details": self.refused[method]})

    async def called(self, method: str, within: float = 10.0) -> None:
        """Wait until ``method`` has been called (a liveness deadline: a test fails rather than hangs)."""
        async with asyncio.timeout(deadline(within)):
            while method not in self.methods():
                self._called.clear()
                await self._called.wait()

    async def read_text_file(
        self, session_id: str, path: str, line: int | None = None, limit: int | None = None, **kwargs: Any
    ) -> ReadTextFileResponse:
        self._record("fs/read_text_file", path)
        if self.read_gate is not None:
            await self.read_gate.wait()
        if Path(path) in self.buffers:
            return ReadTextFileResponse(content=self.buffers[Path(path)])
        if Path(path) in self.unknown:
            raise RequestError.resource_not_found(path)
        try:
            return ReadTextFileResponse(content=Path(path).read_text(encoding="utf-8"))
        except OSError as e:
            raise RequestError.resource_not_found(path) from e

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any) -> None:
        self._record("fs/write_text_file", path)
        if Path(path) in self.read_only:
            raise RequestError.internal_error({"details": f"{Path(path).name} is read-only in this editor"})
        Path(path).write_text(content, encoding="utf-8")
        self.buffers.pop(Path(path), None)

    async def create_terminal(
        self,
        session_id: str,
        command: str,
        args: list[str] | None = None,
        env: list[EnvVariable] | None = None,
        cwd: str | None = None,
        output_byte_limit: int | None = None,
        **kwargs: Any,
    ) -> CreateTerminalResponse:
        argv = [command, *(args or [])]
        environment = dict(os.environ if self.environment is None else self.environment)
        environment.update({variable.name: variable.value for variable in env or []})
        self._record("terminal/create", " ".join(argv))
        process = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=environment,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        limits = [n for n in (output_byte_limit, self.byte_limit) if n is not None]
        terminal = Terminal(argv, cwd, min(limits) if limits else None, process)
        terminal.reader = asyncio.create_task(self._read(terminal))
        terminal_id = f"term-{len(self.terminals) + 1}"
        self.terminals[terminal_id] = terminal
        if self.create_gate is not None:
            await self.create_gate.wait()
        return CreateTerminalResponse(terminal_id=terminal_id)

    @staticmethod
    async def _read(terminal: Terminal) -> None:
        assert terminal.process.stdout is not None
        while chunk := await terminal.process.stdout.read(4096):
            terminal.output += chunk

    def _terminal(self, terminal_id: str) -> Terminal:
        terminal = self.terminals.get(terminal_id)
        if terminal is None or terminal.released:
            raise RequestError.invalid_params({"terminalId": f"no terminal {terminal_id}"})
        return terminal

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> WaitForTerminalExitResponse:
        self._record("terminal/wait_for_exit", terminal_id)
        terminal = self._terminal(terminal_id)
        await terminal.process.wait()
        assert terminal.reader is not None
        await terminal.reader
        status = terminal.status()
        assert status is not None
        return WaitForTerminalExitResponse(exit_code=status.exit_code, signal=status.signal)

    async def terminal_output(self, session_id: str, terminal_id: str, **kwargs: Any) -> TerminalOutputResponse:
        self._record("terminal/output", terminal_id)
        terminal = self._terminal(terminal_id)
        if terminal.process.returncode is not None and terminal.reader is not None:
            await terminal.reader
        text, truncated = terminal.text()
        return TerminalOutputResponse(output=text, truncated=truncated, exit_status=terminal.status())

    async def kill_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> None:
        self._record("terminal/kill", terminal_id)
        self._kill(self._terminal(terminal_id))

    async def release_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> None:
        self._record("terminal/release", terminal_id)
        terminal = self._terminal(terminal_id)
        self._kill(terminal)
        terminal.released = True

    @staticmethod
    def _kill(terminal: Terminal) -> None:
        if terminal.process.returncode is None:
            terminal.killed = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(terminal.process.pid, signal.SIGKILL)

    def showable(self, terminal_id: str) -> bool:
        """Whether a tool call may still name this terminal (it exists and was not released)."""
        terminal = self.terminals.get(terminal_id)
        return terminal is not None and not terminal.released

    def methods(self) -> list[str]:
        """The methods called, in order."""
        return [method for method, _ in self.calls]

    async def close(self) -> None:
        """Kill whatever still runs (a test that failed half-way)."""
        for terminal in self.terminals.values():
            self._kill(terminal)
            await terminal.process.wait()
