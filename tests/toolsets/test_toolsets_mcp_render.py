"""What the model sees of an MCP call's result, and which tool schemas can be offered."""

from __future__ import annotations

import base64

import mcp.types as mt
import pytest

from mindloop.toolsets.mcp import render_result, schema_problem


def result(*blocks: object, structured: object = None, is_error: bool = False) -> mt.CallToolResult:
    return mt.CallToolResult(content=list(blocks), structured_content=structured, is_error=is_error)


def test_text_blocks_are_joined_and_is_error_kept() -> None:
    out = render_result(
        result(mt.TextContent(text="one"), mt.TextContent(text="two"), is_error=True)
    )
    assert out.text == "one\ntwo" and out.is_error


def test_structured_content_follows_unless_a_text_block_already_says_it() -> None:
    said = render_result(result(mt.TextContent(text='{"a": 1}'), structured={"a": 1}))
    assert said.text == '{"a": 1}'
    extra = render_result(result(mt.TextContent(text="done"), structured={"a": [1, "é"]}))
    assert extra.text == 'done\nstructured content:\n{\n  "a": [\n    1,\n    "é"\n  ]\n}'
    only = render_result(result(structured={"ok": True}))
    assert only.text == 'structured content:\n{\n  "ok": true\n}'


def test_media_and_resources_are_described_not_inlined() -> None:
    png = base64.b64encode(b"\x89PNG" + bytes(96)).decode()
    out = render_result(
        result(
            mt.ImageContent(data=png, mime_type="image/png"),
            mt.AudioContent(data=png, mime_type="audio/wav"),
            mt.ResourceLink(uri="file:///r/a.txt", name="a.txt"),
            mt.EmbeddedResource(
                resource=mt.TextResourceContents(uri="file:///r/b.txt", text="B body")
            ),
            mt.EmbeddedResource(
                resource=mt.BlobResourceContents(
                    uri="file:///r/c.bin", blob=png, mime_type="application/octet-stream"
                )
            ),
        )
    )
    assert out.text.splitlines() == [
        "[image image/png, 100 bytes: not shown]",
        "[audio audio/wav, 100 bytes: not shown]",
        "[resource link file:///r/a.txt: a.txt]",
        "[resource file:///r/b.txt]",
        "B body",
        "[resource file:///r/c.bin, application/octet-stream, 100 bytes: not shown]",
    ]
    assert png not in out.text


def test_an_empty_result_says_so() -> None:
    assert render_result(result()).text == "(the tool returned nothing)"


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        ({"type": "object", "properties": {"a": {"type": "string"}}}, None),
        ({"type": "object"}, None),
        ([], "is not a JSON object"),
        ({"properties": {}}, 'must have "type": "object" at its root, got None'),
        ({"type": "array"}, 'must have "type": "object" at its root, got \'array\''),
        (
            {"type": "object", "properties": {"a": {"type": "strnig"}}},
            "is not a valid JSON Schema: 'strnig' is not valid under any of the given schemas",
        ),
        (
            {"type": "object", "required": "a"},
            "is not a valid JSON Schema: 'a' is not of type 'array'",
        ),
    ],
)
def test_schema_problems(schema: object, problem: str | None) -> None:
    assert schema_problem(schema) == problem
