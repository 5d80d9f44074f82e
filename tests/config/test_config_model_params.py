"""ModelParams: one max_tokens, request params shape, deep merge over every namespace."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from mindloop.config import ModelParams, merge_model_params


def test_both_max_tokens_spellings_is_an_error() -> None:
    with pytest.raises(
        ValidationError, match=r"do not set both max_tokens and general\.max_tokens"
    ):
        ModelParams.model_validate({"max_tokens": 1, "general": {"max_tokens": 2}})


@pytest.mark.parametrize(
    ("data", "expected"),
    [({}, None), ({"max_tokens": 5}, 5), ({"general": {"max_tokens": 6}}, 6)],
)
def test_effective_max_tokens(data: dict[str, object], expected: int | None) -> None:
    assert ModelParams.model_validate(data).effective_max_tokens() == expected


def test_request_params_drop_unset_values() -> None:
    params = ModelParams.model_validate(
        {
            "openai": {"temperature": 0.3, "stop": ["END"], "reasoning_effort": "low"},
            "anthropic": {"thinking": {"type": "enabled", "budget_tokens": 2048}},
        }
    )
    assert params.as_request_params() == {
        "max_tokens": None,
        "general": {},
        "openai": {"temperature": 0.3, "stop": ["END"], "reasoning_effort": "low"},
        "anthropic": {"thinking": {"type": "enabled", "budget_tokens": 2048}},
    }


def test_thinking_enabled_needs_budget() -> None:
    with pytest.raises(ValidationError, match="budget_tokens"):
        ModelParams.model_validate({"anthropic": {"thinking": {"type": "enabled"}}})


def test_merge_max_tokens_is_one_leaf_whatever_the_spelling() -> None:
    base = ModelParams.model_validate({"max_tokens": 100})
    over = ModelParams.model_validate({"general": {"max_tokens": 50}})
    merged = merge_model_params(base, over)
    assert merged.effective_max_tokens() == 50
    assert merge_model_params(over, base).effective_max_tokens() == 100
    assert merge_model_params(base, ModelParams()).effective_max_tokens() == 100


def test_merge_replaces_list_and_map_values_whole() -> None:
    base = ModelParams.model_validate({"openai": {"stop": ["a", "b"], "logit_bias": {"1": 5}}})
    over = ModelParams.model_validate({"openai": {"stop": ["c"], "logit_bias": {"2": -5}}})
    assert merge_model_params(base, over).namespace("openai") == {
        "stop": ["c"],
        "logit_bias": {"2": -5},
    }


_openai = st.fixed_dictionaries(
    {},
    optional={
        "temperature": st.floats(0, 2),
        "top_p": st.floats(0, 1),
        "seed": st.integers(-5, 5),
        "user": st.text(max_size=5),
    },
)
_anthropic = st.fixed_dictionaries(
    {}, optional={"top_k": st.integers(0, 50), "temperature": st.floats(0, 1)}
)
_params = st.fixed_dictionaries(
    {},
    optional={
        "general": st.fixed_dictionaries({}, optional={"max_tokens": st.integers(1, 9999)}),
        "openai": _openai,
        "anthropic": _anthropic,
    },
).map(ModelParams.model_validate)


@settings(deadline=None)  # a shared, loaded machine: no per-example time limit
@given(_params, _params)
def test_merge_is_leafwise_override(base: ModelParams, over: ModelParams) -> None:
    merged = merge_model_params(base, over)
    for ns in ("openai", "anthropic"):
        expected = {**base.namespace(ns), **over.namespace(ns)}
        assert merged.namespace(ns) == expected
    expected_max = over.effective_max_tokens() or base.effective_max_tokens()
    assert merged.effective_max_tokens() == expected_max
    assert merge_model_params(merged, ModelParams()) == merged
