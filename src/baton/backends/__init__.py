"""Store backends behind the `Store` protocol, opened by URL."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from baton.backends.base import (
    Blackboard,
    BoardEntry,
    Checkpoint,
    HumanTicket,
    SessionRecord,
    Snapshot,
    Snapshots,
    Store,
    Tasks,
)
from baton.backends.board import write_with_retry
from baton.backends.memory import MemoryStore
from baton.core.errors import ConfigError

if TYPE_CHECKING:
    from baton.backends.sqlite import SQLiteStore


def open_store(spec: Any) -> Store:
    """A store from a URL (`memory://`, `sqlite:///path.db`), a Store object, or None (memory)."""
    if spec is None:
        return MemoryStore()
    if isinstance(spec, str):
        if spec in ("memory://", "memory", ":memory:"):
            return MemoryStore()
        if spec.startswith("sqlite://"):
            from baton.backends.sqlite import SQLiteStore

            return SQLiteStore(spec)
        raise ConfigError(
            f"unknown store URL {spec!r}: use 'memory://' or 'sqlite:///path/to/baton.db'"
        )
    if isinstance(spec, Store):
        return spec
    raise ConfigError(f"store must be a URL or a Store object, got {type(spec).__name__}")


__all__ = [
    "Blackboard",
    "BoardEntry",
    "Checkpoint",
    "HumanTicket",
    "MemoryStore",
    "SQLiteStore",
    "SessionRecord",
    "Snapshot",
    "Snapshots",
    "Store",
    "Tasks",
    "open_store",
    "write_with_retry",
]


def __getattr__(name: str) -> Any:
    """`SQLiteStore` (with sqlite3 and the audit trail) loads on first use."""
    if name == "SQLiteStore":
        from baton.backends.sqlite import SQLiteStore

        return SQLiteStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
