"""Confine this process, and all it will start, to a sandbox policy: Linux namespaces plus Landlock.

Standard library only and importable by path: the reaper (``tools/reaper.py``, run as ``python -I -S`` for a
command, an editor terminal's command or an MCP server) loads it, makes the namespaces and mounts itself
(:func:`prepare`: steps 1 and 2) and forks the program, which enforces step 3 (:func:`restrict`) before it
execs, so the reaper stays outside the command's reach. In order:

1. ``unshare(CLONE_NEWUSER | CLONE_NEWNS [| CLONE_NEWNET])`` with the same user and group ids mapped inside, so
   files keep their owners. A new network namespace (network off) has only a loopback, brought up: a command's
   own test servers work, nothing outside this process tree is reachable (TCP, UDP, the host's 127.0.0.1).
2. In the new mount namespace, nobody else's: every ``hidden`` path that exists is covered by an empty
   read-only tmpfs (a directory) or ``/dev/null`` (a file) — ``~/.ssh``, ``$CODLING_HOME`` and the like read as
   empty; every ``read_only`` path (``.git``, the project's permission rules…) is bound onto itself read-only
   (writes fail with EROFS; a mount point cannot be renamed or removed either: ``mv .git`` cannot swap in a
   copy with writable hooks); and ``/dev/pts`` is a new instance of its own, so a command can open the
   terminals it makes (``/dev/ptmx``) but not the user's (escape sequences written to codling's terminal).
3. ``PR_SET_NO_NEW_PRIVS``, then a Landlock domain: writing, making, removing, linking across directories and
   truncating are allowed only beneath ``writable`` paths (and on a few device files); reading is not limited
   (the hidden paths are covered instead, so ``ls ~`` still works). Landlock also forbids the confined processes
   to mount or unmount (the covers stay), to ptrace or read ``/proc/PID/environ`` of processes outside
   (codling's own environment holds its keys) and, from ABI 6, to signal them or reach their abstract sockets.

Both raise :class:`Unconfinable` with a one-line reason when a step the policy needs is not available
here (no user namespaces, no Landlock): the caller refuses to run the command, it never runs it unconfined.
"""

from __future__ import annotations

import _socket
import ctypes
import errno
import fcntl
import os
import stat
import struct
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC = 32, 4096, 16384
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
PR_SET_NO_NEW_PRIVS = 38
SYS_LANDLOCK_CREATE_RULESET, SYS_LANDLOCK_ADD_RULE, SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH = 1

# Landlock's file-system rights (uapi/linux/landlock.h).
WRITE_FILE, REMOVE_DIR, REMOVE_FILE = 1 << 1, 1 << 4, 1 << 5
MAKE_CHAR, MAKE_DIR, MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = (1 << n for n in range(6, 13))
REFER, TRUNCATE = 1 << 13, 1 << 14
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1, 2

WRITE_RIGHTS = WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_CHAR | MAKE_DIR | MAKE_REG | MAKE_SOCK | MAKE_FIFO
WRITE_RIGHTS |= MAKE_BLOCK | MAKE_SYM
FILE_RIGHTS = WRITE_FILE | TRUNCATE
"""What a rule on a file (not a directory) may grant."""

DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx", "/dev/random", "/dev/urandom")
"""Device files every command may write (``> /dev/null``); other devices stay read-only."""
DEVICE_DIRS = ("/dev/pts", "/dev/shm")


class Unconfinable(Exception):
    """The sandbox cannot be set up here; the message says what is missing, in one line."""


KINDS = {"w": "writable", "r": "read_only", "h": "hidden", "p": "pinned", "e": "directories"}
"""A policy's path kinds, each one letter in its encoding (see :func:`encode_policy`)."""


def encode_policy(
    writable: tuple[str, ...],
    read_only: tuple[str, ...] = (),
    hidden: tuple[str, ...] = (),
    directories: tuple[str, ...] = (),
    pinned: tuple[str, ...] = (),
    *,
    network: bool = False,
) -> str:
    """A policy as one argument: a line per path (its kind's letter, a space, the path), then ``net on|off``.

    ``writable``: directories (and what is beneath) commands may change; ``read_only``: paths beneath those
    they may read but not change (a mount point: not renamed or removed either); ``hidden``: paths they see as
    empty; ``pinned``: directories within writable places that must stay where they are (each a mount point,
    which cannot be renamed: a protected or hidden path deeper down cannot be moved out from under its
    cover, nor a writable root swapped for a link); ``directories``: ``NAME=/path`` variables set for the
    command, each directory made (caches moved into temp: ``~/.cache`` is not writable); ``network``: whether
    they may reach the network (otherwise: a loopback of their own). Every path absolute and resolved; one
    with a line break is refused.
    (Lines, not JSON: the reaper decodes this before every command, and ``json`` costs it 7 ms to import.)
    """
    lines = []
    for letter, paths in zip("wrhep", (writable, read_only, hidden, directories, pinned), strict=True):
        for path in paths:
            if "\n" in path or not path.partition("=")[2 if letter == "e" else 0].startswith("/"):
                raise ValueError(f"a sandbox path must be absolute and on one line: {path!r}")
            lines.append(f"{letter} {path}")
    lines.append(f"net {'on' if network else 'off'}")
    return "\n".join(lines)


