"""The sandbox in-process (issue 35): its policy, what it blocks for real under the reaper, auto mode and lifts,
the "blocked by the sandbox" note, and failing closed. The escape battery through real codling processes in
every mode is tests/e2e/test_sandbox_escapes.py."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
from pydantic_ai.messages import ToolReturnPart

from codling.config import Settings, load_settings
from codling.errors import ConfigError, PermissionDenied, SandboxUnavailable
from codling.llm.catalog import ModelInfo
from codling.mcp_servers import parse_servers
from codling.permission_rules import Rules
from codling.store.header import SessionHeader
from codling.store.ids import new_session_id
from codling.store.index import SessionStore
from codling.store.live import start_session
from codling.tools.approval import Permissions
from codling.tools.local import LocalTerminal
from codling.tools.ports import PermissionRequest, Rejection
from codling.tools.sandbox.blocked import blocked_note
from codling.tools.sandbox.confine import decode_policy, encode_policy
from codling.tools.sandbox.policy import Sandbox, build_sandbox, made_protected
from codling.vocabulary import PermissionMode, SandboxSetting
from tests.fakes.approver import ScriptedApprover
from tests.fakes.scenarios import Call, Say, Script

SECRET = "sk-sandbox-test-0123456789"
MODEL = ModelInfo("test:model", context_limit=100_000, max_output_tokens=1_000)


@pytest.fixture
def places(tmp_path: Path) -> dict[str, Path]:
    """A git workspace, a home with an ssh key, codling's home, and a directory that is none of them (and not
    temp: /tmp is writable by design, so the outside place is made where the sandbox does not allow writes)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text(SECRET)
    codling_home = tmp_path / "codling-home"
    codling_home.mkdir()
    (codling_home / "config.toml").write_text(f'# {SECRET}\nmode = "auto"\n')
    return {"ws": ws, "home": home, "codling_home": codling_home}


def sandbox_of(places: dict[str, Path], setting: SandboxSetting = "on") -> Sandbox:
    return build_sandbox(
        (places["ws"],), home=places["home"], codling_home=places["codling_home"], env={}, setting=setting
    )


