"""What a generation costs: an llm.yaml price wins, the mock is free, known models come
from the bundled genai-prices table (offline), and an unknown price is None, not 0."""

from __future__ import annotations

from typing import Any

import pytest
from genai_prices import Usage, calc_price

from mindloop.config import LlmConfig
from mindloop.providers.pricing import PriceTable


def _table(**providers: dict[str, Any]) -> PriceTable:
    return PriceTable(LlmConfig.model_validate({"providers": providers}))


MODELS = {"models": {"m": {"context_length": 1000}}}


def test_a_price_in_llm_yaml_overrides_the_table_by_key_or_wire_name() -> None:
    price = {"input_per_mtok": 3, "output_per_mtok": 15}
    table = _table(
        oa={
            "kind": "openai-compatible",
            "models": {"fast": {"name": "gpt-4o", "context_length": 1000, "price": price}},
        }
    )
    expected = (1_000_000 * 3 + 200_000 * 15) / 1e6
    assert table.cost("oa", "gpt-4o", 1_000_000, 200_000) == pytest.approx(expected)
    assert table.cost("oa", "fast", 1_000_000, 200_000) == pytest.approx(expected)
    assert table.cost("oa", "fast", 10, None) == pytest.approx(30 / 1e6)


def test_the_mock_is_free_unless_priced() -> None:
    table = _table(mock={"kind": "mock", **MODELS})
    assert table.cost("mock", "m", 5000, 500) == 0.0
    assert table.cost("mock", "m", None, None) == 0.0  # free even without usage
    priced = _table(
        mock={
            "kind": "mock",
            "models": {
                "m": {"context_length": 1000, "price": {"input_per_mtok": 1, "output_per_mtok": 2}}
            },
        }
    )
    assert priced.cost("mock", "m", 1_000_000, 1_000_000) == pytest.approx(3.0)


@pytest.mark.parametrize(
    ("provider", "model", "where"),
    [
        ({"kind": "anthropic"}, "claude-sonnet-4-5", {"provider_id": "anthropic"}),
        ({"kind": "openai-compatible"}, "gpt-4o", {"provider_id": "openai"}),
        (
            {"kind": "openai-compatible", "base_url": "https://api.deepseek.com/v1"},
            "deepseek-chat",
            {"provider_api_url": "https://api.deepseek.com/v1"},
        ),
    ],
)
def test_known_models_are_priced_from_the_bundled_table(
    provider: dict[str, Any], model: str, where: dict[str, str]
) -> None:
    table = _table(p={**provider, "models": {model: {"context_length": 1000}}})
    expected = calc_price(Usage(input_tokens=12_345, output_tokens=678), model, **where)
    cost = table.cost("p", model, 12_345, 678)
    assert cost is not None and cost > 0
    assert cost == pytest.approx(float(expected.total_price))


def test_unknown_prices_are_none_not_free() -> None:
    table = _table(
        local={"kind": "openai-compatible", "base_url": "http://127.0.0.1:8000/v1", **MODELS},
        oa={"kind": "openai-compatible", "models": {"my-finetune-xyz": {"context_length": 10}}},
        an={"kind": "anthropic", **MODELS},
    )
    assert table.cost("local", "m", 1000, 100) is None  # a local server: not in the table
    assert table.cost("oa", "my-finetune-xyz", 1000, 100) is None
    assert table.cost("an", "m", None, None) is None  # no usage reported
    assert table.cost("nope", "m", 1, 1) is None  # not an llm.yaml provider
