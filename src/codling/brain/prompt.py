"""Prompt assembly: the system prompt and the user's content blocks as the model sees them.

The system prompt (``system_prompt``) is static for a session: brain/prompts/system.md, the project's
instructions (AGENTS.md files from the repository root down to the cwd) and a short environment block. What
changes from turn to turn (``turn_context``: recently edited files and the last turn summaries) is given to each
model request as extra instructions, so the history itself stays plain conversation.
"""

from __future__ import annotations

import base64
import binascii
import platform
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from importlib import resources
from pathlib import Path
from typing import Any

from codling.tools.git import git_command, git_env
from codling.tools.workspace import read_plain_file

INSTRUCTIONS_FILE = "AGENTS.md"
INSTRUCTIONS_MAX_BYTES = 20_000
"""Most bytes of one AGENTS.md put in the system prompt."""


@dataclass(frozen=True)
class TextBlock:
    """Plain text the user typed."""

    text: str


@dataclass(frozen=True)
class ResourceBlock:
    """A file (or other resource) attached to the prompt.

    ``text`` is its content (embedded by the client, or read through the FileSystem port for a link);
    ``note`` says why there is no text (unreadable, binary, unsupported type), so nothing is dropped silently.
    """

    uri: str
    text: str | None = None
    note: str | None = None

    @property
    def name(self) -> str:
        """The resource's file name (the last segment of its URI)."""
        return self.uri.rstrip("/").rsplit("/", 1)[-1] or self.uri


@dataclass(frozen=True)
class ImageBlock:
    """An image attached to the prompt: base64 ``data`` of type ``mime_type`` (``uri`` names its source, if
    the client said). A model that can see images gets it as such; the text history keeps only a mention."""

    data: str
    mime_type: str
    uri: str | None = None

    @property
    def name(self) -> str:
        """The image's file name, or ``image`` when it has no source."""
        return (self.uri or "").rstrip("/").rsplit("/", 1)[-1] or "image"

    def mention(self) -> str:
        """The image as text: what the history keeps (and what a model that cannot see images is told)."""
        return f"[image attached: {self.name} ({self.mime_type})]"


PromptBlock = TextBlock | ResourceBlock | ImageBlock


def _fence(text: str) -> str:
    fence = "```"
    while fence in text:
        fence += "`"
    return fence


def render_prompt(blocks: tuple[PromptBlock, ...]) -> str:
    """The user's prompt as one text for the model: typed text, then each resource fenced with its path."""
    parts: list[str] = []
    for block in blocks:
        if isinstance(block, TextBlock):
            parts.append(block.text)
        elif isinstance(block, ImageBlock):
            parts.append(block.mention())
        elif block.text is not None:
            fence = _fence(block.text)
            parts.append(f"{block.uri}\n{fence}\n{block.text.rstrip(chr(10))}\n{fence}")
        else:
            parts.append(f"{block.uri} ({block.note or 'no content'})")
    return "\n\n".join(p for p in parts if p)


def user_content(text: str, images: Sequence[ImageBlock], *, can_see: bool) -> str | list[Any]:
    """The user's prompt as the model gets it: ``text`` (``render_prompt``, which mentions each image), plus
    the images themselves for a model that can see them; a model that cannot is told so, to tell the user."""
    if not images:
        return text
    if not can_see:
        return text + "\n\n[You cannot see images: only the names of the attached images reached you.]"
    from pydantic_ai.messages import BinaryContent

    content: list[Any] = [text]
    for image in images:
        try:
            content.append(BinaryContent(base64.b64decode(image.data, validate=True), media_type=image.mime_type))
        except (binascii.Error, ValueError):
            content[0] += f"\n\n[{image.name} could not be decoded, so it was not sent.]"
    return content


def prompt_summary(blocks: tuple[PromptBlock, ...]) -> str:
    """The prompt as a user would describe it: typed text plus the names of attachments."""
    parts = [b.text if isinstance(b, TextBlock) else f"@{b.name}" for b in blocks]
    return " ".join(p for p in parts if p).strip()


def _git_branch(cwd: Path) -> str | None:
    # Through tools/git.py: the repository's configuration must not get to run a program (core.fsmonitor…).
    git = shutil.which("git")
    if git is None:
        return None
    try:
        out = subprocess.run(
            git_command(git, "rev-parse", "--abbrev-ref", "HEAD"),
            cwd=cwd,
            env=git_env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=2,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def find_project_instructions(cwd: Path) -> list[tuple[Path, str]]:
    """The AGENTS.md files that apply in ``cwd``, outermost first, with their text.

    They are looked for in ``cwd`` and each parent up to the repository root (the nearest directory holding a
    ``.git`` file or directory); outside a repository only ``cwd`` itself counts. Each text is capped at
    ``INSTRUCTIONS_MAX_BYTES``, with a note when cut. Empty and unreadable files are skipped, and so is anything
    but a plain file inside the repository (see ``read_plain_file``).
    """
    cwd = Path(cwd).resolve()
    chain: list[Path] = []
    for directory in (cwd, *cwd.parents):
        chain.append(directory)
        if (directory / ".git").exists():
            break
    else:
        chain = [cwd]
    found: list[tuple[Path, str]] = []
    top = chain[-1]
    for directory in reversed(chain):
        file = directory / INSTRUCTIONS_FILE
        # A link (AGENTS.md -> CLAUDE.md is common) is followed only within the repository: never to
        # /proc/self/environ, a device or a file elsewhere that would then be sent to the provider.
        data = read_plain_file(file, INSTRUCTIONS_MAX_BYTES, inside=top)
        if data is None:
            continue
        text = _capped(data)
        if text.strip():
            found.append((file, text))
    return found


def _capped(data: bytes) -> str:
    if len(data) <= INSTRUCTIONS_MAX_BYTES:
        return data.decode("utf-8", "replace")
    cut = data[:INSTRUCTIONS_MAX_BYTES]
    if (newline := cut.rfind(b"\n")) >= INSTRUCTIONS_MAX_BYTES // 2:
        cut = cut[: newline + 1]
    text = cut.decode("utf-8", "ignore").rstrip("\n")  # "ignore": a character split by the cut
    return f"{text}\n[… cut: only the first {len(cut):,} bytes are shown]"


def system_prompt(cwd: Path, additional_dirs: tuple[Path, ...] = ()) -> str:
    """The system prompt: brain/prompts/system.md, the project's AGENTS.md instructions and a short
    environment block."""
    base = resources.files("codling.brain").joinpath("prompts/system.md").read_text(encoding="utf-8")
    parts = [base.rstrip()]
    if instructions := find_project_instructions(cwd):
        sections = [f"## {path}\n\n{text.strip()}" for path, text in instructions]
        parts.append(
            "# Project instructions (AGENTS.md)\n"
            "The project's own instructions for agents, outermost directory first (nearer ones take precedence). "
            "Follow them unless the user says otherwise.\n\n" + "\n\n".join(sections)
        )
    lines = [
        f"- Working directory: {cwd}",
        f"- Platform: {platform.system()} {platform.release()}",
        f"- Date: {date.today().isoformat()}",
    ]
    if additional_dirs:
        lines.append("- Additional directories: " + ", ".join(str(d) for d in additional_dirs))
    if branch := _git_branch(cwd):
        lines.append(f"- Git branch: {branch}")
    parts.append("# Environment\n" + "\n".join(lines))
    return "\n\n".join(parts) + "\n"
