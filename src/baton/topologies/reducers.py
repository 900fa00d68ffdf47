"""Reducers: how a graph's state key merges the writes of nodes (seed 000 §2.3).

A key without a reducer takes the value written (two nodes writing it in one super-step is an
error: their order would decide). A key with one merges each write into the current value:
declare it on the state schema, `items: Annotated[list[str], append] = []`. Writes of one
super-step are merged in the order of their nodes' names, whatever order the nodes finished
in, so a run and its replay reach the same state. Any function `(current, update) -> new`
is a reducer (`operator.add` too).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from baton.core.errors import ConfigError

Reducer = Callable[[Any, Any], Any]


def append(current: Any, update: Any) -> list[Any]:
    """A list that grows: a list update is added item by item, anything else as one item."""
    items = list(current) if current is not None else []
    if isinstance(update, (list, tuple)):
        items.extend(update)
    else:
        items.append(update)
    return items


def merge(current: Any, update: Any) -> dict[str, Any]:
    """A dict whose keys are set by each update (later keys win; nested dicts are replaced)."""
    out = dict(current) if current is not None else {}
    if not isinstance(update, dict):
        raise TypeError(f"merge needs a dict update, got {type(update).__name__}")
    out.update(update)
    return out


def maximum(current: Any, update: Any) -> Any:
    """The larger of the current value and the update (None counts as absent)."""
    if current is None:
        return update
    if update is None:
        return current
    return max(current, update)


def minimum(current: Any, update: Any) -> Any:
    """The smaller of the current value and the update (None counts as absent)."""
    if current is None:
        return update
    if update is None:
        return current
    return min(current, update)


def reducers_of(schema: type[BaseModel]) -> dict[str, Reducer]:
    """Field name -> its reducer, from `Annotated[..., reducer]` on the schema's fields."""
    found: dict[str, Reducer] = {}
    for name, info in schema.model_fields.items():
        fns = [m for m in info.metadata if callable(m) and not isinstance(m, type)]
        if len(fns) > 1:
            raise ConfigError(f"state key {name!r} has {len(fns)} reducers; give it one")
        if fns:
            found[name] = fns[0]
    return found
