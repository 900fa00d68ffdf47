"""What every backend checks before it saves a graph snapshot, worded once so that they refuse
the same snapshots with the same errors and return the same data."""

from __future__ import annotations

import json

from baton.backends.base import KeptSnapshot, Snapshot
from baton.core.errors import ConfigError, StoreError


def snapshot_json(snapshot: Snapshot) -> str:
    """`snapshot.data` as the JSON text a store keeps; `StoreError` (nothing written) if it is
    not JSON, or if it or a name of the snapshot holds text that UTF-8 cannot encode (a lone
    surrogate), which a file could not hold."""
    where = f"snapshot {snapshot.id!r} of thread {snapshot.thread_id!r}"
    try:
        text = json.dumps(snapshot.data, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise StoreError(
            f"{where} cannot be saved as JSON ({exc}); nothing was written. Keep snapshot data "
            "to strings, finite numbers, booleans, None, lists and dicts with string keys"
        ) from exc
    names = (snapshot.thread_id, snapshot.id, snapshot.run_id, snapshot.parent_id or "")
    for what, value in zip(
        ("thread id", "id", "run id", "parent id", "data"), (*names, text), strict=True
    ):
        if not isinstance(value, str):
            raise StoreError(f"{where}: its {what} is a {type(value).__name__}, not a string")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise StoreError(
                f"{where}: its {what} holds text that is not valid Unicode ({exc.reason} at "
                f"position {exc.start}, a lone surrogate); nothing was written. Repair the "
                "text first, e.g. text.encode('utf-8', 'replace').decode('utf-8')"
            ) from exc
    return text


def check_keep_last(keep_last: int | None) -> None:
    """Refuse a retention that would keep no snapshot (before anything is written)."""
    if keep_last is not None and (
        isinstance(keep_last, bool) or not isinstance(keep_last, int) or keep_last < 1
    ):
        raise ConfigError(
            f"put_snapshot(keep_last={keep_last!r}): keep at least 1 snapshot per thread, or "
            "pass None to keep them all"
        )


def kept_json(kept: KeptSnapshot) -> str:
    """A snapshot to save with a checkpoint as JSON text, its retention checked: both before
    anything of the step is written."""
    check_keep_last(kept.keep_last)
    return snapshot_json(kept.snapshot)
