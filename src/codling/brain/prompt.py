"""Prompt assembly: the system prompt and the user's content blocks as the model sees them.

The system prompt (``system_prompt``) is static for a session: brain/prompts/system.md, the instruction files
(``find_project_instructions``: the user's $CODLING_HOME/AGENTS.md, then AGENTS.md, CLAUDE.md or GEMINI.md from
the repository root down to the cwd) and a short environment block. What changes from turn to turn
(``turn_context``: recently edited files and the last turn recaps) is given to each model request as extra
instructions, so the history itself stays plain conversation.
"""

from __future__ import annotations

import base64
import binascii
import platform
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

from codling.paths import codling_home
from codling.tools.git import config_problem, git_command, git_env
from codling.tools.workspace import read_plain_file

INSTRUCTION_NAMES = ("AGENTS.md", "CLAUDE.md", "GEMINI.md")
"""The instruction files looked for in each directory, in order: the first found is the directory's."""
_COPILOT = Path(".github/copilot-instructions.md")
"""Looked for at the repository root only, after ``INSTRUCTION_NAMES``."""
USER_INSTRUCTIONS_FILE = "AGENTS.md"
"""The user's own instructions for every project, in ``$CODLING_HOME``."""
INSTRUCTIONS_MAX_BYTES = 20_000
"""Most bytes of one instruction file put in the system prompt."""
INSTRUCTIONS_TOTAL_MAX_BYTES = 32_000
"""Most bytes of all instruction files together; the nearest directories' files are kept first."""


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


PROMPT_MAX_CHARS = 1_000_000
"""The most characters of text one prompt keeps, its attachments' included (about 250k tokens, more than any
model's share for a prompt; a 50 MB paste made history.jsonl 50 MB and its reload a minute long)."""


@dataclass(frozen=True)
class CappedPrompt:
    """A prompt within :data:`PROMPT_MAX_CHARS`: its blocks, and how many characters were cut (0: none)."""

    blocks: tuple[PromptBlock, ...]
    cut: int = 0


def cap_prompt(blocks: tuple[PromptBlock, ...], limit: int = PROMPT_MAX_CHARS) -> CappedPrompt:
    """``blocks`` with their text within ``limit`` characters together: a block past what is left keeps its
    head and tail around a note saying how much was cut and to attach a file instead; the model, the history
    and the session's record all get the capped prompt."""
    total = sum(len(b.text or "") for b in blocks if not isinstance(b, ImageBlock))
    if total <= limit:
        return CappedPrompt(blocks)
    room = limit
    out: list[PromptBlock] = []
    cut = 0
    for block in blocks:
        text = None if isinstance(block, ImageBlock) else block.text
        if text is None or len(text) <= room:
            out.append(block)
            room -= len(text or "")
            continue
        head = room * 3 // 4
        tail = room - head
        left_out = len(text) - head - tail
        cut += left_out
        note = (
            f"\n[… {left_out:,} characters were cut after the first {head:,} of this text (before its last "
            f"{tail:,}): codling keeps at most {limit:,} characters of a message. To share more, save it in a file "
            "and attach the file or name its path.]"
        )
        # The note goes last, where a model whose window takes only the message's ends still sees it.
        kept = text[:head] + "\n[…]\n" + (text[-tail:] if tail else "") + note
        out.append(replace(block, text=kept) if isinstance(block, ResourceBlock) else TextBlock(kept))
        room = 0
    return CappedPrompt(tuple(out), cut)


def prompt_cut_warning(cut: int) -> str:
    """What the user is told when :func:`cap_prompt` cut their message."""
    return (
        f"Your message was {cut:,} characters over the {PROMPT_MAX_CHARS:,} codling keeps of one message: the "
        "model and the session's history get its beginning and end, with a note of the cut. Save long text in "
        "a file and attach it or name its path instead."
    )


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