def decode_policy(text: str) -> tuple[dict[str, list[str]], bool]:
    """The paths of each kind (``KINDS``' names) and the network switch of :func:`encode_policy`'s text."""
    paths: dict[str, list[str]] = {name: [] for name in KINDS.values()}
    network = False
    for line in text.split("\n"):
        key, _, value = line.partition(" ")
        if key == "net":
            network = value == "on"
        else:
            paths[KINDS[key]].append(value)
    return paths, network


_libc: ctypes.CDLL | None = None


def _c() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.syscall.restype = ctypes.c_long
        _libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    return _libc


def _fail(what: str) -> Unconfinable:
    code = ctypes.get_errno()
    return Unconfinable(f"{what}: {os.strerror(code)}" if code else what)


def landlock_abi() -> int:
    """The Landlock ABI version this kernel offers (0: none, or disabled at boot)."""
    if not sys.platform.startswith("linux"):
        return 0
    version = _c().syscall(SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), LANDLOCK_CREATE_RULESET_VERSION)
    return max(int(version), 0)


def prepare(policy: str) -> tuple[str, int]:
    """Steps 1 and 2 of the module docstring, in this process (the reaper, which stays out of step 3: the
    namespaces then last until it exits, after it told codling the command's status), and step 3's Landlock
    ruleset, built but not enforced; what was set up, and the ruleset's fd for :func:`restrict`.
    ``Unconfinable`` when a step is refused."""
    if not sys.platform.startswith("linux"):
        raise Unconfinable(f"the sandbox needs Linux (Landlock and user namespaces); this is {sys.platform}")
    abi = landlock_abi()
    if abi < 1:
        raise Unconfinable("this kernel has no Landlock (Linux 5.13 or later, enabled at boot, is needed)")
    paths, network = decode_policy(policy)
    uid, gid = os.geteuid(), os.getegid()
    if _c().unshare(CLONE_NEWUSER | CLONE_NEWNS | (0 if network else CLONE_NEWNET)) != 0:
        why = _USERNS_REFUSED.get(ctypes.get_errno(), "the kernel refused them")
        raise Unconfinable(
            f"user namespaces are not available to this user ({why}); they hide secrets and cut the network"
        )
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} {uid} 1")
    _write("/proc/self/gid_map", f"{gid} {gid} 1")
    if not network:
        _loopback_up()
        os.environ.setdefault("PIP_RETRIES", "0")  # pip would retry a network that is not there for seconds
    for path in paths["pinned"]:  # first: the covers and binds below go on top of them
        _pin(path)
    hidden = sum(_cover(path) for path in paths["hidden"])
    _own_terminals()
    read_only = sum(_read_only(path) for path in paths["read_only"])
    # The working directory still points into the mounts beneath the new ones: walk to it again, or a
    # read-only bind over the workspace itself would not hold for relative paths.
    try:
        os.chdir(os.getcwd())
    except OSError as e:  # the directory is gone: nothing is written through it
        raise Unconfinable(f"the working directory cannot be entered again: {e.strerror}") from e
    for variable in paths["directories"]:
        name, _, directory = variable.partition("=")
        try:
            os.makedirs(directory, mode=0o700, exist_ok=True)
            held = os.lstat(directory)
        except OSError:
            continue  # the program's own default then, which the sandbox may refuse: it says so
        if stat.S_ISDIR(held.st_mode) and held.st_uid == uid and not held.st_mode & 0o022:
            os.environ[name] = directory  # (not one another user made first, to fill with what we would run)
    _own_keyring()
    net = "network: own loopback only" if not network else "network: on"
    ruleset = _ruleset(paths["writable"], abi)
    return f"landlock ABI {abi}; {net}; {hidden} paths covered; {read_only} read-only", ruleset


def restrict(ruleset: int) -> None:
    """Step 3 of the module docstring: this process (the command about to be exec'd) and all it starts are
    held to ``ruleset`` (:func:`prepare`'s); ``Unconfinable`` when the kernel refuses."""
    libc = _c()
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise _fail("cannot set no_new_privs")
    if libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0) != 0:
        raise _fail("cannot enforce the Landlock ruleset")


_USERNS_REFUSED = {
    errno.ENOSPC: "the limit /proc/sys/user/max_user_namespaces is reached, or 0",
    errno.EPERM: "not permitted: kernel.unprivileged_userns_clone, AppArmor or a seccomp filter forbids them",
    errno.EINVAL: "this kernel was built without them",
    errno.EUSERS: "too many nested user namespaces",
}


