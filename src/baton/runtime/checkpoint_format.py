"""The checkpoint's contract: every saved run state carries a format number.

`RunState.to_json` writes `{"format": FORMAT, ...}` (`stamp`); `RunState.from_json` reads the
number (`format_of`) and `upgraded` brings an older format to today's shape by the registered
upgrades (one function per step, `N -> N + 1`, pure functions on the
JSON data) and refuses a newer one with `NewerCheckpoint`, so a Baton that was rolled back
never discards (or half-reads) the run a newer Baton paused. A state saved before formats were
numbered has no `format` key and is format 1.

To change the saved shape: bump `FORMAT`, add the upgrade from the previous number to
`UPGRADES`, and add a golden checkpoint of the old format to `tests/runtime/golden/`
(`tests/runtime/test_checkpoint_format.py` loads and resumes each one).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from baton.core.errors import NewerCheckpoint

FORMAT = 5
"""The format `RunState.to_json` writes.

1. Every container in full.
2. A turn's scratch and view name the messages the run recorded by id instead of repeating
   them (each tool result is saved once; whole messages are still read there), and a graph
   node's completed steps (`PendingCall.memo`) are `{"step": name, "result": value}` instead
   of bare values, so a replay checks each step's name.
3. What the run already committed to its session (a paused run commits what it did so far)
   is named, not repeated: `messages` and `events` hold only what followed the last commit,
   and `committed` (`baton.runtime.state.Committed`) counts the rest, with the first and last
   ids, for a resumed run to read back from the store. Committed messages stay whole where
   the store keeps them masked and the checkpoint does not (a sealed checkpoint).
4. A run (and each sub-run) keeps the citations its citing tools returned (`citations`) and
   those a pipeline stage was given (`cited_in`); a Baton that knows neither would drop them.
5. A turn's scratch or view that is one unbroken stretch of the run's messages (a graph's
   turn) is saved as `[{"span": [first_id, count]}]` instead of one id a message
   (`baton.runtime.turn_refs`), so a long turn's checkpoint does not grow with it.
"""

Upgrade = Callable[[dict[str, Any]], dict[str, Any]]


def _named_steps(data: dict[str, Any]) -> dict[str, Any]:
    """1 -> 2: every recorded step result (in the run and its sub-runs) becomes an unnamed
    `StepResult`, replayed by position as before (whole scratch and view messages are read
    as they are)."""

    def walk(run: dict[str, Any]) -> None:
        turn = run.get("turn") or {}
        for call in turn.get("calls") or ():
            call["memo"] = [{"step": None, "result": v} for v in call.get("memo") or ()]
            if call.get("sub"):
                walk(call["sub"])

    walk(data)
    return data


def _nothing_named(data: dict[str, Any]) -> dict[str, Any]:
    """2 -> 3: a format-2 state repeats every message and event, so it names none (no
    `committed`): the data is already format 3."""
    return data


def _no_citations(data: dict[str, Any]) -> dict[str, Any]:
    """3 -> 4: a format-3 run cited nothing the kernel kept; both lists default to empty."""
    return data


def _no_spans(data: dict[str, Any]) -> dict[str, Any]:
    """4 -> 5: a format-4 turn names its messages one by one, which format 5 still reads."""
    return data


UPGRADES: dict[int, Upgrade] = {
    1: _named_steps,
    2: _nothing_named,
    3: _no_citations,
    4: _no_spans,
}
"""`UPGRADES[n]` turns format `n` data into format `n + 1` data."""

_STAMP = f'{{"format":{FORMAT},'
_HEAD = re.compile(r'\{\s*"format"\s*:\s*(-?\d+)\s*[,}]')


def stamp(body: str) -> str:
    """`body` (a JSON object's text, as pydantic writes it) with the current format first."""
    if body == "{}":
        return f'{{"format":{FORMAT}}}'
    return _STAMP + body[1:]


def format_of(text: str) -> int:
    """The format of a saved state's text (1 when it has none); reads only the head when the
    format comes first, as `stamp` writes it."""
    head = _HEAD.match(text)
    if head is not None:
        return int(head.group(1))
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("a checkpoint's state must be a JSON object")
    found = data.get("format", 1)
    if not isinstance(found, int) or isinstance(found, bool):
        raise ValueError(f"a checkpoint's format must be an integer, not {found!r}")
    return found


def upgraded(text: str, found: int) -> dict[str, Any]:
    """The data of an older format's text, brought to `FORMAT` step by step."""
    if found > FORMAT:
        raise NewerCheckpoint(found, FORMAT)
    if found < 1:
        raise ValueError(f"a checkpoint's format is 1 or more, not {found}")
    data: dict[str, Any] = json.loads(text)
    for n in range(found, FORMAT):
        step = UPGRADES.get(n)
        if step is None:  # a release that changed the format without its upgrade
            raise ValueError(f"no upgrade from checkpoint format {n} to {n + 1}")
        data = step(data)
    data.pop("format", None)
    return data
