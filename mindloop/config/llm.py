"""`.minds/llm.yaml`: the providers a team may use, and their models.

A provider's name is its key under `providers`; a model's wire name defaults to its key.
API keys never live in this file: `api_key_env` names the environment variable that holds
the key, and anything shaped like a key is rejected with that advice.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from mindloop.config.caps import ModelPrice
from mindloop.config.problems import looks_like_secret, render_value

ProviderKind = Literal["openai-compatible", "anthropic", "mock"]

ENV_VAR_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
LLM_CONFIG = ConfigDict(extra="forbid", strict=True)

# How long one attempt of a generation may take, in seconds. `timeout` bounds only the gap
# between bytes, which keep-alives reset; these bound the attempt itself. Reasoning models
# can think for minutes before their first token, hence the generous defaults.
DEFAULT_FIRST_CONTENT_DEADLINE = 300.0
DEFAULT_GENERATION_DEADLINE = 1800.0
# The longest wait a server's `Retry-After` can impose before a retry.
DEFAULT_RETRY_AFTER_CAP = 60.0


class ModelInfo(BaseModel):
    """One model offered by a provider."""

    model_config = LLM_CONFIG

    name: str = ""  # the model name sent on the wire; "" until filled from the key
    context_length: int = Field(gt=0)
    max_output_tokens: int | None = Field(default=None, gt=0)
    # Overrides the price table (genai-prices) for this model (see `config.caps`).
    price: ModelPrice | None = None


class ProviderConfig(BaseModel):
    """One entry of `providers`."""

    model_config = LLM_CONFIG

    name: str
    kind: ProviderKind
    base_url: str | None = None
    api_key_env: str | None = None
    models: dict[str, ModelInfo] = Field(default_factory=dict)
    max_retries: int = Field(default=5, ge=1)
    timeout: float = Field(default=120.0, gt=0)
    first_content_deadline: float = Field(default=DEFAULT_FIRST_CONTENT_DEADLINE, gt=0)
    generation_deadline: float = Field(default=DEFAULT_GENERATION_DEADLINE, gt=0)
    retry_after_cap: float = Field(default=DEFAULT_RETRY_AFTER_CAP, ge=0)
    concurrency: int = Field(default=8, ge=1)
    script_dir: str | None = None

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if looks_like_secret(value):
            raise PydanticCustomError(
                "config",
                "this looks like an API key; never put keys in llm.yaml: set api_key_env to "
                "the NAME of an environment variable (e.g. OPENAI_API_KEY) and export the key "
                "there",
            )
        if not ENV_VAR_NAME.match(value):
            raise PydanticCustomError(
                "config",
                "must be the name of an environment variable (letters, digits, '_'), "
                "e.g. OPENAI_API_KEY",
            )
        return value

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^https?://[^\s/]+", value):
            raise PydanticCustomError(
                "config", "must be an http(s) URL, got {got}", {"got": render_value(value)}
            )
        return value

    @model_validator(mode="after")
    def _kind_rules(self) -> ProviderConfig:
        if self.script_dir is not None and self.kind != "mock":
            raise PydanticCustomError(
                "config", "script_dir applies only to kind: mock", {"key": "script_dir"}
            )
        if self.first_content_deadline > self.generation_deadline:
            raise PydanticCustomError(
                "config",
                "first_content_deadline ({first}) is longer than generation_deadline "
                "({total}): the first content must come within the whole attempt's deadline",
                {
                    "key": "first_content_deadline",
                    "first": f"{self.first_content_deadline:g}",
                    "total": f"{self.generation_deadline:g}",
                },
            )
        if self.kind == "mock" and self.script_dir is None:
            self.script_dir = ".minds/mock"
        for key, info in self.models.items():
            if not info.name:
                info.name = key
        return self


class LlmConfig(BaseModel):
    """llm.yaml: providers by name."""

    model_config = LLM_CONFIG

    providers: dict[str, ProviderConfig] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _names_from_keys(cls, data: Any) -> Any:
        """A provider's name is its key; fill it in so entries need not repeat it."""
        if isinstance(data, dict) and isinstance(data.get("providers"), dict):
            providers = {}
            for key, entry in data["providers"].items():
                if isinstance(entry, dict) and "name" not in entry:
                    entry = {"name": key, **entry}
                providers[key] = entry
            data = {**data, "providers": providers}
        return data
