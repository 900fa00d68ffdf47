"""`@tool`: turn a plain (sync or async) function into a tool an agent can call."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_type_hints, overload

from pydantic import (
    BaseModel,
    ConfigDict,
    PydanticUserError,
    TypeAdapter,
    ValidationError,
    create_model,
)

from baton.approvals import ApprovalPolicy, PolicyLike, approval_policy
from baton.cancellation import CancelledItself, awaited, cancelled_from_outside, sync_call
from baton.compression import Compression, CompressLike, compression_setting
from baton.core.data import Data
from baton.core.errors import ConfigError
from baton.core.interrupt import GraphInterrupt
from baton.core.jsontext import encoder
from baton.core.messages import ToolSpec
from baton.core.text import clean_text
from baton.tool_exec import ProcessFailed, run_in_process, tool_threads

DEFAULT_MAX_RESULT_CHARS = 1500
"""Tool results longer than this are truncated with a visible marker (seed 001 §4.5)."""

Isolation = Literal["thread", "process"]
"""Where a sync tool runs: a pool thread (default) or a child process killed on timeout."""

Citer = Callable[[Any], Sequence[Mapping[str, Any]]]
"""A tool's `cites`: the citations (JSON objects) in a value the tool returned."""

_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")


@dataclass(frozen=True)
class ToolContext:
    """What a tool may know about the call it serves. Declare a parameter annotated
    `ToolContext` to receive it (it is not shown to the model), or call `tool_context()`."""

    idempotency_key: str
    """`<run_id>:<turn>:<step>`: the same on every attempt of this call, including a re-run
    after a crash. Use it to make a side effect exactly-once (e.g. as the payment provider's
    idempotency key, or the primary key of the row the tool writes)."""
    run_id: str
    session_id: str
    agent: str
    call_id: str
    user_id: str | None = None
    """The user the session belongs to (a tool can check the caller with it)."""
    state: Mapping[str, Any] = field(default_factory=dict)
    """The session's slots when the call started (a copy)."""
    scopes: tuple[str, ...] = ()
    """The scopes of the agent that made the call."""
    provenance: Mapping[str, str] = field(default_factory=dict)
    """Where each slot of `state` came from: `tool` or `kernel` (verified), `user` (the
    user's own words); a slot missing here is not verified. Check it before trusting a slot
    for a decision (`baton.runtime.control`)."""
    trace_id: str = ""
    """The run's W3C trace id (32 hex characters), for a tool that carries the trace on."""
    references: tuple[Mapping[str, Any], ...] = ()
    """The citations shown to the calling agent, in the order of its view (`[1]` is the
    first): those of the hand-off it received, or those the stages or workers before it
    cited. Kernel-held (`baton.runtime.citations`), never written by a model."""


_CONTEXT: contextvars.ContextVar[ToolContext | None] = contextvars.ContextVar(
    "baton_tool_context", default=None
)


def tool_context() -> ToolContext | None:
    """The context of the tool call being served, or None outside a tool call."""
    return _CONTEXT.get()


@dataclass(frozen=True)
class ToolOutcome:
    """What a tool call produced, as the model will read it."""

    ok: bool
    content: str
    error: str | None = None
    truncated: bool = False
    raw_chars: int = 0
    value: Any = None
    fatal: bool = False
    """The tool tried to end the process (`SystemExit`): the run stops `failed`."""


def _json_default(obj: Any) -> Any:
    if isinstance(obj, (BaseModel, Data)):
        return obj.model_dump(mode="json")
    if isinstance(obj, (set, frozenset)):
        return sorted(obj, key=str)
    return str(obj)


_to_json = encoder()
_result_json = encoder(_json_default)


def error_content(message: str) -> str:
    """The JSON text a model receives for a failed call."""
    return _to_json({"ok": False, "error": message})


class UnserialisableResult(ValueError):
    """A tool's return value cannot be written as JSON; the message says why."""


def _describe(exc: BaseException) -> str:
    """`<Type>: <message>`, short, even when the exception's own `__str__` fails."""
    try:
        detail = str(exc)
    except Exception:
        detail = "(its message cannot be shown)"
    detail = clean_text(detail)
    if len(detail) > 200:
        detail = detail[:200] + "..."
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__


def _serialise(value: Any) -> str:
    try:
        return _result_json(value)
    except RecursionError:
        why = "it is nested too deeply (or contains itself)"
    except ValueError as exc:
        if "ircular reference" not in str(exc):
            why = _describe(exc)
        else:
            why = "it contains itself (a circular reference)"
    except Exception as exc:  # a `__str__`, `model_dump` or key that fails
        why = f"converting a part of it failed ({_describe(exc)})"
    raise UnserialisableResult(why)