def without_temp(sandbox: Sandbox) -> Sandbox:
    """``sandbox`` with the workspace its only writable place: the tests' other directories are in /tmp, which
    commands may write by design, so this is how one of them stands for "outside"."""
    return replace(sandbox, writable=sandbox.writable[:1], roots=1)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory outside the workspace (and, for ``without_temp``'s sandbox, outside every writable place)."""
    place = tmp_path / "outside"
    place.mkdir()
    return place


async def confined(sandbox: Sandbox, command: str, cwd: Path, lift: str | None = None) -> tuple[int | None, str]:
    result = await LocalTerminal().run(
        command,
        cwd=cwd,
        timeout=30,
        output_limit=20_000,
        sandbox=sandbox.policy(lift),  # type: ignore[arg-type]
    )
    return result.exit_code, result.output


def test_a_policy_survives_its_encoding_and_refuses_a_path_it_cannot_carry() -> None:
    text = encode_policy(
        ("/w", "/tmp"), ("/w/.git",), ("/h/.ssh",), ("XDG_CACHE_HOME=/tmp/c",), ("/w/sub",), network=True
    )
    assert decode_policy(text) == (
        {
            "writable": ["/w", "/tmp"],
            "read_only": ["/w/.git"],
            "hidden": ["/h/.ssh"],
            "pinned": ["/w/sub"],
            "directories": ["XDG_CACHE_HOME=/tmp/c"],
        },
        True,
    )
    with pytest.raises(ValueError, match="absolute and on one line"):
        encode_policy(("/w\nw /",))
    with pytest.raises(ValueError, match="absolute and on one line"):
        encode_policy(("relative",))


def test_the_policy_names_the_workspace_temp_git_and_secrets(places: dict[str, Path]) -> None:
    sandbox = sandbox_of(places)
    ws, home = places["ws"].resolve(), places["home"].resolve()
    assert (sandbox.writable[:2], sandbox.roots) == ((ws, Path("/tmp")), 1)
    assert {ws / ".git", ws / ".codling", ws / ".envrc", home / ".bashrc"} <= set(sandbox.read_only)
    assert {home / ".ssh", home / ".aws", home / ".gnupg", places["codling_home"].resolve()} <= set(sandbox.hidden)
    assert sandbox.hides(home / ".ssh" / "id_rsa") and not sandbox.hides(ws / "a.py")
    assert sandbox.blocked_write(Path("/etc/passwd")) and sandbox.blocked_write(ws / ".git" / "hooks" / "x")
    assert not sandbox.blocked_write(ws / "src" / "a.py") and not sandbox.blocked_write(Path("/tmp/x"))


def test_a_covered_path_never_hides_the_workspace(tmp_path: Path) -> None:
    codling_home = tmp_path / "codling-home"
    ws = codling_home / "projects" / "ws"
    ws.mkdir(parents=True)
    sandbox = build_sandbox((ws,), home=tmp_path, codling_home=codling_home, env={})
    assert codling_home.resolve() not in sandbox.hidden


@pytest.mark.parametrize(
    ("setting", "mode", "applies"),
    [
        ("on", "read-only", True),
        ("on", "ask", True),
        ("on", "accept-edits", True),
        ("on", "auto", True),
        ("on", "yolo", False),
        ("always", "yolo", True),
        ("off", "auto", False),
        ("off", "ask", False),
    ],
)
def test_where_the_sandbox_applies(
    places: dict[str, Path], setting: SandboxSetting, mode: PermissionMode, applies: bool
) -> None:
    assert sandbox_of(places, setting=setting).applies(mode) is applies


async def test_a_confined_command_changes_the_workspace_and_nothing_else(
    places: dict[str, Path], outside: Path
) -> None:
    sandbox, ws = without_temp(sandbox_of(places)), places["ws"]
    victim = places["home"] / "victim.txt"
    victim.write_text("kept\n")
    script = "; ".join(
        [
            "echo made > made.txt",
            f"echo escaped > {outside}/f",
            "echo escaped > .git/hooks/pre-commit",
            "echo '[core] hooksPath = x' >> .git/config",
            "mv .git .git-moved",
            f"ln -s {outside} link; echo escaped > link/g",
            f"ln {victim} hard; echo escaped >> hard",
            f"cat {places['home']}/.ssh/id_rsa",
            f"cat {places['codling_home']}/config.toml",
            f"ln -s {places['home']}/.ssh/id_rsa key; cat key",
            f"cat /proc/{os.getpid()}/environ",
            f"kill -0 {os.getpid()} && echo signalled",
            "echo done",
        ]
    )
    code, output = await confined(sandbox, script, ws)
    assert (code, (ws / "made.txt").read_text()) == (0, "made\n")
    assert (list(outside.iterdir()), victim.read_text()) == ([], "kept\n")
    assert not (ws / ".git" / "hooks" / "pre-commit").exists()
    assert "hooksPath" not in (ws / ".git" / "config").read_text()
    assert (ws / ".git").is_dir() and not (ws / ".git-moved").exists()
    assert SECRET not in output and "signalled" not in output
    assert "PATH=" not in output  # the environment of the process that started the command stays unread
    assert output.rstrip().endswith("done")


async def test_the_network_is_off_but_a_command_s_own_loopback_works(places: dict[str, Path], outside: Path) -> None:
    sandbox, ws = without_temp(sandbox_of(places)), places["ws"]
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.setblocking(False)
        port = listener.getsockname()[1]
        own = (
            "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); "
            "c = socket.create_connection(s.getsockname()); print('own loopback', s.accept()[0] is not None)"
        )
        reach = f"import socket; socket.create_connection(('127.0.0.1', {port}), 5)"
        _, output = await confined(sandbox, f'{sys.executable} -c "{own}"; {sys.executable} -c "{reach}"', ws)
        with pytest.raises(BlockingIOError):
            listener.accept()
    assert "own loopback True" in output and "Connection refused" in output
    # The network lifted: the host's listener is reached, while writes stay confined.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        reach = f"import socket; socket.create_connection(('127.0.0.1', {port}), 5); print('reached')"
        _, output = await confined(sandbox, f'{sys.executable} -c "{reach}"; touch {outside}/x', ws, "network")
        assert "reached" in output and list(outside.iterdir()) == []


async def test_what_the_sandbox_blocked_is_named_with_how_to_ask(places: dict[str, Path], outside: Path) -> None:
    sandbox, ws, home = without_temp(sandbox_of(places)), places["ws"], places["home"]
    script = f"echo x > {outside}/f; cat {home}/.ssh/id_rsa; echo y > .git/hooks/h; curl -sS http://example.invalid"
    _, output = await confined(
        sandbox, script + " 2>&1 || getent hosts example.com || echo 'Could not resolve host'", ws
    )
    note = blocked_note(output, sandbox, cwd=ws, home=home, network=False)
    assert note == (
        "[blocked by the sandbox:\n"
        f"- writing {outside}/f (outside the workspace and temp)\n"
        f"- reading {home.resolve()}/.ssh/id_rsa (hidden: credentials and private sockets)\n"
        f"- writing {ws.resolve()}/.git/hooks/h (git's own files are read-only)\n"
        "- the network (off)\n"
        'If the task needs it, run the command again with lift_sandbox="all" (the network too) and a reason: '
        "the user is asked.]"
    )


def test_what_the_sandbox_did_not_block_gets_no_note(places: dict[str, Path]) -> None:
    sandbox, ws, home = sandbox_of(places), places["ws"], places["home"]
    outputs = [
        "/bin/sh: 1: ./run.sh: Permission denied",  # a script without its execute bit, in the workspace
        "cat: missing.txt: No such file or directory",
        "ok",
        "curl: (6) Could not resolve host: example.com",  # with the network on
    ]
    assert [blocked_note(o, sandbox, cwd=ws, home=home, network=True) for o in outputs] == [None] * 4


def request(command: str, *, sandboxed: bool = True, lift: str | None = None) -> PermissionRequest:
    return PermissionRequest(
        tool_call_id="c1",
        tool_name="run_command",
        kind="execute",
        title=f"Run {command}",
        subject=command,
        sandboxed=sandboxed,
        lift=lift,
        reason="pip must download the package" if lift else None,
    )


async def test_auto_runs_sandboxed_commands_and_edits_without_asking() -> None:
    approver = ScriptedApprover()
    permissions = Permissions("auto", approver)
    await permissions.check(request("pytest -q; rm -rf build"))
    await permissions.check(
        PermissionRequest(tool_call_id="e", tool_name="edit_file", kind="edit", title="Edit a", subject="/w/a")
    )
    assert approver.asked == []
    # Unconfined (sandbox = "off"), a command is asked about as in ask mode.
    approver.answers = ["allow_once"]
    await permissions.check(request("pytest", sandboxed=False))
    assert [r.subject for r in approver.asked] == ["pytest"]


async def test_auto_still_honours_deny_and_ask_rules() -> None:
    rules = Rules.parse({"deny": ["curl"], "ask": ["git push"]}, "config.toml", Path("config.toml"))
    approver = ScriptedApprover("allow_once")
    permissions = Permissions("auto", approver, rules=rules)
    with pytest.raises(PermissionDenied, match="denies it"):
        await permissions.check(request("curl http://x"))
    await permissions.check(request("git push"))
    assert [r.title for r in approver.asked] == ['Run git push (your rule "ask git push" (config.toml) asks)']


@pytest.mark.parametrize("mode", ["ask", "accept-edits", "auto", "yolo"])
async def test_a_lift_is_asked_in_every_mode_saying_what_and_why(mode: PermissionMode) -> None:
    rules = Rules.parse({"allow": ["pip"]}, "config.toml", Path("config.toml"))
    approver = ScriptedApprover("allow_once")
    await Permissions(mode, approver, rules=rules).check(request("pip install x", lift="network"))
    (asked,) = approver.asked
    assert asked.title == (
        "Run pip install x — with the network on (writes stay in the workspace, secrets stay hidden); "
        "the model says: pip must download the package"
    )
    assert asked.always == "every `pip` command with the network on"


async def test_always_for_a_lift_covers_the_program_s_network_or_the_exact_command() -> None:
    approver = ScriptedApprover("allow_always", "allow_always", "allow_once")
    permissions = Permissions("auto", approver)
    await permissions.check(request("pip install x", lift="network"))
    await permissions.check(request("pip install y", lift="network"))  # remembered: not asked
    await permissions.check(request("make deploy", lift="all"))
    await permissions.check(request("make deploy", lift="all"))  # the exact command: remembered
    await permissions.check(request("make deploy2", lift="all"))
    assert [r.subject for r in approver.asked] == ["pip install x", "make deploy", "make deploy2"]
    assert permissions.approved_by("c1") == "your “always” for this exact command, outside the sandbox"
    assert permissions.remembered == {("lift-network", "pip"), ("lift-all-exact", "make deploy")}


async def test_always_for_the_network_never_covers_a_whole_lift_and_git_commits_are_remembered() -> None:
    approver = ScriptedApprover("allow_always", "allow_once", "allow_always")
    permissions = Permissions("auto", approver)
    await permissions.check(request("make fetch && make", lift="network"))
    await permissions.check(request("make fetch && make", lift="all"))  # asked: the answer was for the network
    await permissions.check(request("git commit -m one", lift="all"))
    await permissions.check(request("git commit -m two", lift="all"))  # git commit writes .git: remembered
    assert [(r.subject, r.always) for r in approver.asked] == [
        ("make fetch && make", "this exact command with the network on"),
        ("make fetch && make", "this exact command, outside the sandbox"),
        ("git commit -m one", "every `git commit` command outside the sandbox"),
    ]


async def test_a_lift_without_anyone_to_ask_is_refused() -> None:
    with pytest.raises(PermissionDenied, match="no one can be asked"):
        await Permissions("auto", None).check(request("pip install x", lift="all"))


async def test_a_machine_without_the_sandbox_refuses_the_command_rather_than_run_it(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    terminal = LocalTerminal(reaper=False)  # as where there is no /proc or no Linux
    with pytest.raises(SandboxUnavailable, match="the command was not run: the sandbox cannot run here"):
        await terminal.run(f"touch {marker}", cwd=tmp_path, timeout=10, output_limit=100, sandbox="net off")
    assert not marker.exists()


def test_config_takes_the_sandbox_settings(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('sandbox = "always"\nsandbox_writable = ["~/.cache", "/opt/x"]\n')
    settings = load_settings({"CODLING_HOME": str(home), "HOME": str(tmp_path)})
    assert (settings.sandbox, settings.sandbox_writable) == ("always", (tmp_path / ".cache", Path("/opt/x")))
    (home / "config.toml").write_text('sandbox = "sometimes"\n')
    with pytest.raises(ConfigError, match="sandbox must be one of 'on', 'always', 'off', not 'sometimes'"):
        load_settings({"CODLING_HOME": str(home)})


def test_an_mcp_server_opts_in_to_the_sandbox(tmp_path: Path) -> None:
    where = tmp_path / "config.toml"
    servers = parse_servers(
        {
            "a": {"command": "srv"},
            "b": {"command": "srv", "sandbox": True},
            "c": {"command": "srv", "sandbox": "network"},
        },
        where,
    )
    assert [s.sandbox for s in servers] == ["off", "on", "network"]
    with pytest.raises(ConfigError, match='sandbox must be true, false or "network"'):
        parse_servers({"d": {"command": "srv", "sandbox": "yes"}}, where)
    with pytest.raises(ConfigError, match="args, env and sandbox are for a command"):
        parse_servers({"e": {"url": "http://127.0.0.1:1/mcp", "sandbox": True}}, where)


def test_replace_keeps_a_sandbox_frozen(places: dict[str, Path]) -> None:
    sandbox = sandbox_of(places)
    assert replace(sandbox, setting="off").applies("auto") is False and sandbox.applies("auto")


async def test_a_workspace_the_policy_cannot_carry_runs_nothing(tmp_path: Path) -> None:
    ws = tmp_path / "two\nlines"
    ws.mkdir()
    sandbox = build_sandbox((ws,), home=tmp_path, codling_home=tmp_path / "codling-home", env={})
    with pytest.raises(SandboxUnavailable, match="a sandbox path must be absolute and on one line"):
        sandbox.policy()


async def test_git_cannot_be_pointed_elsewhere_nor_a_hooks_path_written(
    places: dict[str, Path], tmp_path: Path
) -> None:
    ws = places["ws"]
    (ws / "tools" / "hooks").mkdir(parents=True)
    subprocess.run(["git", "-C", str(ws), "config", "core.hooksPath", "tools/hooks"], check=True)
    sandbox = await without_temp(sandbox_of(places)).with_git_asked(shutil.which("git"))
    evil = tmp_path / "evil"
    script = "; ".join(
        [
            f"mkdir -p {evil}/hooks && cp -r .git/objects .git/refs .git/HEAD {evil}/",
            f"echo {evil} > .git/commondir",  # the battery's escape: git would read config and hooks there
            "echo x > .git/config.worktree",
            "mkdir -p .git/modules/m && echo x > .git/modules/m/config",
            "echo '#!/bin/sh' > tools/hooks/pre-commit",
            "git status --short >/dev/null && echo status-works",
            "echo done",
        ]
    )
    _, output = await confined(sandbox, script, ws)
    assert [p.name for p in (ws / ".git").iterdir() if p.name in ("commondir", "config.worktree", "modules")] == []
    assert list((ws / "tools" / "hooks").iterdir()) == []
    assert "status-works" in output and output.rstrip().endswith("done")


async def test_a_protected_path_a_command_makes_is_removed_and_named(places: dict[str, Path]) -> None:
    sandbox, ws, home = without_temp(sandbox_of(places)), places["ws"], places["home"]
    absent = sandbox.absent()
    assert {ws.resolve() / ".envrc", ws.resolve() / ".codling", ws.resolve() / ".vscode" / "tasks.json"} <= set(absent)
    script = (
        "echo 'curl x | sh' > .envrc; mkdir -p .codling .vscode; echo 'allow = [\"rm\"]' > .codling/permissions.toml"
    )
    script += "; echo '{}' > .vscode/tasks.json; echo kept > notes.txt"
    await confined(sandbox, script, ws)
    made = made_protected(absent)
    assert sorted(p.name for p in made) == [".codling", ".envrc", "tasks.json"]
    assert not (ws / ".envrc").exists() and not (ws / ".codling").exists() and not (ws / ".vscode/tasks.json").exists()
    assert (ws / "notes.txt").read_text() == "kept\n" and (ws / ".vscode").is_dir()
    note = blocked_note("", sandbox, cwd=ws, home=home, network=False, made=made)
    assert note is not None and ".envrc: protected, so it was removed (write it with write_file, which asks " in note


async def test_a_command_cannot_write_to_the_user_s_terminal_but_makes_its_own(places: dict[str, Path]) -> None:
    ws = places["ws"]
    master, slave = os.openpty()  # a terminal of this machine's, as the user's chat is
    user_terminals = [Path(os.ttyname(slave))]
    probe = (
        "import os, pty, sys\n"
        "for name in sys.argv[1:]:\n"
        "    try:\n"
        "        os.close(os.open(name, os.O_WRONLY)); print('OPENED', name)\n"
        "    except OSError as e:\n"
        "        print('refused', name, e.strerror)\n"
        "m, s = pty.openpty(); os.write(s, b'own'); print('own pty', os.read(m, 3))\n"
    )
    (ws / "probe.py").write_text(probe)
    try:
        names = " ".join(str(p) for p in user_terminals)
        _, output = await confined(without_temp(sandbox_of(places)), f"{sys.executable} probe.py {names}", ws)
    finally:
        os.close(master)
        os.close(slave)
    assert "own pty b'own'" in output and "OPENED" not in output and "refused /dev/pts/" in output


def test_a_denied_read_is_not_called_a_write(places: dict[str, Path], tmp_path: Path) -> None:
    sandbox, ws, home = sandbox_of(places), places["ws"], places["home"]
    unwritable = tmp_path / "theirs"  # a file the user (codling) could not write either: not the sandbox's doing
    unwritable.write_text("x")
    unwritable.chmod(0o444)
    lines = [f"cat: {unwritable}: Permission denied", "cat: /proc/1/environ: Permission denied"]
    notes = [blocked_note(line, sandbox, cwd=ws, home=home, network=False) for line in lines]
    if os.geteuid() != 0:  # root may write anything: there only the sandbox refuses
        assert notes == [None, None]
    assert notes[1] is None
    quoted = "src/net.py:12:    socket.getaddrinfo(host, 80)  # Could not resolve host"
    retried = "WARNING: Retrying (Retry(total=4)) after connection broken by 'Temporary failure in name resolution'"
    offline = [
        blocked_note(line, sandbox, cwd=ws, home=home, network=False, failed=False) for line in (quoted, retried)
    ]
    assert offline == [None, None]
    busy = blocked_note(
        "error: could not lock config file .git/config: Device or resource busy",
        sandbox,
        cwd=ws,
        home=home,
        network=False,
    )
    assert busy is not None and f"writing {ws.resolve()}/.git/config" in busy


async def test_a_refused_lift_says_what_was_refused_plainly() -> None:
    with pytest.raises(PermissionDenied) as nobody:
        await Permissions("auto", None).check(request("pip install x", lift="network"))
    assert str(nobody.value) == (
        "Not run: running `pip install x` with the network on needs the user's approval, and no one can be asked "
        "in this session. Do without it, or say in your answer what you needed and why"
    )
    with pytest.raises(PermissionDenied) as rejected:
        await Permissions("auto", ScriptedApprover(Rejection("use the vendored copy"))).check(
            request("pip install x", lift="all")
        )
    assert str(rejected.value).startswith(
        "The user rejected running `pip install x` outside the sandbox, saying: use the vendored copy\n"
    )


async def test_caches_go_to_temp_where_the_home_s_cache_is_not_writable(places: dict[str, Path]) -> None:
    ws = places["ws"]
    home = Path("/nonexistent-codling-home")  # a home outside temp, as users' are: its ~/.cache is not writable
    sandbox = build_sandbox((ws,), home=home, codling_home=places["codling_home"], env={})
    names = [variable.partition("=")[0] for variable in sandbox.caches]
    assert names == ["XDG_CACHE_HOME", "npm_config_cache", "GOMODCACHE"]
    code, output = await confined(sandbox, 'mkdir -p "$XDG_CACHE_HOME/pip" && echo cached > "$npm_config_cache/x"', ws)
    assert code == 0, output
    cache = Path(sandbox.caches[0].partition("=")[2])
    assert (cache / "npm" / "x").read_text() == "cached\n" and cache.is_relative_to(tempfile.gettempdir())
    shutil.rmtree(cache)
    # Where the user made ~/.cache writable (sandbox_writable), it stays the tools' cache.
    roomy = build_sandbox(
        (ws,),
        home=places["home"],
        codling_home=places["codling_home"],
        extra_writable=(places["home"] / ".cache",),
        env={},
    )
    assert roomy.caches == ()


async def test_a_session_in_auto_runs_confined_says_what_was_blocked_and_lifts_only_when_allowed(
    project: Path, settings: Settings
) -> None:
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        fetch = (
            f"{sys.executable} -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 5); print('ok')\""
        )
        script = Script(
            [
                [Call("run_command", {"command": f"{fetch}"}, "c1")],
                [Call("run_command", {"command": fetch, "lift_sandbox": "network", "reason": "the dev server"}, "c2")],
                [Call("run_command", {"command": "git commit --allow-empty -qm x", "lift_sandbox": "all"}, "c3")],
                [Say("done")],
            ]
        )
        header = SessionHeader(new_session_id(), project, MODEL.id, "auto")
        approver = ScriptedApprover("allow_once", Rejection("no commits yet"))
        live = start_session(
            SessionStore(settings.home), settings, MODEL, header, approver=approver, model_factory=script.factory()
        )
        await live.brain.run("fetch it")
        await live.close()
    told = [
        str(part.content)
        for request in script.requests
        for part in request[-1].parts
        if isinstance(part, ToolReturnPart)
    ]
    assert told[0].startswith("exit code 1\n") and "[blocked by the sandbox:\n- the network (off: " in told[0]
    assert told[1].startswith("exit code 0\n(ran with the network on, as the user allowed)\nok")
    assert told[2].startswith(
        "Error: The user rejected running `git commit --allow-empty -qm x` outside the sandbox, saying"
    )
    assert [r.subject for r in approver.asked] == [fetch, "git commit --allow-empty -qm x"]


def test_a_note_for_the_network_alone_names_its_lift(places: dict[str, Path]) -> None:
    sandbox, ws, home = sandbox_of(places), places["ws"], places["home"]
    note = blocked_note("curl: (6) Could not resolve host: example.com", sandbox, cwd=ws, home=home, network=False)
    assert note is not None and note.endswith(
        'run the command again with lift_sandbox="network" and a reason: the user is asked.]'
    )


async def test_a_reviewer_delegate_cannot_change_the_workspace_through_a_command(
    project: Path, settings: Settings
) -> None:
    script = Script(
        [
            [Call("delegate", {"agent": "reviewer", "task": "Review it"}, "d1")],
            [
                Call(
                    "run_command",
                    {"command": "touch reviewer-was-here; touch /tmp/reviewer-scratch-$$ && echo scratch"},
                    "c1",
                )
            ],
            [Say("Reviewed.")],
            [Call("delegate", {"agent": "coder", "task": "Mark it"}, "d2")],
            [Call("run_command", {"command": "touch coder-was-here"}, "c2")],
            [Say("Marked.")],
            [Say("Done.")],
        ]
    )
    header = SessionHeader(new_session_id(), project, MODEL.id, "auto")
    live = start_session(
        SessionStore(settings.home),
        settings,
        MODEL,
        header,
        approver=ScriptedApprover(),
        model_factory=script.factory(),
    )
    await live.brain.run("review, then mark")
    await live.close()
    assert not (project / "reviewer-was-here").exists() and (project / "coder-was-here").exists()
    told = [
        str(part.content)
        for request in script.requests
        for part in request[-1].parts
        if isinstance(part, ToolReturnPart) and part.tool_call_id == "c1"
    ]
    assert "scratch" in told[0] and "Read-only file system" in told[0]


async def test_removing_a_made_protected_path_never_goes_through_a_link(
    places: dict[str, Path], tmp_path: Path
) -> None:
    sandbox, ws = without_temp(sandbox_of(places)), places["ws"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "tasks.json").write_text("the user's own\n")
    absent = sandbox.absent()
    # The command makes .vscode a link to a directory holding a tasks.json: the protected path now exists.
    await confined(sandbox, f"ln -s {elsewhere} .vscode", ws)
    made = made_protected(absent)
    assert made == [ws.resolve() / ".vscode"]
    assert not (ws / ".vscode").is_symlink() and (elsewhere / "tasks.json").read_text() == "the user's own\n"


async def test_a_protected_path_made_too_deep_to_walk_is_still_taken_away(places: dict[str, Path]) -> None:
    sandbox, ws = without_temp(sandbox_of(places)), places["ws"]
    absent = sandbox.absent()
    deep = "/".join(["x"] * 1500)
    await confined(sandbox, f"mkdir -p .codling/{deep} && echo 'allow = [\"rm\"]' > .codling/permissions.toml", ws)
    made = made_protected(absent)
    assert made == [ws.resolve() / ".codling"]
    assert [p.name for p in ws.iterdir() if "codling" in p.name] == []


async def test_the_reaper_and_the_covers_stay_out_of_the_command_s_reach(places: dict[str, Path]) -> None:
    sandbox, ws = sandbox_of(places), places["ws"]  # the workspace lies in /tmp, a writable place itself
    (ws / ".vscode").mkdir()
    (ws / ".vscode" / "tasks.json").write_text("{}\n")
    script = "; ".join(
        [
            "kill -9 $PPID; echo killed=$?",  # the reaper: outside the sandbox
            "mv .vscode .vscode-old; echo moved=$?",  # from under the read-only tasks.json
            "echo done",
        ]
    )
    code, output = await confined(sandbox, script, ws)
    assert (code, output.splitlines()[-1]) == (0, "done")
    assert "killed=1" in output and "moved=1" in output
    assert (ws / ".vscode" / "tasks.json").read_text() == "{}\n"
    # A writable root within another (a workspace in /tmp) moved away and replaced by a link to elsewhere: the
    # next command would be given write access wherever the link leads, so none runs.
    elsewhere = places["home"] / "elsewhere"
    elsewhere.mkdir()
    await confined(sandbox, f"mv {ws} {ws}-old && ln -s {elsewhere} {ws}", Path("/tmp"))
    with pytest.raises(SandboxUnavailable, match="was moved, or replaced by a link, since the session began"):
        await confined(sandbox, "echo escaped > x", Path("/tmp"))
    assert list(elsewhere.iterdir()) == []


_KEY_CALLS = {"x86_64": (248, 250), "aarch64": (217, 219)}


async def test_the_caller_s_session_keyring_is_out_of_reach(places: dict[str, Path]) -> None:
    import ctypes

    add_key, keyctl = _KEY_CALLS[os.uname().machine]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    libc.syscall(keyctl, 1, None)  # a session keyring of this test's own, not the machine's
    serial = libc.syscall(add_key, b"user", b"codling-test", SECRET.encode(), len(SECRET), -3)  # @s
    assert serial > 0
    reader = (
        "import ctypes; c = ctypes.CDLL(None); c.syscall.restype = ctypes.c_long; b = ctypes.create_string_buffer(64)"
        f"; n = c.syscall({keyctl}, 11, {serial}, b, 64); print('read', n, b.value)"
    )
    _, output = await confined(sandbox_of(places), f'{sys.executable} -c "{reader}"', places["ws"])
    assert "read -1" in output and SECRET not in output


async def test_submodules_and_repositories_deep_inside_keep_their_git(places: dict[str, Path], tmp_path: Path) -> None:
    ws = places["ws"]
    (ws / "deep" / "proj").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(ws / "deep" / "proj")], check=True)
    library = tmp_path / "library"
    subprocess.run(["git", "init", "-q", str(library)], check=True)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "protocol.file.allow=always"]
    subprocess.run([*git, "-C", str(library), "commit", "-q", "--allow-empty", "-m", "one"], check=True)
    subprocess.run([*git, "-C", str(ws), "submodule", "add", "-q", str(library), "vendor/lib"], check=True)
    gitfile = (ws / "vendor" / "lib" / ".git").read_text()
    sandbox = await without_temp(sandbox_of(places)).with_git_asked(shutil.which("git"))
    script = "echo 'gitdir: /tmp/evil' > vendor/lib/.git; echo '[core] fsmonitor = x' >> deep/proj/.git/config"
    script += "; mv deep deep-old; echo done"
    _, output = await confined(sandbox, script, ws)
    assert output.rstrip().endswith("done")
    assert (ws / "vendor" / "lib" / ".git").read_text() == gitfile
    assert "fsmonitor" not in (ws / "deep" / "proj" / ".git" / "config").read_text()


