"""Spending caps (`caps:` in team.yaml) and model prices (`price:` in llm.yaml).

A cap bounds what one drive, or one task across all its dialogs, may spend: in US dollars
(`max_cost`) and in tokens (`max_tokens`, input plus output as the provider reports them).
They sit in a block of their own rather than among a member's keys because `max_tokens`
there would read as the per-request output limit of `model_params`, which it is not.

    caps:
      drive: {max_cost: 0.50, max_tokens: 200000}   # each drive of any dialog
      task:  {max_cost: 5}                          # every dialog of one task package, ever

A price overrides the maintained price table (`genai-prices`) for one model; it is also the
only way to price a model the table does not know (a local server, a new model).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

STRICT = ConfigDict(extra="forbid", strict=True)


class CapLimits(BaseModel):
    """The limits of one scope; a limit left out does not apply."""

    model_config = STRICT

    max_cost: float | None = Field(default=None, gt=0)  # US dollars
    max_tokens: int | None = Field(default=None, gt=0)  # input + output tokens

    @property
    def any(self) -> bool:
        return self.max_cost is not None or self.max_tokens is not None


class CapsConfig(BaseModel):
    """`caps:` — per drive and per task."""

    model_config = STRICT

    drive: CapLimits = Field(default_factory=CapLimits)
    task: CapLimits = Field(default_factory=CapLimits)


def format_usd(amount: float) -> str:
    """A cost as people read it: `$12.34`, `$0.30`, `$0.0144`, `$0.000123` (LLM calls
    cost fractions of a cent: below a dollar, up to six decimals are kept)."""
    if amount >= 1:
        return f"${amount:,.2f}"
    digits = f"{amount:.6f}".rstrip("0")
    whole, _, frac = digits.partition(".")
    return f"${whole}.{frac.ljust(2, '0')}"


class ModelPrice(BaseModel):
    """A model's price in US dollars per million tokens."""

    model_config = STRICT

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input_per_mtok + output_tokens * self.output_per_mtok) / 1e6
