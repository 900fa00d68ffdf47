"""Fixtures for the CLI tests: a runner with a wide, colourless terminal, run from the repo root."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

REPO = Path(__file__).resolve().parents[2]
"""The repository root (where `examples/` lives)."""

CLI_ENV = {"COLUMNS": "200", "FORCE_COLOR": None, "NO_COLOR": "1", "TERM": "dumb"}
"""Environment for CLI runs: wide lines so nothing wraps, no colour codes."""


@pytest.fixture(autouse=True)
def _restore_sys_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI puts the working directory on sys.path; undo that after each test."""
    monkeypatch.setattr(sys, "path", list(sys.path))


@pytest.fixture
def runner() -> CliRunner:
    """A typer test runner with `CLI_ENV`."""
    return CliRunner(env=CLI_ENV)


@pytest.fixture
def in_repo(monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run the test from the repository root, like a user would."""
    monkeypatch.chdir(REPO)
    return REPO


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    """A fresh SQLite store URL in the test's temporary folder."""
    return f"sqlite:///{tmp_path}/b.db"
