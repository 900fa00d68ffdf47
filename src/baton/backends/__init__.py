"""Store backends behind the store's capability protocols (`Store` is what the kernel needs),
opened by URL."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from baton.backends.base import (
    Blackboard,
    BoardEntry,
    Checkpoint,
    Checkpoints,
    Fence,
    FencedCheckpoints,
    HumanQueue,
    HumanTicket,
    KeptSnapshot,
    Leases,
    SessionRecord,
    Sessions,
    Snapshot,
    Snapshots,
    Store,
    Tasks,
)
from baton.backends.board import write_with_retry
from baton.backends.memory import MemoryStore
from baton.backends.outbox import Delivery, Outbox, OutboxItem
from baton.backends.retention import GcReport, Retaining, Retention
from baton.backends.sealing import (
    CheckpointKeyProvider,
    CheckpointKeys,
    RekeyReport,
    SealedCheckpoints,
)
from baton.core.errors import ConfigError

if TYPE_CHECKING:
    from baton.backends.archive import ArchiveReport, Archiving
    from baton.backends.audit import AuditTrail
    from baton.backends.postgres import PostgresStore as PostgresStore  # not in __all__: an extra
    from baton.backends.redis_store import RedisStore as RedisStore  # not in __all__: an extra
    from baton.backends.sqlite import SQLiteStore


def open_store(spec: Any, *, checkpoint_keys: CheckpointKeyProvider | str | None = None) -> Store:
    """A store from a URL (`memory://`, `sqlite:///path.db`, `postgresql://...`,
    `redis://...`), a Store object, or None (memory). `checkpoint_keys` (else
    `$BATON_CHECKPOINT_KEY`) encrypts the checkpoints of a SQLite, PostgreSQL or Redis store
    (`baton.backends.sealing`)."""
    if checkpoint_keys is not None and not isinstance(spec, str):
        raise ConfigError(
            "open_store(checkpoint_keys=...) applies to a store URL; pass the keys to the "
            "store object's constructor instead (e.g. SQLiteStore(url, checkpoint_keys=...))"
        )
    if spec is None:
        return MemoryStore()
    if isinstance(spec, str):
        if spec in ("memory://", "memory", ":memory:"):
            if checkpoint_keys is not None:
                raise ConfigError(
                    "the memory store keeps checkpoints in process memory, never at rest: "
                    "checkpoint_keys apply to sqlite://, postgresql:// and redis:// stores"
                )
            return MemoryStore()
        if spec.startswith("sqlite://"):
            from baton.backends.sqlite import SQLiteStore

            return SQLiteStore(spec, checkpoint_keys=checkpoint_keys)
        if spec.startswith(("postgresql://", "postgres://")):
            from baton.backends.postgres import PostgresStore

            return PostgresStore(spec, checkpoint_keys=checkpoint_keys)
        if spec.startswith(("redis://", "rediss://", "unix://")):
            from baton.backends.redis_store import RedisStore

            return RedisStore(spec, checkpoint_keys=checkpoint_keys)
        raise ConfigError(
            f"unknown store URL {spec!r}: use 'memory://', 'sqlite:///path/to/baton.db', "
            "'postgresql://user@host:5432/db' or 'redis://host:6379/0'"
        )
    if isinstance(spec, Store):
        return spec
    raise ConfigError(f"store must be a URL or a Store object, got {type(spec).__name__}")


__all__ = [
    "ArchiveReport",
    "Archiving",
    "AuditTrail",
    "Blackboard",
    "BoardEntry",
    "Checkpoint",
    "CheckpointKeyProvider",
    "CheckpointKeys",
    "Checkpoints",
    "Delivery",
    "Fence",
    "FencedCheckpoints",
    "GcReport",
    "HumanQueue",
    "HumanTicket",
    "KeptSnapshot",
    "Leases",
    "MemoryStore",
    "Outbox",
    "OutboxItem",
    "RekeyReport",
    "Retaining",
    "Retention",
    "SQLiteStore",
    "SealedCheckpoints",
    "SessionRecord",
    "Sessions",
    "Snapshot",
    "Snapshots",
    "Store",
    "Tasks",
    "open_store",
    "write_with_retry",
]


def __getattr__(name: str) -> Any:
    """`SQLiteStore` (with sqlite3 and the audit trail), `PostgresStore` (with the `postgres`
    extra), `RedisStore` (with the `redis` extra) and the `AuditTrail` and `Archiving`
    capabilities (with `ArchiveReport`) load on first use."""
    if name == "AuditTrail":
        from baton.backends.audit import AuditTrail

        return AuditTrail
    if name in ("Archiving", "ArchiveReport"):
        from baton.backends import archive

        return getattr(archive, name)
    if name == "SQLiteStore":
        from baton.backends.sqlite import SQLiteStore

        return SQLiteStore
    if name == "PostgresStore":
        from baton.backends.postgres import PostgresStore

        return PostgresStore
    if name == "RedisStore":
        from baton.backends.redis_store import RedisStore

        return RedisStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
