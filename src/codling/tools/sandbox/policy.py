"""What a sandboxed command may touch: the session's sandbox (``Sandbox``) and the policy it hands the reaper.

Writable: the workspace and its additional directories, the temporary directories (``/tmp``, ``/var/tmp``,
``$TMPDIR``, ``/dev/shm``) and what ``sandbox_writable`` in config.toml adds. Within those, read-only: git's
hooks and config (``.git`` itself stays where it is: it cannot be swapped for a copy), the project's permission
rules, and the other protected paths (``tools/protected.py``) at a root's top level and in the home directory.
Unreadable (seen as empty): the credentials of ssh, the clouds, gpg, package registries and git, the docker
socket, ``$CODLING_HOME``. The network: off (a loopback of the command's own), unless lifted.

When it applies: in read-only, ask, accept-edits and auto; in yolo only with ``sandbox = "always"``; never with
``sandbox = "off"``. A call may lift part of it once the user approves (``Lift``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from codling.errors import SandboxUnavailable
from codling.permission_rules import PROJECT_RULES
from codling.tools.git import git_output
from codling.tools.git_places import git_view, nested_repositories
from codling.tools.protected import HOME_PLACES, PROTECTED_PATHS
from codling.tools.sandbox.confine import encode_policy
from codling.vocabulary import PermissionMode, SandboxSetting

Lift = Literal["network", "all"]
"""What a call may ask to lift: the network only (writes and secrets stay confined), or the whole sandbox."""

HIDDEN_IN_HOME = (
    *(".ssh", ".aws", ".gnupg", ".azure", ".kube", ".docker", ".oci", ".password-store", ".vault-token"),
    *(".config/gcloud", ".config/gh", ".config/hub", ".config/op", ".config/rclone", ".config/codling"),
    *(".local/share/keyrings", ".netrc", ".git-credentials", ".pypirc", ".npmrc", ".pgpass", ".my.cnf"),
    *(".cargo/credentials", ".cargo/credentials.toml", ".gem/credentials", ".terraform.d/credentials.tfrc.json"),
    *(".kaggle", ".cache/huggingface/token", ".config/huggingface", ".m2/settings.xml", ".gradle/gradle.properties"),
    *(".codex/auth.json", ".claude/.credentials.json", ".claude.json", ".gemini", ".config/github-copilot"),
    *(".local/share/opencode/auth.json", ".config/containers/auth.json", ".config/pip", ".yarnrc.yml"),
    *(".config/composer/auth.json", ".composer/auth.json", ".s3cfg", ".boto", ".databrickscfg", ".terraformrc"),
    *(".mozilla", ".config/google-chrome", ".config/chromium", ".config/BraveSoftware", ".thunderbird"),
    *(".bash_history", ".zsh_history", ".python_history", ".psql_history", ".mysql_history", ".node_repl_history"),
    ".local/share/fish/fish_history",
)
"""Paths in the home directory a sandboxed command sees empty: keys, tokens, the agents and browsers that hold
them, and shell histories (a secret typed once stays there)."""


def hidden_elsewhere(uid: int, env: dict[str, str]) -> list[Path]:
    """Outside the home: sockets that hand out more than the sandbox allows — docker's (root), the session
    bus and the user's runtime directory (``systemd-run --user``, gpg-agent, keyrings), X11 and tmux (keys
    typed into your windows), the ssh agent's."""
    paths = ["/var/run/docker.sock", "/run/docker.sock", f"/run/user/{uid}", "/tmp/.X11-unix", f"/tmp/tmux-{uid}"]
    paths += ["/run/screen", "/run/dbus/system_bus_socket"]
    paths += [
        value for name in ("SSH_AUTH_SOCK", "XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS") if (value := env.get(name))
    ]
    return [Path(p.removeprefix("unix:path=").split(",")[0]) for p in paths if p.startswith(("/", "unix:path=/"))]


