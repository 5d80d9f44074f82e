"""Server-rendered HTML: one Jinja environment (autoescaped), its filters, and the one
template a transcript entry is drawn with — the same for a page and for the live feed,
so an entry looks the same whether it was there on load or streamed in.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import jinja2

from mindloop.config.caps import format_usd
from mindloop.store import MessageRecord, UsageTotals
from mindloop.store.feed import StoredEvent
from mindloop.web.views import entry_view

TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"


def when(ts: float | None) -> str:
    return datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S") if ts else "-"


def iso(ts: float | None) -> str:
    return datetime.fromtimestamp(ts).astimezone().isoformat(timespec="seconds") if ts else ""


def cost(u: UsageTotals | None) -> str:
    """`$0.0123`, `$0.0123 + 2 unpriced`, `unpriced`, or `-` before any generation."""
    if u is None or not u.generations:
        return "-"
    if u.unpriced == u.generations:
        return "unpriced"
    text = format_usd(u.cost_usd)
    return f"{text} + {u.unpriced} unpriced" if u.unpriced else text


def tokens(u: UsageTotals | None) -> str:
    if u is None or not u.generations:
        return "-"
    return f"{u.input_tokens:,} in / {u.output_tokens:,} out"


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=jinja2.select_autoescape(["html"]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(when=when, iso=iso, cost=cost, tokens=tokens)
    return env


class EntryRenderer:
    """Draws one transcript entry (`_entry.html`) from a stored message or event."""

    def __init__(self, env: jinja2.Environment) -> None:
        self.template = env.get_template("_entry.html")

    def __call__(self, row: MessageRecord | StoredEvent) -> str:
        return self.template.render(e=entry_view(row))
