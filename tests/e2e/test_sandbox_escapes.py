"""The sandbox's escape battery, through real codling processes and the loopback model server.

One scripted ``run_command`` per run carries every probe (:data:`PROBES`, a ``/bin/sh`` script):

* writing outside the workspace: directly, through a symbolic link, from a ``setsid`` daemon at once and
  after the command has ended;
* git: a hook file, ``git config core.hooksPath``, ``mv .git`` and a new one, ``rm -rf .git/hooks``, a hard
  link to ``.git/config`` appended to, a hard link to ``/etc/hostname``;
* secrets: ``~/.ssh/id_rsa`` directly, through a link and through a process outside's ``/proc/PID/root`` (its
  mount namespace has no covers), ``$CODLING_HOME/config.toml``, and ``OPENAI_API_KEY`` in the environment of
  every process in ``/proc`` (a bystander holds it, as an editor would, and so does codling's launcher);
* codling itself: ``kill -0``, ``-STOP``, ``-TERM``;
* the network: a TCP connection and a UDP datagram to sockets this test holds on the host's 127.0.0.1, and a
  connection to its abstract unix socket.

The script prints ``PROBE name: blocked|ESCAPED`` per probe, but the world's state is checked first
(:func:`assert_contained`): the files outside, ``.git``, the sockets' backlogs and queue, codling alive, the
secrets absent from what the model was sent; then each probe's line, and the blocked-by-the-sandbox note.

It runs wherever the sandbox applies, on each path a command can take: ``codling run`` (auto; yolo with
``sandbox = "always"``), ``codling acp`` with commands in the editor's terminals (under codling's
reaper; ask, answered "allow", and auto) and in codling's own (accept-edits), and ``codling chat`` on a
pseudo-terminal (ask, answered "y"). Plain yolo runs the same script unconfined and must see the escapes
(:func:`assert_escaped`): the battery tells an escape when there is one.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, helpers, spawn_agent_process
from acp.schema import ClientCapabilities

from tests.e2e.test_cli import base_env
from tests.fakes import warm
from tests.fakes.acp_client import RecordingClient
from tests.fakes.deadlines import deadline
from tests.fakes.editor import FakeEditor
from tests.fakes.openai_server import OpenAIServer, Reply, ScriptedReply, ToolCall, running_server
from tests.fakes.processes import alive, gone, measured
from tests.fakes.pty_process import PtyProcess

API_KEY = "sk-escape-battery-0c4e1b77d2"
"""codling's key: in the environment of the process that starts it (an editor, a shell, here the launcher)."""
SSH_SECRET = "ssh-escape-battery-5f2c9a31"
CONFIG_SECRET = "config-escape-battery-81d7e6"
BLOCKED_NOTE = "[blocked by the sandbox:\n"
LAST_WORD = "The battery is over."
"""The model's answer once it has the probes' result."""