@dataclass(frozen=True)
class Sandbox:
    """A session's sandbox: which paths a confined command may change, may not change, may not read."""

    writable: tuple[Path, ...]
    """The workspace's roots first (``roots`` of them), then temp and what config.toml adds."""
    roots: int
    read_only: tuple[Path, ...]
    """Beneath ``writable``: paths a command may not change, nor make where they do not exist (those it makes
    anyway are removed after it: ``made_protected``)."""
    hidden: tuple[Path, ...]
    setting: SandboxSetting = "on"
    caches: tuple[str, ...] = ()
    """``NAME=/path`` variables that move tools' caches into temp, where ``~/.cache`` is not writable."""
    _with_git: list[Sandbox] = field(default_factory=list, compare=False, repr=False)
    """This sandbox with git's own places, once asked (``with_git_asked``)."""

    def applies(self, mode: PermissionMode) -> bool:
        """Whether commands run confined in ``mode``."""
        if self.setting == "off":
            return False
        return mode != "yolo" or self.setting == "always"

    def policy(self, lift: Lift | None = None) -> str | None:
        """The policy for the reaper (``confine.encode_policy``), with ``lift`` lifted; None: unconfined."""
        if lift == "all":
            return None
        for root in self.writable:
            if os.path.lexists(root) and Path(os.path.realpath(root)) != root:
                raise SandboxUnavailable(
                    f"{root} was moved, or replaced by a link, since the session began; a confined command would "
                    "write wherever it leads now, so none runs until a new session starts there"
                )
        try:
            return encode_policy(
                tuple(map(str, self.writable)),
                tuple(map(str, self.read_only)),
                tuple(map(str, self.hidden)),
                self.caches,
                tuple(map(str, self.pins())),
                network=lift == "network",
            )
        except ValueError as e:  # a path with a line break: it cannot be confined, so nothing runs
            raise SandboxUnavailable(str(e)) from e

    def pins(self) -> list[Path]:
        """The directories to pin (``confine.encode_policy``): every directory between a read-only or hidden
        path and the writable place it lies in, shallowest first — so none can be renamed away from its cover.
        (A writable root moved away and replaced by a link is caught by :meth:`policy` before the next command.)"""
        pinned: set[Path] = set()
        for path in (*self.read_only, *self.hidden):
            roots = [root for root in self.writable if path != root and path.is_relative_to(root)]
            if not roots:
                continue
            boundary = max(roots, key=lambda root: len(root.parts))
            pinned.update(place for place in path.parents if place != boundary and place.is_relative_to(boundary))
        return sorted(pinned, key=lambda p: (len(p.parts), p))

    def blocked_write(self, path: Path) -> bool:
        """Whether the sandbox (rather than the file's owner) keeps a confined command from changing ``path``."""
        path = _real(path)
        if any(_within(path, p) for p in (*self.read_only, *self.hidden)):
            return True
        return not any(_within(path, root) for root in self.writable) and not path.is_relative_to("/dev")

    def hides(self, path: Path) -> bool:
        """Whether a confined command sees ``path`` empty (it lies in a covered path)."""
        path = _real(path)
        return any(_within(path, p) for p in self.hidden)

    def absent(self) -> list[Path]:
        """The read-only paths that do not exist now (a confined command may not make them)."""
        return [p for p in self.read_only if not os.path.lexists(p)]

    async def with_git_asked(self, git: str | None) -> Sandbox:
        """This sandbox with the places git runs programs from in each root, asked of git once a session:
        a confined command cannot change git's configuration (read-only), so what git said holds."""
        if not self._with_git:
            places: list[Path] = []
            if git is not None:
                for root in self.writable[: self.roots]:
                    places += [place.path for place in (await git_view(git, root)).places]
                    places += await _repositories_within(git, root)
            self._with_git.append(self.with_git(places))
        return self._with_git[0]

    def reading_workspace(self) -> Sandbox:
        """This sandbox with the workspace read-only (a reviewer's): only temp and ``sandbox_writable`` stay
        writable."""
        roots = self.writable[: self.roots]
        return replace(
            self, writable=self.writable[self.roots :], roots=0, read_only=(*roots, *self.read_only), _with_git=[]
        )

    def with_git(self, places: Iterable[Path]) -> Sandbox:
        """This sandbox with the places git runs programs from (hooks directories ``core.hooksPath`` names,
        configuration files: ``tools/git_places.py``) read-only too, where they lie beneath ``writable``."""
        more = [p for p in map(_real, places) if any(_within(p, root) for root in self.writable)]
        return replace(self, read_only=tuple(_unique([*self.read_only, *more])), _with_git=[])


def made_protected(absent: list[Path]) -> list[Path]:
    """Of ``absent`` (``Sandbox.absent`` before a command), those the command made: each is removed (a
    directory with what is in it), so what it names never runs; the paths removed.

    This runs unconfined, on paths a command could shape: nothing is removed through a symbolic link. The
    paths were resolved when the session began, so a link now on the way to one (``.vscode`` made a link to
    a directory elsewhere holding a ``tasks.json``) is the command's: the link itself is what is removed."""
    made: list[Path] = []
    for path in absent:
        if not os.path.lexists(path):  # (through any link on the way: one stat for what was not made, the most)
            continue
        link = next((p for p in (*reversed(path.parents), path) if p.is_symlink()), None)
        if link is not None and not os.path.exists(path):
            continue  # a link to where the protected file is not: it names nothing yet
        target = link or path
        _remove(target)
        made.append(target)
    return list(dict.fromkeys(made))


def _remove(path: Path) -> None:
    """Remove ``path`` whatever the command made of it: first renamed aside in one step (so its protected name
    is gone even if what is inside cannot all be removed), then removed without following links."""
    aside = path.with_name(f".{path.name}.made-by-a-command-{os.getpid()}")
    try:
        os.rename(path, aside)
    except OSError:
        aside = path
    if aside.is_dir() and not aside.is_symlink():
        rm = shutil.which("rm")
        if rm is not None:  # iterative, unlike shutil.rmtree, which a tree 3,000 deep ends in RecursionError
            subprocess.run([rm, "-rf", "--", str(aside)], check=False, capture_output=True)
        else:
            with contextlib.suppress(Exception):
                shutil.rmtree(aside)
    else:
        with contextlib.suppress(OSError):
            aside.unlink()


