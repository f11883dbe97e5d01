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
import os
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from codling.errors import SandboxUnavailable
from codling.permission_rules import PROJECT_RULES
from codling.tools.protected import HOME_PLACES, PROTECTED_PATHS
from codling.tools.sandbox.confine import encode_policy
from codling.vocabulary import PermissionMode, SandboxSetting

Lift = Literal["network", "all"]
"""What a call may ask to lift: the network only (writes and secrets stay confined), or the whole sandbox."""

HIDDEN_IN_HOME = (
    ".ssh",
    ".aws",
    ".gnupg",
    ".azure",
    ".kube",
    ".docker",
    ".config/gcloud",
    ".config/gh",
    ".config/hub",
    ".password-store",
    ".local/share/keyrings",
    ".netrc",
    ".git-credentials",
    ".pypirc",
    ".npmrc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".gem/credentials",
    ".terraform.d/credentials.tfrc.json",
    ".config/codling",
)
"""Paths in the home directory a sandboxed command sees empty: keys, tokens and the agents that hold them."""
HIDDEN_ELSEWHERE = ("/var/run/docker.sock", "/run/docker.sock")
"""Outside the home: the docker socket (whoever reaches it is root)."""


@dataclass(frozen=True)
class Sandbox:
    """A session's sandbox: which paths a confined command may change, may not change, may not read."""

    writable: tuple[Path, ...]
    read_only: tuple[Path, ...]
    pinned: tuple[Path, ...]
    hidden: tuple[Path, ...]
    setting: SandboxSetting = "on"

    def applies(self, mode: PermissionMode) -> bool:
        """Whether commands run confined in ``mode``."""
        if self.setting == "off":
            return False
        return mode != "yolo" or self.setting == "always"

    def policy(self, lift: Lift | None = None) -> str | None:
        """The policy for the reaper (``confine.encode_policy``), with ``lift`` lifted; None: unconfined."""
        if lift == "all":
            return None
        try:
            return encode_policy(
                tuple(map(str, self.writable)),
                tuple(map(str, self.read_only)),
                tuple(map(str, self.pinned)),
                tuple(map(str, self.hidden)),
                network=lift == "network",
            )
        except ValueError as e:  # a path with a line break: it cannot be confined, so nothing runs
            raise SandboxUnavailable(str(e)) from e

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
    hidden_candidates += [codling_home, *map(Path, HIDDEN_ELSEWHERE)]
    if sock := env.get("SSH_AUTH_SOCK"):
        hidden_candidates.append(Path(sock))
    # A covered path must not hide the workspace itself (a workspace in $CODLING_HOME, say).
    hidden = [p for p in _unique(map(_real, hidden_candidates)) if not any(_within(root, p) for root in writable)]
    pinned: list[Path] = []
    read_only: list[Path] = []
    for root in (_real(r) for r in roots):
        git = root / ".git"
        if git.is_dir():
            with contextlib.suppress(OSError):  # as git init makes it: an empty one is covered, not created
                (git / "hooks").mkdir(exist_ok=True)
            pinned.append(git)
            read_only += [git / "hooks", git / "config"]
        read_only.append(root / PROJECT_RULES.parent)  # .codling: its permissions.toml cannot be made either
        read_only += [root / p.pattern.rstrip("/") for p in PROTECTED_PATHS if p.pattern != ".git/"]
    read_only += [home / name.rstrip("/") for name, _ in HOME_PLACES]
    kept = [p for p in _unique(map(_real, read_only)) if any(_within(p, root) for root in writable)]
    return Sandbox(tuple(writable), tuple(kept), tuple(_unique(pinned)), tuple(hidden), setting)


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def _within(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


def _unique(paths: Iterable[Path]) -> list[Path]:
    return list(dict.fromkeys(paths))
