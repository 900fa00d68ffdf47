"""Options shared by the commands that run a team or read its store."""

from __future__ import annotations

from typing import Annotated

import typer

from baton.cli.common import DEFAULT_STORE_URL

STORE_HELP = (
    "Store URL: sqlite:///path.db, memory://, postgresql://user@host:5432/db or "
    f"redis://host:6379/0 (default {DEFAULT_STORE_URL})."
)
"""Help text of the `--store` option."""

StoreOption = Annotated[str | None, typer.Option("--store", help=STORE_HELP)]
"""`--store URL`."""

TeamOption = Annotated[
    str,
    typer.Option(
        "--team",
        "-t",
        metavar="MODULE:ATTRIBUTE",
        help="The team whose run continues, e.g. examples.customer_service:team.",
    ),
]
"""`--team MODULE:ATTRIBUTE` (required)."""

QuietOption = Annotated[bool, typer.Option("--quiet", "-q", help="Do not stream the events live.")]
"""`--quiet`."""

VerboseOption = Annotated[
    bool, typer.Option("--verbose", "-v", help="Stream more detail (routes, replies).")
]
"""`--verbose`."""
