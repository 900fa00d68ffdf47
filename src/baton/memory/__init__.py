"""Long-term memory per user and per agent, on Qdrant (`pip install 'baton-relay[kb]'`):
`Memory`, given to a team (`Team(..., memory=Memory())`), recalls what earlier conversations
left into each agent's view and keeps what a run leaves to remember. Nothing here imports
`qdrant-client` until a name is used."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from baton.memory.records import MemoryRecord, Provenance, Recalled
    from baton.memory.store import Memory, MemoryStoreError

__all__ = ["Memory", "MemoryRecord", "MemoryStoreError", "Provenance", "Recalled"]

_WHERE = {
    "Memory": "store",
    "MemoryStoreError": "store",
    "MemoryRecord": "records",
    "Provenance": "records",
    "Recalled": "records",
}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'baton.memory' has no attribute {name!r}")
    import importlib

    try:
        module = importlib.import_module(f"baton.memory.{where}")
    except ModuleNotFoundError as exc:
        if exc.name is not None and exc.name.split(".")[0] == "qdrant_client":
            raise ImportError(
                f"baton.memory.{name} needs qdrant-client: pip install 'baton-relay[kb]'"
            ) from exc
        raise
    return getattr(module, name)
