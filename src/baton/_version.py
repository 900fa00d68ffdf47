"""Baton's version: pyproject.toml is its single source, read here from the installed
distribution's metadata (semantic versioning; what changed is in CHANGELOG.md)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

DISTRIBUTION = "baton-relay"
"""The name Baton is installed under (`pip install baton-relay`)."""
UNKNOWN = "0+unknown"
"""The version of a source tree imported without being installed: no metadata to read."""


def installed_version() -> str | None:
    """The version of the installed `baton-relay` distribution, or None when it is not installed
    (the source tree is imported from a path, not installed with pip)."""
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return None


__version__ = installed_version() or UNKNOWN
"""The version of Baton, as `baton --version` prints it."""
