"""What users import in their own tests: scripted models that stand in for a provider.

    from mindloop.testing import FunctionModel, ScriptedModel, Turn, Failure, call

See `mindloop.testing.model` for the turn format; pass a model to
`mindloop.service.open_project(rtws, providers={"<llm.yaml provider name>": model})` or
`mindloop.DialogRuntime(rtws, providers={...})`. For mindloop running in other
processes, `ChatServer` serves a model function over the real OpenAI wire protocol on
127.0.0.1 (`mindloop.testing.chat_server`).
"""

from mindloop.testing.chat_server import ChatServer, Reply
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
    "ChatServer",
    "Failure",
    "FunctionModel",
    "Reply",
    "Respond",
    "ScriptedModel",
    "Turn",
    "TurnLike",
    "call",
]
