"""Configuration of an rtws: `.minds/team.yaml`, `.minds/llm.yaml` and the optional
`.minds/mcp.yaml` as pydantic models.

`load_config(rtws)` returns a resolved `Config` or raises `ConfigError`; `check_config`
lists every problem as `file:line: key.path: message`.
"""

from mindloop.config.caps import CapLimits, CapsConfig, ModelPrice
from mindloop.config.config import Config
from mindloop.config.llm import LlmConfig, ModelInfo, ProviderConfig, ProviderKind
from mindloop.config.loader import (
    LLM_FILE,
    TEAM_FILE,
    check_config,
    load_config,
    located_problem,
    tool_selection_problems,
)
from mindloop.config.loop import LoopConfig
from mindloop.config.mcp import (
    MCP_FILE,
    McpConfig,
    McpServerConfig,
    MissingEnvVar,
    expand_env,
)
from mindloop.config.model_params import (
    AnthropicParams,
    AnthropicThinking,
    GeneralParams,
    ModelParams,
    OpenAIParams,
    merge_model_params,
)
from mindloop.config.problems import ConfigError, ConfigProblem
from mindloop.config.team import (
    DEFAULT_FBR_EFFORT,
    DEFAULT_TOOLSETS,
    MemberConfig,
    MemberSpec,
    TeamConfig,
    TeamSpec,
)
from mindloop.config.yaml_lines import YamlDoc, load_yaml

__all__ = [
    "DEFAULT_FBR_EFFORT",
    "DEFAULT_TOOLSETS",
    "LLM_FILE",
    "MCP_FILE",
    "TEAM_FILE",
    "AnthropicParams",
    "AnthropicThinking",
    "CapLimits",
    "CapsConfig",
    "Config",
    "ConfigError",
    "ConfigProblem",
    "GeneralParams",
    "LlmConfig",
    "LoopConfig",
    "McpConfig",
    "McpServerConfig",
    "MemberConfig",
    "MemberSpec",
    "MissingEnvVar",
    "ModelInfo",
    "ModelParams",
    "ModelPrice",
    "OpenAIParams",
    "ProviderConfig",
    "ProviderKind",
    "TeamConfig",
    "TeamSpec",
    "YamlDoc",
    "check_config",
    "expand_env",
    "load_config",
    "load_yaml",
    "located_problem",
    "merge_model_params",
    "tool_selection_problems",
]
