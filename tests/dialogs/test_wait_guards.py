"""The guards of waits and approvals hold for any input (hypothesis): `wait_for` takes
exactly one target, a system event matches exactly the waits whose filter it carries, an
approval's digest names its tool and arguments, and its summary is one bounded line."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from mindloop.dialogs.approvals import SUMMARY_CHARS, args_digest, call_summary
from mindloop.dialogs.wait_kinds import SystemEvent
from mindloop.toolsets.waits import WaitForArgs

_values = st.one_of(st.integers(), st.text(max_size=5), st.booleans(), st.none())
_maps = st.dictionaries(st.sampled_from(["env", "key", "ref", "n"]), _values, max_size=4)


@given(
    seconds=st.one_of(st.none(), st.floats(min_value=0.001, max_value=1e6)),
    at=st.one_of(st.none(), st.just("2030-01-01T00:00:00+00:00")),
    event_type=st.one_of(st.none(), st.text(min_size=1, max_size=8)),
)
def test_wait_for_takes_exactly_one_target(
    seconds: float | None, at: str | None, event_type: str | None
) -> None:
    given_ = [v for v in (seconds, at, event_type) if v is not None]
    try:
        WaitForArgs(seconds=seconds, at=at, event_type=event_type)
    except ValidationError as err:
        assert len(given_) != 1 and "exactly one" in str(err)
    else:
        assert len(given_) == 1


@given(key=st.one_of(st.none(), st.text(max_size=4)), payload=_maps, wanted=_maps)
def test_an_event_matches_the_waits_whose_filter_it_carries(
    key: str | None, payload: dict[str, Any], wanted: dict[str, Any]
) -> None:
    event = SystemEvent(event_type="t", key=key, payload=payload)
    have = {"key": key, **payload}
    carried = all(k in have and have[k] == v for k, v in wanted.items())
    assert event.matches({"event_type": "t", "filter": wanted}) is carried
    assert event.matches({"event_type": "t"})  # no filter: any event of its type


_names = st.text(st.characters(blacklist_characters="\n"), min_size=1, max_size=10)


@given(a=st.tuples(_names, st.text(max_size=30)), b=st.tuples(_names, st.text(max_size=30)))
def test_a_digest_names_its_tool_and_arguments(a: tuple[str, str], b: tuple[str, str]) -> None:
    assert (args_digest(*a) == args_digest(*b)) is (a == b)


@given(tool=_names, arguments=st.text(max_size=400))
def test_a_summary_is_one_bounded_line(tool: str, arguments: str) -> None:
    text = call_summary(tool, arguments)
    assert len(text.splitlines()) == 1 and len(text) <= SUMMARY_CHARS
