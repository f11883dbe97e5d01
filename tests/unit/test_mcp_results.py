"""MCP tools and results as codling shows them: the MCP SDK's own types (and v1-shaped ones) in, text out."""

from __future__ import annotations

import base64
from dataclasses import dataclass

import pytest
from mcp.types import (
    AudioContent,
    BlobResourceContents,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
    Tool,
    ToolAnnotations,
)

from codling.tools.base import ToolImage
from codling.tools.mcp.results import (
    MAX_DESCRIPTION_CHARS,
    MAX_IMAGE_BYTES,
    McpTool,
    describe_exception,
    result_of,
    result_text,
    tool_of,
)
from codling.vocabulary import ToolKind

SCHEMA = {"type": "object", "properties": {"url": {"type": "string"}}}


def test_a_tool_becomes_what_the_model_and_the_editor_see() -> None:
    raw = Tool(
        name="fetch",
        title="Fetch   a\npage",
        description="Fetch  a URL\n\nand return it.",
        input_schema=SCHEMA,
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=True),
    )
    assert tool_of("web", raw, "mcp__web__fetch") == McpTool(
        name="mcp__web__fetch",
        server="web",
        tool="fetch",
        title="Fetch a page",
        description="[MCP server web] Fetch a URL and return it.",
        parameters=SCHEMA,
        kind="fetch",
    )


@pytest.mark.parametrize(
    ("annotations", "kind"),
    [
        (None, "other"),
        (ToolAnnotations(), "other"),
        (ToolAnnotations(read_only_hint=False, open_world_hint=True), "other"),
        (ToolAnnotations(read_only_hint=True), "read"),
        (ToolAnnotations(read_only_hint=True, open_world_hint=False), "read"),
        (ToolAnnotations(read_only_hint=True, open_world_hint=True), "fetch"),
    ],
)
def test_a_tools_kind_follows_the_servers_hints(annotations: ToolAnnotations | None, kind: ToolKind) -> None:
    raw = Tool(name="t", input_schema={"type": "object"}, annotations=annotations)
    assert tool_of("s", raw, "mcp__s__t").kind == kind


@dataclass
class V1Annotations:
    """Annotations as the MCP SDK's v1 spelled them (camelCase), which a duck-typed reader still understands."""

    title: str | None = None
    readOnlyHint: bool | None = None
    openWorldHint: bool | None = None


@dataclass
class V1Tool:
    name: str
    description: str | None
    inputSchema: object
    annotations: V1Annotations | None = None


def test_a_v1_shaped_tool_is_read_by_its_camel_case_names() -> None:
    raw = V1Tool("grep", None, "not a schema", V1Annotations("Search files", readOnlyHint=True, openWorldHint=False))
    assert tool_of("fs", raw, "mcp__fs__grep") == McpTool(
        name="mcp__fs__grep",
        server="fs",
        tool="grep",
        title="Search files",
        description="[MCP server fs]",
        parameters={"type": "object"},
        kind="read",
    )


def test_a_long_description_and_title_are_cut() -> None:
    raw = Tool(name="t", title="T" * 100, description="word " * 1000, input_schema={"type": "object"})
    tool = tool_of("s", raw, "mcp__s__t")
    assert tool.title == "T" * 79 + "…"
    assert tool.description == "[MCP server s] " + ("word " * 400)[: MAX_DESCRIPTION_CHARS - 1] + "…"


def test_every_kind_of_content_block_is_text_for_the_model() -> None:
    png = base64.b64encode(b"\x89PNG" + b"\0" * 296).decode()  # 300 bytes
    content = [
        TextContent(type="text", text="plain text"),
        ImageContent(type="image", data=png, mime_type="image/png"),
        AudioContent(type="audio", data=base64.b64encode(b"a" * 3000).decode(), mime_type="audio/wav"),
        EmbeddedResource(type="resource", resource=TextResourceContents(uri="file:///notes.md", text="# Notes")),
        EmbeddedResource(
            type="resource",
            resource=BlobResourceContents(uri="file:///logo.png", blob=png, mime_type="image/png"),
        ),
        ResourceLink(type="resource_link", name="spec", uri="https://example.com/spec"),
    ]
    assert result_text(content).split("\n") == [
        "plain text",
        "[image (image/png, about 300 bytes): not shown to the model]",
        "[audio (audio/wav, about 3,000 bytes): not shown to the model]",
        "# Notes",
        "[binary resource file:///logo.png]",
        "[resource link: spec <https://example.com/spec>]",
    ]


def test_only_images_a_provider_takes_are_kept_for_a_model_that_sees_them() -> None:
    png = b"\x89PNG" + b"\0" * 296
    svg = base64.b64encode(b"<svg/>").decode()
    big = base64.b64encode(b"\0" * (MAX_IMAGE_BYTES + 3)).decode()
    content = [
        ImageContent(type="image", data=base64.b64encode(png).decode(), mime_type="image/png"),
        ImageContent(type="image", data=svg, mime_type="image/svg+xml"),
        ImageContent(type="image", data=big, mime_type="image/jpeg"),
        ImageContent(type="image", data="not base64!", mime_type="image/png"),
    ]
    result = result_of(content, images=True)
    assert result.images == (ToolImage(png, "image/png"),)
    assert result.text.split("\n") == [
        "[image 1 (image/png, 300 bytes): attached]",
        "[image (image/svg+xml, about 6 bytes): not sent: not an image the model takes]",
        f"[image (image/jpeg, about {len(big) * 3 // 4:,} bytes): not sent: not an image the model takes]",
        "[image (image/png, about 8 bytes): not sent: not an image the model takes]",
    ]
    blind = result_of(content)
    assert blind.images == () and blind.text.startswith("[image (image/png, about 300 bytes): not shown to the model]")


@dataclass
class FutureBlock:
    """A block of a type this codling does not know yet."""

    type: str


def test_an_unknown_block_is_named_not_dropped() -> None:
    assert result_text([FutureBlock("video"), FutureBlock("")]) == "[video content]\n[unknown content]"


def test_a_structured_result_without_content_is_shown_as_json() -> None:
    assert result_text([], {"temperature": 21.5, "city": "Zürich"}) == '{\n "temperature": 21.5,\n "city": "Zürich"\n}'
    assert result_text([TextContent(type="text", text="21.5")], {"temperature": 21.5}) == "21.5"
    assert result_text([]) == ""


def test_an_exception_group_is_described_by_its_innermost_error() -> None:
    group = BaseExceptionGroup(
        "unhandled errors in a TaskGroup", [ExceptionGroup("inner", [ConnectionError("  reset\n by peer ")])]
    )
    assert describe_exception(group) == "ConnectionError: reset by peer"
    assert describe_exception(ExceptionGroup("wrapped", [TimeoutError()])) == "TimeoutError"


def test_colours_and_progress_in_a_result_are_removed() -> None:
    # A server that runs a build passes its terminal output on.
    content = [TextContent(type="text", text="\x1b[32mok\x1b[0m\n10%\r100%"), TextContent(type="text", text="a\x07b")]
    assert result_text(content) == "ok\n100%\nab"
