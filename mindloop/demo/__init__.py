"""`mindloop demo`: a short offline team scenario on the scripted mock provider.

It creates a fresh rtws; the root member lists, reads and writes files with tools,
updates the Taskdoc with `change_mind` and sees the change in its next generation, asks a
teammate for a review (a side dialog) and itself for three fresh-boots opinions (FBR),
then asks the human one question (Q4H), which the demo answers on the human's behalf.
Everything stays on disk for the other commands to inspect.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from mindloop.cli.render import TranscriptRenderer
from mindloop.demo.script import DEMO_PROMPT, DEMO_SCRIPT, DEMO_TEAM, HUMAN_ANSWER
from mindloop.dialogs.runtime import DialogRuntime, DriveEnd, DriveResult
from mindloop.dialogs.scheduler import Scheduler
from mindloop.errors import MindloopError
from mindloop.rtws import init_rtws
from mindloop.rtws.scaffold import MOCK_MODEL, dump_yaml


@dataclass
class DemoReport:
    rtws: Path
    dialog_id: str
    result: DriveResult
    state_file: Path
    dialogs: int
    questions_answered: int


def prepare_demo_rtws(directory: Path) -> None:
    init_rtws(directory, provider="mock")
    minds = directory / ".minds"
    (minds / "team.yaml").write_text(dump_yaml(DEMO_TEAM), "utf-8")
    (minds / "mock" / f"{MOCK_MODEL}.yaml").write_text(dump_yaml(DEMO_SCRIPT), "utf-8")
    persona = minds / "team" / "reviewer" / "persona.md"
    persona.parent.mkdir(parents=True, exist_ok=True)
    persona.write_text("You are Reviewer: precise, brief, kind.\n", "utf-8")


async def run_demo(directory: Path | None, console: Console) -> DemoReport:
    if directory is None:
        directory = Path(tempfile.mkdtemp(prefix="mindloop-demo-"))
    elif directory.exists() and any(directory.iterdir()):
        raise MindloopError(f"{directory} is not empty; the demo needs a fresh directory")
    prepare_demo_rtws(directory)

    console.rule("mindloop demo")
    console.print(f"rtws: {directory}  (scripted mock model, no network)")
    rt = DialogRuntime(directory)
    renderer = TranscriptRenderer(console, show_thinking=True)
    renderer.attach(rt.bus)
    answered = 0
    try:
        rec = rt.create_root_dialog("tasks/example.tsk", title="demo")
        renderer.set_dialog(rec.id, rec.member)
        rt.post_user_message(rec.id, DEMO_PROMPT)
        console.print(f"[bold]you:[/] {escape(DEMO_PROMPT)}")
        sched = Scheduler(rt)
        await sched.run()
        for q in rt.store.open_questions(root_ids=[rec.id]):
            renderer.close()
            console.print(f"[bold]human (answered by the demo):[/] {escape(HUMAN_ANSWER)}")
            console.print(f'[dim]  = mindloop answer -C {directory} {q.id} "{HUMAN_ANSWER}"[/]')
            rt.answer_question(q.id, HUMAN_ANSWER)
            answered += 1
        await sched.run()
        roots = [r for r in sched.results if r.dialog_id == rec.id]
        result = roots[-1] if roots else DriveResult(rec.id, DriveEnd.ERROR, error="root never ran")
        dialogs = len(rt.store.list_dialogs(root_id=rec.id))
    finally:
        renderer.close()
        await rt.aclose()
    console.rule("where things are")
    console.print(f"state:      {rt.store.path}")
    console.print(f"file tools: {directory / 'CHANGELOG.md'}")
    console.print(f"tree:       mindloop dialogs tree -C {directory} tasks/example.tsk")
    console.print(f"Taskdoc:    mindloop taskdoc show -C {directory} tasks/example.tsk")
    console.print(f"transcript: mindloop dialogs show -C {directory} {rec.id}")
    return DemoReport(directory, rec.id, result, rt.store.path, dialogs, answered)
