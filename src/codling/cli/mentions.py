"""``@path`` mentions in a prompt typed at ``codling chat``: each names a file attached to the prompt.

A mention starts a word: ``@src/app.py``, or ``@"docs/a file.md"`` for a path with spaces. A file's text is
attached whole (as an editor attaches a file, ``brain/prompt.ResourceBlock``), an image as an image; a
directory, a file too large or one that cannot be read is passed on by name with the reason, so the model is
not left guessing. Punctuation that ends a sentence (``see @README.md.``) is not part of the path unless the
path with it exists. An ``@`` after a letter, a digit or another ``@`` starts no mention
(``user@example.com``). What was attached, and what was not and why, is
said to the user in one line each.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from codling.brain.prompt import PromptBlock, ResourceBlock, TextBlock
from codling.cli.session_plan import IMAGE_TYPES, read_image
from codling.errors import CodlingError

if TYPE_CHECKING:  # the tools load at the first turn, not before the chat's input line
    from codling.tools.ports import FileSystem
    from codling.tools.workspace import Workspace

MENTION = re.compile(r'(?<![\w@])@(?:"(?P<quoted>[^"\n]+)"|(?P<bare>[^\s"@]+))')
"""``@path`` or ``@"path with spaces"``, the ``@`` not after a letter, a digit or another ``@``."""

TRAILING = ".,;:!?)]}'"
"""Characters that end a sentence rather than a path (dropped when the path with them does not exist)."""

MAX_MENTION_BYTES = 1_000_000
"""The largest file a mention attaches whole; a larger one is passed on by name (the model can read parts)."""


@dataclass(frozen=True)
class Attached:
    """A prompt with its mentions attached: the blocks for the model, and one line per mention for the user."""

    blocks: tuple[PromptBlock, ...]
    notes: tuple[str, ...]


def mentioned(text: str) -> list[str]:
    """The paths ``text`` mentions, as typed, in order."""
    return [m["quoted"] or m["bare"] for m in MENTION.finditer(text)]


async def attach(text: str, workspace: Workspace, fs: FileSystem) -> Attached:
    """``text`` as a prompt with the files it mentions attached (each once), read through ``fs`` inside
    ``workspace`` (a path outside it is refused, as the tools refuse it)."""
    blocks: list[PromptBlock] = [TextBlock(text)]
    notes: list[str] = []
    seen: set[Path] = set()
    for typed in mentioned(text):
        path = _existing(typed, workspace.cwd)
        if path is None:
            notes.append(f"@{typed}: no such file or directory in {workspace.cwd}; sent as typed")
            continue
        try:
            resolved = workspace.resolve(str(path))
        except CodlingError as e:
            notes.append(f"@{typed}: not attached: {e}")
            continue
        if resolved in seen:
            continue
        seen.add(resolved)
        block, note = await _attach_one(resolved, _shown(resolved, workspace.cwd), fs)
        blocks.append(block)
        notes.append(note)
    return Attached(tuple(blocks), tuple(notes))


def _existing(typed: str, cwd: Path) -> Path | None:
    """The path ``typed`` names (relative to ``cwd``), dropping sentence punctuation it ends with if need be."""
    candidate = typed
    while candidate:
        path = cwd / candidate
        try:
            if path.exists():
                return path
        except (OSError, ValueError):  # a name the system cannot take (too long, a NUL)
            return None
        if candidate[-1] not in TRAILING:
            return None
        candidate = candidate[:-1]
    return None


async def _attach_one(path: Path, shown: str, fs: FileSystem) -> tuple[PromptBlock, str]:
    uri = path.as_uri()
    if path.is_dir():
        note = "a directory: only its path is attached (codling can list it)"
        return ResourceBlock(uri, note=note), f"@{shown}: {note}"
    if path.suffix.lower() in IMAGE_TYPES:
        try:
            image = read_image(path)
        except CodlingError as e:
            return ResourceBlock(uri, note=str(e)), f"@{shown}: not attached: {e}"
        return image, f"attached {shown} (image)"
    size = path.stat().st_size
    if size > MAX_MENTION_BYTES:
        note = f"{size:,} bytes, too large to attach whole (the limit is {MAX_MENTION_BYTES:,}); read parts of it"
        return ResourceBlock(uri, note=note), f"@{shown}: only its path is attached: {size:,} bytes is too large"
    try:
        content = await fs.read_text(path)
    except CodlingError as e:
        return ResourceBlock(uri, note=f"could not be read: {e}"), f"@{shown}: not attached: {e}"
    lines = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
    return ResourceBlock(uri, text=content), f"attached {shown} ({lines:,} line{'s' if lines != 1 else ''})"


def _shown(path: Path, cwd: Path) -> str:
    return str(path.relative_to(cwd)) if path.is_relative_to(cwd) else str(path)
