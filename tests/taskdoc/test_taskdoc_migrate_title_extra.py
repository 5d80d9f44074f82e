"""`taskdoc migrate` takes the files people actually have: a leading `#` title (kept at the
top of goals.md) and headings other than Goals/Constraints/Progress (Bear-in-mind names
become `bearinmind/` sections, any other an extra section), nothing lost; the command says
where each heading went and audits every section it created."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from taskdoc_testutil import write

from mindloop.taskdoc import TaskPackage
from mindloop.taskdoc.migrate import migrate_file, plan_migration
from mindloop.taskdoc.sections import is_identifier
from tests.scenario_util import ml

DOC = """\
# Login feature

Owner: the web team.

## Goals
Users can log in.

## Notes
- see the design doc

## Risks
- password reuse

## 备注
中文

## Constraints
- MUST hash passwords

## Open questions!
- SSO later?
"""


def test_title_and_other_headings_are_kept(tmp_path: Path) -> None:
    write(tmp_path, "notes/login.md", DOC)
    pkg, plan = migrate_file(tmp_path, "notes/login.md", "tasks/login.tsk")
    files = {p.relative_to(pkg.path).as_posix(): p.read_text() for p in pkg.path.rglob("*.md")}
    assert files == {
        "goals.md": "**Login feature**\n\nOwner: the web team.\n\nUsers can log in.\n",
        "constraints.md": "- MUST hash passwords\n",
        "progress.md": "",
        "bearinmind/risks.md": "- password reuse\n",
        "extra/notes.md": "- see the design doc\n",
        "extra/open-questions.md": "- SSO later?\n",
        "extra/section.md": "# 备注\n\n中文\n",  # no file name spells it: the heading opens it
    }
    assert plan.title == "Login feature"
    assert [(m.heading, m.line, m.section) for m in plan.extra] == [
        ("Notes", 8, "extra/notes.md"),
        ("备注", 14, "extra/section.md"),
        ("Open questions!", 20, "extra/open-questions.md"),
    ]
    assert [e.rel for e in TaskPackage(tmp_path, "tasks/login.tsk").extra_sections().entries] == [
        "extra/notes.md",
        "extra/open-questions.md",
        "extra/section.md",
    ]


def test_a_heading_of_a_known_section_is_no_title(tmp_path: Path) -> None:
    plan = plan_migration("# Goals\n## detail\nx\n")
    assert plan.title is None and plan.files["goals.md"] == "## detail\nx\n"
    # Two headings of the top level: sections, not a title.
    plan = plan_migration("# Goals\ng\n# Notes\nn\n")
    assert plan.title is None and plan.files["extra/notes.md"] == "n\n"


@given(
    st.lists(
        st.text(min_size=1, max_size=20).filter(
            lambda t: t.strip() == t and "\n" not in t and "#" not in t
        ),
        min_size=1,
        max_size=6,
    )
)
def test_any_other_headings_map_to_distinct_valid_sections(headings: list[str]) -> None:
    text = "# Goals\ng\n" + "".join(f"# {h}\nbody of {i}\n" for i, h in enumerate(headings))
    try:
        plan = plan_migration(text)
    except Exception as exc:  # only a repeated known section may be refused
        assert "duplicate section" in str(exc)
        return
    extra = [m.section for m in plan.extra]
    assert len(set(extra)) == len(extra)
    for rel in extra:
        category, name = rel.removesuffix(".md").split("/")
        assert category == "extra" and is_identifier(name)
    bodies = "".join(plan.files.values())
    assert all(f"body of {i}" in bodies for i in range(len(headings)))  # nothing lost


def test_the_migrate_command_says_where_things_went_and_audits_them(tmp_path: Path) -> None:
    assert ml("init", str(tmp_path / "p")).returncode == 0
    proj = tmp_path / "p"
    write(proj, "old.md", DOC)
    out = ml("-C", str(proj), "taskdoc", "migrate", "old.md")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "old.tsk"
    assert "title 'Login feature' -> goals.md (its first line)" in out.stderr
    assert "line 8: 'Notes' -> extra/notes.md" in out.stderr
    assert "line 11: 'Risks' -> bearinmind/risks.md" in out.stderr
    shown = json.loads(ml("-C", str(proj), "taskdoc", "show", "old.tsk", "--json").stdout)
    sections = {s["section"]: s for s in shown["sections"]}
    for rel in ("goals.md", "bearinmind/risks.md", "extra/notes.md", "extra/section.md"):
        assert sections[rel]["actor_member"] == "human" and sections[rel]["recorded"], rel
    human = ml("-C", str(proj), "taskdoc", "show", "old.tsk").stdout
    notes = next(line for line in human.splitlines() if line.startswith("── extra/notes.md"))
    assert "extra: read by agents with recall_taskdoc" in notes and "by human" in notes
    risks = next(line for line in human.splitlines() if line.startswith("── bearinmind/risks.md"))
    assert "recall_taskdoc" not in risks  # injected with the Taskdoc
