"""Structured logs of a command that works on an rtws: `.mindloop/logs/mindloop.log`.

One JSON object per line (time, level, logger, message, and the record's structured
fields), so a log can be searched with `jq` as easily as read. The file rotates at
`MAX_BYTES`, keeping `BACKUPS` old files. The runtime's events (except streamed chunks)
are logged too, by `EventLog`, so the file tells what every dialog did without the state
database. `--verbose` writes the same records to stderr, one plain line each.

Logging is set up only by commands that write state, once their input was accepted:
a refused command or a read leaves no `.mindloop/` behind.
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import sys
import time
from pathlib import Path
from typing import Any

from mindloop.events.types import CHUNK_TYPES, Event

LOG_DIR = Path(".mindloop") / "logs"
LOG_FILE = "mindloop.log"
MAX_BYTES = 5 * 1024 * 1024
BACKUPS = 5
# Longer texts in an event (a tool's whole output) are cut to this many characters.
FIELD_CHARS = 2000

ROOT_LOGGER = "mindloop"
_HANDLER_MARK = "_mindloop_cli_handler"

# Attributes every LogRecord has; anything else on a record was passed as `extra`.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
}


class JsonFormatter(logging.Formatter):
    """A record as one JSON line: ts, level, logger, msg, then its `extra` fields."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": round(record.created, 3),
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(record.created)),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                doc[key] = value
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return json.dumps(doc, ensure_ascii=False, default=str)


def _drop_ours(logger: logging.Logger) -> None:
    for handler in [h for h in logger.handlers if getattr(h, _HANDLER_MARK, False)]:
        logger.removeHandler(handler)
        handler.close()


def setup_logging(rtws: Path, *, verbose: bool = False) -> Path | None:
    """Send the `mindloop` loggers to the rtws's rotating log file (and to stderr with
    `verbose`); returns the file. Calling it again replaces what it set up before.

    A log that cannot be written (a read-only rtws whose state is in PostgreSQL, say) is
    one warning line on stderr, and the command goes on without it: None."""
    logger = logging.getLogger(ROOT_LOGGER)
    _drop_ours(logger)
    folder = rtws / LOG_DIR
    path: Path | None = folder / LOG_FILE
    handlers: list[logging.Handler] = []
    try:
        folder.mkdir(parents=True, exist_ok=True)
        to_file = logging.handlers.RotatingFileHandler(
            folder / LOG_FILE, maxBytes=MAX_BYTES, backupCount=BACKUPS, encoding="utf-8"
        )
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        sys.stderr.write(f"warning: cannot write the log {folder / LOG_FILE}: {reason}\n")
        path = None
    else:
        to_file.setFormatter(JsonFormatter())
        handlers.append(to_file)
    if verbose:
        to_console = logging.StreamHandler()  # stderr
        to_console.setFormatter(
            logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%H:%M:%S")
        )
        handlers.append(to_console)
    for handler in handlers:
        setattr(handler, _HANDLER_MARK, True)
        logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if verbose else logging.INFO)
    logger.propagate = False
    return path


def _clip(value: Any) -> Any:
    if isinstance(value, str) and len(value) > FIELD_CHARS:
        return f"{value[:FIELD_CHARS]}… ({len(value)} chars)"
    return value


def stop_logging() -> None:
    """Undo `setup_logging`: its handlers closed, the `mindloop` logger as it was."""
    logger = logging.getLogger(ROOT_LOGGER)
    _drop_ours(logger)
    logger.setLevel(logging.NOTSET)
    logger.propagate = True


class EventLog:
    """A bus listener that logs every runtime event but streamed chunks, with its fields:
    `{"event": "tool_call", "dialog_id": …, "name": …}`."""

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self.log = logger or logging.getLogger("mindloop.events")

    def __call__(self, event: Event) -> None:
        if event.type in CHUNK_TYPES:
            return
        level = logging.WARNING if event.type in ("error", "provider_retry") else logging.INFO
        fields = {key: _clip(value) for key, value in event.payload().items()}
        self.log.log(
            level,
            "%s %s",
            event.type,
            event.dialog_id or "-",
            extra={"event": str(event.type), "dialog_id": event.dialog_id, "data": fields},
        )
