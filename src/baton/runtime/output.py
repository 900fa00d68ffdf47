"""Structured output: an agent's final answer validated into its `output_type`.

`OutputSpec` is built once per agent when the team is compiled: the type's JSON schema (sent
with every request as `ModelRequest.output_schema`), its validator, and a one-line note on the
expected JSON shape for the system prompt (left out when the model enforces the schema
itself). An answer is parsed like tool-call arguments (fences, a repair of syntax only, never
a guessed value) and validated by pydantic; the kernel re-asks once quoting the exact error
(`model_call.ask`). The validated value travels as JSON data (`RunState.final`), so a
checkpoint keeps it, and `rebuild` gives the typed value back for `RunResult.final`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError

from baton.core.errors import ConfigError, ParseError
from baton.models.parsing import parse_json_answer
from baton.models.textmode import json_shape

_NAME_RE = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True, slots=True)
class Typed:
    """An answer that validated: its JSON text (what the user and the transcript get) and
    its JSON data (what the run's state keeps)."""

    text: str
    data: Any


@dataclass(frozen=True, slots=True)
class OutputSpec:
    """An agent's output type, compiled: schema, validator and prompt note."""

    type: Any
    name: str
    """A short name for the type (`Weather`), for providers that name schemas."""
    schema: dict[str, Any]
    """Its JSON schema (pydantic's `json_schema()`)."""
    adapter: TypeAdapter[Any]
    note: str | None
    """The shape line for the system prompt; None when the model enforces the schema."""

    def check(self, text: str | None) -> Typed | str:
        """The answer validated, or the error to quote back to the model."""
        try:
            data = parse_json_answer(text)
        except ParseError as exc:
            return str(exc)
        try:
            # strict JSON rules (a date as text, ...) whatever the repair went through
            value = self.adapter.validate_json(json.dumps(data, ensure_ascii=False))
        except ValidationError as exc:
            return describe(exc, self.name)
        normal = self.adapter.dump_python(value, mode="json")
        return Typed(json.dumps(normal, ensure_ascii=False), normal)

    def rebuild(self, data: Any) -> Any:
        """The typed value of an answer's JSON data (as kept in the run's state)."""
        return self.adapter.validate_json(json.dumps(data, ensure_ascii=False))


def compile_output(output_type: Any, native: bool) -> OutputSpec:
    """The `OutputSpec` of an agent's `output_type`; `ConfigError` when pydantic cannot
    validate it or give it a JSON schema."""
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(output_type)
        schema = adapter.json_schema()
    except Exception as exc:
        raise ConfigError(
            f"output_type {output_type!r} cannot be used: {exc}; give a pydantic BaseModel "
            "subclass (or a type pydantic can validate, such as list[Model] or a TypedDict)"
        ) from exc
    raw = getattr(output_type, "__name__", "") or schema.get("title", "")
    name = _NAME_RE.sub("_", str(raw))[:64] or "output"
    note = None
    if not native:
        note = f"Your final answer is JSON only, of this shape: {json_shape(schema)}"
    return OutputSpec(output_type, name, schema, adapter, note)


def describe(exc: ValidationError, name: str) -> str:
    """Pydantic's errors, one per field: where, what, and the value given."""
    parts = []
    for e in exc.errors(include_url=False):
        where = ".".join(str(p) for p in e["loc"]) or "(the whole answer)"
        part = f"{where}: {e['msg']}"
        if e["type"] != "missing":
            part += f" (got {json.dumps(e.get('input'), ensure_ascii=False, default=str)[:80]})"
        parts.append(part)
    count = len(parts)
    return f"{count} validation error{'s' if count != 1 else ''} for {name}: " + "; ".join(parts)