def build_sandbox(
    roots: Sequence[Path],
    *,
    home: Path,
    codling_home: Path,
    extra_writable: Iterable[Path] = (),
    setting: SandboxSetting = "on",
    env: dict[str, str] | None = None,
) -> Sandbox:
    """The sandbox of a session whose workspace has ``roots`` (see the module docstring)."""
    env = dict(os.environ) if env is None else env
    temps = ["/tmp", "/var/tmp", "/dev/shm", tempfile.gettempdir(), env.get("TMPDIR", "")]
    writable = _unique(_real(p) for p in (*roots, *extra_writable, *(Path(t) for t in temps if t)))
    hidden_candidates = [home / name for name in HIDDEN_IN_HOME]
    hidden_candidates += [codling_home, *hidden_elsewhere(os.getuid(), env)]
    # A covered path must not hide the workspace itself (a workspace in $CODLING_HOME, say).
    hidden = [p for p in _unique(map(_real, hidden_candidates)) if not any(_within(root, p) for root in writable)]
    read_only: list[Path] = []
    for root in (_real(r) for r in roots):
        # All of .git: its hooks and config, and what redirects git elsewhere (commondir, config.worktree,
        # modules/…); being a mount point, it cannot be moved or replaced either. git status, diff and log work.
        read_only += [root / ".git", *linked_git_directories(root / ".git")]
        read_only += [repository / ".git" for repository in nested_repositories(root)]
        read_only.append(root / PROJECT_RULES.parent)  # .codling: its permissions.toml cannot be made either
        read_only += [root / p.pattern.rstrip("/") for p in PROTECTED_PATHS if p.pattern != ".git/"]
    read_only += [home / name.rstrip("/") for name, _ in HOME_PLACES]
    # codling itself, where a workspace holds it (its own checkout, a project's virtualenv): the reaper and
    # the sandbox's own code run from these files unconfined, and codling imports some modules late.
    read_only += [Path(__file__).resolve().parents[2], Path(sys.prefix)]
    kept = [p for p in _unique(map(_real, read_only)) if any(_within(p, root) for root in writable)]
    sandbox = Sandbox(tuple(writable), len(_unique(map(_real, roots))), tuple(kept), tuple(hidden), setting)
    if not sandbox.blocked_write(home / ".cache" / "x"):
        return sandbox
    # Caches go to temp, one per workspace (pip, uv, go, pre-commit follow XDG; npm and go's modules do not):
    # ~/.cache itself is not writable (a command could leave programs there that the user's tools run later).
    tag = hashlib.sha256(str(_real(roots[0])).encode()).hexdigest()[:12] if roots else "none"
    cache = Path(tempfile.gettempdir()) / f"codling-cache-{os.getuid()}-{tag}"
    variables = {"XDG_CACHE_HOME": cache, "npm_config_cache": cache / "npm", "GOMODCACHE": cache / "go-mod"}
    return replace(sandbox, caches=tuple(f"{name}={path}" for name, path in variables.items()))


async def _repositories_within(git: str, root: Path) -> list[Path]:
    """The ``.git`` of every repository within ``root`` git knows of: submodules (their ``.git`` file names
    the git directory to use) and repositories in untracked directories, however deep."""
    found: list[Path] = []
    staged = await git_output(git, "-C", str(root), "ls-files", "--stage", "-z", timeout=30)
    for entry in (staged or b"").split(b"\0"):
        if entry.startswith(b"160000 "):  # a gitlink: a submodule's path
            found.append(root / os.fsdecode(entry.split(b"\t", 1)[1]) / ".git")
    # (Without --directory, git names a repository in an untracked directory on its own line, "deep/proj/".)
    others = await git_output(git, "-C", str(root), "ls-files", "--others", "--exclude-standard", "-z", timeout=30)
    for entry in (others or b"").split(b"\0"):
        if entry.endswith(b"/") and os.path.lexists(root / os.fsdecode(entry) / ".git"):
            found.append(root / os.fsdecode(entry) / ".git")
    return found


def linked_git_directories(git: Path) -> list[Path]:
    """Where a worktree's ``.git`` file leads: its git directory and the repository's common one."""
    try:
        line = git.read_text(errors="replace").strip() if git.is_file() else ""
    except OSError:
        return []
    if not line.startswith("gitdir:"):
        return []
    directory = git.parent / line.removeprefix("gitdir:").strip()
    try:
        common = (directory / "commondir").read_text(errors="replace").strip()
    except OSError:
        return [directory]
    return [directory, directory / common]


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def _within(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


def _unique(paths: Iterable[Path]) -> list[Path]:
    return list(dict.fromkeys(paths))
