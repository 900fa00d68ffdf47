"""Knowledge bases (`pip install 'baton-relay[kb]'`): documents chunked by structure, indexed
in Qdrant (a local folder or a server) and BM25, searched by meaning, words and ids, each
passage with its citation. Nothing here imports `qdrant-client` until a name is used."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from baton.knowledge.errors import DocumentError, KnowledgeBaseError
    from baton.knowledge.kb import KnowledgeBase
    from baton.knowledge.passages import Citation, IngestReport, Passage

__all__ = [
    "Citation",
    "DocumentError",
    "IngestReport",
    "KnowledgeBase",
    "KnowledgeBaseError",
    "Passage",
]

_WHERE = {
    "KnowledgeBase": "kb",
    "Citation": "passages",
    "IngestReport": "passages",
    "Passage": "passages",
    "KnowledgeBaseError": "errors",
    "DocumentError": "errors",
}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'baton.knowledge' has no attribute {name!r}")
    import importlib

    try:
        module = importlib.import_module(f"baton.knowledge.{where}")
    except ModuleNotFoundError as exc:
        if exc.name is not None and exc.name.split(".")[0] in (
            "qdrant_client",
            "bm25s",
            "pypdf",
            "portalocker",
        ):
            raise ImportError(
                f"baton.knowledge.{name} needs the kb extra ({exc.name}): "
                "pip install 'baton-relay[kb]'"
            ) from exc
        raise
    return getattr(module, name)
