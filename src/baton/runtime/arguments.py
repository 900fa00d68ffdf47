"""A call's arguments are checked before anything reads them: an approval policy, a guard, the
tool.

JSON from a model may hold `NaN`, `Infinity` and `-Infinity` (Python's `json` reads them), and
every comparison with NaN is false: `args["amount"] > 10_000` would let a NaN amount through an
approval gate. So a non-finite number anywhere in the arguments refuses the call with an error
the model reads (a re-ask, like any invalid argument), and a tool's arguments are validated
against its schema before its approval policy sees them (the policy reads the validated,
typed values).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from baton.tools import Tool


def non_finite(value: Any, path: str = "") -> str | None:
    """The path of the first NaN or infinite number in `value` (`amount`, `items[2].price`),
    or None when every number is finite."""
    if type(value) is float:
        return None if math.isfinite(value) else (path or "the value")
    if isinstance(value, dict):
        for k, v in value.items():
            if type(v) is str or type(v) is int:  # the usual argument
                continue
            found = non_finite(v, f"{path}.{k}" if path else str(k))
            if found is not None:
                return found
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            found = non_finite(v, f"{path}[{i}]")
            if found is not None:
                return found
    return None


def finite_error(where: str) -> str:
    """What the model reads for a non-finite number at `where`."""
    return (
        f"invalid arguments: {where} is not a finite number (NaN and Infinity are refused); "
        "call again with a real number"
    )


def validated(tool: Tool, args: Mapping[str, Any]) -> dict[str, Any] | str:
    """`args` validated against `tool`'s schema (typed values), or the error the model reads."""
    try:
        return tool.validate(dict(args))
    except ValidationError as exc:
        return f"invalid arguments for {tool.name}: " + "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in exc.errors()
        )
