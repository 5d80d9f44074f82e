"""`.minds/team.yaml`: the roster, as written (`TeamSpec`) and as resolved (`TeamConfig`).

Members inherit every key they do not set from `member_defaults`. To point each error at
the line the user actually wrote, validation happens in two steps: every mapping
(`member_defaults` and each member) is validated on its own as a `MemberSpec` where every
key is optional; then `resolve_team` merges defaults and member into a `MemberConfig`,
where only missing required keys can still go wrong.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from pathlib import PurePosixPath
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from mindloop.config.caps import CapsConfig
from mindloop.config.loop import LoopConfig
from mindloop.config.model_params import ModelParams, merge_model_params
from mindloop.config.problems import KeyPath, render_value
from mindloop.i18n import Lang

MEMBER_CONFIG = ConfigDict(extra="forbid", strict=True, populate_by_name=True)

DEFAULT_FBR_EFFORT = 3
MAX_FBR_EFFORT = 100
DEFAULT_TOOLSETS: tuple[str, ...] = ("fs", "shell", "control")
# read_dirs/write_dirs may never grant these: their state is encapsulated and reachable only
# through dedicated tools (DESIGN.md §3).
RESERVED_TOP_DIRS: dict[str, str] = {
    ".minds": "team configuration and memory, changed only by dedicated tools",
    ".mindloop": "runtime state, owned by the runtime",
}
REQUIRED_MEMBER_KEYS: tuple[str, ...] = ("provider", "model")


def default_persona(member_id: str) -> str:
    return f".minds/team/{member_id}/persona.md"


def check_fbr_effort(value: object) -> int:
    """`fbr-effort` is an integer 0..100; bools, floats and strings are not integers."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_FBR_EFFORT:
        return value
    raise PydanticCustomError(
        "fbr_effort",
        "must be an integer in 0..100, got {got}",
        {"got": render_value(value)},
    )


def _parts(entry: str) -> list[str]:
    return [p for p in PurePosixPath(entry.replace("\\", "/")).parts if p not in ("", ".")]


def check_dir_entry(entry: str, *, grants: bool) -> str:
    """A directory ACL entry: rtws-relative, not escaping it; grants skip reserved state."""
    if not entry.strip():
        raise PydanticCustomError("config", "must not be empty")
    if entry.startswith(("/", "\\")) or (len(entry) > 1 and entry[1] == ":"):
        raise PydanticCustomError(
            "config", "must be a path relative to the rtws, got {got}", {"got": render_value(entry)}
        )
    parts = _parts(entry)
    if ".." in parts:
        raise PydanticCustomError(
            "config",
            "must stay inside the rtws ('..' is not allowed), got {got}",
            {"got": render_value(entry)},
        )
    if not grants or not parts:
        return entry
    top = parts[0].casefold()
    if top in RESERVED_TOP_DIRS:
        raise PydanticCustomError(
            "config",
            "{entry} cannot be granted: {top}/ is encapsulated state ({why})",
            {"entry": entry, "top": parts[0], "why": RESERVED_TOP_DIRS[top]},
        )
    if any(p.casefold().endswith(".tsk") for p in parts):
        raise PydanticCustomError(
            "config",
            "{entry} cannot be granted: *.tsk task packages are encapsulated state, "
            "read with recall_taskdoc and changed with change_mind",
            {"entry": entry},
        )
    return entry


def check_tool_name(name: str) -> str:
    """A toolset or tool selector: a name, '*' (all) or '!name' (exclude)."""
    bare = name.strip().removeprefix("!")
    if not bare or bare != bare.strip() or any(c.isspace() for c in bare):
        raise PydanticCustomError(
            "config", "must be a name, '*' or '!name', got {got}", {"got": render_value(name)}
        )
    return name


_MODULE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def check_module_name(name: str) -> str:
    """A `python_tools` entry: a dotted Python module name (`myproject.tools`)."""
    if not _MODULE_NAME.match(name):
        raise PydanticCustomError(
            "config",
            "must be a dotted Python module name such as myproject.tools, got {got}",
            {"got": render_value(name)},
        )
    return name


