"""The human's side of a Taskdoc: replace one section, name its maintainer.

A person changes a Taskdoc through the same audited write as an agent's `change_mind`,
recorded with the actor `human`, whichever face they use (`mindloop taskdoc edit`, the web
UI): one way, so the history reads the same and a kill mid-change is reconciled the same.
A person's edit starts from a text they read; the change is made only if the section
still holds that text (checked under the package lock), so an agent's change made
meanwhile is never silently overwritten.
"""

from __future__ import annotations

from mindloop.errors import MindloopError
from mindloop.i18n import Lang
from mindloop.store import Store, TaskdocChange
from mindloop.taskdoc import fsio
from mindloop.taskdoc.mind import change_mind
from mindloop.taskdoc.package import TaskPackage
from mindloop.taskdoc.sections import SECTION_SUFFIX, SectionError, parse_section_ref

HUMAN_ACTOR = "human"


class EditConflict(MindloopError):
    """The section changed since the person's edit started; nothing was written."""


def content_hash(text: str | None) -> str:
    """What an edit names as the text it started from (a missing section is empty)."""
    return fsio.sha256_text(text or "")


def section_ref(ref: str, what: str = "section") -> str:
    """The package-relative file of a section as people name it (`goals`, `goals.md`,
    `bearinmind/risks`, `ux/checklist`), or an error naming `what`."""
    try:
        return parse_section_ref(ref)
    except SectionError as exc:
        raise MindloopError(f"{what} {ref!r}: {exc.text.removeprefix('Error: ')}") from None


def edit_section(
    pkg: TaskPackage,
    section: str,
    content: str,
    *,
    store: Store,
    expected_hash: str | None,
    lang: Lang = "en",
) -> TaskdocChange:
    """Replace one section of `pkg` with `content`, audited with the actor `human`.

    `expected_hash` (`content_hash` of the text the edit started from) makes the change
    conditional: `EditConflict` if the section holds something else now. Every other
    refusal of `change_mind` (blank text, a reserved name in the wrong place, too large)
    is a `MindloopError` naming the section; nothing is written then."""
    rel = section_ref(section)
    category, _, name = rel.removesuffix(SECTION_SUFFIX).rpartition("/")
    result = change_mind(
        pkg,
        selector=name,
        category=category or None,
        content=content,
        actor_member=HUMAN_ACTOR,
        actor_dialog=None,
        is_root=True,
        store=store,
        lang=lang,
        expected_hash=expected_hash,
    )
    if result.conflict:
        raise EditConflict(f"{pkg.rel_path}/{rel}: {result.text.removeprefix('Error: ')}")
    if not result.ok or result.change is None:
        raise MindloopError(f"{pkg.rel_path}/{rel}: {result.text.removeprefix('Error: ')}")
    return result.change


def maintainer(store: Store | None, task_path: str, default: str) -> str:
    """Who maintains a Taskdoc: the member of its latest root dialog, else `default`
    (the member a new dialog would start with)."""
    if store is not None:
        roots = [d for d in store.list_dialogs(task_path=task_path) if d.kind == "root"]
        if roots:
            return roots[-1].member
    return default
