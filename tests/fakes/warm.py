"""Warm codling processes for the e2e tests: a server per test worker that has imported what a codling process
imports (pydantic-ai, the provider SDKs, the ACP SDK, typer and rich, codling itself) and forks a codling on
request, so that a test's ``codling acp`` or ``codling run`` skips the ~3 CPU-seconds of imports a cold start
pays (the suite starts ~150 of them on two cores). The fake MCP server (:data:`MCP_SERVER`, the mcp SDK's
~2 CPU-seconds) is forked the same way.

A warm codling is a real process: started through :data:`LAUNCHER` (a few milliseconds of standard library), it
gets the launcher's argv, environment, working directory and stdin, stdout and stderr, runs ``python -m codling``'s
own entry point, and the launcher passes signals on and ends with its exit status (``warm_launch.py``). What a
warm codling does not reproduce, the tests that check it start codling cold (:func:`cold`): its imports
(``tests/unit/test_startup.py``, the chat's first line) and what ``/proc`` shows of its environment (the seal).
A test that signals or inspects the codling itself (a SIGKILL, ``/proc/<pid>/limits``) finds it with
:func:`behind`. Its controlling terminal, if the launcher has one, stays the launcher's: the terminal's signals
reach the launcher, which passes them on.

Coverage measures only cold processes, so under ``scripts/coverage`` every codling starts cold.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import os
import resource
import runpy
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

LAUNCHER = Path(__file__).with_name("warm_launch.py")
MCP_SERVER = "tests.fakes.mcp_server"
"""The fake MCP server's module (``tests/fakes/mcp_server.py``)."""


def cold(name: str = "codling") -> list[str]:
    """The command that runs module ``name`` from scratch, as an editor or a shell starts codling."""
    return [sys.executable, "-m", name]


_server: subprocess.Popen[bytes] | None = None
_socket = ""
_lock = threading.Lock()


def codling() -> list[str]:
    """The command that starts a codling the way this test worker can afford: forked by the worker's warm
    server (started on first use), or from scratch under coverage."""
    return module("codling")


def module(name: str) -> list[str]:
    """The command that runs module ``name`` as ``python -m`` would (``codling``, or ``MCP_SERVER``): forked by
    this worker's warm server (started on first use), or from scratch under coverage."""
    global _server, _socket
    if any(variable.startswith("COVERAGE_PROCESS") for variable in os.environ):
        return cold(name)
    with _lock:
        if _server is None or _server.poll() is not None:
            _socket = str(Path(tempfile.mkdtemp(prefix="codling-warm-")) / "socket")
            env = {name: os.environ[name] for name in ("PATH", "PYTHONPATH") if name in os.environ}
            _server = subprocess.Popen(
                [sys.executable, "-m", "tests.fakes.warm", _socket],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env={**env, "HOME": str(Path(_socket).parent)},
                cwd=Path(__file__).resolve().parents[2],
            )
            assert _server.stdout is not None
            ready = _server.stdout.readline()
            if ready != b"ready\n":
                raise RuntimeError(f"the warm codling server did not start: {ready!r}")
            atexit.register(_stop, _server, Path(_socket).parent)
    return [sys.executable, "-S", str(LAUNCHER), _socket, name]


def server_pid() -> int:
    """The pid of this worker's warm server (started if need be): what it forks are its children."""
    codling()
    assert _server is not None
    return _server.pid


def behind(pid: int) -> int:
    """The pid of the codling behind the launcher ``pid`` while it runs (``pid`` itself for a cold codling)."""
    note = _behind_dir(_socket) / str(pid) if _socket else None
    try:
        return int(note.read_text()) if note else pid
    except FileNotFoundError:
        return pid


def _behind_dir(socket_path: str) -> Path:
    """Where the server notes, per launcher pid, the pid of the codling it forked for it."""
    return Path(socket_path).with_name("behind")


def _stop(server: subprocess.Popen[bytes], directory: Path) -> None:
    assert server.stdin is not None
    server.stdin.close()  # the server kills what it forked and ends
    server.wait()
    shutil.rmtree(directory, ignore_errors=True)


@dataclass(frozen=True)
class Request:
    """What a launcher asks for: a module run as ``python -m`` would (codling, or the fake MCP server) with these
    args, environment and working directory, on these descriptors (its stdin, stdout and stderr)."""

    module: str
    argv: list[str]
    env: dict[str, str]
    cwd: str
    limits: dict[str, tuple[int, int]]
    fds: list[int]


def _preload() -> None:
    """Import what a codling process imports, and build what it builds once per process."""
    import codling.acp.client_ports
    import codling.acp.mcp_specs
    import codling.acp.translate
    import codling.brain.context.pin_capture
    import codling.cli.acp_main
    import codling.cli.app
    import codling.store.index
    import codling.store.live  # noqa: F401
    from codling.llm.providers import warm_up_provider
    from codling.llm.tokens import warm_up
    from codling.store.records import build_records

    warm_up()
    for model in ("openai:m", "anthropic:m", "google-gla:m"):
        warm_up_provider(model)
    build_records()
    import tests.fakes.mcp_server  # noqa: F401  (the fake MCP server: the mcp SDK)


