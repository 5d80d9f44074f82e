"""`mindloop demo`: a short offline scenario on the scripted mock provider.

It creates a fresh rtws, runs one root dialog whose member lists, reads and writes files
with tools and updates the Taskdoc with `change_mind`, and leaves everything on disk so
the user can inspect it with the other commands.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml
from rich.console import Console

from mindloop.cli.render import TranscriptRenderer
from mindloop.demo.script import DEMO_PROMPT, DEMO_SCRIPT
from mindloop.dialogs.runtime import DialogRuntime, DriveResult
from mindloop.errors import MindloopError
from mindloop.rtws import init_rtws
from mindloop.rtws.scaffold import MOCK_MODEL


@dataclass
class DemoReport:
    rtws: Path
    dialog_id: str
    result: DriveResult
    state_file: Path


async def run_demo(directory: Path | None, console: Console) -> DemoReport:
    if directory is None:
        directory = Path(tempfile.mkdtemp(prefix="mindloop-demo-"))
    elif directory.exists() and any(directory.iterdir()):
        raise MindloopError(f"{directory} is not empty; the demo needs a fresh directory")
    init_rtws(directory, provider="mock")
    script = directory / ".minds" / "mock" / f"{MOCK_MODEL}.yaml"
    script.write_text(yaml.safe_dump(DEMO_SCRIPT, sort_keys=False, allow_unicode=True), "utf-8")

    console.rule("mindloop demo")
    console.print(f"rtws: {directory}  (scripted mock model, no network)")
    rt = DialogRuntime(directory)
    renderer = TranscriptRenderer(console, show_thinking=True)
    renderer.attach(rt.bus)
    try:
        rec = rt.create_root_dialog("tasks/example.tsk", title="demo")
        renderer.set_dialog(rec.id, rec.member)
        rt.post_user_message(rec.id, DEMO_PROMPT)
        console.print(f"[bold]you:[/] {DEMO_PROMPT}")
        result = await rt.drive(rec.id)
    finally:
        renderer.close()
        await rt.aclose()
    console.rule("where things are")
    console.print(f"state:      {rt.store.path}")
    console.print(f"file tools: {directory / 'CHANGELOG.md'}")
    console.print(f"Taskdoc:    mindloop taskdoc show -C {directory} tasks/example.tsk")
    console.print(f"transcript: mindloop dialogs show -C {directory} {rec.id}")
    return DemoReport(directory, rec.id, result, rt.store.path)
