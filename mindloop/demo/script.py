"""The scripted model answers behind `mindloop demo` (a mock-provider script): one task
carried through the whole work loop.

PLAN asks the human one question, then plans four nodes: the changelog (dev), a
contributing guide for the reviewer (a teammate; it depends on the changelog, so the
runtime dispatches it once the changelog is DONE), release notes (after the changelog)
and a BENCH node, the release check, run last. DO writes the changelog; CHECK finds it
has no dated release heading (a check failure); ADJUST asks itself for three fresh-boots
opinions (FBR), records its cycle (`retry_propose`: the runtime checks it differs from any
earlier one) and sends the node back to DO, which writes a dated one; CHECK passes it.
DO drafts the release notes and publishes them (a move the human approves first) while
the reviewer writes the guide; CHECK passes both; the
release check runs once nothing has changed since those checks; SELF_IMPROVE adds a habit to dev's self.md and asks the KB teammate to keep a note on
the changelog format, which `mindloop run TASK` delivers (once) before it returns and a
later `mindloop run` lets the KB process.

Each entry matches the last input message of a step; the first match wins, so the most
specific entries come first. The phase inputs start `[work loop] Phase <PHASE> (entry
<n>)` and show the nodes they are about as `# Node <id>: <title>`.
"""

from __future__ import annotations

from typing import Any

DEMO_PROMPT = (
    "demo: prepare the first release: a changelog, a contributing guide (for the reviewer) "
    "and release notes, then check the release"
)

# The marker only appears once the updated Taskdoc is injected into a later generation.
PROGRESS_TEXT = "- Planned: changelog, contributing guide (reviewer), release notes, check."
TASKDOC_MARKER = "## Progress\n" + PROGRESS_TEXT

HUMAN_ANSWER = "Yes, follow Keep a Changelog."

SELF_MD_HABIT = "- Before COMPLETE, run every criterion's `verify` command myself."
KB_NOTE = (
    "Changelogs here follow Keep a Changelog: a `## [x.y.z] - YYYY-MM-DD` heading per "
    "release, newest first."
)
EMPTY_SHA256_PREFIX = "e3b0c44298fc"  # self.md does not exist yet (sha256 of "")
KB_FILE = "kb/changelog-format.md"

RELEASE_CHECK = (
    "test -f CHANGELOG.md && test -f CONTRIBUTING.md && test -f RELEASE_NOTES.md "
    "&& echo release check passed"
)
# n1's verify command; CHECK runs exactly it (its shell runs test runners and the verify
# commands of the nodes under check only, agent-loop §3)
HEADING_CHECK = "grep -n '^## \\[' CHANGELOG.md || { echo no dated release heading; exit 1; }"

DEMO_TEAM: dict[str, object] = {
    "member_defaults": {"provider": "mock", "model": "mock-model", "fbr-effort": 3},
    "default_responder": "dev",
    "members": {
        "dev": {
            "name": "Dev",
            "gofor": "general engineering",
            "toolsets": ["*"],
            # publishing (moving a draft into place) waits for the human's approval
            "approval_required": ["move"],
        },
        "reviewer": {"name": "Reviewer", "gofor": "reviews changes", "toolsets": ["fs"]},
    },
}


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def _create(title: str, requirement: str, verify: str, **extra: Any) -> dict[str, Any]:
    return _call(
        "node_create",
        parent_id="root",
        kind="EXECUTION",
        title=title,
        requirement=requirement,
        acceptance_criteria=[
            {"when": "the release is prepared", "then": requirement, "verify": verify}
        ],
        **extra,
    )


def _end(hint: str, progress: str, reason: str, **summary: Any) -> dict[str, Any]:
    return _call(
        "phase_end",
        next_behavior=hint,
        summary={"progress": progress, **summary},
        reason=reason,
    )


def _complete(node: str) -> dict[str, Any]:
    return _call(
        "node_transition",
        node_id=node,
        to="COMPLETE",
        reason="self-check passed",
        self_check=[{"criterion": "AC1", "passed": True, "evidence": "checked by hand"}],
    )


def _done(node: str, conclusion: str) -> dict[str, Any]:
    return _call(
        "node_transition", node_id=node, to="DONE", reason="checked", conclusion=conclusion
    )


def _work(node: str, path: str, content: str) -> list[dict[str, Any]]:
    return [
        _call("write_file", path=path, content=content),
        _call("node_update", node_id=node, artifacts=[path]),
    ]


CHANGELOG_DRAFT = "# Changelog\n\n- First release.\n"
CHANGELOG = "# Changelog\n\n## [0.1.0] - 2026-01-01\n\n### Added\n- First release.\n"
RELEASE_NOTES = "# Release notes\n\n0.1.0: the first release.\n"
NOTES_DRAFT = "drafts/RELEASE_NOTES.md"
CONTRIBUTING = "# Contributing\n\nOpen an issue first; keep changes small.\n"

