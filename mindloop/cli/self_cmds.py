"""`mindloop self history` and `mindloop self revert SEQ`: a human's view and undo of what
self-improvement wrote into a member's `.minds/team/<member>/self.md`."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from mindloop.cli.common import console, get_rtws, print_json

if TYPE_CHECKING:  # the config is imported by the commands that use it (cheap --help)
    from mindloop.config import Config

app = typer.Typer(no_args_is_help=True, help="A member's self.md: its history and reverts.")

MemberOption = Annotated[
    str | None,
    typer.Option("--member", "-m", help="Whose self.md (default: the default responder)."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


def _member(ctx: typer.Context, member: str | None) -> tuple[Config, str]:
    from mindloop.config import load_config

    rtws = get_rtws(ctx)
    config = load_config(rtws)
    chosen = member or config.team.default_responder
    config.member(chosen)  # a clear error for an unknown member
    return config, chosen


@app.command("history")
def history(ctx: typer.Context, member: MemberOption = None, as_json: JsonOption = False) -> None:
    """List the changes of a member's self.md, oldest first."""
    from mindloop.toolsets import self_md_git
    from mindloop.toolsets.self_md import SelfMdFile

    config, mid = _member(ctx, member)
    file = SelfMdFile(config.rtws, mid)
    entries = file.history()
    reverted = {e.reverts_seq: e.seq for e in entries if e.reverts_seq is not None}
    commits: dict[str, str] = {}
    if entries and config.team.loop.self_md.git_commit and self_md_git.in_git_repo(config.rtws):
        commits = self_md_git.commits_by_key(config.rtws)
    if as_json:
        print_json(
            [
                {
                    **e.model_dump(exclude={"prev_content"}),
                    "reverted_by": reverted.get(e.seq),
                    "git_commit": commits.get(e.idempotency_key),
                }
                for e in entries
            ]
        )
        return
    if not entries:
        console.print(f"no changes to .minds/team/{mid}/self.md")
        return
    from rich.table import Table

    decided = {e.proposal_seq: e for e in entries if e.proposal_seq is not None}
    table = Table("seq", "at", "by", "change", "rationale", "commit")
    for e in entries:
        change = f"{e.op} {e.section!r}"
        if e.status == "proposed":
            d = decided.get(e.seq)
            change += (
                f" (proposed: {d.status} as #{d.seq})"
                if d is not None
                else f" (proposed, open: approval {e.approval_id})"
            )
        elif e.proposal_seq is not None:
            why = f": {e.decision_reason}" if e.decision_reason else ""
            change += f" ({e.status} proposal #{e.proposal_seq}, by {e.decided_by}{why})"
        if e.seq in reverted:
            change += f" (reverted by #{reverted[e.seq]})"
        at = datetime.fromtimestamp(e.at).strftime("%Y-%m-%d %H:%M")
        commit = commits.get(e.idempotency_key, "")[:10]
        table.add_row(str(e.seq), at, e.by, escape(change), escape(e.rationale), commit)
    console.print(table)


@app.command("revert")
def revert(
    ctx: typer.Context,
    seq: Annotated[int, typer.Argument(help="The change to undo (see `mindloop self history`).")],
    member: MemberOption = None,
    as_json: JsonOption = False,
) -> None:
    """Undo one change of a member's self.md: a new history entry restores what that
    change replaced (and is committed to git when loop.self_md.git_commit is on)."""
    from mindloop.toolsets.self_improve import revert_self_md

    config, mid = _member(ctx, member)
    result = revert_self_md(config.rtws, mid, seq, config.team.loop.self_md)
    if as_json:
        print_json(result.model_dump(mode="json", exclude_none=True))
        return
    line = f"reverted #{seq} of .minds/team/{mid}/self.md as #{result.history_seq}"
    if result.git_commit:
        line += f" (commit {result.git_commit[:10]})"
    console.print(line, markup=False)
    if result.message:
        console.print(result.message, markup=False)