def _receive(conn: socket.socket) -> Request:
    head, fds, _flags, _address = socket.recv_fds(conn, 4, 3)
    while len(head) < 4:
        head += conn.recv(4 - len(head))
    (size,) = struct.unpack("!I", head)
    body = b""
    while len(body) < size:
        chunk = conn.recv(size - len(body))
        if not chunk:
            raise EOFError("the launcher went away")
        body += chunk
    raw = json.loads(body)

    def text(value: str) -> str:
        return os.fsdecode(value.encode("latin-1"))

    return Request(
        module=raw["module"],
        argv=[text(arg) for arg in raw["argv"]],
        env={text(k): text(v) for k, v in raw["env"]},
        cwd=text(raw["cwd"]),
        limits={name: (soft, hard) for name, (soft, hard) in raw["limits"].items()},
        fds=list(fds),
    )


def serve(path: str) -> Request:
    """Fork a codling for each launcher that connects to ``path``; returns only in a forked child, with what
    its launcher asked for. Ends the process (killing what it forked) when its stdin ends."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, ("accept", 0))
    selector.register(0, selectors.EVENT_READ, ("parent", 0))
    children: dict[int, tuple[socket.socket, int, Path]] = {}
    behind = _behind_dir(path)
    behind.mkdir()
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        for key, _events in selector.select():
            what, pid = key.data
            if what in ("ended", "launcher") and pid not in children:
                continue  # both ends went in one wake-up: the codling was reaped and its launcher let go already
            if what == "accept":
                conn, _ = listener.accept()
                try:
                    request = _receive(conn)
                except (OSError, EOFError, ValueError):
                    conn.close()
                    continue
                assert threading.active_count() == 1, "a warm server must not fork with threads running"
                pid = os.fork()
                if pid == 0:
                    selector.close()
                    listener.close()
                    conn.close()
                    for other, pidfd, _note in children.values():
                        other.close()
                        os.close(pidfd)
                    return request
                for fd in request.fds:
                    os.close(fd)
                pidfd = os.pidfd_open(pid)
                launcher, _uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
                note = behind / str(launcher)
                note.write_text(str(pid))
                children[pid] = (conn, pidfd, note)
                selector.register(pidfd, selectors.EVENT_READ, ("ended", pid))
                selector.register(conn, selectors.EVENT_READ, ("launcher", pid))
                _send(conn, f"pid {pid}\n")
            elif what == "ended":
                conn, pidfd, note = children.pop(pid)
                _, status = os.waitpid(pid, 0)
                note.unlink()
                selector.unregister(pidfd)
                os.close(pidfd)
                if conn.fileno() >= 0:
                    _send(conn, f"status {status}\n")
                    selector.unregister(conn)
                    conn.close()
            elif what == "launcher":  # gone (killed): so is its codling
                conn, _pidfd, _note = children[pid]
                selector.unregister(conn)
                conn.close()
                os.kill(pid, signal.SIGKILL)
            else:  # the test worker has ended
                for pid in children:
                    os.kill(pid, signal.SIGKILL)
                for pid in children:
                    os.waitpid(pid, 0)
                sys.exit(0)


def _send(conn: socket.socket, line: str) -> None:
    with contextlib.suppress(OSError):  # the launcher was killed; its codling is killed or reaped already
        conn.sendall(line.encode())


def _become(request: Request) -> None:
    """Turn this forked child into the process its launcher asked for."""
    for target, fd in enumerate(request.fds):
        os.dup2(fd, target)
    os.closerange(3, 65536)
    os.chdir(request.cwd)
    os.environ.clear()
    os.environ.update(request.env)
    sys.dont_write_bytecode = bool(request.env.get("PYTHONDONTWRITEBYTECODE"))
    for name, limit in request.limits.items():  # the launcher's, as a process started in its place inherits them
        resource.setrlimit(getattr(resource, name), limit)
    sys.argv = ["-m", *request.argv]
    sys.modules.pop(request.module, None)  # preloaded; run as __main__ afresh, as ``python -m`` would
    sys.orig_argv = [sys.executable, "-m", request.module, *request.argv]
    for name, fd, mode in (("stdin", 0, "r"), ("stdout", 1, "w"), ("stderr", 2, "w")):
        old = getattr(sys, name)
        stream = io.TextIOWrapper(
            io.open(fd, f"{mode}b", closefd=False),  # noqa: SIM115, UP020 (CPython's own standard streams)
            encoding=old.encoding,
            errors=old.errors,
            newline="\n" if mode == "w" else None,
            line_buffering=name == "stderr" or (name == "stdout" and os.isatty(fd)),
        )
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def main() -> None:
    _preload()
    import gc

    gc.freeze()  # what the forks share stays shared: their collections leave it alone
    request = serve(sys.argv[1])
    _become(request)
    code = _run(request.module)
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code)


def _run(module: str) -> int:
    """Run ``module`` (codling's entry point) and end as Python would, minus the tearing down of every module,
    which would touch (and so copy) every page the fork shares with the server."""
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as e:
        code = _exit_code(e.code)
    except BaseException as e:
        sys.excepthook(type(e), e, e.__traceback__)
        code = 1
        if isinstance(e, KeyboardInterrupt):  # Python ends killed by the SIGINT it did not handle
            code = -signal.SIGINT
    threading._shutdown()  # type: ignore[attr-defined]  # joins the threads that are not daemons, as at exit
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None and not stream.closed:
                stream.flush()
        except OSError:
            code = code or 120  # as Python does when it cannot flush its standard streams at exit
    return code


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


if __name__ == "__main__":
    main()
