"""The packaging tests: the built distributions, and the embedded model's installer; one wheel
and one fresh virtual environment for the whole session (`wheel_kit`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from wheel_kit import Built, build, fresh_venv


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "packaging: builds the wheel and installs it into a fresh venv (about two minutes; "
        "needs the package index)",
    )


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """The sdist and the wheel, built once for the session."""
    return build(tmp_path_factory)


@pytest.fixture(scope="session")
def venv(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment holding the wheel with its `server` extra."""
    return fresh_venv(built, tmp_path_factory)
