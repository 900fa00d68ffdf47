"""Make the repository's `examples` and `benchmarks` importable, as `baton eval` does from the
repository root."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@pytest.fixture(autouse=True)
def _restore_sys_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI puts the working directory on sys.path; undo that after each test."""
    monkeypatch.setattr(sys, "path", list(sys.path))
