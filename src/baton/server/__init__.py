"""The API server of `baton serve`: a FastAPI app over a team (see docs/server.md).

Needs the `server` extra (FastAPI and uvicorn): `pip install 'baton-relay[server]'`.
"""

from __future__ import annotations

from baton.server.app import create_app
from baton.server.auth import AuthConfig, Principal

__all__ = ["AuthConfig", "Principal", "create_app"]