def describe_prompt(blocks: tuple[PromptBlock, ...]) -> str:
    """The prompt as a user would describe it: typed text plus the names of attachments."""
    parts = [b.text if isinstance(b, TextBlock) else f"@{b.name}" for b in blocks]
    return " ".join(p for p in parts if p).strip()


def _git_branch(cwd: Path) -> str | None:
    # Through tools/git.py: the repository's configuration must not get to run a program (core.fsmonitor…).
    git = shutil.which("git")
    if git is None or config_problem(cwd, git) is not None:  # an include naming a pipe would hold git
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


@dataclass(frozen=True)
class InstructionFile:
    """An instruction file that goes in the system prompt: where it was found and its text (capped).

    ``path`` is the name looked for (``AGENTS.md`` even when it is a link to ``CLAUDE.md``); ``user`` marks the
    user's own file in ``$CODLING_HOME``, which applies to every project.
    """

    path: Path
    text: str
    user: bool = False

    @property
    def kind(self) -> str:
        """Which kind of file it is, as the prompt's heading names it: ``AGENTS.md``, ``CLAUDE.md``…"""
        if self.path.name == _COPILOT.name and self.path.parent.name == _COPILOT.parent.name:
            return str(_COPILOT)
        return self.path.name

    @property
    def size(self) -> int:
        """Its text's size in bytes (UTF-8), as the total cap counts it."""
        return len(self.text.encode("utf-8"))


@dataclass(frozen=True)
class Instructions:
    """The instruction files for a session, outermost first (the order of the system prompt), and those found
    but left out because all of them together would pass ``INSTRUCTIONS_TOTAL_MAX_BYTES``."""

    files: tuple[InstructionFile, ...] = ()
    left_out: tuple[InstructionFile, ...] = ()


def find_project_instructions(cwd: Path, home: Path | None = None) -> Instructions:
    """The instruction files that apply in ``cwd``: the user's ``AGENTS.md`` in ``home`` (``$CODLING_HOME`` when
    None), then one file per directory from the repository root down to ``cwd``.

    The repository root is the nearest directory holding a ``.git`` file or directory; outside a repository
    only ``cwd`` itself counts (and is the root). In each directory the first of ``INSTRUCTION_NAMES`` that is
    a readable plain file with some text wins; at the root ``.github/copilot-instructions.md`` comes last. A
    file that is the same file as one already taken (``AGENTS.md`` linking to ``CLAUDE.md`` one directory up)
    is not taken twice. Each text is capped at ``INSTRUCTIONS_MAX_BYTES``, with a note when cut, and all of them
    together at ``INSTRUCTIONS_TOTAL_MAX_BYTES``: the nearest directories' files are kept first, and what does
    not fit is returned as ``left_out``. Anything but a plain file (see ``read_plain_file``) inside the
    repository (for the user's file: inside ``home``) is skipped.
    """
    chain = _directories(Path(cwd).resolve())
    top = chain[0]
    home = (codling_home() if home is None else Path(home)).absolute()
    # Outermost first, one group of candidates per place: the first readable one of a group is its file.
    groups: list[tuple[tuple[Path, ...], Path, bool]] = [((home / USER_INSTRUCTIONS_FILE,), home, True)]
    for directory in chain:
        names = (*INSTRUCTION_NAMES, _COPILOT) if directory == top else INSTRUCTION_NAMES
        groups.append((tuple(directory / name for name in names), top, False))
    found: list[InstructionFile] = []
    seen: set[Path] = set()
    for candidates, inside, user in groups:
        for path in candidates:
            # A link (AGENTS.md -> CLAUDE.md is common) is followed only within the repository (or home):
            # never to /proc/self/environ, a device or a file elsewhere that would then be sent to the provider.
            data = read_plain_file(path, INSTRUCTIONS_MAX_BYTES, inside=inside)
            if data is None or not (text := _capped(data)).strip():
                continue
            if (real := _real(path)) not in seen:
                seen.add(real)
                found.append(InstructionFile(path, text, user))
            break
    return _within_total(found)


