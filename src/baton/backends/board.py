"""Read-modify-write on a blackboard entry that survives other writers: `write_with_retry`.

The store's `write_entry` is compare-and-set, so two agents that read one version cannot both
write over it: the loser gets `ConflictError`. This helper is the loser's side of the
protocol: read again, apply the same update to the fresh value, and write again.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Any

from baton.backends._conflicts import board_json
from baton.backends.base import Blackboard, BoardEntry
from baton.core.errors import ConfigError, ConflictError

entry_json = board_json
"""`entry_json(board, key, value)`: the JSON text every store keeps for a board entry, or the
`StoreError` every store raises for it (not JSON, or nested deeper than `MAX_JSON_DEPTH`)."""

MAX_BACKOFF_S = 0.25
"""Longest pause between two tries of `write_with_retry`, however many conflicts it met."""


async def write_with_retry(
    store: Blackboard,
    board: str,
    key: str,
    update: Callable[[Any | None], Any],
    *,
    writer: str = "",
    attempts: int = 5,
    backoff_s: float = 0.005,
) -> tuple[BoardEntry, int]:
    """Write `update(current value)` under (board, key), re-reading and retrying on conflict.

    Each try reads the entry (None as the value when it does not exist), calls `update` with
    a fresh copy of the value (it may change it in place and return it), and writes the
    result compare-and-set on the version it read. After a `ConflictError` it waits a random
    pause of up to `backoff_s` (doubled after each conflict, at most `MAX_BACKOFF_S`; 0: no
    pause), so that writers who keep colliding spread out, then tries again, `attempts` tries
    in all. `update` may thus run several times: keep it free of side effects.

    Returns the stored entry and the number of conflicts met on the way (what a topology
    counts as board contention). Raises `ConflictError` when every try lost to another writer.
    """
    if attempts < 1:
        raise ConfigError(f"write_with_retry(attempts={attempts}): make at least 1 attempt")
    conflicts = 0
    while True:
        entry = await store.read_entry(board, key)
        version = 0 if entry is None else entry.version
        value = update(None if entry is None else entry.value)
        try:
            return await store.write_entry(board, key, value, version, writer=writer), conflicts
        except ConflictError as exc:
            conflicts += 1
            if conflicts >= attempts:
                raise ConflictError(
                    f"entry {key!r} of board {board!r}: all {attempts} attempts to write it "
                    f"lost to other writers (the last read version {version}); nothing was "
                    "written. Retry later, pass more attempts, or split the entry into keys "
                    "that fewer writers share",
                    key=exc.key,
                ) from exc
        if backoff_s > 0:
            cap = min(backoff_s * 2 ** min(conflicts - 1, 16), MAX_BACKOFF_S)
            await asyncio.sleep(random.uniform(0, cap))
