"""Helpers shared by the CLI commands: loading a team, opening stores, reporting errors."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from baton.backends import open_store
from baton.backends.base import Store
from baton.core.errors import BatonError
from baton.topologies.team import Team

if TYPE_CHECKING:
    from rich.console import Console

DEFAULT_STORE_URL = "sqlite:///.baton/baton.db"
"""The store the CLI uses when `--store` is not given."""

EVENTS_FILE = "events.jsonl"
"""Name of the JSONL event log the CLI writes next to its SQLite database."""


class CLIError(Exception):
    """A problem the user can fix; the CLI prints the message (no traceback) and exits."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def ensure_cwd_on_path() -> None:
    """Put the working directory first on `sys.path`, so `examples.x:team` imports from here."""
    cwd = os.getcwd()
    if cwd in sys.path:
        sys.path.remove(cwd)
    sys.path.insert(0, cwd)


def load_team(spec: str) -> Team:
    """The `Team` named by `module:attribute` (the attribute may be dotted): a Team, or a
    function of no arguments that builds one, or builds an object with a `team` (as
    `baton.desk:build_desk` does)."""
    obj = load_object(spec)
    if not isinstance(obj, Team) and callable(obj) and not isinstance(obj, type):
        try:
            obj = obj()
        except TypeError as exc:
            raise CLIError(
                f"{spec} is a function that could not be called without arguments ({exc}); "
                "name a Team or a function of no arguments that builds one"
            ) from None
    obj = getattr(obj, "team", obj)
    if not isinstance(obj, Team):
        raise CLIError(
            f"{spec} is a {type(obj).__name__}, not a baton Team or a function that builds one"
        )
    return obj


def load_object(spec: str) -> object:
    """The object named by `module:attribute` (the attribute may be dotted)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise CLIError(
            f"expected MODULE:ATTRIBUTE, got {spec!r} (e.g. examples.customer_service:team)"
        )
    ensure_cwd_on_path()
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing and (module_name == missing or module_name.startswith(missing + ".")):
            raise CLIError(
                f"cannot import module {module_name!r}: no module named {missing!r} "
                f"(looked in {os.getcwd()} and on sys.path; run from the folder that "
                "contains it)"
            ) from None
        raise CLIError(
            f"importing module {module_name!r} failed: it needs {missing or exc}, "
            "which is not installed"
        ) from None
    except Exception as exc:
        raise CLIError(
            f"importing module {module_name!r} failed: {type(exc).__name__}: {exc}"
        ) from None
    obj: object = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise CLIError(f"module {module_name!r} has no attribute {attr!r}") from None
    return obj


def sqlite_file(url: str) -> Path | None:
    """The database file of a `sqlite:///` URL, or None for other stores and `:memory:`."""
    if not url.startswith("sqlite://"):
        return None
    from baton.backends.sqlite import parse_sqlite_url

    try:
        path = parse_sqlite_url(url)
    except BatonError as exc:
        raise CLIError(str(exc)) from None
    return None if path == ":memory:" else Path(path)


def events_path(url: str) -> Path:
    """Where the CLI appends the JSONL event log for the store `url`."""
    db = sqlite_file(url)
    if db is not None:
        return db.parent / EVENTS_FILE
    db = sqlite_file(DEFAULT_STORE_URL)
    assert db is not None
    return db.parent / EVENTS_FILE


def open_cli_store(url: str) -> Store:
    """`open_store(url)` with store problems turned into `CLIError`s."""
    try:
        return open_store(url)
    except BatonError as exc:
        raise CLIError(str(exc)) from None


def fail(console: Console, error: CLIError) -> None:
    """Print `error` on `console` (stderr) as one clear line."""
    from rich.text import Text

    from baton.observe.terminal import safe

    # the message may quote what a user or a model wrote: shown, never obeyed by the terminal
    console.print(Text.assemble(("error: ", "bold red"), safe(error.message)), soft_wrap=True)