def check_approval_name(name: str) -> str:
    """An `approval_required` entry: the name of one tool or one toolset, as written in
    `tools`/`toolsets` but without '*' or '!' (an approval list only adds)."""
    if not name or name != name.strip() or any(c.isspace() for c in name) or name[0] in "!*":
        raise PydanticCustomError(
            "config",
            "must be the name of a tool or a toolset (no '*', no '!'), got {got}",
            {"got": render_value(name)},
        )
    return name


GrantDir = Annotated[str, AfterValidator(lambda v: check_dir_entry(v, grants=True))]
DenyDir = Annotated[str, AfterValidator(lambda v: check_dir_entry(v, grants=False))]
ToolName = Annotated[str, AfterValidator(check_tool_name)]
ModuleName = Annotated[str, AfterValidator(check_module_name)]
ApprovalName = Annotated[str, AfterValidator(check_approval_name)]


class MemberSpec(BaseModel):
    """One member mapping (or `member_defaults`) as written: every key optional."""

    model_config = MEMBER_CONFIG

    name: str | None = None
    provider: str | None = None
    model: str | None = None
    model_params: ModelParams | None = None
    fbr_effort: Any = Field(default=None, validation_alias=AliasChoices("fbr-effort", "fbr_effort"))
    fbr_model_params: ModelParams | None = None
    toolsets: list[ToolName] | None = None
    tools: list[ToolName] | None = None
    read_dirs: list[GrantDir] | None = None
    write_dirs: list[GrantDir] | None = None
    no_read_dirs: list[DenyDir] | None = None
    no_write_dirs: list[DenyDir] | None = None
    persona: str | None = None
    gofor: str | None = None
    hidden: bool | None = None
    # Calls of these tools (or of any tool of these toolsets) wait for the human's
    # approval before they run (`dialogs.approvals`).
    approval_required: list[ApprovalName] | None = None

    @field_validator("fbr_effort", mode="plain")
    @classmethod
    def _effort(cls, value: object) -> int | None:
        return None if value is None else check_fbr_effort(value)

    @field_validator("persona")
    @classmethod
    def _persona(cls, path: str | None) -> str | None:
        return None if path is None else check_dir_entry(path, grants=False)

    def set_keys(self) -> dict[str, Any]:
        """The keys this mapping sets, by field name. A key written as null sets nothing
        (it is reported as an error; it must not also erase what member_defaults set)."""
        return {k: v for k in self.model_fields_set if (v := getattr(self, k)) is not None}


class MemberConfig(BaseModel):
    """A resolved member: its own keys over `member_defaults` over built-in defaults."""

    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)

    id: str
    name: str = ""
    provider: str
    model: str
    model_params: ModelParams = Field(default_factory=lambda: ModelParams())
    fbr_effort: int = Field(
        default=DEFAULT_FBR_EFFORT, validation_alias=AliasChoices("fbr_effort", "fbr-effort")
    )
    fbr_model_params: ModelParams = Field(default_factory=lambda: ModelParams())
    toolsets: list[str] = Field(default_factory=lambda: list(DEFAULT_TOOLSETS))
    tools: list[str] = Field(default_factory=list)
    read_dirs: list[str] = Field(default_factory=list)
    write_dirs: list[str] = Field(default_factory=list)
    no_read_dirs: list[str] = Field(default_factory=list)
    no_write_dirs: list[str] = Field(default_factory=list)
    persona: str = ""
    gofor: str | None = None
    hidden: bool = False
    approval_required: list[str] = Field(default_factory=list)

    @field_validator("fbr_effort", mode="plain")
    @classmethod
    def _effort(cls, value: object) -> int:
        return check_fbr_effort(value)

    @model_validator(mode="after")
    def _derived_defaults(self) -> MemberConfig:
        if not self.name:
            self.name = self.id
        if not self.persona:
            self.persona = default_persona(self.id)
        return self

    def fbr_params(self) -> ModelParams:
        """Params for FBR generations: `fbr_model_params` deep-merged over `model_params`."""
        return merge_model_params(self.model_params, self.fbr_model_params)


