"""ACP content blocks ⇄ brain prompt blocks."""

from __future__ import annotations

import base64
import binascii
from pathlib import Path
from urllib.parse import unquote, urlparse

from acp import helpers
from acp.schema import (
    AudioContentBlock,
    EmbeddedResourceContentBlock,
    ImageContentBlock,
    ResourceContentBlock,
    TextContentBlock,
    TextResourceContents,
)

from codling.brain.images import may_see_images
from codling.brain.prompt import ImageBlock, PromptBlock, ResourceBlock, TextBlock
from codling.errors import CodlingError
from codling.llm.catalog import ModelInfo
from codling.tools.ports import FileSystem
from codling.tools.workspace import Workspace

ContentBlock = (
    TextContentBlock | ImageContentBlock | AudioContentBlock | ResourceContentBlock | EmbeddedResourceContentBlock
)


async def to_prompt(
    blocks: list[ContentBlock], workspace: Workspace, fs: FileSystem, *, model: ModelInfo
) -> tuple[tuple[PromptBlock, ...], list[str]]:
    """Brain prompt blocks for a session/prompt, plus notes for the user about anything not sent as is.

    Text and embedded text resources pass through; a resource link is read through the FileSystem port (inside
    the workspace); images pass through when ``model`` can see them (else the model is told one was attached,
    and the user that it could not see it); audio and binary resources are replaced by a note the model sees
    too.
    """
    out: list[PromptBlock] = []
    notes: list[str] = []
    for block in blocks:
        if isinstance(block, TextContentBlock):
            out.append(TextBlock(block.text))
        elif isinstance(block, ResourceContentBlock):
            out.append(await _read_link(block.uri, workspace, fs))
        elif isinstance(block, ImageContentBlock):
            name = ImageBlock("", block.mime_type, block.uri).name
            if len(block.data) > IMAGE_MAX_BASE64:
                size = len(block.data) * 3 / 4 / 2**20
                out.append(TextBlock(f"[The user attached an image, {name}, too large to pass on ({size:.1f} MB).]"))
                notes.append(
                    f"Note: the image {name} is about {size:.1f} MB, over the {IMAGE_MAX_BYTES // 2**20} MB codling "
                    "passes on (and stores), so it was not sent to the model; attach a smaller or compressed "
                    "image.\n\n"
                )
                continue
            data = _base64(block.data)
            if data is None:
                out.append(TextBlock(f"[The user attached an image, {name}, that could not be decoded.]"))
                notes.append(f"Note: the image {name} could not be decoded, so it was not sent to the model.\n\n")
                continue
            image = ImageBlock(data, block.mime_type, block.uri)
            out.append(image)
            if not may_see_images(model):
                notes.append(
                    f"Note: {model.id} cannot see images; it was only told that you attached {image.name}.\n\n"
                )
        elif isinstance(block, EmbeddedResourceContentBlock):
            res = block.resource
            if isinstance(res, TextResourceContents):
                out.append(ResourceBlock(res.uri, text=res.text))
            else:
                note = "binary content is not supported; only its name was passed on"
                out.append(ResourceBlock(res.uri, note=note))
                notes.append(f"Note: {res.uri}: {note}.\n\n")
        else:
            kind = block.type
            article = "an" if kind[:1] in "aeiou" else "a"
            out.append(TextBlock(f"[The user attached {kind} content that could not be passed on.]"))
            notes.append(
                f"Note: {article} {kind} attachment was not sent to the model: codling does not accept {kind} input "
                "yet.\n\n"
            )
    return tuple(out), notes


IMAGE_MAX_BYTES = 20 * 2**20
"""The largest image a prompt passes on: what the largest provider limit allows (OpenAI's 20 MB; Anthropic's
is 5 MB, which its API reports itself). A larger one would be stored whole in history.jsonl and re-read on
every load, for a request every provider refuses."""
IMAGE_MAX_BASE64 = IMAGE_MAX_BYTES * 4 // 3 + 4096
""":data:`IMAGE_MAX_BYTES` as base64, with room for line breaks and a ``data:`` prefix (checked before
decoding: a 200 MB string is not decoded to learn that it is too large)."""


async def _read_link(uri: str, workspace: Workspace, fs: FileSystem) -> ResourceBlock:
    path = _path_from_uri(uri)
    if path is None:
        return ResourceBlock(uri, note="not a file; only its address was passed on")
    try:
        return ResourceBlock(uri, text=await fs.read_text(workspace.resolve(str(path))))
    except CodlingError as e:
        return ResourceBlock(uri, note=f"could not be read: {e}")


def _base64(data: str) -> str | None:
    """Image data as plain base64 (line breaks and a ``data:…;base64,`` prefix removed), or None if it is not
    base64 or empty."""
    text = "".join(data.split())
    if text.startswith("data:") and "," in text:
        text = text.split(",", 1)[1]
    try:
        return text if text and base64.b64decode(text, validate=True) else None
    except (binascii.Error, ValueError):
        return None


def _path_from_uri(uri: str) -> Path | None:
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return Path(unquote(parsed.path))
    if parsed.scheme == "" and uri:
        return Path(uri)
    return None


def to_acp(
    block: PromptBlock,
) -> TextContentBlock | ImageContentBlock | EmbeddedResourceContentBlock | ResourceContentBlock:
    """The ACP content block a prompt block is shown as (on replay)."""
    if isinstance(block, TextBlock):
        return helpers.text_block(block.text)
    if isinstance(block, ImageBlock):
        return helpers.image_block(block.data, block.mime_type, uri=block.uri)
    if block.text is not None:
        return helpers.resource_block(helpers.embedded_text_resource(block.uri, block.text))
    return helpers.resource_link_block(block.name, block.uri, description=block.note)
