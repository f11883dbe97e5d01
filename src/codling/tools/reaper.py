"""A per-command subreaper: what a command starts cannot slip out of reach by leaving its process tree.

A process that starts a daemon (``setsid … &``, a double fork) and clears its environment leaves the command's
process group and loses ``CODLING_COMMAND_ID``; its parent exits and the kernel hands it to init, where
nothing ties it to the command any more. On Linux ``LocalTerminal`` therefore runs each command under this
small program, run by path as ``python -I -S reaper.py STATUS_FD GRACE LC_CTYPE SANDBOX SHELL ARG...`` (standard
library only, no ``site``: about 25 ms), in a session of its own, with stdout and stderr on the command's
output pipe and stdin on a control pipe from codling. It makes itself a *child subreaper*
(``prctl(PR_SET_CHILD_SUBREAPER)``), so orphans are handed to it instead of init, and starts ``SHELL ARG...``
in a new session (as codling did before: ``kill 0`` in a command cannot reach the reaper) with stdin
``/dev/null``, the output pipe, and SIGPIPE and SIGXFSZ at their defaults (Python ignores them). Then it lets
go of the output pipe, or its end of file would never come, and writes to ``STATUS_FD``:

* ``pid N`` once the shell runs (its pid is its process group's id), or ``error ERRNO`` if it could not start;
* ``exit W`` when the shell ends (W: its raw wait status). Background processes keep running meanwhile, so
  codling can still read what they print for a moment, as it always did.

End of file on stdin (codling closed it, or codling died) means the command is over: every process below the
reaper, found by a walk of ``/proc`` by parent pid, gets SIGTERM, ``GRACE`` seconds to go, then SIGKILL until
none is left; then the reaper exits as the shell did (same code, or killed by the same signal). SIGTERM,
SIGHUP and SIGINT to the reaper do the same. ``LC_CTYPE`` is ``-`` (unset) or ``=VALUE``: the variable as
codling meant it, because Python's start-up sets it in a C locale (PEP 538), which the command must not see.
``SANDBOX`` is ``-`` (unconfined) or ``=POLICY``: the reaper makes the sandbox's namespaces and mounts, and the
shell it forks restricts itself with Landlock before it execs, so the reaper stays outside the command's reach
(``start``, ``sandbox/confine.py``); when it cannot be confined, the reaper writes ``unconfinable REASON`` and
exits 126, nothing run.

In an editor's terminal a confined command runs under it too (``python -I -S reaper.py terminal GRACE SANDBOX
SHELL ARG...``), on the terminal's own stdio: when the shell ends (or SIGTERM comes) everything below the reaper
is stopped, so a daemon that cleared its environment and left the process group does not outlive the command.

An MCP stdio server runs under it too (``python -I -S reaper.py serve GRACE LC_CTYPE SANDBOX PATH ARGV0 ARG...``,
spawned by the MCP SDK in a session of its own): the server, started at ``PATH`` in a session of its own, gets the
reaper's stdin, stdout and stderr (the JSON-RPC pipes, the error log), which the reaper then lets go of, keeping
only a watch on stdout. The server's end (the SDK closed its stdin, or it crashed), SIGTERM (the SDK's own kill,
which reaches only the reaper's group), and codling going away (its end of stdout closed: the watch reports an
error) each stop everything below the reaper, ``setsid`` grandchildren included; then it exits as the server did.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import time

REAPER = os.path.abspath(__file__)
_PR_SET_CHILD_SUBREAPER = 36
KILL_SECONDS = 5.0
"""How long SIGKILL sweeps go on after the grace: what is still there then is not ours to kill."""


def reaper_argv(
    status_fd: int, grace: float, lc_ctype: str | None, argv: list[str], sandbox: str | None = None
) -> list[str]:
    """The argv that runs ``argv`` under the reaper, reporting on ``status_fd``, confined to ``sandbox`` (a
    policy of ``sandbox/confine.py``; None: unconfined)."""
    return [sys.executable, "-I", "-S", REAPER, str(status_fd), repr(grace), _mark(lc_ctype), _mark(sandbox), *argv]


def server_argv(
    grace: float, lc_ctype: str | None, path: str, argv: list[str], sandbox: str | None = None
) -> list[str]:
    """The argv that runs an MCP stdio server (the program at ``path``, with ``argv``) under the reaper,
    confined to ``sandbox`` (None: unconfined)."""
    return [sys.executable, "-I", "-S", REAPER, "serve", repr(grace), _mark(lc_ctype), _mark(sandbox), path, *argv]


def terminal_argv(grace: float, sandbox: str, argv: list[str]) -> list[str]:
    """The argv an editor's terminal runs for ``argv`` confined to ``sandbox``: under the reaper, which stops
    what the command leaves behind when it ends (there is no pipe from codling there: its own end is the end)."""
    return [sys.executable, "-I", "-S", REAPER, "terminal", repr(grace), _mark(sandbox), *argv]


UNCONFINABLE = "codling: the sandbox cannot run here: "
"""How the reaper's message starts (exit code 126) when an editor terminal's command cannot be confined."""


def _mark(value: str | None) -> str:
    """An optional argument: ``-`` for None, else ``=VALUE``."""
    return "-" if value is None else f"={value}"


class NotStarted(Exception):
    """The program did not start: ``line`` says why, as the status pipe does (``error ERRNO``,
    ``unconfinable REASON``)."""

    def __init__(self, line: str) -> None:
        super().__init__(line)
        self.line = line


def start(path: str, argv: list[str], sandbox: str, stdin: int | None = None) -> int:
    """Start the program at ``path`` in a session of its own (SIGPIPE and SIGXFSZ at their defaults, ``stdin``
    as its stdin if given), confined to the policy of ``sandbox`` (``_mark``'s); its pid, or ``NotStarted``.

    For a confined program the reaper makes the namespaces, covers and binds itself (``confine.prepare``: they
    then last until it exits, after it told codling the status, rather than hold up the command's end), then
    forks the program, which restricts itself with Landlock (``confine.restrict``) before it execs: the reaper
    stays outside that domain, so a command may not signal it, trace it or read its memory, and cannot end it
    to leave its own processes running past the command. A pipe closed on exec tells the reaper whether the
    exec happened, or why not."""
    if sandbox == "-":
        actions = [] if stdin is None else [(os.POSIX_SPAWN_DUP2, stdin, 0)]
        try:
            return os.posix_spawn(
                path, argv, os.environ, file_actions=actions, setsid=True, setsigdef=(signal.SIGPIPE, signal.SIGXFSZ)
            )
        except OSError as e:
            raise NotStarted(f"error {e.errno or 0}") from e
    sys.path.insert(0, os.path.join(os.path.dirname(REAPER), "sandbox"))
    import confine  # loaded by path: this file runs with -I, without the package on its path

    try:
        _, ruleset = confine.prepare(sandbox[1:])
    except confine.Unconfinable as e:
        raise NotStarted(f"unconfinable {e}") from e
    told, tell = os.pipe()  # both close on exec
    pid = os.fork()
    if pid == 0:  # the child: nothing here may return into the reaper's code
        try:
            # (exec resets the signals the reaper handles; those Python ignores stay ignored unless reset here)
            signal.signal(signal.SIGPIPE, signal.SIG_DFL)
            signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
            os.setsid()
            if stdin is not None:
                os.dup2(stdin, 0)
            try:
                confine.restrict(ruleset)
            except confine.Unconfinable as e:
                os.write(tell, f"unconfinable {e}".encode())
                os._exit(126)
            os.execve(path, argv, os.environ)
        except OSError as e:
            os.write(tell, f"error {e.errno or 0}".encode())
        except BaseException:
            os.write(tell, b"error 0")
        os._exit(127)
    os.close(tell)
    os.close(ruleset)
    said = b""
    while chunk := os.read(told, 4096):
        said += chunk
    os.close(told)
    if said:
        os.waitpid(pid, 0)
        raise NotStarted(said.decode(errors="replace"))
    return pid


def can_reap() -> bool:
    """Whether commands can run under a subreaper here (Linux, with an interpreter to run this file)."""
    return sys.platform.startswith("linux") and bool(sys.executable) and os.path.isdir("/proc/self")


def become_subreaper() -> bool:
    """Make orphaned descendants re-parent to this process; whether the system allowed it."""
    try:
        import ctypes

        return bool(ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):  # no prctl here
        return False


def descendants(root: int) -> set[int]:
    """Every live process below ``root``, by a walk of /proc's parent pids (empty without /proc)."""
    children: dict[int, list[int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return set()
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                # The command name (in parentheses) may hold spaces and parentheses: split after the last one.
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):  # gone meanwhile
            continue
        if fields[0] not in (b"Z", b"X"):  # a zombie has no children left and cannot be signalled
            children.setdefault(int(fields[1]), []).append(int(name))
    found: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


class Reaper:
    """The shell, its status, and a wake-up pipe that SIGCHLD and the stop signals write to."""

    def __init__(self, status_fd: int | None) -> None:
        self.status_fd = status_fd
        self.shell: int | None = None
        self.status: int | None = None
        self.stopping = False
        self._wake, wake_w = os.pipe()
        for fd in (self._wake, wake_w):
            os.set_blocking(fd, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(sig, self._stop)

    def _stop(self, *_: object) -> None:
        self.stopping = True

    def tell(self, line: str) -> None:
        """Write one line of status for codling (which may be gone: then nobody listens, the work goes on)."""
        if self.status_fd is None:
            return
        with contextlib.suppress(OSError):
            os.write(self.status_fd, f"{line}\n".encode())

    def reap(self) -> bool:
        """Collect every child that ended, noting the shell's status; whether any child is left."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return False
            if pid == 0:
                return True
            if pid == self.shell:
                self.status = status
                self.tell(f"exit {status}")

    def wait(self, seconds: float, control: int | None = None) -> None:
        """Wait up to ``seconds`` for a signal or, with ``control``, for end of file on it (then stop)."""
        fds = [self._wake] if control is None else [self._wake, control]
        ready, _, _ = select.select(fds, [], [], seconds)
        if self._wake in ready:
            while True:
                try:
                    if not os.read(self._wake, 512):
                        break
                except BlockingIOError:
                    break
        if control is not None and control in ready and not os.read(control, 512):
            self.stopping = True

    def watch(self, seconds: float, pipe: int) -> None:
        """Wait up to ``seconds`` for a signal or for the reader of ``pipe`` (a write end) to be gone (then stop)."""
        poller = select.poll()
        poller.register(self._wake, select.POLLIN)
        poller.register(pipe, 0)  # errors only: a pipe whose readers are all gone reports POLLERR
        for fd, events in poller.poll(seconds * 1000):
            if fd == pipe and events & (select.POLLERR | select.POLLHUP | select.POLLNVAL):
                self.stopping = True
        self.wait(0)

    def stop_all(self, grace: float) -> None:
        """SIGTERM everything below, ``grace`` seconds to go, then SIGKILL sweeps until none is left."""
        me = os.getpid()
        term_until = time.monotonic() + grace
        kill_until = term_until + KILL_SECONDS
        termed: set[int] = set()
        while self.reap():
            now = time.monotonic()
            below = descendants(me)
            if now < term_until:
                sig, targets = signal.SIGTERM, below - termed  # those forked meanwhile get theirs too
                termed |= below
            elif now < kill_until:
                sig, targets = signal.SIGKILL, below
            else:
                return  # another user's (a setuid program): we cannot, it goes to init
            if targets and self.shell is not None:
                # The shell's group at once, as before: a shell whose child dies first would say "Terminated".
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.shell, sig)
            for pid in targets:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, sig)
            self.wait(0.05 if sig == signal.SIGTERM else 0.01)


def _set_lc_ctype(mark: str) -> None:
    if mark == "-":
        os.environ.pop("LC_CTYPE", None)
    else:
        os.environ["LC_CTYPE"] = mark[1:]


def _say_not_started(e: NotStarted, path: str) -> int:
    """Say on stderr why ``path`` did not start (where no status pipe is: a server's log, an editor's
    terminal); the exit code that says it too (126: not confinable, 127: not startable)."""
    kind, _, detail = e.line.partition(" ")
    if kind == "unconfinable":
        os.write(2, f"{UNCONFINABLE}{detail}\n".encode())
        return 126
    os.write(2, f"cannot start {path}: {os.strerror(int(detail or 0))}\n".encode())
    return 127


def serve(grace: float, sandbox: str, path: str, argv: list[str]) -> int:
    """Run an MCP stdio server on the reaper's own stdio until it ends, SIGTERM comes or codling is gone; then
    stop everything below and return its exit code."""
    become_subreaper()
    reaper = Reaper(None)
    try:
        reaper.shell = start(path, argv, sandbox)
    except NotStarted as e:
        return _say_not_started(e, path)
    watched = os.dup(1)  # not inheritable: only the server may hold the pipes
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(null, fd)
    while not reaper.stopping and reaper.status is None:
        reaper.reap()
        if reaper.status is None:
            reaper.watch(1.0, watched)
    reaper.stop_all(grace)
    return _exit_as(reaper)


def in_terminal(grace: float, sandbox: str, argv: list[str]) -> int:
    """Run ``argv`` in the editor's terminal, on the reaper's own stdio (the terminal), until it exits or SIGTERM
    comes; then stop everything below (daemons it left included) and exit as it did."""
    become_subreaper()
    reaper = Reaper(None)
    try:
        reaper.shell = start(argv[0], argv, sandbox)
    except NotStarted as e:
        return _say_not_started(e, argv[0])
    while not reaper.stopping and reaper.status is None:
        reaper.reap()
        if reaper.status is None:
            reaper.wait(1.0)
    reaper.stop_all(grace)
    return _exit_as(reaper)


def main(argv: list[str]) -> int:
    """Run the command of ``argv`` (see the module docstring); the shell's exit code."""
    if argv[1] == "terminal":
        return in_terminal(float(argv[2]), argv[3], argv[4:])
    if argv[1] == "serve":
        _set_lc_ctype(argv[3])
        return serve(float(argv[2]), argv[4], argv[5], argv[6:])
    status_fd, grace, lc_ctype, sandbox, shell = int(argv[1]), float(argv[2]), argv[3], argv[4], argv[5:]
    os.set_inheritable(status_fd, False)  # the command must not hold it
    _set_lc_ctype(lc_ctype)
    become_subreaper()  # if refused, orphans escape us; codling's scan by CODLING_COMMAND_ID still runs
    reaper = Reaper(status_fd)
    null = os.open(os.devnull, os.O_RDWR)
    try:
        reaper.shell = start(shell[0], shell, sandbox, stdin=null)
    except NotStarted as e:
        reaper.tell(e.line)
        return 126 if e.line.startswith("unconfinable") else 127
    reaper.tell(f"pid {reaper.shell}")
    os.dup2(null, 1)  # only the command's processes may hold the output pipe
    os.dup2(null, 2)
    while not reaper.stopping:
        reaper.reap()
        reaper.wait(1.0, control=0)
    reaper.stop_all(grace)
    return _exit_as(reaper)


def _exit_as(reaper: Reaper) -> int:
    """The exit code of the shell (or server), or end by its signal; 128 + SIGTERM when it never ended."""
    if reaper.status is None:
        return 128 + signal.SIGTERM
    code = os.waitstatus_to_exitcode(reaper.status)
    if code < 0:  # end the way the shell did
        if -code != signal.SIGKILL:
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        return 128 - code
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
