"""The `*_sync` faces' guard."""

from __future__ import annotations

import asyncio


def run_sync_guard() -> None:
    """Raise a clear error when `run_sync` is called inside a running event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise RuntimeError(
        "run_sync() cannot be called from inside a running event loop; use `await team.run(...)`"
    )
