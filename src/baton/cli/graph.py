"""`baton graph module:team`: the topology as a Mermaid flowchart."""

from __future__ import annotations

from typing import Annotated

import typer

from baton.cli.common import CLIError, fail, load_object


def graph(
    target: Annotated[
        str,
        typer.Argument(help="The team or graph as MODULE:ATTRIBUTE, e.g. baton.desk:team."),
    ],
) -> None:
    """Print the topology as a Mermaid flowchart: agents, hand-offs, workers, tools; a
    graph's nodes and edges, conditional edges labelled.

    Paste it into a Markdown file (GitHub renders it) or any Mermaid renderer."""
    from rich.console import Console

    from baton.topologies.graph import Graph
    from baton.topologies.team import Team

    try:
        found = load_object(target)
        if not isinstance(found, (Team, Graph)):
            raise CLIError(f"{target} is a {type(found).__name__}, not a baton Team or Graph")
    except CLIError as exc:
        fail(Console(stderr=True), exc)
        raise typer.Exit(exc.code) from None
    typer.echo(found.to_mermaid(), nl=False)
