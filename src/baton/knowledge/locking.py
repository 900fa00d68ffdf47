"""The folder lock: one process at a time writes a knowledge base (in local mode, opens it)."""

from __future__ import annotations

from pathlib import Path

import portalocker

_HELD: set[Path] = set()
"""Lock files held in this process: only to say, when a lock is taken, who holds it."""


class FolderLock:
    """An exclusive lock on a file in the knowledge base's folder, held across processes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock: portalocker.Lock | None = None

    def acquire(self, timeout_s: float) -> None:
        """Take the lock, waiting up to `timeout_s`; TimeoutError if it stays taken."""
        if self._lock is not None:
            return
        lock = portalocker.Lock(
            self.path, mode="a", timeout=timeout_s, check_interval=0.05, fail_when_locked=False
        )
        try:
            lock.acquire()
        except portalocker.exceptions.LockException as exc:
            raise TimeoutError(f"{self.path} stayed locked for {timeout_s:g} s") from exc
        self._lock = lock
        _HELD.add(self.path.resolve())

    def held_here(self) -> bool:
        """Whether another object in this process holds this lock."""
        return self._lock is None and self.path.resolve() in _HELD

    def release(self) -> None:
        """Let the lock go (nothing happens if it is not held)."""
        if self._lock is not None:
            lock, self._lock = self._lock, None
            _HELD.discard(self.path.resolve())
            lock.release()
