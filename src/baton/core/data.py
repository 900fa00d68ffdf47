"""`Data`: pydantic (de)serialisation for the kernel's plain dataclasses.

Why dataclasses and not pydantic models: messages, tool calls, usage, tool specs, events and
run results are created many times per run on the kernel's hot path, and stores keep them for
the life of a session. As `BaseModel`s each instance cost a validation pass and came with a
`__dict__` and a fields-set `set`: three objects the cyclic garbage collector traverses again
and again as the store grows. As `@dataclass(slots=True)` classes each is one GC-tracked
object, built by a plain `__init__`.

Pydantic still gives them JSON schemas, validation and serialisation through one cached
`TypeAdapter` per class: `Data` adds the part of the `BaseModel` API that Baton uses
(`model_dump`, `model_dump_json`, `model_validate`, `model_validate_json`, `model_copy`,
`model_json_schema`). Construction does not check types: the kernel builds these objects from
values it has already checked, and data from outside (stores, event logs) is validated on the
way in by `model_validate*` and `event_from_json`.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, Literal, TypeVar

from pydantic import TypeAdapter

D = TypeVar("D", bound="Data")

_ADAPTERS: dict[type, TypeAdapter[Any]] = {}


def adapter(cls: type[D]) -> TypeAdapter[D]:
    """The `TypeAdapter` of a `Data` class, built on first use and cached."""
    found = _ADAPTERS.get(cls)
    if found is None:
        found = _ADAPTERS[cls] = TypeAdapter(cls)
    return found


class Data:
    """Mixin for `@dataclass(slots=True, kw_only=True)` classes: the `BaseModel` methods used."""

    __slots__ = ()

    # The methods below call the adapter's compiled serializer and validator directly: the
    # `TypeAdapter` wrappers add about as much time again per call, and stores call them once
    # per message and event.
    def model_dump(
        self,
        *,
        mode: Literal["json", "python"] = "python",
        include: Any = None,
        exclude: Any = None,
        by_alias: bool = False,
        exclude_defaults: bool = False,
        exclude_none: bool = False,
    ) -> dict[str, Any]:
        """The instance as a dict (`mode="json"`: JSON-compatible values only)."""
        out: dict[str, Any] = adapter(type(self)).serializer.to_python(
            self,
            mode=mode,
            include=include,
            exclude=exclude,
            by_alias=by_alias,
            exclude_defaults=exclude_defaults,
            exclude_none=exclude_none,
        )
        return out

    def model_dump_json(
        self,
        *,
        indent: int | None = None,
        include: Any = None,
        exclude: Any = None,
        by_alias: bool = False,
        exclude_defaults: bool = False,
        exclude_none: bool = False,
    ) -> str:
        """The instance as a JSON string."""
        return (
            adapter(type(self))
            .serializer.to_json(
                self,
                indent=indent,
                include=include,
                exclude=exclude,
                by_alias=by_alias,
                exclude_defaults=exclude_defaults,
                exclude_none=exclude_none,
            )
            .decode()
        )

    @classmethod
    def model_validate(cls: type[D], obj: Any, *, strict: bool | None = None) -> D:
        """Validate a dict (or an instance) into this class; raises pydantic's ValidationError."""
        out: D = adapter(cls).validator.validate_python(obj, strict=strict)
        return out

    @classmethod
    def model_validate_json(cls: type[D], data: str | bytes, *, strict: bool | None = None) -> D:
        """Parse and validate JSON into this class; raises pydantic's ValidationError."""
        out: D = adapter(cls).validator.validate_json(data, strict=strict)
        return out

    @classmethod
    def model_json_schema(
        cls, mode: Literal["validation", "serialization"] = "validation"
    ) -> dict[str, Any]:
        """The JSON schema of this class."""
        return adapter(cls).json_schema(mode=mode)

    def model_copy(self: D, *, update: dict[str, Any] | None = None, deep: bool = False) -> D:
        """A copy with `update` applied (not validated, as with `BaseModel.model_copy`)."""
        base = copy.deepcopy(self) if deep else self
        return dataclasses.replace(base, **(update or {}))  # type: ignore[type-var]
