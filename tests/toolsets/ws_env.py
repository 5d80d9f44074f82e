"""A workspace tool environment: an rtws with docs, a store, and calls run the way the
engine runs them (arguments through the registry; store effects applied in one
transaction, an `EffectResult` recasting the result, a refused effect skipping the rest)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mindloop.store import Store
from mindloop.store import workspace as rows
from mindloop.tools.base import StartDetached, StoreEffect, ToolContext, ToolOutput, call_key
from mindloop.toolsets import standard_registry
from mindloop.toolsets.workspace import StoreWorkspaceAccess
from mindloop.workspace import repo
from mindloop.workspace.state import WorkspaceState

TASK = "tasks/login.tsk"
DOCS = {
    "docs/auth.md": "# Auth\nJWT, 15 min tokens.\n",
    "docs/api.md": "# API\nPOST /login\n",
    "docs/db.md": "# DB\nusers table\n",
    "docs/notes.md": "# Notes\nmisc\n",
    "README.md": "# proj\n",
    "src/login.py": "def login(): ...\n",
    "build/login_generated.md": "ignored by git\n",
}


def build(base: Path) -> Path:
    rtws = base / "proj"
    (rtws / ".minds").mkdir(parents=True)
    (rtws / TASK).mkdir(parents=True)
    (rtws / TASK / "goals.md").write_text("Users can log in.\n")
    (rtws / TASK / "secret.md").write_text("inside the package\n")
    (rtws / ".gitignore").write_text("build/\n")
    for rel, text in DOCS.items():
        (rtws / rel).parent.mkdir(parents=True, exist_ok=True)
        (rtws / rel).write_text(text)
    (base / "outside.md").write_text("outside\n")
    (rtws / "docs" / "escape.md").symlink_to(base / "outside.md")
    return rtws


@dataclass
class Env:
    rtws: Path
    store: Store
    members: frozenset[str] = frozenset({"dev", "bob", "carol"})
    started: list[StartDetached] = field(default_factory=list)
    n: int = 0

    def ctx(
        self, *, is_root: bool = True, member: str = "dev", dialog: str = "d-root"
    ) -> ToolContext:
        self.n += 1
        return ToolContext(
            rtws=self.rtws,
            member=member,
            dialog_id=dialog,
            call_key=call_key(dialog, "t", self.n),
            is_root=is_root,
            task_path=TASK,
            workspace=StoreWorkspaceAccess(self.store, self.members),
        )

    async def call(self, name: str, ctx: ToolContext | None = None, **args: Any) -> ToolOutput:
        out = await self.run(name, ctx, **args)
        return self.commit(out)

    async def run(self, name: str, ctx: ToolContext | None = None, **args: Any) -> ToolOutput:
        """The call up to its effects (not committed yet)."""
        return await standard_registry().execute(name, json.dumps(args), ctx or self.ctx())

    def commit(self, out: ToolOutput) -> ToolOutput:
        with self.store.tx():
            for effect in out.effects:
                if isinstance(effect, StoreEffect):
                    recast = effect.apply(self.store)
                    if recast is not None:
                        out = ToolOutput(recast.text, recast.is_error, out.effects)
                        if recast.is_error:
                            break
                elif isinstance(effect, StartDetached):
                    self.started.append(effect)
        return out

    def state(self) -> WorkspaceState:
        return repo.load(self.store, TASK)

    def snapshot(self) -> tuple[Any, ...]:
        """Everything a command could change (nodes, index, rules, log, files)."""
        st = self.state()
        files = (
            sorted(
                (p.relative_to(self.rtws).as_posix(), p.read_bytes())
                for p in (self.rtws / TASK / "workspace").rglob("*")
                if p.is_file() and p.name != ".lock"
            )
            if (self.rtws / TASK / "workspace").exists()
            else []
        )
        return (
            st.nodes,
            st.index,
            [r.text for r in st.rules],
            len(rows.log(self.store, TASK)),
            files,
        )
