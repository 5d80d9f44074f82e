"""The live lines of a task's work loop, on top of the dialog transcript: each phase as it
starts (with the node it works), its end with the hint, and after each routing decision
a progress bar over the task's nodes (a dropped hint is said so)."""

from __future__ import annotations

from rich.markup import escape

from mindloop.cli.loop_cmds import progress_bar
from mindloop.cli.render import TranscriptRenderer
from mindloop.events.types import Event, LoopRouted, PhaseEnded, PhaseStarted, WaitOpened


class LoopRenderer(TranscriptRenderer):
    def _line(self, ev: Event) -> str | None:
        match ev:
            case PhaseStarted(phase=phase, entry=entry, node=node):
                on = f" · node {escape(node)}" if node else ""
                return f"[bold magenta]━━ {phase} (entry {entry}){on} ━━[/]"
            case PhaseEnded(phase=phase, by=by, hint=hint, summary=summary):
                said = f" · hint {hint}" if hint else ""
                gist = f": {escape(summary)}" if summary else ""
                return f"[magenta]■ {phase} ended ({by}{said}){gist}[/]"
            case LoopRouted(target=target, rule=rule, done=done, total=total, hint_dropped=why):
                dropped = (
                    f"\n[yellow]  hint dropped (HINT_ILLEGAL): {escape(why)}[/]" if why else ""
                )
                return (
                    f"[magenta]→ {target}[/] [dim]({rule})[/] {progress_bar(done, total)}{dropped}"
                )
            case WaitOpened(kind=kind, key=key):
                return f"{self._lead(ev.dialog_id)}[cyan]⏸ {kind} wait {escape(key)}[/]"
            case _:
                return super()._line(ev)
