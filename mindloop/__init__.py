"""mindloop: a local-first runtime for teams of LLM agents.

The public Python API (everything in `__all__`):

- `open_project(rtws)` and the use cases on it, the same ones the CLI runs:
  `start_chat`, `post`, `ask` (through the Router), `answer`, `retry`, `run` (the scheduler,
  once or `watch=True`),
  `list_dialogs`, `show_dialog`, `dialog_trees`, `list_questions` (and the Router's,
  `list_router_questions`), the approvals: `list_approvals`, `approve`, `reject`, and
  `deliver_event` (a system event for `wait_for`); results are typed (`Posted`,
  `DriveReport` with its `Outcome`, `Transcript` …). See `mindloop.service`.
- The engine underneath: `DialogRuntime` (create, post, drive dialogs) and `Scheduler`.
- Configuration: `load_config`, `check_config`, `init_rtws` (scaffold an rtws).
- For your tests: scripted models that replace a provider without any YAML script, in
  `mindloop.testing` (`ScriptedModel`, `FunctionModel`, `Turn`, `call`, `Failure`):

      from mindloop import open_project, run, start_chat
      from mindloop.testing import ScriptedModel

      async with open_project(rtws, providers={"mock": ScriptedModel(["hi"])}) as p:
          posted = start_chat(p, "hello", task="tasks/example.tsk")
          report = await run(p, root_id=posted.dialog.id)

Names are imported on first use, so `import mindloop` stays cheap.

mindloop logs with the standard `logging` module under the `mindloop` logger (silent
unless the application configures logging; the CLI writes `.mindloop/logs/`).
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "mindloop.service": (
        "Answered",
        "Asked",
        "Decided",
        "DeletedTree",
        "Delivered",
        "DialogSummary",
        "DriveReport",
        "Outcome",
        "Posted",
        "Project",
        "RouterQuestion",
        "Transcript",
        "TreeNode",
        "answer",
        "approve",
        "ask",
        "delete_tree",
        "deliver_event",
        "dialog_trees",
        "list_approvals",
        "list_dialogs",
        "list_questions",
        "list_router_questions",
        "open_project",
        "post",
        "reject",
        "retry",
        "run",
        "show_dialog",
        "start_chat",
        "tree_to_delete",
    ),
    "mindloop.dialogs.runtime": ("DialogRuntime",),
    "mindloop.dialogs.outcomes": ("DriveEnd", "DriveResult"),
    "mindloop.dialogs.policy": ("DefaultPolicy", "PolicyResolver", "Refusal", "TurnPolicy"),
    "mindloop.store": ("DialogStatus",),
    "mindloop.dialogs.scheduler": ("Scheduler",),
    "mindloop.config": ("Config", "ConfigError", "check_config", "load_config"),
    "mindloop.rtws": ("init_rtws",),
    "mindloop.errors": ("MindloopError",),
    "mindloop.events.bus": ("EventBus",),
    "mindloop.events.types": ("Event", "EventType"),
    "mindloop.providers.base": ("GenerationRequest", "Provider", "ProviderError"),
}
logging.getLogger(__name__).addHandler(logging.NullHandler())

_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = [
    "Answered",
    "Asked",
    "Config",
    "ConfigError",
    "Decided",
    "DefaultPolicy",
    "DeletedTree",
    "Delivered",
    "DialogRuntime",
    "DialogStatus",
    "DialogSummary",
    "DriveEnd",
    "DriveReport",
    "DriveResult",
    "Event",
    "EventBus",
    "EventType",
    "GenerationRequest",
    "MindloopError",
    "Outcome",
    "PolicyResolver",
    "Posted",
    "Project",
    "Provider",
    "ProviderError",
    "Refusal",
    "RouterQuestion",
    "Scheduler",
    "Transcript",
    "TreeNode",
    "TurnPolicy",
    "answer",
    "approve",
    "ask",
    "check_config",
    "delete_tree",
    "deliver_event",
    "dialog_trees",
    "init_rtws",
    "list_approvals",
    "list_dialogs",
    "list_questions",
    "list_router_questions",
    "load_config",
    "open_project",
    "post",
    "reject",
    "retry",
    "run",
    "show_dialog",
    "start_chat",
    "tree_to_delete",
]

if TYPE_CHECKING:
    from mindloop.config import Config, ConfigError, check_config, load_config
    from mindloop.dialogs.outcomes import DriveEnd, DriveResult
    from mindloop.dialogs.policy import DefaultPolicy, PolicyResolver, Refusal, TurnPolicy
    from mindloop.dialogs.runtime import DialogRuntime
    from mindloop.dialogs.scheduler import Scheduler
    from mindloop.errors import MindloopError
    from mindloop.events.bus import EventBus
    from mindloop.events.types import Event, EventType
    from mindloop.providers.base import GenerationRequest, Provider, ProviderError
    from mindloop.rtws import init_rtws
    from mindloop.service import (
        Answered,
        Asked,
        Decided,
        DeletedTree,
        Delivered,
        DialogSummary,
        DriveReport,
        Outcome,
        Posted,
        Project,
        RouterQuestion,
        Transcript,
        TreeNode,
        answer,
        approve,
        ask,
        delete_tree,
        deliver_event,
        dialog_trees,
        list_approvals,
        list_dialogs,
        list_questions,
        list_router_questions,
        open_project,
        post,
        reject,
        retry,
        run,
        show_dialog,
        start_chat,
        tree_to_delete,
    )
    from mindloop.store import DialogStatus


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'mindloop' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
