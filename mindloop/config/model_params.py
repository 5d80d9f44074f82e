"""`model_params` / `fbr_model_params`: generation parameters per provider namespace.

Shape (dominds.md §2): top-level `max_tokens`, and namespaces `general` (only
`max_tokens`), `openai`, `anthropic`. `max_tokens` and `general.max_tokens` mean the same
thing, so setting both is an error rather than a silent precedence rule. FBR drives use
`merge_model_params(model_params, fbr_model_params)`: a deep merge over every namespace,
including `general` (DESIGN.md §4 decision 3).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

STRICT = ConfigDict(extra="forbid", strict=True, frozen=True)


class GeneralParams(BaseModel):
    """Provider-neutral parameters."""

    model_config = STRICT

    max_tokens: int | None = Field(default=None, ge=1)


class OpenAIParams(BaseModel):
    """Chat Completions parameters, passed through by the openai-compatible adapter."""

    model_config = STRICT

    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, ge=1)
    top_p: float | None = Field(default=None, ge=0, le=1)
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)
    seed: int | None = None
    stop: str | list[str] | None = None
    logit_bias: dict[str, int] | None = None
    user: str | None = None
    reasoning_effort: str | None = None
    verbosity: Literal["low", "medium", "high"] | None = None
    parallel_tool_calls: bool | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = Field(default=None, ge=0, le=20)


class AnthropicThinking(BaseModel):
    """Extended thinking, mirroring the Messages API `thinking` parameter."""

    model_config = STRICT

    type: Literal["enabled", "disabled"] = "enabled"
    budget_tokens: int | None = Field(default=None, ge=1024)

    @model_validator(mode="after")
    def _budget_when_enabled(self) -> AnthropicThinking:
        if self.type == "enabled" and self.budget_tokens is None:
            raise PydanticCustomError(
                "config",
                "thinking enabled needs budget_tokens (an integer >= 1024)",
                {"key": "budget_tokens"},
            )
        return self


class AnthropicParams(BaseModel):
    """Messages API parameters, passed through by the anthropic adapter."""

    model_config = STRICT

    temperature: float | None = Field(default=None, ge=0, le=1)
    max_tokens: int | None = Field(default=None, ge=1)
    top_p: float | None = Field(default=None, ge=0, le=1)
    top_k: int | None = Field(default=None, ge=0)
    stop_sequences: list[str] | None = None
    thinking: AnthropicThinking | None = None


NAMESPACES: tuple[str, ...] = ("general", "openai", "anthropic")

# Namespaces of the anchor's `model_param_options` that mindloop has no provider kind for
# (the FBR design doc's own example uses `codex`): a precise error instead of a bare
# "unknown key", naming where the values belong.
FOREIGN_NAMESPACES: dict[str, str] = {
    "codex": "mindloop has no codex provider kind; put these parameters under openai "
    "(used by openai-compatible providers) or anthropic",
}


class ModelParams(BaseModel):
    """Generation parameters of a member (or of its FBR drives)."""

    model_config = STRICT

    max_tokens: int | None = Field(default=None, ge=1)
    general: GeneralParams = Field(default_factory=lambda: GeneralParams())
    openai: OpenAIParams = Field(default_factory=lambda: OpenAIParams())
    anthropic: AnthropicParams = Field(default_factory=lambda: AnthropicParams())

    @model_validator(mode="before")
    @classmethod
    def _foreign_namespace(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key, why in FOREIGN_NAMESPACES.items():
                if key in data:
                    raise PydanticCustomError("config", why, {"key": key})
        return data

    @field_validator("general")
    @classmethod
    def _one_max_tokens(cls, general: GeneralParams, info: ValidationInfo) -> GeneralParams:
        # A field validator (not a model one) so this is reported alongside other errors.
        if general.max_tokens is not None and info.data.get("max_tokens") is not None:
            raise PydanticCustomError(
                "config",
                "do not set both max_tokens and general.max_tokens",
                {"key": "max_tokens"},
            )
        return general

    def effective_max_tokens(self) -> int | None:
        """The provider-neutral output limit, wherever it was written."""
        return self.max_tokens if self.max_tokens is not None else self.general.max_tokens

    def namespace(self, name: str) -> dict[str, Any]:
        """The set (non-None) values of one namespace."""
        part: BaseModel = getattr(self, name)
        return part.model_dump(exclude_none=True)

    def as_request_params(self) -> dict[str, Any]:
        """The dict carried by `GenerationRequest.params`; unset values are dropped.

        `max_tokens` is always present (None when unset) and is mirrored into
        `general.max_tokens`, so adapters may read either.
        """
        out: dict[str, Any] = {"max_tokens": self.effective_max_tokens()}
        for name in NAMESPACES:
            out[name] = self.namespace(name)
        if out["max_tokens"] is not None:
            out["general"]["max_tokens"] = out["max_tokens"]
        return out


def _normalized(params: ModelParams) -> dict[str, Any]:
    """Plain data with the one max_tokens leaf held at the top level."""
    data: dict[str, Any] = {"max_tokens": params.effective_max_tokens()}
    for name in NAMESPACES:
        data[name] = params.namespace(name)
    data["general"].pop("max_tokens", None)
    return data


def merge_model_params(base: ModelParams, over: ModelParams) -> ModelParams:
    """Deep-merge `over` onto `base`: every set leaf of `over` wins, in every namespace.

    Leaves are parameters (a `stop` list, a `logit_bias` map, `thinking` are each one
    value); `max_tokens` and `general.max_tokens` are the same leaf.
    """
    merged = _normalized(base)
    for key, value in _normalized(over).items():
        if isinstance(value, dict):
            merged[key] = {**merged[key], **value}
        elif value is not None:
            merged[key] = value
    return ModelParams.model_validate(merged)