class TeamSpec(BaseModel):
    """team.yaml as written."""

    model_config = ConfigDict(extra="forbid", strict=True)

    member_defaults: MemberSpec = Field(default_factory=lambda: MemberSpec.model_validate({}))
    default_responder: str | None = None
    members: dict[str, MemberSpec | None] = Field(default_factory=dict)
    # The language of runtime-written prompts and headings (decision 10): en or zh.
    work_language: Lang = "en"
    caps: CapsConfig = Field(default_factory=CapsConfig)  # spending caps (`config.caps`)
    # Modules whose `@tool` functions become toolsets named after the module.
    python_tools: list[ModuleName] = Field(default_factory=list)
    loop: LoopConfig = Field(default_factory=LoopConfig)  # the work loop (`config.loop`)


class TeamConfig(BaseModel):
    """The resolved team: every member complete, `default_responder` naming one of them."""

    model_config = ConfigDict(extra="forbid")

    member_defaults: MemberSpec = Field(default_factory=lambda: MemberSpec.model_validate({}))
    members: dict[str, MemberConfig]
    default_responder: str
    work_language: Lang = "en"
    caps: CapsConfig = Field(default_factory=CapsConfig)
    python_tools: list[str] = Field(default_factory=list)
    loop: LoopConfig = Field(default_factory=LoopConfig)

    @model_validator(mode="after")
    def _responder_exists(self) -> TeamConfig:
        if self.default_responder not in self.members:
            known = ", ".join(self.members) or "(none)"
            raise ValueError(
                f"default_responder {self.default_responder!r} is not a member; members: {known}"
            )
        return self


# ---------------------------------------------------------------- resolution

Issue = tuple[KeyPath, str]


def merged_member(member_id: str, defaults: MemberSpec, own: MemberSpec) -> dict[str, Any]:
    """Defaults then the member's own keys; `model_params` deep-merged, lists replaced."""
    data = defaults.set_keys()
    for key, value in own.set_keys().items():
        base = data.get(key)
        if key in ("model_params", "fbr_model_params") and base is not None:
            value = merge_model_params(base, value)
        data[key] = value
    data["id"] = member_id
    return data


def source_path(member_id: str, own: MemberSpec, key: str, spelled: str | None = None) -> KeyPath:
    """Where a resolved key came from: the member itself or member_defaults."""
    yaml_key = spelled or key
    if key in own.set_keys():
        return ("members", member_id, yaml_key)
    return ("member_defaults", yaml_key)


def resolve_team(
    spec: TeamSpec, known_ids: Collection[str] = (), *, report_missing: bool = True
) -> tuple[TeamConfig | None, list[Issue]]:
    """Merge defaults into members; report missing required keys and a bad responder.

    `known_ids` are further member ids that exist but failed validation (so they are not
    in `spec`); they count as members for `default_responder`. `report_missing=False`
    when `member_defaults` itself was invalid: members then cannot be judged incomplete.
    """
    issues: list[Issue] = []
    all_ids = list(dict.fromkeys([*known_ids, *spec.members]))
    members: dict[str, MemberConfig] = {}
    for member_id, own in spec.members.items():
        own = own or MemberSpec.model_validate({})
        data = merged_member(member_id, spec.member_defaults, own)
        missing = [k for k in REQUIRED_MEMBER_KEYS if data.get(k) is None]
        for key in missing if report_missing else ():
            issues.append(
                (
                    ("members", member_id),
                    f"missing {key}: set it on the member or in member_defaults",
                )
            )
        if not missing:
            members[member_id] = MemberConfig.model_validate(data)
    if not all_ids:
        issues.append((("members",), "no members: add at least one member under members"))
    responder = spec.default_responder
    if responder is None:
        visible = [mid for mid, m in members.items() if not m.hidden]
        responder = visible[0] if visible else next(iter(all_ids), None)
    elif responder not in all_ids:
        known = ", ".join(all_ids) or "(none)"
        issues.append((("default_responder",), f"{responder!r} is not a member (members: {known})"))
    router = spec.loop.router.member
    if router is not None and router not in all_ids:
        known = ", ".join(all_ids) or "(none)"
        issues.append(
            (("loop", "router", "member"), f"{router!r} is not a member (members: {known})")
        )
    if issues or responder is None or len(members) < len(all_ids):
        return None, issues
    return TeamConfig(
        member_defaults=spec.member_defaults,
        members=members,
        default_responder=responder,
        work_language=spec.work_language,
        caps=spec.caps,
        python_tools=list(spec.python_tools),
        loop=spec.loop,
    ), issues
