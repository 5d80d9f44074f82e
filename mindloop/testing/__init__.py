"""What users import in their own tests: scripted models that stand in for a provider.

    from mindloop.testing import FunctionModel, ScriptedModel, Turn, Failure, call

See `mindloop.testing.model` for the turn format; pass a model to
`mindloop.service.open_project(rtws, providers={"<llm.yaml provider name>": model})` or
`mindloop.DialogRuntime(rtws, providers={...})`.
"""

from mindloop.testing.model import (
    Call,
    Failure,
    FunctionModel,
    Respond,
    ScriptedModel,
    Turn,
    TurnLike,
    call,
)

__all__ = [
    "Call",
    "Failure",
    "FunctionModel",
    "Respond",
    "ScriptedModel",
    "Turn",
    "TurnLike",
    "call",
]
