"""`Agent`: an immutable, validated description of one specialist."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, get_origin

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from baton.approvals import ApprovalPolicy, approval_policy
from baton.compression import Compression, compression_setting
from baton.core.policies import ContextPolicy, parse_policy
from baton.guardrails import Guardrail
from baton.tools import Tool, Toolset

_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,47}$")


class Agent(BaseModel):
    """One specialist: what it owns, what it refuses, its tools and whom it may hand off to."""

    # defer_build: pydantic builds the validator on first use, not during `import baton`
    model_config = ConfigDict(
        frozen=True, arbitrary_types_allowed=True, extra="forbid", defer_build=True
    )

    name: str = Field(description="Unique name in the team; used in `transfer_to_<name>`.")
    instructions: str = Field(default="", description="System prompt of the agent.")
    description: str = Field(default="", description="What the agent owns (drives routing).")
    not_for: str = Field(default="", description="What it must not handle (drives hand-offs).")
    examples: Sequence[str] = Field(default=(), description="Utterances it should receive.")
    tools: Sequence[Tool] = Field(default=(), description="Tools only this agent may call.")
    toolsets: Sequence[Toolset] = Field(
        default=(),
        description="Tools it takes from elsewhere, listed by the team before each run (an MCP "
        "server's `server.tools(...)`); a toolset given in `tools` lands here.",
    )
    handoffs: Sequence[str] = Field(default=(), description="Agents it may pass the baton to.")
    model: Any = Field(
        default=None,
        description="A `Model`, a name ('local', 'openai:<name>'), or None for the team's model.",
    )
    max_iterations: int = Field(default=8, ge=1, description="Model calls per turn before a trip.")
    accepts: Sequence[str] | None = Field(
        default=None, description="Whitelist of state keys it receives; None accepts all."
    )
    context: ContextPolicy = Field(
        default_factory=ContextPolicy,
        description="What it sees of the conversation when it receives the baton: "
        "'structured' (default), 'recent(n)', 'summary' or 'full'.",
    )
    handoff_context: dict[str, ContextPolicy] = Field(
        default_factory=dict,
        description="Per-target policy for the hand-offs it makes; overrides the receiver's.",
    )
    transfer_back: bool = Field(
        default=False,
        description="Offer `transfer_back`: return the baton to whoever handed it over.",
    )
    history_tool: bool = Field(
        default=True,
        description="Offer `fetch_history` when it received the baton by hand-off.",
    )
    scopes: Sequence[str] = Field(
        default=(),
        description="Permission scopes it holds (`billing:read`, `billing:*`, `*`); a call to a "
        "tool needing a scope it lacks is refused (least privilege: none by default).",
    )
    approve_handoffs: dict[str, Any] = Field(
        default_factory=dict,
        description="Hand-offs that wait for a person's approval, per target: True, a function "
        "(payload fields, state) -> bool, or an ApprovalPolicy.",
    )
    output_type: Any = Field(
        default=None,
        description="A pydantic model (or list[Model], a TypedDict) its final answer must "
        "validate into: the answer is JSON, `RunResult.final` holds the typed value. None: "
        "free text.",
    )
    guardrails: Sequence[Any] = Field(
        default=(),
        description="Its own `Guardrail`s: they join the rules in force when it takes the "
        "baton, and stay in force for the rest of the run wherever the baton goes.",
    )
    compress_results: Any = Field(
        default=None,
        description="Compress its long tool results with a light model before its next model "
        "call (seed 001 §4.5): True, a threshold in tokens, or a `Compression`; None/False: "
        "off (default). A tool's own `compress` wins.",
    )
    handoff_guardrails: dict[str, Sequence[Any]] = Field(
        default_factory=dict,
        description="`Guardrail`s per hand-off target: they join the rules in force when the "
        "baton crosses that edge (this agent -> the target).",
    )

    @field_validator("name")
    @classmethod
    def _valid_name(cls, v: str) -> str:
        if not _NAME_RE.match(v):
            raise ValueError(
                "agent names must start with a letter or '_' and hold only letters, digits, "
                "'_' or '-' (at most 48 characters), because they become tool names"
            )
        return v

    @model_validator(mode="before")
    @classmethod
    def _split_toolsets(cls, data: Any) -> Any:
        """`tools=[server.tools(...), my_tool]`: the toolsets go to `toolsets`."""
        if isinstance(data, dict) and "tools" in data:
            items = list(data["tools"] or ())
            sets = [t for t in items if isinstance(t, Toolset)]
            if sets:
                data = {
                    **data,
                    "tools": [t for t in items if not isinstance(t, Toolset)],
                    "toolsets": [*data.get("toolsets", ()), *sets],
                }
        return data

    @field_validator("toolsets", mode="before")
    @classmethod
    def _toolsets(cls, v: Any) -> Any:
        items = tuple(v or ())
        for t in items:
            if not isinstance(t, Toolset):
                raise ValueError(f"{t!r} is not a toolset: pass server.tools(...) of an MCPServer")
        return items

    @field_validator("tools", mode="before")
    @classmethod
    def _coerce_tools(cls, v: Any) -> Any:
        items = list(v or ())
        out: list[Tool] = []
        for t in items:
            if isinstance(t, Tool):
                out.append(t)
            elif callable(t):
                out.append(Tool(t))
            else:
                raise ValueError(f"{t!r} is not a tool: decorate a function with @tool")
        names = [t.name for t in out]
        dupes = {n for n in names if names.count(n) > 1}
        if dupes:
            raise ValueError(f"duplicate tool names {sorted(dupes)}: give each tool its own name")
        return tuple(out)

    @field_validator("scopes", mode="before")
    @classmethod
    def _scopes(cls, v: Any) -> Any:
        if isinstance(v, str):
            raise ValueError("scopes takes a list of scope names, e.g. ['billing:read']")
        return tuple(v or ())

    @field_validator("output_type")
    @classmethod
    def _output_type(cls, v: Any) -> Any:
        if v is None or isinstance(v, type) or get_origin(v) is not None:
            return v
        raise ValueError(
            f"output_type takes a type, such as a pydantic BaseModel subclass, not {v!r}"
        )

    @field_validator("guardrails", mode="before")
    @classmethod
    def _guardrails(cls, v: Any) -> Any:
        return _rules(v, "guardrails")

    @field_validator("compress_results", mode="before")
    @classmethod
    def _compress_results(cls, v: Any) -> Compression | None:
        try:
            found = compression_setting(v, "compress_results")
        except Exception as exc:  # a ConfigError: pydantic reports a ValueError
            raise ValueError(str(exc)) from exc
        return found if isinstance(found, Compression) else None

    def compression_for(self, tool: Tool) -> Compression | None:
        """How `tool`'s long results are compressed for this agent (None: they are not)."""
        own = tool.compress
        if own is None:
            found: Compression | None = self.compress_results
            return found
        return own if isinstance(own, Compression) else None

    @field_validator("handoff_guardrails", mode="before")
    @classmethod
    def _handoff_guardrails(cls, v: Any) -> Any:
        if not isinstance(v, dict):
            raise ValueError("handoff_guardrails takes a dict: target agent -> [Guardrail, ...]")
        return {str(t): _rules(rules, f"handoff_guardrails[{t!r}]") for t, rules in v.items()}

    @field_validator("approve_handoffs", mode="before")
    @classmethod
    def _approve_handoffs(cls, v: Any) -> Any:
        out: dict[str, ApprovalPolicy] = {}
        for target, policy in dict(v or {}).items():
            found = approval_policy(policy)
            if found is not None:
                out[str(target)] = found
        return out

    def handoff_approval(self, target: str) -> ApprovalPolicy | None:
        """The approval policy of hand-offs to `target` (None: they need no sign-off)."""
        found = self.approve_handoffs.get(target)
        return found if isinstance(found, ApprovalPolicy) else None

    def missing_scopes(self, tool: Tool) -> tuple[str, ...]:
        """The scopes `tool` needs that this agent does not hold."""
        return tuple(s for s in tool.scopes if not _grants(self.scopes, s))

    @field_validator("examples", "handoffs", mode="before")
    @classmethod
    def _tuple_of_str(cls, v: Any) -> Any:
        if isinstance(v, str):
            return (v,)
        return tuple(v or ())

    @field_validator("accepts", mode="before")
    @classmethod
    def _accepts(cls, v: Any) -> Any:
        if v is None:
            return None
        return tuple([v] if isinstance(v, str) else v)

    @field_validator("context", mode="before")
    @classmethod
    def _context(cls, v: Any) -> Any:
        return parse_policy(v)

    @field_validator("handoff_context", mode="before")
    @classmethod
    def _handoff_context(cls, v: Any) -> Any:
        return {str(k): parse_policy(p) for k, p in dict(v or {}).items()}

    def tool(self, name: str) -> Tool | None:
        """The agent's tool called `name`, or None."""
        for t in self.tools:
            if t.name == name:
                return t
        return None


def _rules(v: Any, where: str) -> tuple[Guardrail, ...]:
    """A list of `Guardrail`s as a tuple; anything else is a clear error."""
    if isinstance(v, Guardrail):
        raise ValueError(f"{where} takes a list of Guardrail objects: wrap {v.name!r} in [...]")
    items = tuple(v or ())
    for g in items:
        if not isinstance(g, Guardrail):
            raise ValueError(f"{where}: {g!r} is not a Guardrail; build one with Guardrail(...)")
    return items


def _grants(held: Sequence[str], needed: str) -> bool:
    """True when a held scope covers `needed`: equal, `*`, or a `prefix:*` wildcard."""
    for h in held:
        if h == needed or h == "*" or (h.endswith(":*") and needed.startswith(h[:-1])):
            return True
    return False
