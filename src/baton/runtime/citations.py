"""Citations: what citing tools returned, carried by the kernel, never written by a model.

A tool that declares `cites` (a knowledge base's search, `KnowledgeBase.as_tool`) returns
citations in its value. After each successful call the kernel takes them from the value the
tool returned (not from the text a model read or wrote) into the run (`RunState.citations`):
a worker's reach the supervisor that asked it, a pipeline stage's reach the stages after it
(`RunState.cited_in`, shown in their views), and a hand-off carries them all
(`HandoffPayload.citations`). A model cannot add one: `HandoffArgs` has no such field.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from baton.core.jsontext import to_canonical

if TYPE_CHECKING:
    from baton.runtime.state import RunState
    from baton.tools import Tool

MAX_CITATIONS = 32
"""Citations a run (and a hand-off) carries at most: the first ones found are kept."""
_SCALARS = (str, int, float, bool, type(None))

log = logging.getLogger("baton.citations")


def _clean(citation: Any) -> dict[str, Any] | None:
    """`citation` as a flat JSON object of scalars, or None when it is not one."""
    if not isinstance(citation, Mapping) or not citation:
        return None
    out: dict[str, Any] = {}
    for key, value in citation.items():
        if not isinstance(key, str) or not isinstance(value, _SCALARS):
            return None
        out[key] = value
    return out


def _key(citation: Mapping[str, Any]) -> str:
    """What makes two citations the same: the chunk they name, or all their fields."""
    chunk = citation.get("chunk_id")
    return f"chunk:{chunk}" if isinstance(chunk, str) and chunk else to_canonical(citation)


def merged(held: list[dict[str, Any]], new: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """`held` then those of `new` it lacks, at most `MAX_CITATIONS` (a new list; `held` is
    returned itself when nothing is added)."""
    seen = {_key(c) for c in held}
    added: list[dict[str, Any]] = []
    for c in new:
        if len(held) + len(added) >= MAX_CITATIONS:
            break
        k = _key(c)
        if k not in seen:
            seen.add(k)
            added.append(dict(c))
    return [*held, *added] if added else held


def collect(run: RunState, tool: Tool, value: Any) -> None:
    """Add the citations in `value`, what `tool` returned, to the run's. A `cites` function
    that fails, or a citation that is not a flat JSON object, costs the citation, not the
    call."""
    if tool.cites is None:
        return
    try:
        found = list(tool.cites(value))
    except Exception as exc:
        log.warning("tool %s: its cites function failed (%s); no citations kept", tool.name, exc)
        return
    clean = [c for c in map(_clean, found) if c is not None]
    if len(clean) < len(found):
        log.warning(
            "tool %s: %d citations are not flat JSON objects; dropped",
            tool.name,
            len(found) - len(clean),
        )
    run.citations = merged(run.citations, clean)
