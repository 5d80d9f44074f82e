"""What a generation cost, from the tokens its provider reported.

The price of a model comes, in this order, from its `price:` in `.minds/llm.yaml` (an
override, see `config.caps`), from the mock provider (free: it runs nothing), or from the
maintained price table of the `genai-prices` package, whose data ships inside the package
(no network). A model the table does not know, or a generation whose provider reported no
usage, has no cost (`None`): it is counted as unpriced, never as free.

Which table entry applies is decided by the provider's kind: `anthropic` is Anthropic;
`openai-compatible` is OpenAI without a `base_url`, and otherwise whatever provider the
table knows at that URL (DeepSeek, OpenRouter, Groq …), and none for a local server. The
lookup is made once per model; each generation is then a multiplication.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mindloop.config import LlmConfig, ProviderConfig

# A price for (input tokens, output tokens), or None when the model has no known price.
Pricer = Callable[[int, int], float | None]


def _unpriced(_in: int, _out: int) -> float | None:
    return None


def _free(_in: int, _out: int) -> float | None:
    return 0.0


class PriceTable:
    """Prices of the models of one llm.yaml, looked up lazily and kept."""

    def __init__(self, llm: LlmConfig) -> None:
        self._llm = llm
        self._pricers: dict[tuple[str, str], Pricer] = {}

    def cost(
        self, provider: str, model: str, input_tokens: int | None, output_tokens: int | None
    ) -> float | None:
        """The cost in US dollars of one generation of `model` (its wire name or its key in
        llm.yaml) on the llm.yaml provider `provider`; None when unknown."""
        pricer = self._pricers.get((provider, model))
        if pricer is None:
            pricer = self._pricers[(provider, model)] = self._pricer(provider, model)
        if input_tokens is None and output_tokens is None:
            return 0.0 if pricer is _free else None
        return pricer(input_tokens or 0, output_tokens or 0)

    def _pricer(self, provider: str, model: str) -> Pricer:
        cfg = self._llm.providers.get(provider)
        if cfg is None:
            return _unpriced
        for key, info in cfg.models.items():
            if model in (key, info.name) and info.price is not None:
                return info.price.cost
        if cfg.kind == "mock":
            return _free
        return table_pricer(cfg, model)


def table_pricer(cfg: ProviderConfig, model: str) -> Pricer:
    """The `genai-prices` entry of `model` as served by `cfg`, or an unpriced pricer."""
    from genai_prices import Usage, calc_price  # ~0.3 s to import: only when pricing

    where: dict[str, Any] = {}
    if cfg.kind == "anthropic":
        where["provider_id"] = "anthropic"
    elif cfg.base_url is None:
        where["provider_id"] = "openai"
    else:
        where["provider_api_url"] = cfg.base_url
    try:
        calc_price(Usage(input_tokens=0, output_tokens=0), model, **where)
    except LookupError:
        return _unpriced

    def price(input_tokens: int, output_tokens: int) -> float | None:
        usage = Usage(input_tokens=input_tokens, output_tokens=output_tokens)
        return float(calc_price(usage, model, **where).total_price)

    return price
