"""A `!?@human` question's `Options:` and `Default:` body lines (audit item 8, agent-loop
§6.2): the grammar's data table reads them, in English or Chinese labels, any case, an
ASCII or a full-width colon; anything else is just text."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mindloop.dialogs.tellask import parse_message
from mindloop.dialogs.tellask.grammar import Q4H_FIELD_LABELS, Q4hField, parse_q4h_fields


def test_options_and_default_are_read_from_the_body() -> None:
    [call] = parse_message(
        "Need a choice.\n!?@human Which database?\n!?Options: SQLite | PostgreSQL\n"
        "!?Default: SQLite\n"
    ).calls
    assert parse_q4h_fields(call.body) == (["SQLite", "PostgreSQL"], "SQLite")


def test_labels_case_colons_and_the_first_line_of_a_field() -> None:
    body = "OPTIONS : a |  | b | a\n默认：乙\nDefault: later one\n选项：x | y\n"
    assert parse_q4h_fields(body) == (["a", "b"], "乙")
    assert parse_q4h_fields("Options:\nDefault:   \n") == ([], None)  # empty: nothing stated
    assert parse_q4h_fields("Postgres or SQLite?\nReason: speed") == ([], None)
    assert {f for f in Q4H_FIELD_LABELS.values()} == set(Q4hField)


@given(st.text())
def test_any_body_parses_without_error_and_options_are_clean(body: str) -> None:
    options, default = parse_q4h_fields(body)
    assert all(o and o == o.strip() and "|" not in o for o in options)
    assert len(options) == len(set(options))
    assert default is None or (default and default == default.strip())


@given(
    st.lists(
        st.text(
            alphabet=st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), min_size=1
        ).filter(lambda o: o.strip() and "|" not in o and "\n" not in o),
        min_size=1,
        max_size=5,
        unique_by=str.strip,
    ),
    st.text(alphabet="abcxyz ", min_size=1).filter(str.strip),
)
def test_written_options_and_default_come_back(options: list[str], default: str) -> None:
    body = f"Why?\nOptions: {' | '.join(options)}\nDefault: {default}\n"
    assert parse_q4h_fields(body) == ([o.strip() for o in options], default.strip())
