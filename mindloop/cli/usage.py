"""How usage and cost read on the command line (one format for every command)."""

from __future__ import annotations

from mindloop.config.caps import format_usd
from mindloop.store import UsageTotals


def cost_text(u: UsageTotals) -> str:
    """`$0.0123`, `$0.0123 + 2 unpriced`, or `unpriced` when no generation had a price."""
    if u.unpriced and u.unpriced == u.generations:
        return "unpriced"
    text = format_usd(u.cost_usd)
    return f"{text} + {u.unpriced} unpriced" if u.unpriced else text


def usage_line(u: UsageTotals) -> str:
    """`3 generations · 1,234 tokens in / 56 out · $0.0123`."""
    gens = f"{u.generations} generation" + ("" if u.generations == 1 else "s")
    return f"{gens} · {u.input_tokens:,} tokens in / {u.output_tokens:,} out · {cost_text(u)}"
