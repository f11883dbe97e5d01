"""A session's MCP servers: started in the background, their tools listed, their calls run, stopped at the end.

Each server runs in a task of its own (:class:`McpServer`), which connects through pydantic-ai's
``MCPToolset`` (stdio, streamable HTTP or SSE, over fastmcp and the MCP SDK), lists the server's tools and then
holds the connection open until the session stops it; the connection is entered and left in that one task, as
the MCP SDK's task groups require. Nothing here blocks ``session/new``: :meth:`McpServers.start` only creates
the tasks (pydantic-ai's MCP modules, slow to import, are imported in a thread), and a turn waits for the
servers still starting (:meth:`McpServers.starting`, :meth:`McpServer.settled`), each one at most
``startup_timeout`` seconds from its start.

A server that stops working during a call is *crashed*: the next call of one of its tools starts it again, once
a session. A server that cannot start (a missing program, an exit, a refused connection, a timeout) or that
stops working again is *failed*: its tools are gone for the rest of the session. Either way a
:class:`McpNotice` says why, with the tail of what a stdio server wrote to stderr. Notices go to the listener
(:meth:`McpServers.listen`: the session, which shows them to the user).
Stopping a stdio server closes its stdin and then ends its whole process tree (the MCP SDK's shutdown), so
nothing is left running after :meth:`McpServers.stop`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

from codling.errors import ToolError
from codling.mcp_servers import McpServerSpec
from codling.tools.mcp.names import tool_name
from codling.tools.mcp.results import McpResult, McpTool, describe_exception, result_of, result_text, tool_of
from codling.tools.sandbox.policy import Sandbox

log = logging.getLogger(__name__)

ServerStatus = Literal["starting", "ready", "crashed", "failed", "stopped"]
"""``crashed``: the server stopped working during a call; the next call of one of its tools restarts it (once
a session), so its tools stay offered."""

RESTARTS = 1
"""How many times a server that stopped working is started again (at the next call of one of its tools)."""

STDERR_TAIL_CHARS = 2_000
"""How much of a failed stdio server's stderr the user sees."""

MAX_TOOLS = 100
"""Most tools one server may offer the model (a server with more is cut, and the user told)."""


@dataclass(frozen=True)
class McpNotice:
    """Something the user should know about an MCP server: it failed to start, stopped working, or was cut."""

    server: str
    message: str
    """One line saying what happened, naming the server."""
    detail: str = ""
    """The server's last words on stderr (stdio), or the error's own text."""


Notify = Callable[[McpNotice], None]


