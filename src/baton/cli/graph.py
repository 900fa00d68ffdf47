"""`baton graph module:team`: the topology as a Mermaid flowchart."""

from __future__ import annotations

from typing import Annotated

import typer

from baton.cli.common import CLIError, fail, load_team


def graph(
    target: Annotated[
        str, typer.Argument(help="The team as MODULE:ATTRIBUTE, e.g. examples.desk:team.")
    ],
) -> None:
    """Print the team's topology as a Mermaid flowchart: agents, hand-offs, workers, tools.

    Paste it into a Markdown file (GitHub renders it) or any Mermaid renderer."""
    from rich.console import Console

    try:
        team = load_team(target)
    except CLIError as exc:
        fail(Console(stderr=True), exc)
        raise typer.Exit(exc.code) from None
    typer.echo(team.to_mermaid(), nl=False)