PROBES = r"""O='@OUTSIDE@'; H='@HOME@'; C='@CODLING_HOME@'; P=@PID@; B=@BYSTANDER@
r() { if [ "$1" = 0 ]; then echo "PROBE $2: ESCAPED"; else echo "PROBE $2: blocked"; fi; }
echo x > "$O/direct"; r $? write-outside
ln -s "$O" link && echo x > link/via-link; r $? symlink-write
mkfifo daemon-started
(setsid sh -c 'echo $$ > daemon.pid; echo x > "$1/daemon-now"; echo > daemon-started
  while kill -0 "$2" 2>/dev/null; do sleep 0.05; done
  echo x > "$1/daemon-late"; echo > daemon-finished' sh "$O" $$ </dev/null >/dev/null 2>&1 &)
read _ < daemon-started; test -e "$O/daemon-now"; r $? daemon-write
echo 'touch pwned' > .git/hooks/pre-commit; r $? hook
git config core.hooksPath evilhooks; r $? hooks-path
ln .git/config hl && printf '[escape]\n\thardlinked = yes\n' >> hl; r $? hardlink-config
ln /etc/hostname hn; r $? hardlink-etc
rm -rf .git/hooks; test -d .git/hooks; [ $? != 0 ]; r $? rm-hooks
mv .git .git2 && mkdir -p .git/hooks && echo 'touch pwned' > .git/hooks/pre-commit; r $? mv-git
cat "$H/.ssh/id_rsa"; grep -q PRIVATE "$H/.ssh/id_rsa"; r $? read-ssh
ln -s "$H/.ssh/id_rsa" k; cat k; grep -q PRIVATE k; r $? symlink-read
cat "$C/config.toml"; grep -q marker "$C/config.toml"; r $? read-codling-home
cat "/proc/$B/root$H/.ssh/id_rsa"; grep -q PRIVATE "/proc/$B/root$H/.ssh/id_rsa"; r $? proc-root-ssh
for f in /proc/[0-9]*/environ; do (tr '\0' '\n' < "$f") 2>/dev/null; done | grep '^OPENAI_API_KEY=.'; r $? environ
kill -0 "$P"; r $? signal-codling
kill -STOP "$P" && kill -CONT "$P"; r $? stop-codling
@TERM@
curl -sS -m 1 -o /dev/null "http://127.0.0.1:@TCP@/"; r $? tcp-loopback
bash -c 'echo datagram > /dev/udp/127.0.0.1/@UDP@'
python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).connect(b"\0" + sys.argv[1].encode())' @ABSTRACT@
r $? abstract-socket
echo "PROBES done"
"""
"""Every escape, one line each; ``@TERM@`` becomes ``kill -TERM "$P"`` where the sandbox is meant to apply."""

NAMES = (
    "write-outside",
    "symlink-write",
    "daemon-write",
    "hook",
    "hooks-path",
    "hardlink-config",
    "hardlink-etc",
    "rm-hooks",
    "mv-git",
    "read-ssh",
    "symlink-read",
    "read-codling-home",
    "proc-root-ssh",
    "environ",
    "signal-codling",
    "stop-codling",
    "tcp-loopback",
    "abstract-socket",
)


def outside_root() -> Path:
    """A directory the test may create in that no sandbox makes writable: not a temp directory (those are
    writable by design), not the workspace. ``/var/lib`` where the tests run as root, else the checkout."""
    temps = [Path(p).resolve() for p in ("/tmp", "/var/tmp", "/dev/shm", tempfile.gettempdir())]
    temps += [Path(os.environ["TMPDIR"]).resolve()] if os.environ.get("TMPDIR") else []
    for candidate in (Path("/var/lib"), Path(__file__).resolve().parents[2]):
        if os.access(candidate, os.W_OK) and not any(candidate.is_relative_to(t) for t in temps):
            return candidate
    raise AssertionError("no writable directory outside the temp directories for the escape target")


