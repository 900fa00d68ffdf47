"""`baton replay SESSION`: run a stored session again through the current code, with the
recorded model responses and tool results, and show where it first differs.

SESSION is a session id in `--store`, or a fixture file written by `--export`.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from baton.cli.common import DEFAULT_STORE_URL, CLIError, fail, load_team
from baton.cli.driver import require_store
from baton.cli.options import StoreOption
from baton.core.errors import BatonError

if TYPE_CHECKING:
    from baton.replay import Recording


async def _read(url: str, session: str) -> Recording:
    from baton.cli.common import open_cli_store
    from baton.replay import read_recording

    store = open_cli_store(url)
    try:
        return await read_recording(store, session)
    finally:
        await store.close()


def _recording(session: str, store: str | None) -> Recording:
    from baton.replay import Recording

    if session.endswith(".json"):
        return Recording.load(session)
    url = store or DEFAULT_STORE_URL
    require_store(url)
    return asyncio.run(_read(url, session))


def replay_command(
    session: Annotated[
        str, typer.Argument(help="Session id in the store, or a fixture file (.json).")
    ],
    store: StoreOption = None,
    team: Annotated[
        str | None,
        typer.Option(
            "--team",
            "-t",
            metavar="MODULE:ATTRIBUTE",
            help="The team to replay through (the current code); default: the fixture's.",
        ),
    ] = None,
    run: Annotated[
        str | None, typer.Option("--run", help="Replay the session up to this run id.")
    ] = None,
    until: Annotated[
        int | None,
        typer.Option("--until", min=1, help="Compare only the first N steps of the last run."),
    ] = None,
    live_model: Annotated[
        bool,
        typer.Option(
            "--live-model",
            help="Ask the team's model again (tools still answer from the record).",
        ),
    ] = False,
    export: Annotated[
        Path | None,
        typer.Option("--export", help="Write the session as a self-contained fixture file."),
    ] = None,
) -> None:
    """Replay a recorded session offline, step by step, and show the first divergence.

    Tools never run: each call answers with its recorded result. Exit 0 when every step is
    as recorded, 1 at a divergence (shown side by side), 2 for a usage mistake.
    """
    from rich.console import Console

    from baton.replay import replay
    from baton.replay.show import print_report

    out, err = Console(), Console(stderr=True)
    try:
        try:
            recording = _recording(session, store).upto(run)
            if export is not None:
                if team is not None:
                    recording = recording.model_copy(update={"team": team})
                written = recording.dump(export)
                out.print(f"wrote {written} ({len(recording.runs)} runs, secrets masked)")
                if team is None:
                    raise typer.Exit(0)
            target = team or recording.team
            if target is None:
                raise CLIError(
                    "pass --team MODULE:ATTRIBUTE: the team to replay the session through"
                )
            loaded = load_team(target)
            report = asyncio.run(replay(loaded, recording, live_model=live_model, until=until))
        except BatonError as exc:
            raise CLIError(str(exc), code=1) from None
    except CLIError as exc:
        fail(err, exc)
        raise typer.Exit(exc.code) from None
    print_report(out, report)
    raise typer.Exit(0 if report.ok else 1)
