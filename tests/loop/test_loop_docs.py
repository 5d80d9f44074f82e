"""docs/loop.md prints the tool matrix and the routing rules as the code holds them."""

from __future__ import annotations

from pathlib import Path

from mindloop.loop.phases import matrix_markdown
from mindloop.loop.routing import rules_markdown

DOC = Path(__file__).resolve().parents[2] / "docs" / "loop.md"


def test_the_docs_print_the_tables_of_the_code() -> None:
    text = DOC.read_text("utf-8")
    assert matrix_markdown() in text
    assert rules_markdown() in text