@dataclass
class World:
    """What one run may try to escape to, and what it must not reach."""

    home: Path
    codling_home: Path
    project: Path
    outside: Path
    tcp: socket.socket
    udp: socket.socket
    abstract: socket.socket
    bystander: subprocess.Popen[bytes]
    """A process outside, as an editor would be: ``OPENAI_API_KEY`` in its environment, the host's mounts."""
    hooks: list[str]

    def config(self, lines: str) -> None:
        (self.codling_home / "config.toml").write_text(f"# marker: {CONFIG_SECRET}\n{lines}")

    def env(self, server: OpenAIServer) -> dict[str, str]:
        return {
            **base_env(self.home),
            "CODLING_HOME": str(self.codling_home),
            "CODLING_MODEL": "openai-chat:fake-model",
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_KEY": API_KEY,
        }

    def script(self, codling_pid: int, *, sandboxed: bool) -> str:
        replacements = {
            "@OUTSIDE@": str(self.outside),
            "@HOME@": str(self.home),
            "@CODLING_HOME@": str(self.codling_home),
            "@PID@": str(codling_pid),
            "@BYSTANDER@": str(self.bystander.pid),
            "@TCP@": str(self.tcp.getsockname()[1]),
            "@UDP@": str(self.udp.getsockname()[1]),
            "@ABSTRACT@": self.abstract.getsockname()[1:].decode(),
            "@TERM@": 'kill -TERM "$P"; r $? term-codling' if sandboxed else "",
        }
        text = PROBES
        for key, value in replacements.items():
            text = text.replace(key, value)
        return text


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    home = tmp_path / "u"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text(
        f"-----BEGIN OPENSSH PRIVATE KEY-----\n{SSH_SECRET}\n-----END OPENSSH PRIVATE KEY-----\n"
    )
    codling_home = home / ".codling"
    codling_home.mkdir()
    project = tmp_path / "project"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True, timeout=deadline(30))
    (project / ".git" / "hooks").mkdir(exist_ok=True)
    (project / ".git" / "hooks" / "post-merge.sample").write_text("#!/bin/sh\n")
    outside = outside_root() / f"codling-escape-{uuid.uuid4().hex}"
    outside.mkdir()
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    bystander = subprocess.Popen(  # ends when its stdin closes
        [sys.executable, "-c", "import sys; sys.stdin.read()"],
        stdin=subprocess.PIPE,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "OPENAI_API_KEY": API_KEY},
    )
    try:
        tcp.bind(("127.0.0.1", 0))
        tcp.listen(8)  # never accepted: a connection that got through waits in the backlog
        tcp.setblocking(False)
        udp.bind(("127.0.0.1", 0))
        udp.setblocking(False)
        abstract.bind(f"\0codling-escape-{uuid.uuid4().hex}".encode())
        abstract.listen(8)
        abstract.setblocking(False)
        hooks = sorted(p.name for p in (project / ".git" / "hooks").iterdir())
        yield World(home, codling_home, project, outside, tcp, udp, abstract, bystander, hooks)
    finally:
        tcp.close()
        udp.close()
        abstract.close()
        assert bystander.stdin is not None
        bystander.stdin.close()
        bystander.wait(timeout=deadline(10))
        shutil.rmtree(outside, ignore_errors=True)


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with running_server() as s:
        yield s


def script_the_model(server: OpenAIServer, world: World, *, sandboxed: bool) -> Callable[[int], None]:
    """Answer the first request with the probes (run_command) and the next with :data:`LAST_WORD`; the probes need
    codling's pid, so they are written when the request comes (``started`` gives the launcher's pid first)."""
    launcher: list[int] = []
    known = threading.Event()

    def respond(body: dict[str, Any]) -> ScriptedReply:
        if any(m.get("role") == "tool" for m in body["messages"]):
            return Reply(text=[LAST_WORD])
        assert known.wait(deadline(30)), "codling's launcher pid was never given"
        script = world.script(warm.behind(launcher[0]), sandboxed=sandboxed)
        return Reply(tool_calls=[ToolCall("run_command", {"command": script}, id="probes")])

    def started(pid: int) -> None:
        launcher.append(pid)
        known.set()

    server.responder = respond
    return started


def tool_result(server: OpenAIServer) -> str:
    """The probes' result as the model was sent it (the request after the tool call)."""
    results = [m for request in server.requests for m in request["messages"] if m.get("role") == "tool"]
    assert results, f"no tool result reached the model: {json.dumps(server.requests)[-2000:]}"
    content = results[-1]["content"]
    return content if isinstance(content, str) else json.dumps(content)


def verdicts(output: str) -> dict[str, str]:
    return {
        line.split(":", 1)[0].removeprefix("PROBE ").strip(): line.split(":", 1)[1].strip()
        for line in output.splitlines()
        if line.startswith("PROBE ") and ":" in line
    }


async def daemon_gone(world: World) -> None:
    """Wait (bounded) until the setsid daemon has ended: killed by the reaper, or done with its late write."""
    pid_file = world.project / "daemon.pid"
    assert pid_file.exists(), "the daemon never started"
    assert await gone(int(pid_file.read_text()), within=30), "the setsid daemon is still running"