_DEV: list[dict[str, Any]] = [
    # ---- SELF_IMPROVE (first: its input quotes earlier messages): a habit for self.md,
    # a KB request, then the end
    {
        "contains": "[work loop] Phase SELF_IMPROVE",
        "tool_calls": [
            _call(
                "self_md_patch",
                section="Habits",
                op="append",
                content=SELF_MD_HABIT,
                base_sha256=EMPTY_SHA256_PREFIX,
                rationale="n1 failed its check for a missing release heading",
                evidence_refs=["check report of n1"],
            ),
            _call(
                "kb_request",
                kind="ADD",
                topic="changelog format",
                content=KB_NOTE,
                evidence_refs=["CHANGELOG.md"],
            ),
            _end(
                "END",
                "release 0.1.0 prepared and checked; a habit and a KB note kept",
                "the task is done",
            ),
        ],
    },
    # ---- PLAN: one question first, then four nodes, one per step
    {
        "contains": "[work loop] Phase PLAN (entry 1)",
        "thinking": "The format of the changelog is the human's call.",
        "response": "Before planning, one decision is yours.\n"
        "!?@human Should CHANGELOG.md follow the Keep a Changelog format?\n"
        "!?Answer yes or no.\n",
    },
    {
        "contains": "answer from the human",
        "response": "Planning the release: the changelog first.",
        "tool_calls": [
            _create(
                "Changelog",
                "CHANGELOG.md with a dated release heading",
                HEADING_CHECK,
            )
        ],
    },
    {
        "role": "tool",
        "contains": "created n1",
        "tool_calls": [
            _create(
                "Contributing guide",
                "CONTRIBUTING.md for new contributors",
                "test -f CONTRIBUTING.md",
                assignee="MEMBER:reviewer",
                deps=["n1"],
            )
        ],
    },
    {
        "role": "tool",
        "contains": "created n2",
        "tool_calls": [
            _create(
                "Release notes",
                "RELEASE_NOTES.md for 0.1.0",
                "test -f RELEASE_NOTES.md",
                deps=["n1"],
            )
        ],
    },
    {
        "role": "tool",
        "contains": "created n3",
        "tool_calls": [
            _create(
                "Release check",
                "every release file is there",
                RELEASE_CHECK,
                type="BENCH",
                deps=["n1", "n2", "n3"],
            )
        ],
    },
    {
        "role": "tool",
        "contains": "created n4",
        "tool_calls": [
            _call("change_mind", selector="progress", content=PROGRESS_TEXT),
            _end(
                "DO",
                "four nodes planned; the guide goes to @reviewer after the changelog",
                "the plan is complete",
                key_decisions=["Keep a Changelog format"],
            ),
        ],
    },
    # ---- DO: the changelog (twice: the first draft fails its check)
    {
        "contains": ["[work loop] Phase DO", "# Node n1: Changelog", "attempt 1"],
        "response": "Adding the dated release heading.",
        "tool_calls": _work("n1", "CHANGELOG.md", CHANGELOG),
    },
    {
        "contains": ["[work loop] Phase DO", "# Node n1: Changelog"],
        "response": "Writing the changelog.",
        "tool_calls": _work("n1", "CHANGELOG.md", CHANGELOG_DRAFT),
    },
    {
        "role": "tool",
        "contains": "updated n1",
        "tool_calls": [
            _complete("n1"),
            _end("CHECK", "CHANGELOG.md written", "ready for its check"),
        ],
    },
    # ---- DO: the release notes, drafted, then published (the move needs an approval)
    {
        "contains": ["[work loop] Phase DO", "# Node n3: Release notes"],
        "response": "Drafting the release notes.",
        "tool_calls": [
            _call("write_file", path=NOTES_DRAFT, content=RELEASE_NOTES),
            _call("node_update", node_id="n3", artifacts=["RELEASE_NOTES.md"]),
        ],
    },
    {
        "role": "tool",
        "contains": "updated n3",
        "response": "Publishing them.",
        "tool_calls": [_call("move", src=NOTES_DRAFT, dst="RELEASE_NOTES.md")],
    },
    {
        # the approved move ran; its note (with any other that came meanwhile) is last
        "contains": "The human approved move",
        "tool_calls": [
            _complete("n3"),
            _end("CHECK", "RELEASE_NOTES.md published", "ready for its check"),
        ],
    },
    {
        "role": "tool",
        "contains": "RELEASE_NOTES.md",
        "tool_calls": [
            _complete("n3"),
            _end("CHECK", "RELEASE_NOTES.md published", "ready for its check"),
        ],
    },
    # ---- CHECK: the changelog, failing first
    {
        "contains": ["[work loop] Phase CHECK", "# Node n1: Changelog"],
        "tool_calls": [_call("run_shell", command=HEADING_CHECK)],
    },
    {
        "role": "tool",
        "contains": "no dated release heading",
        "tool_calls": [
            _call(
                "node_transition",
                node_id="n1",
                to="CHECK_FAILED",
                reason="AC1 failed: no dated release heading",
                evidence="grep found no '## [' heading",
            ),
            _end(
                "ADJUST",
                "n1 failed AC1",
                "a node failed its check",
                risks=["the changelog has no release heading"],
            ),
        ],
    },
    {
        "role": "tool",
        "contains": "## [0.1.0] - 2026-01-01",
        "tool_calls": [
            _done("n1", "CHANGELOG.md has the dated 0.1.0 heading"),
            _end("DO", "n1 passed", "the changelog is done"),
        ],
    },
    # ---- CHECK: the guide and the notes, in whichever order they complete
    {
        "contains": [
            "[work loop] Phase CHECK",
            "# Node n2: Contributing guide",
            "# Node n3: Release notes",
        ],
        "tool_calls": [
            _done("n2", "CONTRIBUTING.md is there"),
            _done("n3", "RELEASE_NOTES.md is there"),
            _end("END", "n2 and n3 passed", "both checked"),
        ],
    },
    {
        "contains": ["[work loop] Phase CHECK", "# Node n3: Release notes"],
        "tool_calls": [
            _done("n3", "RELEASE_NOTES.md is there"),
            _end("END", "n3 passed", "checked"),
        ],
    },
    {
        "contains": ["[work loop] Phase CHECK", "# Node n2: Contributing guide"],
        "tool_calls": [
            _done("n2", "CONTRIBUTING.md is there"),
            _end("END", "n2 passed", "checked"),
        ],
    },
    # ---- CHECK: the BENCH node, last
    {
        "contains": ["[work loop] Phase CHECK", "# Node n4: Release check"],
        "tool_calls": [_call("run_shell", command=RELEASE_CHECK)],
    },
    {
        "role": "tool",
        "contains": "release check passed",
        "tool_calls": [
            _done("n4", "every release file is there"),
            _end("END", "the release check passed", "all nodes are done"),
        ],
    },
    # ---- ADJUST: a fresh look (FBR, three samples), then back to DO
    {
        "contains": "[work loop] Phase ADJUST",
        "response": "The check says the changelog has no dated release heading. A fresh "
        "look first.\n"
        "!?@self\n!?You are doing tool-less FBR. Use only this text as context.\n"
        "!?A changelog failed the check `grep '^## \\['`: no dated release heading. What "
        "should the next attempt change?\n",
    },
    {
        "contains": "FBR @self sideline response",
        "tool_calls": [
            _call(
                "retry_propose",
                failure_class="CHECK_FAIL",
                evidence="grep '^## \\[' CHANGELOG.md: no match (the check report)",
                reflection="WRONG_APPROACH: the check wants a dated release heading; "
                "the FBR samples agree",
                change_kind="STRATEGY",
                change_summary="add a dated '## [0.1.0]' heading",
                plan="rewrite CHANGELOG.md with a dated '## [0.1.0] - <date>' release heading",
            )
        ],
    },
    {
        "role": "tool",
        "contains": "ACCEPTED: ADJUST cycle",
        "tool_calls": [
            _call(
                "node_transition",
                node_id="n1",
                to="IN_PROGRESS",
                reason="WRONG_APPROACH: add a dated '## [0.1.0]' heading (check report, FBR)",
            ),
            _end(
                "DO",
                "n1 back to DO with a dated heading",
                "the cause is clear",
                key_decisions=["root cause WRONG_APPROACH, evidence: the check report"],
            ),
        ],
    },
]

