"""A program run on a real pseudo-terminal, driven as a person at a keyboard would: wait for text, type.

The reader thread collects everything the program writes (stdout and stderr share the terminal); ``expect``
waits on a condition variable for text to appear, so a test never sleeps to synchronise.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from tests.fakes.deadlines import deadline

ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[()][A-Z0-9]|\x1b[=>78]|\r")
"""Escape sequences (and carriage returns) a screen would act on rather than show."""


def plain(text: str) -> str:
    """``text`` without terminal escape sequences and carriage returns."""
    return ANSI.sub("", text)


class PtyProcess:
    """``argv`` with its stdin, stdout and stderr on one pseudo-terminal, ``columns`` wide (40 rows)."""

    def __init__(
        self, argv: Sequence[str], *, env: Mapping[str, str], cwd: Path | None = None, columns: int = 120
    ) -> None:
        import fcntl
        import pty
        import struct
        import termios

        primary, secondary = pty.openpty()
        fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
        self.process = subprocess.Popen(
            list(argv),
            stdin=secondary,
            stdout=secondary,
            stderr=secondary,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,  # the terminal becomes its controlling terminal: Ctrl-C is a real SIGINT
        )
        os.close(secondary)
        self._fd = primary
        self._raw = b""
        self._changed = threading.Condition()
        self._closed = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self._fd, 4096)
            except OSError:  # EIO: the program closed the terminal
                chunk = b""
            with self._changed:
                if not chunk:
                    self._closed = True
                    self._changed.notify_all()
                    return
                self._raw += chunk
                self._changed.notify_all()

    @property
    def output(self) -> str:
        """Everything written so far, without escape sequences."""
        with self._changed:
            return plain(self._raw.decode("utf-8", "replace"))

    @property
    def raw(self) -> bytes:
        """Everything written so far, as written."""
        with self._changed:
            return self._raw

    def expect(self, text: str | re.Pattern[str], *, after: int = 0, timeout: float = 30.0) -> int:
        """Wait until ``text`` appears in the plain output past offset ``after``; the offset just past it."""
        pattern = text if isinstance(text, re.Pattern) else re.compile(re.escape(text))
        found: list[int] = []

        def seen() -> bool:
            match = pattern.search(plain(self._raw.decode("utf-8", "replace")), after)
            if match:
                found.append(match.end())
            return bool(match) or self._closed

        with self._changed:
            if not self._changed.wait_for(seen, deadline(timeout)) or not found:
                raise AssertionError(f"{text!r} did not appear; the screen so far:\n{self.output[-3000:]}")
        return found[0]

    def send(self, text: str) -> None:
        """Type ``text`` (``\\r`` is Enter, ``\\x03`` Ctrl-C, ``\\x04`` Ctrl-D)."""
        os.write(self._fd, text.encode())

    def interrupt(self) -> None:
        """Ctrl-C, as the terminal sends it: SIGINT to the program's process group."""
        os.killpg(self.process.pid, signal.SIGINT)

    def wait(self, timeout: float = 30.0) -> int:
        """The exit status, once the program has ended and everything it wrote was read."""
        code = self.process.wait(timeout=deadline(timeout))
        with self._changed:
            self._changed.wait_for(lambda: self._closed, deadline(timeout))
        return code

    def close(self) -> None:
        """Kill the program if it still runs and release the terminal."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=deadline(10))
        self._reader.join(timeout=deadline(10))
        os.close(self._fd)