def _write(path: str, text: str) -> None:
    try:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)
    except OSError as e:
        raise Unconfinable(f"cannot map ids in the user namespace ({path}): {e.strerror}") from e


def _loopback_up() -> None:
    """Bring ``lo`` up in the new network namespace (SIOCGIFFLAGS, then SIOCSIFFLAGS with IFF_UP)."""
    s = _socket.socket(_socket.AF_INET, _socket.SOCK_DGRAM)
    try:
        request = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(s.fileno(), 0x8913, request))[1]
        fcntl.ioctl(s.fileno(), 0x8914, struct.pack("16sH22x", b"lo", flags | 1))
    except OSError as e:
        raise Unconfinable(f"cannot bring up the loopback of the new network namespace: {e.strerror}") from e
    finally:
        s.close()


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    encoded = [None if v is None else v.encode() for v in (source, target, fstype, data)]
    if _c().mount(encoded[0], encoded[1], encoded[2], flags, encoded[3]) != 0:
        raise _fail(f"cannot mount over {target}")


def _cover(path: str) -> bool:
    """Cover ``path`` with an empty read-only directory or ``/dev/null``; whether it existed."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    if stat.S_ISDIR(mode):
        _mount("none", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0555")
    else:
        _mount("/dev/null", path, None, MS_BIND)
    return True


def _own_terminals() -> None:
    """A devpts instance of the namespace's own on ``/dev/pts``, its ``ptmx`` on ``/dev/ptmx``."""
    if not os.path.isdir("/dev/pts"):
        return
    _mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620")
    if os.path.exists("/dev/ptmx"):
        _mount("/dev/pts/ptmx", "/dev/ptmx", None, MS_BIND)


def _pin(path: str) -> None:
    """Bind ``path`` (a directory, if it is one) onto itself: a mount point cannot be renamed or removed."""
    try:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            return
    except OSError:
        return
    _mount(path, path, None, MS_BIND | MS_REC)


_KEYCTL = {"x86_64": 250, "aarch64": 219, "riscv64": 219}
KEYCTL_JOIN_SESSION_KEYRING = 1


def _own_keyring() -> None:
    """A new, empty session keyring: the caller's (Kerberos tickets, tools' keys) is not readable from here.
    Where keyctl is refused (no keyrings in this kernel, a seccomp filter), the caller's is out of reach too."""
    number = _KEYCTL.get(os.uname().machine)
    if number is not None:
        _c().syscall(number, KEYCTL_JOIN_SESSION_KEYRING, None)


def _read_only(path: str) -> bool:
    """Bind ``path`` onto itself read-only; whether it existed."""
    try:
        vfs = os.statvfs(path)
    except OSError:
        return False
    _mount(path, path, None, MS_BIND | MS_REC)
    # A remount must keep the flags the mount was locked with, or the kernel refuses it.
    kept = 0
    for st_flag, ms_flag in ((2, MS_NOSUID), (4, MS_NODEV), (8, MS_NOEXEC), (1024, MS_NOATIME)):
        if vfs.f_flag & st_flag:
            kept |= ms_flag
    for st_flag, ms_flag in ((2048, MS_NODIRATIME), (4096, MS_RELATIME)):
        if vfs.f_flag & st_flag:
            kept |= ms_flag
    _mount(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | kept)
    return True


def _ruleset(writable: list[str], abi: int) -> int:
    """A Landlock ruleset (its fd, closed on exec) granting writes beneath ``writable`` only; not enforced."""
    handled = WRITE_RIGHTS | (REFER if abi >= 2 else 0) | (TRUNCATE if abi >= 3 else 0)
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0
    attr = struct.pack("QQQ", handled, 0, scoped)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    libc = _c()
    ruleset = int(libc.syscall(SYS_LANDLOCK_CREATE_RULESET, attr[:size], ctypes.c_size_t(size), 0))
    if ruleset < 0:
        raise _fail("cannot create a Landlock ruleset")
    try:
        for path in writable:
            _allow(ruleset, path, handled)
        for path in DEVICES:
            _allow(ruleset, path, FILE_RIGHTS & handled)
        for path in DEVICE_DIRS:
            _allow(ruleset, path, handled)
    except BaseException:
        os.close(ruleset)
        raise
    os.set_inheritable(ruleset, False)
    return ruleset


def _allow(ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # not here: nothing to allow
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= FILE_RIGHTS
        rule = struct.pack("=Qi", rights, fd)
        if _c().syscall(SYS_LANDLOCK_ADD_RULE, ruleset, LANDLOCK_RULE_PATH_BENEATH, rule, 0) != 0:
            code = ctypes.get_errno()
            raise Unconfinable(f"cannot allow writes beneath {path}: {os.strerror(code or errno.EINVAL)}")
    finally:
        os.close(fd)
