"""Asking `recall_taskdoc` for a top-level section says it is always injected (DESIGN.md
decision 6) — with or without a category, since a model asking for `goals` has no
category to give."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from taskdoc_testutil import make_package

from mindloop.taskdoc import SectionError, TaskPackage, recall_taskdoc
from mindloop.tools.base import ToolContext
from mindloop.toolsets import standard_registry

ALWAYS_INJECTED = "always injected into your context"


@pytest.mark.parametrize("category", [None, "", "  ", "bearinmind", "ux"])
@pytest.mark.parametrize("selector", ["goals", "constraints", "progress", " !progress "])
def test_top_level_selector_is_always_injected(
    tmp_path: Path, selector: str, category: str | None
) -> None:
    pkg: TaskPackage = make_package(tmp_path)
    with pytest.raises(SectionError) as err:
        recall_taskdoc(pkg, category=category, selector=selector)
    assert err.value.code == "top_level_always_injected"
    assert ALWAYS_INJECTED in err.value.text


def test_other_selector_without_category_asks_for_it(tmp_path: Path) -> None:
    with pytest.raises(SectionError) as err:
        recall_taskdoc(make_package(tmp_path), category=None, selector="risks")
    assert err.value.code == "category_required"


async def test_engine_call_without_category_says_always_injected(tmp_path: Path) -> None:
    """The call as a model makes it: raw JSON arguments through the engine's registry."""
    make_package(tmp_path)
    ctx = ToolContext.for_test(
        tmp_path, member="lead", dialog_id="d-1", task_path="tasks/t.tsk", root_member="lead"
    )
    out = await standard_registry().execute(
        "recall_taskdoc", json.dumps({"selector": "goals"}), ctx
    )
    assert out.is_error
    assert ALWAYS_INJECTED in out.text, out.text
