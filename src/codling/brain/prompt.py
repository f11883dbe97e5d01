"""Prompt assembly: the system prompt and the user's content blocks as the model sees them."""

from __future__ import annotations

import platform
import subprocess
from dataclasses import dataclass
from datetime import date
from importlib import resources
from pathlib import Path


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


PromptBlock = TextBlock | ResourceBlock


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
        elif block.text is not None:
            fence = _fence(block.text)
            parts.append(f"{block.uri}\n{fence}\n{block.text.rstrip(chr(10))}\n{fence}")
        else:
            parts.append(f"{block.uri} ({block.note or 'no content'})")
    return "\n\n".join(p for p in parts if p)


def prompt_summary(blocks: tuple[PromptBlock, ...]) -> str:
    """The prompt as a user would describe it: typed text plus the names of attachments."""
    parts = [b.text if isinstance(b, TextBlock) else f"@{b.uri.rsplit('/', 1)[-1]}" for b in blocks]
    return " ".join(p for p in parts if p).strip()


def _git_branch(cwd: Path) -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--abbrev-ref", "HEAD"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=2,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def system_prompt(cwd: Path, additional_dirs: tuple[Path, ...] = ()) -> str:
    """The system prompt: brain/prompts/system.md plus a short environment block."""
    base = resources.files("codling.brain").joinpath("prompts/system.md").read_text(encoding="utf-8")
    lines = [
        f"- Working directory: {cwd}",
        f"- Platform: {platform.system()} {platform.release()}",
        f"- Date: {date.today().isoformat()}",
    ]
    if additional_dirs:
        lines.append("- Additional directories: " + ", ".join(str(d) for d in additional_dirs))
    if branch := _git_branch(cwd):
        lines.append(f"- Git branch: {branch}")
    return base.rstrip() + "\n\n# Environment\n" + "\n".join(lines) + "\n"
