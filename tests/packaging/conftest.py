"""The packaging tests: the built distributions, and the embedded model's installer."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "packaging: builds the wheel and installs it into a fresh venv (about two minutes; "
        "needs the package index)",
    )
