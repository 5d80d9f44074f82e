"""`mindloop check`'s warning about models without a known price when a cost cap is set."""

from __future__ import annotations

from pathlib import Path

from mindloop.config import load_config
from mindloop.rtws.checks import unpriced_warnings
from tests.config.config_testutil import SAMPLE_LLM, SAMPLE_TEAM, write_config


def test_check_warns_of_unpriced_models_when_a_cost_cap_is_set(tmp_path: Path) -> None:
    llm = SAMPLE_LLM + (
        "  local:\n"
        "    kind: openai-compatible\n"
        "    base_url: http://127.0.0.1:8000/v1\n"
        "    models:\n"
        "      my-model: {context_length: 1000}\n"
    )
    team = SAMPLE_TEAM + "  carol: {provider: local, model: my-model}\n"
    write_config(tmp_path, team=team, llm=llm)
    assert unpriced_warnings(load_config(tmp_path)) == []  # no max_cost: nothing to warn of
    write_config(tmp_path, team=team + "caps:\n  task: {max_cost: 5}\n", llm=llm)
    assert unpriced_warnings(load_config(tmp_path)) == [
        ".minds/llm.yaml: providers.local.models.my-model: no known price, so its generations "
        "count for nothing toward caps max_cost; set its price: "
        "{input_per_mtok: …, output_per_mtok: …}"
    ]  # the mock is free, so priced
    priced = llm.replace(
        "my-model: {context_length: 1000}",
        "my-model: {context_length: 1000, price: {input_per_mtok: 0, output_per_mtok: 0}}",
    )
    write_config(tmp_path, team=team + "caps:\n  task: {max_cost: 5}\n", llm=priced)
    assert unpriced_warnings(load_config(tmp_path)) == []