class McpServer:
    """One MCP server of a session, from its start to its stop."""

    def __init__(
        self, spec: McpServerSpec, cwd: Path, startup_timeout: float, notify: Notify, sandbox: Sandbox | None = None
    ) -> None:
        self.spec = spec
        self._sandbox = sandbox
        self.status: ServerStatus = "starting"
        self._cwd = cwd
        self._startup_timeout = startup_timeout
        self._notify = notify
        self._toolset: Any = None
        self._settled = asyncio.Event()
        self._stop = asyncio.Event()
        self._errlog: IO[bytes] | None = None
        self._task: asyncio.Task[None] | None = None
        self._restarts_left = RESTARTS
        self._closing = False
        self._restarting = asyncio.Lock()
        self.raw_tools: list[Any] = []
        """The server's tools as it lists them (MCP SDK ``Tool``s), once it is ready."""

    def start(self) -> None:
        """Start connecting in the background (once, and never after ``stop``)."""
        if self._task is None and not self._stop.is_set() and not self._closing:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"mcp-{self.spec.name}")

    @property
    def is_settled(self) -> bool:
        """Whether the server is past starting (ready, failed or stopped)."""
        return self._settled.is_set()

    async def settled(self) -> None:
        """Wait until the server is ready or failed (bounded by its startup timeout)."""
        await self._settled.wait()

    async def _run(self) -> None:
        try:
            toolset = await self._connect()
        except asyncio.CancelledError:
            self._settle("stopped")
            raise
        except Exception as e:
            self._fail(f"MCP server {self.spec.name} ({self.spec.describe()}) did not start", e)
            return
        try:
            await self._stop.wait()
        finally:
            # Left in the task that entered it: the MCP SDK's task groups must be exited where they began.
            with contextlib.suppress(Exception):
                await asyncio.shield(toolset.__aexit__(None, None, None))
            self._close_errlog()

    async def _connect(self) -> Any:
        policy = None
        if self.spec.sandbox != "off" and self._sandbox is not None:
            policy = self._sandbox.policy("network" if self.spec.sandbox == "network" else None)
        toolset = self._toolset = await build_toolset(
            self.spec, self._cwd, self._startup_timeout, self._stderr(), policy
        )
        try:
            async with asyncio.timeout(self._startup_timeout):
                await toolset.__aenter__()
                try:
                    self.raw_tools = list(await toolset.list_tools())
                except BaseException:
                    await asyncio.shield(toolset.__aexit__(None, None, None))
                    raise
        except TimeoutError as e:
            raise TimeoutError(f"no answer within {self._startup_timeout:g} s") from e
        if len(self.raw_tools) > MAX_TOOLS:
            self._notify(
                McpNotice(
                    self.spec.name,
                    f"MCP server {self.spec.name} offers {len(self.raw_tools)} tools; "
                    f"the model gets the first {MAX_TOOLS}",
                )
            )
            self.raw_tools = self.raw_tools[:MAX_TOOLS]
        self._settle("ready")
        log.info("MCP server %s ready: %d tools", self.spec.name, len(self.raw_tools))
        return toolset

    def status_now(self) -> ServerStatus:
        """The server's status as it is now: it changes while a call awaits (a type checker would keep the one
        it narrowed before the await)."""
        return self.status

    def _settle(self, status: ServerStatus) -> None:
        self.status = status
        self._settled.set()

    def _fail(self, message: str, error: BaseException | None) -> None:
        """Mark the server failed (its tools are gone) and tell the user why, with its stderr's tail."""
        if self.status in ("failed", "stopped"):
            return
        tail = self.stderr_tail()
        detail = tail or (describe_exception(error) if error is not None else "")
        if error is not None and tail:
            message = f"{message}: {describe_exception(error)}"
        message, detail = self.spec.scrub(message), self.spec.scrub(detail)
        log.warning("%s", message)
        self._settle("failed")
        self._stop.set()
        self._notify(McpNotice(self.spec.name, message, detail))

    def _crash(self, message: str, error: BaseException) -> None:
        """The server stopped working: let it go (its task leaves the connection, a stdio process ends) and tell
        the user, with its stderr's tail; its tools stay, and the next call starts it again."""
        tail = self.stderr_tail()
        message = self.spec.scrub(f"{message}: {describe_exception(error)}; it will be restarted at its next call")
        detail = self.spec.scrub(tail or describe_exception(error))
        log.warning("%s", message)
        self.status = "crashed"
        self._stop.set()
        self._notify(McpNotice(self.spec.name, message, detail))

    async def _restart(self, tool: McpTool) -> None:
        """Start a crashed server again (once a session) before calling ``tool``; a :class:`ToolError` saying
        so when it does not start (it is then failed)."""
        async with self._restarting:
            if self.status != "crashed":  # another call restarted it meanwhile
                return
            if self._task is not None:
                await asyncio.gather(self._task, return_exceptions=True)  # the old connection is closed
            self._restarts_left -= 1
            self.status = "starting"
            self._settled = asyncio.Event()
            self._stop = asyncio.Event()
            self._task = None
            self.start()
            if self._task is None:  # stopped meanwhile
                self._settle("stopped")
            await self._settled.wait()
        if self.status_now() != "ready":
            raise ToolError(
                f"The MCP server {self.spec.name} stopped working earlier and did not start again, so {tool.tool} "
                "cannot be called; its tools are gone for the rest of this session (the user was shown why)."
            )
        log.info("MCP server %s restarted", self.spec.name)

    async def call(self, tool: McpTool, args: dict[str, Any], timeout: float, *, images: bool = False) -> McpResult:
        """Run ``tool`` with ``args``; its result for the model (its images kept when ``images``: the model sees
        them). A :class:`ToolError` for an error the tool reported, a timeout, or a server that stopped working
        (which is then failed)."""
        if self.status == "crashed":
            await self._restart(tool)
        if self.status != "ready":
            raise ToolError(f"The MCP server {self.spec.name} is not running, so {tool.tool} cannot be called.")
        try:
            async with asyncio.timeout(timeout):
                result = await self._toolset.client.call_tool(tool.tool, args, raise_on_error=False)
        except TimeoutError as e:
            raise ToolError(
                f"{tool.tool} on MCP server {self.spec.name} did not answer within {timeout:g} s and was cancelled."
            ) from e
        except Exception as e:
            if is_protocol_error(e):
                raise ToolError(f"MCP server {self.spec.name} refused {tool.tool}: {describe_exception(e)}") from e
            tail = self.stderr_tail()
            status = self.status_now()
            if status == "ready" and self._restarts_left > 0:
                self._crash(f"MCP server {self.spec.name} stopped working during {tool.tool}", e)
                after = "it will be started again when one of its tools is called next"
            elif status == "crashed":  # another call's failure already said so
                after = "it will be started again when one of its tools is called next"
            else:
                again = " again, after it had been restarted once" if self._restarts_left < RESTARTS else ""
                self._fail(f"MCP server {self.spec.name} stopped working{again} during {tool.tool}", e)
                after = f"it stopped working{again}, so its tools are gone for the rest of this session"
            raise ToolError(
                self.spec.scrub(
                    f"The MCP server {self.spec.name} stopped working while running {tool.tool} "
                    f"({describe_exception(e)}); {after}." + (f"\nIts last output:\n{tail}" if tail else "")
                )
            ) from e
        if result.is_error:
            text = result_text(result.content, result.structured_content)
            raise ToolError(f"{tool.tool} on MCP server {self.spec.name} failed: {text or 'no message'}")
        return result_of(result.content, result.structured_content, images=images)

    def _stderr(self) -> IO[bytes] | None:
        if self.spec.transport != "stdio":
            return None
        # The server's stderr, read with pread (never moving the offset the server's writes share); closed
        # when the server stops.
        self._errlog = tempfile.TemporaryFile(prefix="codling-mcp-")  # noqa: SIM115
        return self._errlog

    def stderr_tail(self) -> str:
        """The last lines a stdio server wrote to stderr ("" for none)."""
        if self._errlog is None or self._errlog.closed:
            return ""
        fd = self._errlog.fileno()
        size = os.fstat(fd).st_size
        start = max(0, size - STDERR_TAIL_CHARS)
        data = os.pread(fd, size - start, start).decode("utf-8", "replace")
        if start:
            data = data.partition("\n")[2] or data
        return data.strip()

    def _close_errlog(self) -> None:
        if self._errlog is not None:
            self._errlog.close()

    async def stop(self) -> None:
        """Disconnect (a stdio server's process tree ends); wait until it has."""
        self._closing = True
        self._stop.set()
        if self._task is None:  # never started: it never will
            self._settle("stopped")
            return
        if not self._settled.is_set():
            self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        if self.status != "failed":
            self.status = "stopped"
        self._close_errlog()