def _annotated(fn: Callable[..., Any]) -> Any:
    """What carries `fn`'s annotations: the function itself, a partial's function, or a
    callable object's `__call__`."""
    if inspect.isroutine(fn) or isinstance(fn, type):
        return fn
    if isinstance(fn, functools.partial):
        return _annotated(fn.func)
    return type(fn).__call__  # a callable object (checked callable before)


def _schema_error(ann: Any) -> Exception | None:
    """Why pydantic cannot validate `ann` or give its JSON schema, or None."""
    try:
        TypeAdapter(ann).json_schema()
    except (PydanticUserError, TypeError) as exc:
        return exc
    return None


def _short(value: Any) -> str:
    """`repr(value)`, cut to 60 characters (it goes into an error message)."""
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 60 else text[:57] + "..."


def _type_name(ann: Any) -> str:
    """How an annotation reads in an error message (`Lock`, `list[Widget]`)."""
    return ann.__qualname__ if isinstance(ann, type) else repr(ann)


def render_result(value: Any, limit: int) -> tuple[str, bool, int]:
    """Serialise a tool's return value and truncate it: (text, truncated, original length).

    Raises `UnserialisableResult` (saying why) for a value that cannot be written as JSON: one
    that contains itself, is nested too deeply, or has a part whose conversion raises."""
    text = clean_text(value if isinstance(value, str) else _serialise(value))
    n = len(text)
    if limit > 0 and n > limit:
        return text[:limit] + f"\n...[truncated: showing {limit} of {n} characters]", True, n
    return text, False, n


def _docstring_parts(doc: str | None) -> tuple[str, dict[str, str]]:
    """Description and per-argument help from a Google- or reST-style docstring."""
    if not doc:
        return "", {}
    doc = inspect.cleandoc(doc)
    arg_help: dict[str, str] = {}
    desc_lines: list[str] = []
    section: str | None = None  # None: description; "args"; "other": a section left out
    current: str | None = None
    for line in doc.splitlines():
        stripped = line.strip()
        rest = re.match(r"^:param\s+(\w+):\s*(.*)$", stripped)
        if rest:
            arg_help[rest.group(1)] = rest.group(2)
            continue
        if stripped.lower() in ("args:", "arguments:", "parameters:"):
            section = "args"
            continue
        if stripped.lower() in ("returns:", "raises:", "yields:", "examples:"):
            section = "other"  # header and body are not part of the description
            continue
        if section == "args":
            m = re.match(r"^(\w+)\s*(\([^)]*\))?\s*:\s*(.*)$", stripped)
            if m:
                current = m.group(1)
                arg_help[current] = m.group(3)
            elif stripped and current:
                arg_help[current] += " " + stripped
            continue
        if section == "other":
            if not stripped or line[0].isspace():
                continue
            section = None  # unindented text after a section belongs to the description
        desc_lines.append(line)
    return "\n".join(desc_lines).strip(), arg_help


