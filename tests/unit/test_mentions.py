"""`@path` mentions typed at `codling chat`: which words are mentions, and what each attaches (or why not)."""

from __future__ import annotations

from pathlib import Path

import pytest

from codling.brain.prompt import ImageBlock, ResourceBlock, TextBlock
from codling.cli.mentions import MAX_MENTION_BYTES, Attached, attach, mentioned
from codling.cli.session_plan import MAX_IMAGE_BYTES
from codling.tools.local import LocalFileSystem
from codling.tools.workspace import Workspace

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 16


@pytest.mark.parametrize(
    ("text", "paths"),
    [
        ("look at @src/app.py", ["src/app.py"]),
        ('read @"docs/a file.md" and @README.md.', ["docs/a file.md", "README.md."]),
        ("mail me at me@example.com", []),
        ("@a @b", ["a", "b"]),
        ("(@src/app.py)", ["src/app.py)"]),  # the ")" goes when the path is looked up
        ("x@y and a@@b", []),  # an @ after a letter, a digit or an @ starts no mention
        ("@", []),
    ],
)
def test_which_words_are_mentions(text: str, paths: list[str]) -> None:
    assert mentioned(text) == paths


async def attached(project: Path, text: str) -> Attached:
    return await attach(text, Workspace(project), LocalFileSystem())


async def test_a_file_is_attached_whole_once_and_sentence_punctuation_is_not_part_of_its_path(project: Path) -> None:
    text = "compare @README.md, @src/app.py and @README.md."
    assert await attached(project, text) == Attached(
        (
            TextBlock(text),
            ResourceBlock((project / "README.md").as_uri(), text="# demo\n"),
            ResourceBlock((project / "src/app.py").as_uri(), text="def greet():\n    return 'hello'\n"),
        ),
        ("attached README.md (1 line)", "attached src/app.py (2 lines)"),
    )


async def test_a_quoted_path_with_spaces_and_an_image(project: Path) -> None:
    (project / "my notes.txt").write_text("a\nb\nc")
    (project / "shot.png").write_bytes(PNG)
    result = await attached(project, 'see @"my notes.txt" and @shot.png')
    assert result.blocks[1] == ResourceBlock((project / "my notes.txt").as_uri(), text="a\nb\nc")
    image = result.blocks[2]
    assert isinstance(image, ImageBlock) and (image.mime_type, image.name) == ("image/png", "shot.png")
    assert result.notes == ("attached my notes.txt (3 lines)", "attached shot.png (image)")


async def test_what_cannot_be_attached_is_passed_on_by_name_with_the_reason(project: Path, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("outside")
    (project / "blob.bin").write_bytes(b"\0\1\2")
    (project / "huge.log").write_bytes(b"x" * (MAX_MENTION_BYTES + 1))
    result = await attached(project, "@missing.py @../secret.txt @src @blob.bin @huge.log")
    src, blob, huge = result.blocks[1:]
    assert src == ResourceBlock(
        (project / "src").as_uri(), note="a directory: only its path is attached (codling can list it)"
    )
    assert isinstance(blob, ResourceBlock) and blob.text is None and "binary" in (blob.note or "")
    assert isinstance(huge, ResourceBlock) and huge.text is None and "too large" in (huge.note or "")
    missing, outside, *rest = result.notes
    assert missing == f"@missing.py: no such file or directory in {project}; sent as typed"
    assert outside.startswith("@../secret.txt: not attached: ") and "outside" in outside
    assert [note.split(":")[0] for note in rest] == ["@src", "@blob.bin", "@huge.log"]
    assert "outside" not in str(result.blocks)  # nothing from outside the workspace was read


async def test_a_mention_of_a_sibling_whose_name_extends_the_cwd_s_is_refused_unless_granted(tmp_path: Path) -> None:
    ws, secrets = tmp_path / "ws", tmp_path / "ws-secrets"
    ws.mkdir()
    secrets.mkdir()
    (secrets / "key.txt").write_text("sk-live-0123456789\n")
    (ws / "key-link.txt").symlink_to(secrets / "key.txt")
    text = "read @../ws-secrets/key.txt and @key-link.txt"
    refused = await attach(text, Workspace(ws), LocalFileSystem())
    assert refused == Attached(
        (TextBlock(text),),
        (
            f"@../ws-secrets/key.txt: not attached: path '{ws / '../ws-secrets/key.txt'}' is outside the workspace "
            f"({ws}); use a path inside it",
            f"@key-link.txt: not attached: path '{ws / 'key-link.txt'}' leads outside the workspace through a "
            f"symbolic link (to {secrets / 'key.txt'}); use a path inside the workspace",
        ),
    )
    # Granted, the sibling is attached (once) and named by its absolute path: it is not under the cwd.
    granted = await attach(text, Workspace(ws, [secrets]), LocalFileSystem())
    assert granted == Attached(
        (TextBlock(text), ResourceBlock((secrets / "key.txt").as_uri(), text="sk-live-0123456789\n")),
        (f"attached {secrets / 'key.txt'} (1 line)",),
    )


async def test_a_mention_no_file_could_have_is_sent_as_typed(project: Path) -> None:
    overlong, nul, dots = "n" * 300, "a\0b", "!?"
    text = f"see @{overlong}, @{nul} and @{dots}"
    result = await attached(project, text)
    assert result == Attached(
        (TextBlock(text),),
        tuple(
            f"@{typed}: no such file or directory in {project}; sent as typed" for typed in (f"{overlong},", nul, dots)
        ),
    )


async def test_an_image_too_large_to_attach_is_passed_on_by_name(project: Path) -> None:
    big = project / "huge.png"
    with big.open("wb") as f:
        f.truncate(MAX_IMAGE_BYTES + 1)
    result = await attached(project, "what is @huge.png?")
    text, image = result.blocks
    (note,) = result.notes
    assert text == TextBlock("what is @huge.png?")
    assert isinstance(image, ResourceBlock) and (image.uri, image.text) == (big.as_uri(), None)
    assert note == "@huge.png: not attached: 20,971,521 bytes is more than the 20,971,520 allowed"
    assert image.note == "20,971,521 bytes is more than the 20,971,520 allowed"