def _directories(cwd: Path) -> list[Path]:
    """The repository root down to ``cwd`` (only ``cwd`` outside a repository)."""
    chain: list[Path] = []
    for directory in (cwd, *cwd.parents):
        chain.append(directory)
        if (directory / ".git").exists():
            return chain[::-1]
    return [cwd]


def _real(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # it was read a moment ago; a link changed since is its own file
        return path


def _within_total(found: list[InstructionFile]) -> Instructions:
    # The nearest directory's instructions matter most (they are the most specific, and take precedence in the
    # prompt): fill the budget from the innermost file outwards, keeping any outer file that still fits.
    kept: list[InstructionFile] = []
    left_out: list[InstructionFile] = []
    total = 0
    for file in reversed(found):
        if total + file.size <= INSTRUCTIONS_TOTAL_MAX_BYTES:
            kept.append(file)
            total += file.size
        else:
            left_out.append(file)
    return Instructions(tuple(reversed(kept)), tuple(reversed(left_out)))


def _capped(data: bytes) -> str:
    if len(data) <= INSTRUCTIONS_MAX_BYTES:
        return data.decode("utf-8", "replace")
    cut = data[:INSTRUCTIONS_MAX_BYTES]
    if (newline := cut.rfind(b"\n")) >= INSTRUCTIONS_MAX_BYTES // 2:
        cut = cut[: newline + 1]
    text = cut.decode("utf-8", "ignore").rstrip("\n")  # "ignore": a character split by the cut
    return f"{text}\n[… cut: only the first {len(cut):,} bytes are shown]"


def instructions_section(instructions: Instructions) -> str | None:
    """The system prompt's section of instructions (None without any): a heading naming the kinds of file
    used, a line on their order, each file under its path, and a note naming the files left out."""
    files = instructions.files
    if not files:
        return None
    kinds = ", ".join(dict.fromkeys(f.kind for f in files))
    user = any(f.user for f in files)
    project = any(not f.user for f in files)
    if user and project:
        order = (
            "The user's own instructions for every project first, then the project's, outermost directory first "
            "(nearer ones take precedence)."
        )
    elif user:
        order = "The user's own instructions for agents, for every project."
    else:
        order = "The project's own instructions for agents, outermost directory first (nearer ones take precedence)."
    sections = [f"## {f.path}\n\n{f.text.strip()}" for f in files]
    if instructions.left_out:
        sections.append(
            f"[Left out, to keep all instructions under {INSTRUCTIONS_TOTAL_MAX_BYTES:,} bytes (the nearest "
            "directories' files come first): " + ", ".join(str(f.path) for f in instructions.left_out) + "]"
        )
    head = f"# Project instructions ({kinds})\n{order} Follow them unless the user says otherwise."
    return "\n\n".join((head, *sections))


def system_prompt(cwd: Path, additional_dirs: tuple[Path, ...] = (), home: Path | None = None) -> str:
    """The system prompt: brain/prompts/system.md, the instruction files (``find_project_instructions``; the
    user's own in ``home``, ``$CODLING_HOME`` when None) and a short environment block.

    The same inputs give the same bytes: the prompt is the start of every request's cached prefix."""
    base = resources.files("codling.brain").joinpath("prompts/system.md").read_text(encoding="utf-8")
    parts = [base.rstrip()]
    if section := instructions_section(find_project_instructions(cwd, home)):
        parts.append(section)
    lines = [
        f"- Working directory: {cwd}",
        f"- Platform: {platform.system()} {platform.release()}",
    ]
    if additional_dirs:
        lines.append("- Additional directories: " + ", ".join(str(d) for d in additional_dirs))
    if branch := _git_branch(cwd):
        lines.append(f"- Git branch: {branch}")
    parts.append("# Environment\n" + "\n".join(lines))
    return "\n\n".join(parts) + "\n"
