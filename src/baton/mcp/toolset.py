"""An MCP server's tools as Baton tools: `MCPToolset` (what `server.tools(...)` returns) and
`MCPTool`, a `Tool` whose schema comes from the server.

An `MCPTool` is a `Tool`: the kernel runs it like any other (scopes, grounded ids, secret
handles, approval, timeout, redaction of errors, truncation of results, recorded with its
idempotency key). Only where its arguments are checked (the server's JSON schema, with
`jsonschema`) and what its function does (a `tools/call` on the server) differ. Its result is
tool output, quoted data for the model: never control state.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Mapping, Sequence
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import mcp_types
from pydantic import ValidationError
from pydantic_core import PydanticCustomError

from baton.approvals import PolicyLike
from baton.core.errors import ConfigError
from baton.core.messages import ToolSpec
from baton.mcp.client import MCPServer
from baton.tools import Tool, ToolContext, Toolset

IDEMPOTENCY_KEY = "idempotency_key"
"""The `_meta` key of a call's idempotency key (`<run_id>:<turn>:<step>`)."""

_NAME_BAD = re.compile(r"[^A-Za-z0-9_-]")


class MCPToolError(Exception):
    """The server ran the tool and reported an error (`isError`): the model reads it."""


async def _mcp_call(_baton_context: ToolContext) -> Any:
    """The signature every `MCPTool` declares to `Tool` (it takes the call's context only;
    the server's schema describes the arguments)."""
    raise RuntimeError("an MCPTool calls its server itself: this signature never runs")


class MCPTool(Tool):
    """One tool of an MCP server, called through the kernel like a native tool."""

    def __init__(
        self,
        server: MCPServer,
        remote: mcp_types.Tool,
        *,
        name: str,
        scopes: Sequence[str] = (),
        requires_approval: PolicyLike = False,
        approver_roles: Sequence[str] = (),
        dual: bool = False,
        approval_timeout_s: float | None = None,
        timeout_s: float | None = None,
        max_result_chars: int | None = None,
    ) -> None:
        super().__init__(
            _mcp_call,
            name=name,
            description=remote.description or remote.title or remote.name,
            scopes=scopes,
            timeout_s=timeout_s,
            requires_approval=requires_approval,
            approver_roles=approver_roles,
            dual=dual,
            approval_timeout_s=approval_timeout_s,
            max_result_chars=max_result_chars,
        )
        self.server = server
        self.remote_name = remote.name
        """The tool's name on its server (the model may see a prefixed or cleaned one)."""
        schema = dict(remote.input_schema or {"type": "object"})
        try:
            kind = jsonschema.validators.validator_for(schema)
            kind.check_schema(schema)
        except jsonschema.SchemaError as exc:
            raise ConfigError(
                f"{server.describe()}: tool {remote.name!r} has an input schema that is not "
                f"valid JSON schema ({exc.message}); leave it out with exclude=[...]"
            ) from None
        self._validator = kind(schema)
        self.parameters = schema
        self.spec = ToolSpec(name=name, description=self.description, parameters=schema)
        self.fn = self._call

    def validate(self, args: dict[str, Any]) -> dict[str, Any]:
        """Check the arguments against the server's JSON schema; raises pydantic's
        `ValidationError` (as a native tool's check does) naming each wrong argument."""
        errors = sorted(self._validator.iter_errors(args), key=lambda e: list(e.path))
        if errors:
            raise ValidationError.from_exception_data(
                self.name,
                [
                    {
                        "type": PydanticCustomError("mcp_schema", "{why}", {"why": e.message}),
                        "loc": tuple(e.absolute_path),
                        "input": e.instance,
                    }
                    for e in errors[:5]
                ],
            )
        return dict(args)

    async def _call(self, _baton_context: ToolContext, **arguments: Any) -> Any:
        result = await self.server.call_tool(self.remote_name, arguments, call_meta(_baton_context))
        if result.is_error:
            raise MCPToolError(
                f"{self.server.name}/{self.remote_name}: {_text(result.content) or 'failed'}"
            )
        return _value(result)


def call_meta(context: ToolContext) -> dict[str, Any]:
    """The `_meta` of a call: its idempotency key and the run's W3C trace context."""
    meta: dict[str, Any] = {IDEMPOTENCY_KEY: context.idempotency_key}
    if re.fullmatch(r"[0-9a-f]{32}", context.trace_id) and set(context.trace_id) != {"0"}:
        meta["traceparent"] = f"00-{context.trace_id}-{secrets.token_hex(8)}-01"
    return meta


