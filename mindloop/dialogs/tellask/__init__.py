"""Tellask parsing: the text grammar models use to ask teammates, themselves or the human.

`parse_message` for a finished message; `TellaskStreamParser` while it streams. Both give
the same `TellaskCall`s (with stable call ids) for any chunking of the same text.
"""

from mindloop.dialogs.tellask.grammar import TellaskErrorCode, TellaskErrorReason
from mindloop.dialogs.tellask.parser import (
    CallFinishEvent,
    CallLineEvent,
    CallStartEvent,
    MarkdownEvent,
    ParsedMessage,
    TellaskCall,
    TellaskError,
    TellaskEvent,
    TellaskStreamParser,
    parse_message,
)

__all__ = [
    "CallFinishEvent",
    "CallLineEvent",
    "CallStartEvent",
    "MarkdownEvent",
    "ParsedMessage",
    "TellaskCall",
    "TellaskError",
    "TellaskErrorCode",
    "TellaskErrorReason",
    "TellaskEvent",
    "TellaskStreamParser",
    "parse_message",
]
