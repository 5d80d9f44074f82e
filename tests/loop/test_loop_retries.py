"""Retry records and what must change on every retry (agent-loop §8.3)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from mindloop.config.loop_retries import RetriesConfig
from mindloop.loop.ladder import Exhausted, FailureClass, Level, Outcome
from mindloop.loop.retries import (
    Accepted,
    ChangeKind,
    Rejected,
    RetryLedger,
    RetryProposal,
    RetryRule,
    diff_fingerprint,
    evidence_digest,
    plan_fingerprint,
    reflections_for_prompt,
)
from mindloop.store import Store
from tests.store.stores import KINDS, open_store

TASK = "tasks/login.tsk"
FAIL = "FAILED tests/test_login.py::test_ok - AssertionError at 2024-05-01T10:00:03 in /tmp/pytest-81/x"


def proposal(
    level: Level = Level.L2,
    *,
    kind: ChangeKind = ChangeKind.STRATEGY,
    fp: str = "a",
    evidence: str = FAIL,
    **kw: object,
) -> RetryProposal:
    fields: dict[str, object] = {"reflection": f"try {fp}"} | kw
    return RetryProposal(
        task_path=TASK,
        todo_id="n1",
        level=level,
        failure_class=FailureClass.VERIFY_FAIL if level is Level.L2 else FailureClass.CHECK_FAIL,
        evidence_digest=evidence_digest(evidence),
        change_kind=kind,
        change_summary=f"change {fp}",
        fingerprint=diff_fingerprint(f"+ line {fp}\n")
        if level is Level.L2
        else plan_fingerprint(f"plan {fp}"),
        **fields,  # type: ignore[arg-type]
    )


@pytest.fixture(params=KINDS)
def ledger(tmp_path: Path, request: pytest.FixtureRequest) -> RetryLedger:
    """The ledger on every dialect of the store conformance suite."""
    return RetryLedger(open_store(tmp_path / "state.sqlite", request.param), RetriesConfig())


def test_an_accepted_retry_is_recorded(ledger: RetryLedger) -> None:
    got = ledger.propose(proposal())
    assert isinstance(got, Accepted) and got.record.attempt == 1 and got.record.id > 0
    [stored] = ledger.records(TASK, "n1")
    assert (
        stored.fingerprint == got.record.fingerprint and stored.change_kind is ChangeKind.STRATEGY
    )


def test_judging_a_retry_writes_nothing(ledger: RetryLedger) -> None:
    first = ledger.judge(proposal())
    assert isinstance(first, Accepted) and first.record.attempt == 1 and first.record.id == 0
    assert ledger.records(TASK, "n1") == []
    assert isinstance(ledger.propose(proposal()), Accepted)
    again = ledger.judge(proposal())
    assert isinstance(again, Rejected) and again.rule is RetryRule.FINGERPRINT_REPEATED


def test_a_retry_repeating_an_earlier_fingerprint_is_rejected(ledger: RetryLedger) -> None:
    assert isinstance(ledger.propose(proposal(fp="a")), Accepted)
    again = ledger.propose(proposal(fp="a", kind=ChangeKind.TOOL))
    assert isinstance(again, Rejected) and again.rule is RetryRule.FINGERPRINT_REPEATED
    assert again.text().startswith("Error [RETRY_FINGERPRINT_REPEATED]")
    assert len(ledger.records(TASK, "n1")) == 1  # nothing recorded
    # The same change at the other level is a different attempt.
    assert isinstance(ledger.propose(proposal(Level.L3, fp="a")), Accepted)


def test_diff_and_plan_fingerprints_ignore_what_does_not_change_the_change() -> None:
    a = "diff --git a/x b/x\nindex 1234abc..5678def 100644\n@@ -1,3 +1,3 @@\n-old\n+new  value\n"
    b = "diff --git a/x b/x\nindex 9999999..0000000 100644\n@@ -10,3 +10,3 @@ def f():\n-old\n+new value\n"
    assert diff_fingerprint(a) == diff_fingerprint(b)
    assert diff_fingerprint(a) != diff_fingerprint(a.replace("new", "newer"))
    assert plan_fingerprint("Split n1 into two nodes; retry.") == plan_fingerprint(
        "split N1 into two  nodes, retry"
    )
    assert plan_fingerprint("split n1") != plan_fingerprint("reassign n1")
    assert plan_fingerprint("retry with 3 workers") == plan_fingerprint("retry with 4 workers")


NOISE = st.tuples(
    st.sampled_from(["10:00:01", "2025-01-02T03:04:05Z", "7:03"]),
    st.sampled_from(["/tmp/a1/b", "/home/u/p.py", "/x"]),
    st.sampled_from(["0xdeadbeef12", "9f86d081884c7d65", "123e4567-e89b-12d3-a456-426614174000"]),
    st.integers(0, 10**9),
)


@given(st.text(alphabet="abcdefghij klmnop", max_size=60), NOISE, NOISE)
def test_evidence_digests_mask_times_paths_and_ids(
    text: str, a: tuple[str, str, str, int], b: tuple[str, str, str, int]
) -> None:
    def failure(n: tuple[str, str, str, int]) -> str:
        return f"{text}: at {n[0]} in {n[1]} (object {n[2]}) after {n[3]} ms"

    assert evidence_digest(failure(a)) == evidence_digest(failure(b))
    assert evidence_digest(failure(a)) != evidence_digest(failure(a).replace(" in ", " near "))


def test_params_already_tried_against_the_same_evidence_is_rejected(ledger: RetryLedger) -> None:
    assert isinstance(ledger.propose(proposal(fp="a", kind=ChangeKind.PARAMS)), Accepted)
    same = ledger.propose(proposal(fp="b", kind=ChangeKind.PARAMS))
    assert isinstance(same, Rejected) and same.rule is RetryRule.PARAMS_ALREADY_TRIED
    # Another kind of change is fine; so is PARAMS against new evidence.
    assert isinstance(ledger.propose(proposal(fp="b", kind=ChangeKind.CONTEXT)), Accepted)


def test_params_against_changed_evidence_is_allowed(tmp_path: Path) -> None:
    ledger = RetryLedger(Store(tmp_path / "s.sqlite"), RetriesConfig(do_repairs=3))
    assert isinstance(ledger.propose(proposal(fp="a", kind=ChangeKind.PARAMS)), Accepted)
    assert isinstance(
        ledger.propose(proposal(fp="b", kind=ChangeKind.PARAMS, evidence="a new failure")), Accepted
    )


@pytest.mark.parametrize("kind", [ChangeKind.DECOMPOSE, ChangeKind.ASSIGNEE, ChangeKind.ACCEPTANCE])
def test_adjust_only_changes_are_rejected_in_do(ledger: RetryLedger, kind: ChangeKind) -> None:
    got = ledger.propose(proposal(kind=kind))
    assert isinstance(got, Rejected) and got.rule is RetryRule.RESERVED_FOR_ADJUST
    assert isinstance(ledger.propose(proposal(Level.L3, kind=kind)), Accepted)


def test_the_third_adjust_cycle_must_be_structural(ledger: RetryLedger) -> None:
    assert isinstance(
        ledger.propose(proposal(Level.L3, fp="one", kind=ChangeKind.PARAMS)), Accepted
    )
    assert isinstance(ledger.propose(proposal(Level.L3, fp="two", kind=ChangeKind.TOOL)), Accepted)
    third = ledger.propose(proposal(Level.L3, fp="three", kind=ChangeKind.TOOL))
    assert isinstance(third, Rejected) and third.rule is RetryRule.NOT_STRUCTURAL
    ok = ledger.propose(proposal(Level.L3, fp="three", kind=ChangeKind.DECOMPOSE))
    assert isinstance(ok, Accepted) and ok.record.attempt == 3
    done = ledger.propose(proposal(Level.L3, fp="four", kind=ChangeKind.STRATEGY))
    assert isinstance(done, Exhausted) and done.outcome is Outcome.NODE_FAILED and done.tell_user


def test_relaxing_acceptance_needs_an_approval(ledger: RetryLedger) -> None:
    relax = proposal(Level.L3, kind=ChangeKind.ACCEPTANCE, relaxes_acceptance=True)
    got = ledger.propose(relax)
    assert isinstance(got, Rejected) and got.rule is RetryRule.RELAXED_WITHOUT_APPROVAL
    asked = proposal(
        Level.L3, kind=ChangeKind.ACCEPTANCE, relaxes_acceptance=True, approval_id="ap-1"
    )
    assert isinstance(ledger.propose(asked, approved=lambda i: False), Rejected)
    assert isinstance(ledger.propose(asked, approved=lambda i: i == "ap-1"), Accepted)
    # Tightening a criterion needs nothing.
    tighter = proposal(Level.L3, fp="t", kind=ChangeKind.ACCEPTANCE)
    assert isinstance(ledger.propose(tighter), Accepted)


def test_do_self_repair_is_counted_per_entry(ledger: RetryLedger) -> None:
    assert isinstance(ledger.propose(proposal(fp="1")), Accepted)
    assert isinstance(ledger.propose(proposal(fp="2")), Accepted)
    third = ledger.propose(proposal(fp="3"))
    assert isinstance(third, Exhausted) and third.outcome is Outcome.DO_EXHAUSTED
    assert third.node_status == "CHECK_FAILED"
    nxt = ledger.propose(proposal(fp="3", entry=1))  # after ADJUST, a new DO entry
    assert isinstance(nxt, Accepted) and nxt.record.attempt == 1


def test_reflections_are_short_and_only_the_last_three_are_shown(ledger: RetryLedger) -> None:
    long = ledger.propose(proposal(reflection="x" * 500))
    assert isinstance(long, Rejected) and long.rule is RetryRule.REFLECTION_TOO_LONG
    assert "120 tokens" in long.message
    with pytest.raises(ValidationError, match="L2 or L3"):
        proposal(Level.L1)
    for fp in ("a", "b", "c"):
        assert isinstance(ledger.propose(proposal(Level.L3, fp=fp)), Accepted)
    for fp in ("d", "e"):
        assert isinstance(ledger.propose(proposal(Level.L2, fp=fp)), Accepted)
    records = ledger.records(TASK, "n1")
    assert reflections_for_prompt(records, RetriesConfig()) == ["try c", "try d", "try e"]
    assert reflections_for_prompt(records, RetriesConfig(reflections_in_prompt=0)) == []


def test_records_appended_by_another_process_are_seen(tmp_path: Path) -> None:
    # the ledger keeps a task's records between reads: until another connection commits
    ours = RetryLedger(Store(tmp_path / "s.sqlite"), RetriesConfig())
    theirs = RetryLedger(Store(tmp_path / "s.sqlite"), RetriesConfig())
    with ours.store.tx():
        assert ours.records(TASK, "n1") == []
    assert isinstance(theirs.propose(proposal(fp="a")), Accepted)
    with ours.store.tx():
        assert [r.change_summary for r in ours.records(TASK, "n1")] == ["change a"]
    assert isinstance(ours.propose(proposal(fp="a")), Rejected)