def _text(blocks: Sequence[Any]) -> str:
    """The content blocks as text: text as is, a resource's text, others described."""
    parts = []
    for b in blocks:
        if isinstance(b, mcp_types.TextContent):
            parts.append(b.text)
        elif isinstance(b, mcp_types.EmbeddedResource):
            text = getattr(b.resource, "text", None)
            parts.append(text if text is not None else f"[resource {b.resource.uri}]")
        elif isinstance(b, mcp_types.ResourceLink):
            parts.append(f"[resource link {b.uri}]")
        else:
            parts.append(f"[{getattr(b, 'type', 'content')} {getattr(b, 'mime_type', '')}]")
    return "\n".join(parts)


def _value(result: mcp_types.CallToolResult) -> Any:
    """What the model reads: the text, the structured content, or both when the text is
    not just the structured content written out."""
    text = _text(result.content)
    structured = result.structured_content
    if structured is None:
        return text
    if not text:
        return structured
    if isinstance(structured, dict) and list(structured.values()) == [text]:
        return text  # a plain value the server wrapped (`{"result": text}`)
    try:
        if json.loads(text) == structured:
            return structured
    except ValueError:
        pass
    return {"structured_content": structured, "text": text}


class MCPToolset(Toolset):
    """The tools an agent takes from one MCP server (`server.tools(...)`), filtered and given
    Baton's policies (scopes, approval, timeout, result size)."""

    def __init__(
        self,
        server: MCPServer,
        *,
        include: Sequence[str] | None = None,
        exclude: Sequence[str] = (),
        scopes: Sequence[str] = (),
        tool_scopes: Mapping[str, Sequence[str]] | None = None,
        requires_approval: PolicyLike | Mapping[str, PolicyLike] = False,
        approver_roles: Sequence[str] = (),
        dual: bool = False,
        approval_timeout_s: float | None = None,
        timeout_s: float | None = None,
        max_result_chars: int | None = None,
        prefix: str = "",
    ) -> None:
        for label, names in (("include", include), ("exclude", exclude), ("scopes", scopes)):
            if isinstance(names, str):
                raise ConfigError(f"{server.describe()}: {label} takes a list of names")
        self.server = server
        self.name = server.name
        self.include = None if include is None else tuple(include)
        self.exclude = tuple(exclude)
        self.scopes = tuple(scopes)
        self.tool_scopes = {k: tuple(v) for k, v in (tool_scopes or {}).items()}
        self.requires_approval = requires_approval
        self.approver_roles = tuple(approver_roles)
        self.dual = dual
        self.approval_timeout_s = approval_timeout_s
        self.timeout_s = timeout_s
        self.max_result_chars = max_result_chars
        self.prefix = prefix
        self._version = -1
        self._tools: list[Tool] = []

    def __repr__(self) -> str:
        return f"MCPToolset({self.server.name!r})"

    async def list_tools(self) -> Sequence[Tool]:
        """The selected tools; built again only when the server's list changed."""
        version, listed = await self.server.list_tools()
        if version != self._version:
            self._tools = self._build(listed)
            self._version = version
        return self._tools

    async def aclose(self) -> None:
        """Close the server's connection (it opens again when next used)."""
        await self.server.aclose()

    def _build(self, listed: Sequence[mcp_types.Tool]) -> list[Tool]:
        offered = [t.name for t in listed]
        named = [*(self.include or ()), *self.exclude, *self.tool_scopes]
        if isinstance(self.requires_approval, Mapping):
            named += list(self.requires_approval)
        unknown = sorted({n for n in named if n not in offered})
        if unknown:
            raise ConfigError(
                f"{self.server.describe()} has no tool named {', '.join(map(repr, unknown))} "
                f"(its tools: {', '.join(offered) or 'none'}); fix the names given to "
                "server.tools(...)"
            )
        out: list[Tool] = []
        for remote in listed:
            if self.include is not None and remote.name not in self.include:
                continue
            if remote.name in self.exclude:
                continue
            policy = self.requires_approval
            if isinstance(policy, Mapping):
                policy = policy.get(remote.name, False)
            out.append(
                MCPTool(
                    self.server,
                    remote,
                    name=_NAME_BAD.sub("_", self.prefix + remote.name)[:64],
                    scopes=(*self.scopes, *self.tool_scopes.get(remote.name, ())),
                    requires_approval=policy,
                    approver_roles=self.approver_roles,
                    dual=self.dual,
                    approval_timeout_s=self.approval_timeout_s,
                    timeout_s=self.timeout_s,
                    max_result_chars=self.max_result_chars,
                )
            )
        return out
