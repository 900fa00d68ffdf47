"""Running a team (or reading a store) for one CLI command, and leaving things as they were.

`with_team` imports the team, points it at the command's store, logs its events to the JSONL
file next to the database, runs one coroutine and puts the team back (store and sinks): the
imported object may be used again in the same process (tests, notebooks). `with_store` does the
same for the commands that only read or update the store (listings, ticket steps).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from baton.backends.base import Store
from baton.cli.common import CLIError, events_path, load_team, open_cli_store, sqlite_file
from baton.observe.base import EventSink
from baton.observe.jsonl import JSONLSink
from baton.topologies.team import Team

T = TypeVar("T")


def require_store(url: str) -> None:
    """Refuse (exit 1) a SQLite store whose file does not exist, instead of creating it."""
    db = sqlite_file(url)
    if db is not None and not db.exists():
        raise CLIError(f"no store at {db}: run `baton run ...` first, or pass --store URL", code=1)


def with_team(
    target: str,
    url: str,
    action: Callable[[Team], Coroutine[Any, Any, T]],
    *,
    live: EventSink | None = None,
    existing: bool = False,
) -> tuple[T, Path]:
    """Run `action(team)` on the team `target` over the store `url`; (its value, event log).

    `live` also receives the events as they happen. `existing` refuses a SQLite store file that
    does not exist yet. Errors of the run itself (`BatonError`, `ValueError`) propagate.
    """
    team = load_team(target)
    if existing:
        require_store(url)
    log_file = events_path(url)
    store = open_cli_store(url)
    previous = team.store
    sinks: list[EventSink] = []
    jsonl: JSONLSink | None = None
    team.use_store(store)

    async def go() -> T:
        try:
            return await action(team)
        finally:
            await store.close()

    try:
        try:
            jsonl = JSONLSink(log_file)
        except OSError as exc:
            asyncio.run(store.close())
            raise CLIError(f"cannot write the event log {log_file}: {exc}") from None
        sinks.append(jsonl)
        if live is not None:
            sinks.append(live)
        for sink in sinks:
            team.add_sink(sink)
        return asyncio.run(go()), log_file
    finally:
        for sink in sinks:
            team.remove_sink(sink)
        team.use_store(previous)  # leave the imported team as it was
        if jsonl is not None:
            jsonl.close()


def with_store(url: str, action: Callable[[Store], Coroutine[Any, Any, T]]) -> T | None:
    """Run `action(store)` on the store `url` and close it; None when its SQLite file does not
    exist (nothing was ever stored there, and reading does not create it)."""
    db = sqlite_file(url)
    if db is not None and not db.exists():
        return None
    store = open_cli_store(url)

    async def go() -> T:
        try:
            return await action(store)
        finally:
            await store.close()

    return asyncio.run(go())
