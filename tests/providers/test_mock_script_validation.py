"""`validate_script`: every problem of a script as `<file>:<line>: <key path>: <message>`."""

from __future__ import annotations

from pathlib import Path

import pytest

from mindloop.providers.mock_script import (
    MockScript,
    MockScriptError,
    validate_script,
    validate_script_dir,
)

VALID = """\
responses:
  - match: list the files
    member: alice
    thinking: hmm
    response: Listing.
    tool_calls:
      - {name: list_dir, arguments: {path: .}}
      - {name: read_file, arguments: '{"path": '}
    usage: {input_tokens: 10, output_tokens: 5}
    delay_ms: 0
    chunk_delay_ms: 1.5
  - contains: [a, b]
    role: tool
    context_contains: x
    response: ok
  - regex: '^go\\b'
    error: {status: timeout, message: slow, times: 2}
    response: partial text
    after_chunks: 1
  - member: bob
    response: bob's catch-all
  - default: true
    response: anything else
"""


def problems(tmp_path: Path, body: str) -> list[str]:
    path = tmp_path / "m.yaml"
    path.write_text(body, encoding="utf-8")
    return [p.removeprefix(f"{path}:") for p in validate_script(path)]


def test_valid_script_has_no_problems_and_loads(tmp_path: Path) -> None:
    assert problems(tmp_path, VALID) == []
    script = MockScript.load(tmp_path / "m.yaml")
    assert [e.index for e in script.entries] == [0, 1, 2, 3, 4]
    assert [e.line for e in script.entries] == [2, 12, 16, 20, 22]


def test_unknown_key_names_line_path_and_suggests(tmp_path: Path) -> None:
    body = """responses:
  - match: a
    response: b
  - match: c
    response: d
  - match: e
    tool_calls:
      - name: read_file
      - nmae: read_file
"""
    assert problems(tmp_path, body) == [
        "9: responses[2].tool_calls[1]: missing required key 'name'",
        "9: responses[2].tool_calls[1]: unknown key 'nmae' (did you mean 'name'?)",
    ]


def test_unknown_top_level_and_entry_keys(tmp_path: Path) -> None:
    body = "responses:\n  - match: a\n    respnse: b\nextra: 1\n"
    assert problems(tmp_path, body) == [
        "3: responses[0]: unknown key 'respnse' (did you mean 'response'?)",
        "4: <top>: unknown key 'extra'",
    ]


def test_yaml_syntax_error_has_its_line(tmp_path: Path) -> None:
    body = "responses:\n  - match: a\n    response: [b\n  - match: c\n"
    (problem,) = problems(tmp_path, body)
    assert problem.startswith("4: YAML syntax error:")


def test_type_errors_say_what_was_expected(tmp_path: Path) -> None:
    body = """responses:
  - match: a
    response: no
  - match: b
    response: x
    delay_ms: "5"
  - match: c
    response: x
    usage: {input_tokens: -1}
  - not a mapping
"""
    found = problems(tmp_path, body)
    assert found[0].startswith("3: responses[0].response: expected a string, got bool (YAML")
    assert found[1] == "6: responses[1].delay_ms: expected a number, got str"
    assert found[2].startswith("9: responses[2].usage.input_tokens: ")
    assert found[3] == "10: responses[3]: expected a mapping, got str"
    assert len(found) == 4


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("match: a\n    contains: b\n    response: x",
         "use exactly one of match, contains, regex (got match, contains)"),
        ("default: true\n    regex: a\n    response: x",
         "`default: true` is a catch-all; remove `regex`"),
        ("response: x", "needs a condition: one of match, contains, regex"),
        ("match: a\n    response: x\n    after_chunks: 1",
         "`after_chunks` only applies together with `error`"),
        ("match: a", "produces nothing"),
    ],
)  # fmt: skip
def test_entry_level_rules_point_at_the_entry(tmp_path: Path, entry: str, message: str) -> None:
    body = f"responses:\n  - match: ok\n    response: ok\n  - {entry}\n"
    (problem,) = problems(tmp_path, body)
    assert problem.startswith(f"4: responses[1]: {message}")


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ("regex: '(unclosed'\n    response: x",
         "5: responses[1].regex: invalid regular expression: missing ), unterminated subpattern"),
        ("match: a\n    error: {status: 302}",
         "6: responses[1].error.status: must be an HTTP status 400..599 or 'timeout', got 302"),
        ("match: a\n    error: {status: 500, times: 0}",
         "6: responses[1].error.times: Input should be greater than or equal to 1"),
        ("match: a\n    error: {status: 400, retry_after: 3}",
         "6: responses[1].error: retry_after applies only to a status that is retried "
         "(429, 5xx), got 400"),
        ("match: a\n    error: {status: timeout, retry_after: 3}",
         "6: responses[1].error: retry_after applies only to a status that is retried "
         "(429, 5xx), got 'timeout'"),
        ("match: a\n    error: {status: 429, retry_after: -1}",
         "6: responses[1].error.retry_after: Input should be greater than or equal to 0"),
        ("match: a\n    tool_calls: [{name: f, arguments: [1, 2]}]",
         "6: responses[1].tool_calls[0].arguments: must be a mapping (sent as JSON) or a string"),
        ("contains: []\n    response: x", "5: responses[1].contains: must not be empty"),
        ("match: a\n    role: system\n    response: x",
         "6: responses[1].role: Input should be 'user', 'tool' or 'assistant'"),
    ],
)  # fmt: skip
def test_value_errors_point_at_the_key(tmp_path: Path, entry: str, expected: str) -> None:
    body = f"responses:\n  - match: ok\n    response: ok\n\n  - {entry}\n"
    (problem,) = problems(tmp_path, body)
    assert problem.startswith(expected)


def test_duplicate_keys_are_reported(tmp_path: Path) -> None:
    body = "responses:\n  - match: a\n    response: one\n    response: two\n"
    assert problems(tmp_path, body) == ["4: responses[0]: duplicate key 'response'"]


def test_empty_file_and_bare_responses(tmp_path: Path) -> None:
    assert problems(tmp_path, "") == [
        "1: the script is empty; expected `responses:` with a list of entries"
    ]
    assert problems(tmp_path, "# only a comment\n")[0].startswith("1: the script is empty")
    assert problems(tmp_path, "responses:\n") == []
    assert problems(tmp_path, "[1, 2]\n") == ["1: <top>: expected a mapping, got list"]
    assert problems(tmp_path, "{}\n") == ["1: <top>: missing required key 'responses'"]


def test_missing_and_undecodable_files(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    assert validate_script(missing) == [f"{missing}: file not found"]
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"responses:\n  - match: \xff\n")
    (problem,) = validate_script(binary)
    assert problem.startswith(f"{binary}:1: not valid UTF-8")


def test_load_raises_with_all_problems(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("responses:\n  - match: a\n  - regex: '['\n    response: x\n")
    with pytest.raises(MockScriptError) as info:
        MockScript.load(path)
    assert len(info.value.problems) == 2
    assert str(info.value) == "\n".join(info.value.problems)


def test_validate_script_dir_checks_every_script_including_subdirectories(tmp_path: Path) -> None:
    (tmp_path / "good.yaml").write_text(VALID)
    (tmp_path / "org").mkdir()
    (tmp_path / "org" / "model.yaml").write_text("responses:\n  - match: a\n    bad: 1\n")
    (tmp_path / "notes.txt").write_text("not a script")
    assert validate_script_dir(tmp_path) == [
        f"{tmp_path / 'org' / 'model.yaml'}:3: responses[0]: unknown key 'bad'"
    ]
    assert validate_script_dir(tmp_path / "absent") == []