class McpServers:
    """The MCP servers of one session (never shared with another session)."""

    def __init__(
        self,
        specs: tuple[McpServerSpec, ...],
        cwd: Path,
        *,
        startup_timeout: float = 30.0,
        tool_timeout: float = 120.0,
        sandbox: Sandbox | None = None,
    ) -> None:
        self.specs = specs
        self.tool_timeout = tool_timeout
        self._listener: Notify | None = None
        self._pending: list[McpNotice] = []
        self._servers = [McpServer(spec, cwd, startup_timeout, self._notify, sandbox) for spec in specs]
        self._started = False
        self._tools: dict[str, tuple[McpServer, McpTool]] = {}
        self._named: set[int] = set()

    def listen(self, notify: Notify) -> None:
        """Send notices to ``notify`` from now on, first those that came before (they wait until then)."""
        self._listener = notify
        pending, self._pending = self._pending, []
        for notice in pending:
            notify(notice)

    def start(self) -> None:
        """Start every server in the background (once; later calls do nothing)."""
        if self._started:
            return
        self._started = True
        for server in self._servers:
            server.start()

    async def ready(self) -> None:
        """Wait for the servers still starting (each bounded by the startup timeout)."""
        self.start()
        await asyncio.gather(*(server.settled() for server in self._servers))

    def starting(self) -> tuple[McpServer, ...]:
        """The servers still starting (after :meth:`start`)."""
        return tuple(server for server in self._servers if not server.is_settled)

    @property
    def servers(self) -> tuple[McpServer, ...]:
        """Every server, in the order they were named."""
        return tuple(self._servers)

    def tools(self) -> tuple[McpTool, ...]:
        """The tools of the servers that are ready, under their model-facing names."""
        self._name_new_tools()
        return tuple(tool for server, tool in self._tools.values() if server.status in ("ready", "crashed"))

    def find(self, name: str) -> tuple[McpServer, McpTool] | None:
        """The server and tool behind a model-facing name (None: not an MCP tool of this session)."""
        self._name_new_tools()
        return self._tools.get(name)

    async def stop(self) -> None:
        """Stop every server and wait until each has."""
        await asyncio.gather(*(server.stop() for server in self._servers), return_exceptions=True)

    def _name_new_tools(self) -> None:
        # Names are given once, in the order servers became ready, so a tool keeps its name all session.
        taken = set(self._tools)
        for index, server in enumerate(self._servers):
            if server.status != "ready" or index in self._named:
                continue
            self._named.add(index)
            for raw in server.raw_tools:
                tool = tool_of(server.spec.name, raw, tool_name(server.spec.name, str(raw.name), taken))
                taken.add(tool.name)
                self._tools[tool.name] = (server, tool)

    def _notify(self, notice: McpNotice) -> None:
        if self._listener is not None:
            self._listener(notice)
        else:
            self._pending.append(notice)


async def build_toolset(
    spec: McpServerSpec, cwd: Path, startup_timeout: float, errlog: IO[bytes] | None, policy: str | None = None
) -> Any:
    """pydantic-ai's ``MCPToolset`` for ``spec``, confined to ``policy`` if any (its modules imported in a
    thread: they take seconds)."""
    module = await asyncio.to_thread(_import_mcp)
    return module.toolset_for(spec, cwd, startup_timeout, errlog, policy)


def _import_mcp() -> Any:
    from codling.startup import imports_without_gc

    with imports_without_gc():
        from codling.tools.mcp import connect

    return connect


def is_protocol_error(error: BaseException) -> bool:
    """Whether ``error`` is the server answering a call with a JSON-RPC error (it still works), rather than
    the connection or the server failing."""
    from codling.tools.mcp.connect import protocol_error

    return protocol_error(error)