DEMO_SCRIPT: dict[str, object] = {
    "responses": [
        # The FBR samples (tool-less, same member): reason from the body only.
        {
            "member": "dev",
            "contains": "Fresh Boots Reasoning (FBR) request",
            "response": "Conclusion: add a '## [0.1.0] - <date>' heading. Reasoning: the "
            "check greps for it. Unknowns: the release date.",
        },
        # The KB teammate folds the request into kb/ (once: a duplicate never reaches it).
        {
            "member": "kb",
            "role": "tool",
            "contains": KB_FILE,
            "response": f"Added {KB_FILE}.",
        },
        {
            "member": "kb",
            "contains": "[kb_request from @dev",
            "tool_calls": [
                _call("write_file", path=KB_FILE, content=f"# Changelog format\n\n{KB_NOTE}\n")
            ],
        },
        # The reviewer works the node dispatched to it, then replies.
        {
            "member": "reviewer",
            "role": "tool",
            "contains": "CONTRIBUTING.md",
            "response": "Written CONTRIBUTING.md.\nARTIFACT: CONTRIBUTING.md",
        },
        {
            "member": "reviewer",
            "contains": "# Node n2: Contributing guide",
            "tool_calls": [_call("write_file", path="CONTRIBUTING.md", content=CONTRIBUTING)],
        },
        *({"member": "dev", **e} for e in _DEV),
    ]
}