def assert_contained(world: World, output: str, codling_pid: int | None) -> None:
    """Nothing got out: the world's state first, then what the script and the model saw. ``codling_pid``: a
    codling that must still run (None: one that ended, its exit status checked by the caller)."""
    assert list(world.outside.iterdir()) == [], "a write outside the workspace got through"
    git = world.project / ".git"
    assert not (world.project / ".git2").exists() and git.is_dir()
    assert sorted(p.name for p in (git / "hooks").iterdir()) == world.hooks
    config = (git / "config").read_text()
    assert "evilhooks" not in config and "hardlinked" not in config
    assert not (world.project / "hn").exists(), "a hard link to /etc/hostname was made"
    with pytest.raises(BlockingIOError):
        world.tcp.accept()  # no connection reached the host's listener
    with pytest.raises(BlockingIOError):
        world.udp.recvfrom(64)  # no datagram reached the host's socket
    with pytest.raises(BlockingIOError):
        world.abstract.accept()  # nor a connection the abstract unix socket this test holds
    assert codling_pid is None or alive(codling_pid)
    for secret in (SSH_SECRET, CONFIG_SECRET, API_KEY):
        assert secret not in output
    seen = verdicts(output)
    assert "PROBES done" in output, output
    assert {name: seen.get(name) for name in (*NAMES, "term-codling")} == dict.fromkeys(
        (*NAMES, "term-codling"), "blocked"
    ), output
    # The model is told what the sandbox blocked, and how to ask.
    assert BLOCKED_NOTE in output, output
    note = output[output.index(BLOCKED_NOTE) :]
    assert f"writing {world.outside}/direct (outside the workspace and temp)" in note, note
    assert "the network (off: 127.0.0.1 is the command's own, where only servers it starts answer)" in note, note
    # With someone to ask (an editor, a terminal) the model may ask to lift it; in `codling run`, not.
    assert note.endswith(
        "No one can be asked to lift it in this session: if the task needs it, say in your answer what to run "
        "outside the sandbox.]"
        if codling_pid is None
        else 'run the command again with lift_sandbox="all" (the network too) and a reason: the user is asked.]'
    ), note


def assert_escaped(world: World, output: str) -> None:
    """Unconfined, the same probes get out: the battery sees an escape when there is one."""
    assert {"direct", "via-link", "daemon-now"} <= {p.name for p in world.outside.iterdir()}
    assert (world.project / ".git2").is_dir()
    assert "evilhooks" in (world.project / ".git2" / "config").read_text()
    assert "hardlinked" in (world.project / ".git2" / "config").read_text()
    connection, _ = world.tcp.accept()
    connection.close()
    assert world.udp.recvfrom(64)[0] == b"datagram\n"
    world.abstract.accept()[0].close()
    assert SSH_SECRET in output and CONFIG_SECRET in output
    seen = verdicts(output)
    escaped = {"write-outside", "symlink-write", "daemon-write", "hook", "hooks-path", "hardlink-config"}
    escaped |= {"rm-hooks", "mv-git", "read-ssh", "symlink-read", "read-codling-home", "proc-root-ssh", "environ"}
    escaped |= {"signal-codling", "stop-codling", "abstract-socket"}
    # Not among them: tcp-loopback (curl connects, then times out waiting for an answer: the backlog above tells)
    # and hardlink-etc (/etc may be another file system, where no hard link can be made, sandbox or not).
    assert {name: seen.get(name) for name in escaped} == dict.fromkeys(escaped, "ESCAPED"), output
    assert BLOCKED_NOTE not in output


# --- codling run ------------------------------------------------------------------------------------------


