"""Running a team (or reading a store) for one CLI command, and leaving things as they were.

`with_team` imports the team and runs one coroutine with a binding of it (`Team.bind`) on the
command's store, logging its events to the JSONL file next to the database; the imported
object is never changed, so it may be used again in the same process (tests, notebooks).
`with_store` opens and closes the store for the commands that only read or update it
(listings, ticket steps).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import typer

from baton.backends.base import Store
from baton.cli.common import (
    CLIError,
    events_path,
    fail,
    load_team,
    open_cli_store,
    sqlite_file,
)
from baton.core.errors import (
    ApprovalError,
    BatonError,
    ConflictError,
    NoRunToResume,
    SessionOwnerError,
)
from baton.observe.base import EventSink
from baton.observe.jsonl import JSONLSink
from baton.runtime.result import RunResult
from baton.topologies.team import Team

if TYPE_CHECKING:
    from rich.console import Console

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
    try:
        jsonl = JSONLSink(log_file)
    except OSError as exc:
        asyncio.run(store.close())
        raise CLIError(f"cannot write the event log {log_file}: {exc}") from None
    sinks: list[EventSink] = [*team.sinks, jsonl, *([live] if live is not None else [])]

    async def go() -> T:
        try:  # a binding closes no store it was given: the command closes its own
            async with team.bind(store=store, sinks=sinks) as bound:
                return await action(bound)
        finally:
            await store.close()

    try:
        return asyncio.run(go()), log_file
    finally:
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


CLEAR_ERRORS: tuple[type[BaseException], ...] = (
    ApprovalError,
    NoRunToResume,
    ConflictError,
    SessionOwnerError,
)
"""Errors whose own message is the whole story (printed as they are, exit 1)."""


def run_and_report(
    out: Console,
    err: Console,
    target: str,
    url: str,
    action: Callable[[Team], Coroutine[Any, Any, RunResult]],
    *,
    live: EventSink | None = None,
    existing: bool = False,
) -> NoReturn:
    """Run `action(team)`, print the run's outcome and exit: 1 when it failed or the team
    refused it (with one clear line, no traceback), 2 for a usage mistake, else 0."""
    from baton.cli.output import print_outcome

    try:
        try:
            result, log_file = with_team(target, url, action, live=live, existing=existing)
        except ValueError as exc:  # what the caller gave is wrong (an empty message, ...)
            raise CLIError(str(exc)) from None
        except CLEAR_ERRORS as exc:
            raise CLIError(str(exc), code=1) from None
        except BatonError as exc:
            raise CLIError(f"the run failed: {exc}", code=1) from None
    except CLIError as exc:
        fail(err, exc)
        raise typer.Exit(exc.code) from None
    print_outcome(out, result, url, str(log_file), target)
    raise typer.Exit(1 if result.status == "failed" else 0)
