"""A config file that is not UTF-8 is reported at the line and column of its first bad byte."""

from __future__ import annotations

from pathlib import Path

import pytest
from config_testutil import SAMPLE_LLM, SAMPLE_TEAM, problem_lines, write_config
from hypothesis import given, settings
from hypothesis import strategies as st

from mindloop.config import ConfigError, ConfigProblem, load_config
from mindloop.config.yaml_lines import decode_text


def _first_bad(raw: bytes) -> tuple[int, int, int] | None:
    """(line, column, byte) of the first byte that is not UTF-8, found another way: the
    `surrogateescape` handler turns exactly the undecodable bytes into lone surrogates."""
    text = raw.decode("utf-8", errors="surrogateescape")
    for i, ch in enumerate(text):
        if 0xDC80 <= ord(ch) <= 0xDCFF:
            line_start = text.rfind("\n", 0, i) + 1
            return text.count("\n", 0, i) + 1, i - line_start + 1, ord(ch) - 0xDC00
    return None


@pytest.mark.parametrize(
    ("name", "good"),
    [(".minds/team.yaml", SAMPLE_TEAM), (".minds/llm.yaml", SAMPLE_LLM)],
)
def test_not_utf8_names_line_and_column(tmp_path: Path, name: str, good: str) -> None:
    write_config(tmp_path)
    lines = good.splitlines(keepends=True)
    raw = "".join(lines[:2]).encode() + "  # café ".encode() + b"\xe9t\xe9\n"
    (tmp_path / name).write_bytes(raw + "".join(lines[2:]).encode())
    expected = (
        f"{name}:3:10: is not UTF-8 text (byte 0xe9 does not begin a valid UTF-8 "
        "character): save it as UTF-8"
    )
    assert problem_lines(tmp_path) == [expected]
    with pytest.raises(ConfigError, match=r"team\.yaml:3:10|llm\.yaml:3:10"):
        load_config(tmp_path)


def test_a_cut_multibyte_character_at_the_end(tmp_path: Path) -> None:
    problem = decode_text("a: 1\nb: é".encode()[:-1], "x.yaml")
    assert isinstance(problem, ConfigProblem)
    assert (problem.line, problem.column) == (2, 4)
    assert str(problem).startswith("x.yaml:2:4: is not UTF-8 text (the file ends inside")


@settings(max_examples=300, deadline=None)  # a shared, loaded machine: no time limit
@given(st.binary(max_size=200))
def test_position_of_first_bad_byte_in_any_bytes(raw: bytes) -> None:
    _check(raw)


@settings(max_examples=300, deadline=None)  # a shared, loaded machine: no time limit
@given(
    st.text(max_size=80),
    st.binary(min_size=1, max_size=4),
    st.text(max_size=20),
)
def test_position_in_text_with_bad_bytes_inside(before: str, bad: bytes, after: str) -> None:
    _check(before.encode("utf-8", errors="surrogatepass") + bad + after.encode("utf-8", "replace"))


def _check(raw: bytes) -> None:
    result = decode_text(raw, "f.yaml")
    oracle = _first_bad(raw)
    if oracle is None:
        assert result == raw.decode("utf-8")
        return
    assert isinstance(result, ConfigProblem)
    line, column, byte = oracle
    assert (result.file, result.line, result.column) == ("f.yaml", line, column)
    assert str(result).startswith(f"f.yaml:{line}:{column}: ")
    if "file ends inside" not in result.message:
        assert f"byte 0x{byte:02x}" in result.message
