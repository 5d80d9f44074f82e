"""The one function that builds a node's context: what a member given the node reads
first (node dispatch), and what the work loop shows of its current node.

Decision 2 (explicit dispatch): the context holds the node's own requirement and
acceptance criteria, the workspace rules, the docs dispatched to this node that are
active (inlined while they fit the budget, else listed with how to read them), the
conclusions of its deps, and its ancestors' titles and requirements for orientation —
never an ancestor's docs, never the doc index, never an expired doc (upstream flaw 2).
An isolated node's chain starts at itself.
"""

from __future__ import annotations

from pathlib import Path

from mindloop.i18n import Lang
from mindloop.tools.base import Acl
from mindloop.tools.pathguard import AccessDenied, resolve_agent_path
from mindloop.workspace.docs import is_url
from mindloop.workspace.models import Node
from mindloop.workspace.state import WorkspaceState
from mindloop.workspace.texts import ctx_text

INLINE_BUDGET = 24_000  # characters of doc text inlined in one context
DOC_CAP = 12_000  # characters of one doc inlined at most
CHAIN_TEXT = 300  # characters of an ancestor's requirement shown
DEP_TEXT = 2_000  # characters of a dep's conclusion shown


def chain(state: WorkspaceState, node: Node) -> list[Node]:
    """Ancestors from the top of the node's chain down to its parent: the root, or the
    nearest isolated ancestor (statement 53); nothing for an isolated node itself."""
    if node.isolate:
        return []
    out: list[Node] = []
    for anc in state.ancestors(node.id):
        out.append(anc)
        if anc.isolate:
            break
    return list(reversed(out))


def _read(rtws: Path, path: str, acl: Acl | None) -> str | None:
    try:
        resolved = resolve_agent_path(rtws, path, acl or Acl(), "read")
        return resolved.read_text("utf-8", errors="replace")
    except (AccessDenied, OSError):
        return None


def node_context(
    state: WorkspaceState,
    node_id: str,
    *,
    rtws: Path,
    lang: Lang | None = None,
    acl: Acl | None = None,
    budget: int = INLINE_BUDGET,
    reply_protocol: bool = True,
) -> str:
    lang = lang or state.lang
    t = lambda key: ctx_text(lang, key)  # noqa: E731
    node = state.peek(node_id)  # read: a session's value keeps its nodes untaken
    if node is None:
        raise KeyError(node_id)
    out = [
        t("head").format(id=node.id, title=node.title),
        t("intro").format(task=state.task),
        "",
        t("requirement"),
        node.requirement or "-",
    ]
    if node.acceptance_criteria:
        out += ["", t("criteria")]
        for c in node.acceptance_criteria:
            line = t("criterion").format(id=c.id, when=c.when, then=c.then)
            out.append(line + (t("verify").format(verify=c.verify) if c.verify else ""))
    if state.rules:
        out += ["", t("rules"), *(f"- {r.text}" for r in state.rules)]
    ancestors = chain(state, node)
    if ancestors:
        out += ["", t("chain")]
        for a in ancestors:
            req = " ".join(a.requirement.split())
            req = req if len(req) <= CHAIN_TEXT else req[:CHAIN_TEXT] + "…"
            out.append(f"- {a.id} {a.title}: {req}" if req else f"- {a.id} {a.title}")
    out += ["", t("docs")]
    docs = state.prompt_docs(node)
    if not docs:
        out.append(t("no_docs"))
    left = budget
    listed: list[str] = []
    for d in docs:
        desc = d.description or "-"
        if is_url(d.path):
            listed.append(t("doc_url").format(path=d.path, desc=desc))
            continue
        text = _read(rtws, d.path, acl)
        if text is None:
            listed.append(t("doc_listed").format(path=d.path, desc=desc, why=t("unreadable")))
            continue
        if len(text) > min(left, DOC_CAP):
            listed.append(t("doc_listed").format(path=d.path, desc=desc, why=t("over_budget")))
            continue
        left -= len(text)
        fence = "````" if "```" in text else "```"
        head = t("doc_head").format(
            path=d.path, desc=f" — {d.description}" if d.description else ""
        )
        out += [head, fence, text.rstrip("\n"), fence]
    out += listed
    deps = [dep for d in node.deps if (dep := state.peek(d)) is not None]
    if deps:
        out += ["", t("deps")]
        for dep in deps:
            concl = " ".join(dep.conclusion.split()) or t("no_conclusion")
            concl = concl if len(concl) <= DEP_TEXT else concl[:DEP_TEXT] + "…"
            out.append(
                t("dep").format(id=dep.id, title=dep.title, status=dep.status, conclusion=concl)
            )
    if node.blockers:
        out += ["", t("blockers"), *(f"- {b}" for b in node.blockers)]
    if reply_protocol:
        out += ["", t("reply"), t("reply_text")]
    return "\n".join(out) + "\n"
