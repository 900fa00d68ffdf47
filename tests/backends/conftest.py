"""Fixtures shared by the store tests: one `store` fixture per backend."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from baton.backends import MemoryStore, SQLiteStore, Store

BACKENDS = ["memory", "sqlite"]


def make_store(kind: str, tmp_path: Path) -> Store:
    """A fresh store of backend `kind`; SQLite lives in a file under `tmp_path`."""
    if kind == "memory":
        return MemoryStore()
    if kind == "sqlite":
        return SQLiteStore(f"sqlite:///{tmp_path / 'baton.db'}")
    raise ValueError(f"unknown backend {kind!r}")


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """Every backend in turn, closed after the test."""
    s = make_store(request.param, tmp_path)
    try:
        yield s
    finally:
        await s.close()