def run_codling(world: World, server: OpenAIServer, *args: str, sandboxed: bool) -> tuple[str, int]:
    """``codling run *args`` with the probes; the tool result the model got, and codling's pid."""
    started = script_the_model(server, world, sandboxed=sandboxed)
    process = subprocess.Popen(
        [*warm.codling(), "run", *args, "try to get out"],
        env=world.env(server),
        cwd=world.project,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    started(process.pid)
    codling_pid = warm.behind(process.pid)
    try:
        stdout, stderr = process.communicate(timeout=deadline(60))
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, stderr
    assert stdout.strip() == LAST_WORD, stderr
    return tool_result(server), codling_pid


@pytest.mark.parametrize(
    ("config", "mode"),
    [("", "auto"), ('sandbox = "always"\n', "yolo")],
    ids=["auto", "yolo-sandbox-always"],
)
async def test_codling_run_keeps_every_probe_in(world: World, server: OpenAIServer, config: str, mode: str) -> None:
    world.config(config)
    output, _ = run_codling(world, server, "--mode", mode, sandboxed=True)
    await daemon_gone(world)
    assert_contained(world, output, None)  # codling lived to end the turn: run_codling checks its last word


async def test_plain_yolo_lets_the_same_probes_out(world: World, server: OpenAIServer) -> None:
    world.config("")
    output, _ = run_codling(world, server, "--mode", "yolo", sandboxed=False)
    await daemon_gone(world)
    assert_escaped(world, output)


# --- codling acp ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "terminals", "answers"),
    [("ask", True, ["allow_once"]), ("auto", True, []), ("accept-edits", False, ["allow_once"])],
    ids=["ask-editor-terminal", "auto-editor-terminal", "accept-edits-own-terminal"],
)
async def test_codling_acp_keeps_every_probe_in(
    world: World, server: OpenAIServer, mode: str, terminals: bool, answers: list[str | None]
) -> None:
    world.config(f'mode = "{mode}"\n')
    started = script_the_model(server, world, sandboxed=True)
    editor = FakeEditor()
    client = RecordingClient(answers=list(answers), editor=editor if terminals else None)
    capabilities = ClientCapabilities(terminal=terminals)
    try:
        async with spawn_agent_process(
            client, *warm.codling(), "acp", cwd=world.project, env=measured(world.env(server))
        ) as (conn, process):
            started(process.pid)
            codling_pid = warm.behind(process.pid)
            await asyncio.wait_for(
                conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=capabilities), deadline(30)
            )
            session = await asyncio.wait_for(conn.new_session(cwd=str(world.project)), deadline(30))
            reply = await asyncio.wait_for(
                conn.prompt(session_id=session.session_id, prompt=[helpers.text_block("try to get out")]),
                deadline(60),
            )
            assert reply.stop_reason == "end_turn"
            await daemon_gone(world)
            assert_contained(world, tool_result(server), codling_pid)
    finally:
        await editor.close()
    assert len(client.permissions) == len(answers)  # auto runs a sandboxed command without asking
    created = [detail for method, detail in editor.calls if method == "terminal/create"]
    if terminals:  # the editor ran the command line under codling's reaper, confined
        assert len(created) == 1 and "reaper.py terminal" in created[0]
    else:
        assert created == []


# --- codling chat -----------------------------------------------------------------------------------------


async def test_codling_chat_on_a_terminal_keeps_every_probe_in(world: World, server: OpenAIServer) -> None:
    world.config("")
    started = script_the_model(server, world, sandboxed=True)
    env = {**world.env(server), "TERM": "xterm", "NO_COLOR": "1", "PROMPT_TOOLKIT_NO_CPR": "1"}
    chat = PtyProcess([*warm.codling(), "chat"], env=measured(env), cwd=world.project)
    try:
        started(chat.process.pid)
        codling_pid = warm.behind(chat.process.pid)
        at = chat.expect("›")
        chat.send("try to get out\r")
        at = chat.expect("Allow? [y]es", after=at)
        chat.send("y\r")
        at = chat.expect(LAST_WORD, after=at)
        chat.expect("›", after=at)
        await daemon_gone(world)
        assert_contained(world, tool_result(server), codling_pid)
        chat.send("\x04")
        assert chat.wait() == 0
    finally:
        chat.close()
