"""Baton and the Agent2Agent protocol, with the official `a2a-sdk` (`pip install
'baton-relay[a2a]'`): remote agents as hand-off targets and supervisor workers, and a team
served as an A2A agent (`baton a2a serve`). Nothing here imports the SDK until a name is
used."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from baton.a2a.link import RemoteAgentError
    from baton.a2a.remote import RemoteAgent

__all__ = ["RemoteAgent", "RemoteAgentError"]

_WHERE = {
    "RemoteAgent": "remote",
    "RemoteAgentError": "link",
}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'baton.a2a' has no attribute {name!r}")
    import importlib

    try:
        module = importlib.import_module(f"baton.a2a.{where}")
    except ModuleNotFoundError as exc:
        if exc.name is not None and exc.name.split(".")[0] in ("a2a", "google", "httpx"):
            raise ImportError(
                f"baton.a2a.{name} needs the A2A SDK: pip install 'baton-relay[a2a]'"
            ) from exc
        raise
    return getattr(module, name)
