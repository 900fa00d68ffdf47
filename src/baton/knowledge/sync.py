"""The sync faces of `KnowledgeBase`, for scripts: the same async code, run on one private
event loop thread, so an open index (and its folder lock) stays open between calls."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from types import TracebackType

    from baton.knowledge.passages import Citation, IngestReport, Passage

T = TypeVar("T")
S = TypeVar("S", bound="_Async")


class _Async(Protocol):
    """The async methods the sync faces run."""

    _loop: asyncio.AbstractEventLoop | None
    _thread: threading.Thread | None

    def _run(self, coro: Coroutine[Any, Any, T]) -> T: ...

    async def ingest(self, path: str | Path, **kwargs: Any) -> IngestReport: ...

    async def search(self, query: str, k: int = 5, **kwargs: Any) -> list[Passage]: ...

    async def remove(self, source: str | Path) -> int: ...

    async def stats(self) -> dict[str, Any]: ...

    async def verify(self, citation: Citation) -> bool: ...

    async def close(self) -> None: ...

    def close_sync(self: _Async) -> None: ...


class SyncFaces:
    """`ingest_sync`, `search_sync`, ... and `with kb:` over the async methods."""

    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on this object's own event loop thread."""
        if self._loop is None:
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="knowledge-base", daemon=True)
            thread.start()
            self._loop, self._thread = loop, thread
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def ingest_sync(self: _Async, path: str | Path, **kwargs: Any) -> IngestReport:
        """`ingest` for scripts."""
        return self._run(self.ingest(path, **kwargs))

    def search_sync(self: _Async, query: str, k: int = 5, **kwargs: Any) -> list[Passage]:
        """`search` for scripts."""
        return self._run(self.search(query, k, **kwargs))

    def remove_sync(self: _Async, source: str | Path) -> int:
        """`remove` for scripts."""
        return self._run(self.remove(source))

    def stats_sync(self: _Async) -> dict[str, Any]:
        """`stats` for scripts."""
        return self._run(self.stats())

    def verify_sync(self: _Async, citation: Citation) -> bool:
        """`verify` for scripts."""
        return self._run(self.verify(citation))

    def close_sync(self: _Async) -> None:
        """`close` for scripts; also stops the sync faces' event loop."""
        if self._loop is None:
            asyncio.run(self.close())
            return
        self._run(self.close())
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join()
        loop.close()

    def __enter__(self: S) -> S:
        return self

    def __exit__(
        self: _Async,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close_sync()