def test_quoted_errors_viewers_and_what_is_missing_anyway_get_no_note(places: dict[str, Path]) -> None:
    sandbox, ws, home = sandbox_of(places), places["ws"], places["home"]
    document = (
        "- `PermissionError: [Errno 13] Permission denied: '/var/lib/app/db.sqlite'`\n> curl: (6) Could not resolve"
    )

    def note(output: str, command: str = "make", failed: bool = True) -> str | None:
        return blocked_note(output, sandbox, cwd=ws, home=home, network=False, failed=failed, command=command)

    assert note(document) is None
    assert note("cat: /var/lib/app/db.sqlite: Permission denied", "cat TROUBLESHOOTING.md", failed=False) is None
    assert note(f"ls: cannot access '{home}/.aws': No such file or directory") is None  # not there outside either
    # git writing .git says nothing of why it failed: the note does.
    assert note("", "git stash && git stash pop") == (
        "[blocked by the sandbox:\n- git stash writing .git (git's own files are read-only)\n"
        'If the task needs it, run the command again with lift_sandbox="all" (the network too) and a reason: '
        "the user is asked.]"
    )
    offline = blocked_note(
        "curl: (6) Could not resolve host: x", sandbox, cwd=ws, home=home, network=False, askable=False
    )
    assert offline == (
        "[blocked by the sandbox:\n- the network (off)\nNo one can be asked to lift it in this session: if the task "
        "needs it, say in your answer what to run outside the sandbox.]"
    )