class Tool:
    """A callable tool: schema from type hints and docstring, policy fields for the kernel."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        scopes: Sequence[str] = (),
        timeout_s: float | None = None,
        requires_approval: PolicyLike = False,
        approver_roles: Sequence[str] = (),
        dual: bool = False,
        approval_timeout_s: float | None = None,
        records: Sequence[str] | None = None,
        max_result_chars: int | None = None,
        isolation: Isolation = "thread",
        compress: CompressLike = None,
        reuse: bool = True,
        quoted: bool = False,
        cites: Citer | None = None,
    ) -> None:
        if not callable(fn):
            named = f"tool {name!r}: " if name else ""
            raise ConfigError(
                f"{named}@tool turns a function into a tool, but got {type(fn).__name__} "
                f"{_short(fn)}; decorate a def (or async def), or pass one: tool(my_function)"
            )
        self.fn = fn
        found = name or getattr(fn, "__name__", None)
        if not isinstance(found, str):
            raise ConfigError(
                f"@tool got a {type(fn).__name__} {_short(fn)}, which has no __name__ to name "
                "the tool by; give it one: tool(name='...')(...)"
            )
        self.name: str = found
        if not _NAME_RE.match(self.name):
            raise ConfigError(
                f"tool name {self.name!r} is not valid: use letters, digits, '_' or '-' "
                "(at most 64 characters, not starting with a digit)"
            )
        doc_desc, arg_help = _docstring_parts(fn.__doc__)
        self.description: str = description if description is not None else doc_desc
        self.scopes: tuple[str, ...] = tuple(scopes)
        """Permission scopes the tool needs (e.g. `billing:read`)."""
        self.timeout_s = timeout_s
        """Per-tool timeout in seconds; the smaller of this and `Guards.tool_timeout_s` wins."""
        self.approval: ApprovalPolicy | None = approval_policy(
            requires_approval, roles=approver_roles, dual=dual, timeout_s=approval_timeout_s
        )
        """When a call waits for a person's sign-off (None: never)."""
        if isinstance(scopes, str) or (records is not None and isinstance(records, str)):
            raise ConfigError(f"tool {self.name!r}: scopes and records take a list of names")
        self.records: tuple[str, ...] | None = None if records is None else tuple(records)
        """Arguments a successful call writes to the session's known facts; None: the
        id-like ones (`order_id`, `ORD-1`), never plain options such as `limit`."""
        self.max_result_chars = max_result_chars
        """Truncate longer results; None uses the team default (1,500)."""
        self.compress: Compression | bool | None = compression_setting(
            compress, f"tool {self.name!r}: compress"
        )
        """Compress long results (`Compression`), never (False), or as the agent says (None)."""
        if not isinstance(reuse, bool):
            raise ConfigError(f"tool {self.name!r}: reuse takes True or False, not {reuse!r}")
        self.reuse = reuse
        """Answer an identical call in the same turn from the first result (True)."""
        if not isinstance(quoted, bool) or (cites is not None and not callable(cites)):
            raise ConfigError(
                f"tool {self.name!r}: quoted takes True or False and cites a function "
                "(the returned value -> its citations)"
            )
        self.quoted = quoted
        """Its results are quoted data (retrieved passages, fetched pages): never the source of
        a verified fact, not even as a whole field (`baton.runtime.provenance`)."""
        self.cites: Citer | None = cites
        """The citations in a value the tool returned; the kernel collects them into the run
        and the hand-off payload (`HandoffPayload.citations`), never from a model's words."""
        self.is_async = inspect.iscoroutinefunction(_annotated(fn))
        if isolation not in ("thread", "process"):
            raise ConfigError(
                f"tool {self.name!r}: isolation must be 'thread' or 'process', not {isolation!r}"
            )
        if isolation == "process":
            if self.is_async:
                raise ConfigError(
                    f"tool {self.name!r}: isolation='process' is for sync functions; an async "
                    "tool is cancelled on timeout"
                )
            if "<locals>" in fn.__qualname__ or fn.__module__ in (None, "__main__"):
                raise ConfigError(
                    f"tool {self.name!r}: isolation='process' needs a function defined at the "
                    "top level of an importable module (the child process imports it by name)"
                )
        self.isolation: Isolation = isolation
        """Where a sync call runs: a pool thread, abandoned (still running) after a timeout,
        or a child process, killed after a timeout."""
        self.context_param: str | None = None
        """The parameter that receives the `ToolContext`, if the function declares one."""
        self.args_model, schema = self._build_args_model(fn, arg_help)
        schema.pop("title", None)
        self.parameters: dict[str, Any] = schema
        self.spec = ToolSpec(name=self.name, description=self.description, parameters=schema)

    def _build_args_model(
        self, fn: Callable[..., Any], arg_help: dict[str, str]
    ) -> tuple[type[BaseModel], dict[str, Any]]:
        """The model validating the arguments, and its JSON schema; `ConfigError` naming the
        parameter whose type cannot be validated or described."""
        from pydantic import Field

        try:
            hints = get_type_hints(_annotated(fn))
        except Exception as exc:  # unresolved forward references
            raise ConfigError(
                f"tool {self.name!r}: cannot resolve its type hints ({exc}); "
                "import the types it names at module level"
            ) from exc
        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError) as exc:  # some builtins have no signature
            raise ConfigError(
                f"tool {self.name!r}: its parameters cannot be read ({exc}); wrap it in a "
                "def with named, annotated parameters"
            ) from exc
        fields: dict[str, Any] = {}
        for pname, param in params.items():
            if hints.get(pname) is ToolContext:
                self.context_param = pname  # injected by the kernel, not shown to the model
                continue
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise ConfigError(
                    f"tool {self.name!r}: *args/**kwargs cannot be described to a model; "
                    "name each argument"
                )
            if param.kind is param.POSITIONAL_ONLY:
                raise ConfigError(
                    f"tool {self.name!r}: parameter {pname!r} is positional-only, but a "
                    "model's arguments are passed by name; remove the '/'"
                )
            ann = hints.get(pname, Any)
            default = ... if param.default is param.empty else param.default
            fields[pname] = (ann, Field(default, description=arg_help.get(pname)))
        try:
            model: type[BaseModel] = create_model(
                f"{self.name}_args", __config__=ConfigDict(extra="forbid"), **fields
            )
            schema = model.model_json_schema()
        except (PydanticUserError, TypeError) as exc:
            raise self._unsupported(fields, exc) from exc
        return model, schema

    def _unsupported(self, fields: dict[str, Any], exc: Exception) -> ConfigError:
        """The `ConfigError` naming the parameter whose type pydantic cannot validate or
        describe as JSON schema (found by trying each alone), for `exc` about the whole."""
        where = "its types"
        for pname, (ann, _) in fields.items():
            failed = _schema_error(ann)
            if failed is not None:
                exc, where = failed, f"parameter {pname!r} has type {_type_name(ann)}, which"
                break
        why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return ConfigError(
            f"tool {self.name!r}: {where} cannot be described to a model as JSON ({why}); use "
            "str, int, float, bool, None, a Literal, an Enum, a pydantic model or a dataclass, "
            "or lists and dicts of those"
        )

    def validate(self, args: dict[str, Any]) -> dict[str, Any]:
        """Validate arguments against the schema; raises pydantic's ValidationError."""
        # dict(iter(model)): `dict(model)` first asks the model for `keys`, which pydantic
        # answers by raising AttributeError from two `__getattr__`s, on every tool call
        return dict(iter(self.args_model.model_validate(args)))

    @property
    def requires_approval(self) -> bool:
        """True when some calls wait for approval."""
        return self.approval is not None

    async def invoke(
        self, args: dict[str, Any], default_limit: int, context: ToolContext | None = None
    ) -> ToolOutcome:
        """Validate, run and render. Never raises: failures become error outcomes."""
        limit = self.max_result_chars if self.max_result_chars is not None else default_limit
        try:
            clean = self.validate(args)
        except ValidationError as exc:
            msg = f"invalid arguments for {self.name}: " + "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                for e in exc.errors()
            )
            return ToolOutcome(ok=False, content=error_content(msg), error=msg)
        if self.context_param is not None:
            if context is None:
                msg = f"{self.name} needs a ToolContext and was called without one"
                return ToolOutcome(ok=False, content=error_content(msg), error=msg)
            clean[self.context_param] = context
        token = _CONTEXT.set(context) if context is not None else None
        try:
            if self.is_async:
                value = await awaited(self.fn(**clean))
            elif self.isolation == "thread":  # the pool copies the context: tool_context() works
                value = await tool_threads().run(sync_call, self.fn, clean)
            else:
                value = await run_in_process(
                    self.fn.__module__, self.fn.__qualname__, clean, context
                )
        except ProcessFailed as exc:
            msg = f"{self.name} failed in its process: {exc}"
            return ToolOutcome(ok=False, content=error_content(msg), error=msg)
        except GraphInterrupt:
            raise  # `interrupt(value)`: the kernel pauses the run on this call
        except CancelledItself as exc:
            return self._cancelled_itself(exc)
        except Exception as exc:
            msg = f"{type(exc).__name__}: {exc}"
            return ToolOutcome(ok=False, content=error_content(msg), error=msg)
        except asyncio.CancelledError as exc:
            if cancelled_from_outside():
                raise  # the run is cancelled (task.cancel(), team.cancel, a timeout)
            return self._cancelled_itself(exc)
        except SystemExit as exc:  # `sys.exit()` in a tool must not take the process down
            msg = (
                f"{self.name} tried to exit the process (SystemExit({exc.code!r})); the run "
                "stops here. A tool should raise an exception to report a failure"
            )
            return ToolOutcome(ok=False, content=error_content(msg), error=msg, fatal=True)
        finally:
            if token is not None:
                _CONTEXT.reset(token)
        try:
            text, truncated, n = render_result(value, limit)
        except UnserialisableResult as exc:
            msg = (
                f"{self.name} ran, but its result could not be serialised: {exc}; whatever it "
                "did stands, so do not call it again to get the result"
            )
            return ToolOutcome(ok=False, content=error_content(msg), error=msg)
        return ToolOutcome(ok=True, content=text, truncated=truncated, raw_chars=n, value=value)

    def _cancelled_itself(self, exc: BaseException) -> ToolOutcome:
        """The failed outcome of a call that raised `CancelledError` though nobody cancelled
        it (`baton.cancellation`): the run goes on, the model reads why."""
        detail = clean_text(str(exc))
        msg = (
            f"{self.name} raised CancelledError{f' ({detail})' if detail else ''} although its "
            "call was not cancelled; the call failed, and it may have taken effect before that"
        )
        return ToolOutcome(ok=False, content=error_content(msg), error=msg)

    def timeout_error(self, limit: float) -> str:
        """What the model reads when a call of this tool ran past `limit` seconds: that it
        may have taken effect, so that it is not retried blindly."""
        if self.is_async:
            fate = "and was cancelled; it may have taken effect before that"
        elif self.isolation == "process":
            fate = "and its process was stopped; it may have taken effect before that"
        else:
            fate = (
                "and may still be running in the background (a sync tool cannot be stopped), "
                "so it may yet take effect"
            )
        return (
            f"{self.name} timed out after {limit}s {fate}; check whether it did before calling "
            "it again, or ask the user"
        )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the underlying function directly (handy in tests)."""
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"


class Toolset(ABC):
    """Tools an agent takes from elsewhere (an MCP server), known only once listed: pass one
    in `Agent(tools=[...])` beside plain tools. The team lists it before each run."""

    name: str
    """Names the toolset in errors (an MCP server's name)."""

    @abstractmethod
    async def list_tools(self) -> Sequence[Tool]:
        """The tools it offers now; the same objects while nothing changed (a new list is
        what makes the team compile the agent again)."""

    @abstractmethod
    async def aclose(self) -> None:
        """Release what it holds (a connection); it opens again when next used."""


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    scopes: Sequence[str] = (),
    timeout_s: float | None = None,
    requires_approval: PolicyLike = False,
    approver_roles: Sequence[str] = (),
    dual: bool = False,
    approval_timeout_s: float | None = None,
    records: Sequence[str] | None = None,
    max_result_chars: int | None = None,
    isolation: Isolation = "thread",
    compress: CompressLike = None,
    reuse: bool = True,
    quoted: bool = False,
    cites: Citer | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    scopes: Sequence[str] = (),
    timeout_s: float | None = None,
    requires_approval: PolicyLike = False,
    approver_roles: Sequence[str] = (),
    dual: bool = False,
    approval_timeout_s: float | None = None,
    records: Sequence[str] | None = None,
    max_result_chars: int | None = None,
    isolation: Isolation = "thread",
    compress: CompressLike = None,
    reuse: bool = True,
    quoted: bool = False,
    cites: Citer | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a tool from a function: `@tool` or `@tool(scopes=[...], timeout_s=5)`.

    `scopes`: permissions an agent must hold (`Agent(scopes=...)`) to call it.
    `requires_approval`: True, a function `(args, state) -> bool`, or an `ApprovalPolicy`;
    the run then pauses until `team.approve`/`team.reject` (`approver_roles`, `dual` and
    `approval_timeout_s` refine a True or a function).
    `records`: arguments a successful call writes to the session's known facts (default: the
    id-like ones).
    `isolation`: where a sync function runs. "thread" (default): a daemon thread of Baton's
    pool; after a timeout the run goes on and the call is abandoned, still running in the
    background (Python threads cannot be killed). "process": a child process, killed after a
    timeout (a module-level function; arguments and result must pickle; each call starts a
    process, so it costs tens of milliseconds or more).
    `compress`: compress long results with a light model before the next model call (True, a
    threshold in tokens, a `Compression`); False keeps them whole even under the agent's
    `compress_results`; None (default) follows it (`baton.compression`).
    `reuse`: an identical call (same arguments) by the same agent in the same turn is answered
    from the first successful result, not run again (default True: a repeated identical call
    in one turn is almost always a loop); False runs every call (a tool meant to act twice).
    `quoted`: its results are quoted data (a search, a fetched page): nothing in them becomes
    a verified fact of a hand-off's state.
    `cites`: a function from the returned value to its citations (JSON objects); the kernel
    collects them for the hand-off payload (`HandoffPayload.citations`).
    """

    def wrap(f: Callable[..., Any]) -> Tool:
        return Tool(
            f,
            name=name,
            description=description,
            scopes=scopes,
            timeout_s=timeout_s,
            requires_approval=requires_approval,
            approver_roles=approver_roles,
            dual=dual,
            approval_timeout_s=approval_timeout_s,
            records=records,
            max_result_chars=max_result_chars,
            isolation=isolation,
            compress=compress,
            reuse=reuse,
            quoted=quoted,
            cites=cites,
        )

    if fn is not None:
        return wrap(fn)
    return wrap
