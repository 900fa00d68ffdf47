"""`baton --version` and `baton.__version__` read pyproject.toml's version from the installed
metadata, and say so plainly when there is none."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

import pytest
from typer.testing import CliRunner

import baton
from baton import _version
from baton.cli.app import app


def test_the_version_is_the_installed_distributions() -> None:
    assert baton.__version__ == version("baton-relay")
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output == f"baton {version('baton-relay')}\n"


def test_a_source_tree_that_is_not_installed_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> str:
        raise PackageNotFoundError(name)

    monkeypatch.setattr(_version, "version", missing)
    assert _version.installed_version() is None
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output == "baton 0+unknown (the baton-relay distribution is not installed)\n"
