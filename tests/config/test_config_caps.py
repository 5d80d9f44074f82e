"""`caps:` in team.yaml and `price:` in llm.yaml: strict, with file:line errors."""

from __future__ import annotations

from pathlib import Path

from mindloop.config import load_config
from tests.config.config_testutil import SAMPLE_LLM, SAMPLE_TEAM, problem_lines, write_config

TEAM = ".minds/team.yaml"
LLM = ".minds/llm.yaml"

PRICED_LLM = SAMPLE_LLM.replace(
    "mock-model: {context_length: 128000}",
    "mock-model: {context_length: 128000, price: {input_per_mtok: 3, output_per_mtok: 15}}",
)


def test_caps_and_a_price_load(tmp_path: Path) -> None:
    team = (
        SAMPLE_TEAM + "caps:\n  drive: {max_cost: 0.5, max_tokens: 200000}\n  task: {max_cost: 5}\n"
    )
    write_config(tmp_path, team=team, llm=PRICED_LLM)
    config = load_config(tmp_path)
    caps = config.team.caps
    assert (caps.drive.max_cost, caps.drive.max_tokens) == (0.5, 200000)
    assert (caps.task.max_cost, caps.task.max_tokens) == (5.0, None)
    price = config.llm.providers["mock"].models["mock-model"].price
    assert price is not None and (price.input_per_mtok, price.output_per_mtok) == (3, 15)


def test_no_caps_block_means_no_caps(tmp_path: Path) -> None:
    write_config(tmp_path)
    caps = load_config(tmp_path).team.caps
    assert not caps.drive.any and not caps.task.any


def test_bad_caps_are_reported_at_their_line(tmp_path: Path) -> None:
    team = SAMPLE_TEAM + (
        "caps:\n"  # line 13
        "  drive:\n"
        "    max_cost: -1\n"  # 15
        "    max_tokens: '1000'\n"  # 16
        "  task:\n"
        "    max_dollars: 3\n"  # 18
        "  member: {}\n"  # 19
    )
    write_config(tmp_path, team=team)
    lines = problem_lines(tmp_path)
    assert lines[0] == f"{TEAM}:15: caps.drive.max_cost: must be > 0, got -1"
    assert lines[1].startswith(f"{TEAM}:16: caps.drive.max_tokens:")
    assert lines[2].startswith(f"{TEAM}:18: caps.task.max_dollars: unknown key")
    assert "max_cost" in lines[2]
    assert lines[3].startswith(f"{TEAM}:19: caps.member: unknown key")
    assert len(lines) == 4


def test_a_null_cap_is_refused(tmp_path: Path) -> None:
    write_config(tmp_path, team=SAMPLE_TEAM + "caps:\n  drive:\n    max_cost:\n")
    assert problem_lines(tmp_path) == [
        f"{TEAM}:15: caps.drive.max_cost: must not be null: write a value, or leave the key "
        "out to get its default"
    ]


def test_a_bad_price_is_reported_at_its_line(tmp_path: Path) -> None:
    llm = SAMPLE_LLM.replace(
        "mock-model: {context_length: 128000}",
        "mock-model:\n        context_length: 128000\n        price: {input_per_mtok: 3}",
    )
    write_config(tmp_path, llm=llm)
    assert problem_lines(tmp_path) == [
        f"{LLM}:7: providers.mock.models.mock-model.price.output_per_mtok: missing required key"
    ]
