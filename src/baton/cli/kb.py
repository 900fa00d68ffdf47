"""`baton kb ingest | search | stats | remove`: knowledge bases from the command line.

The knowledge base's folder is `.baton/kb/NAME` unless `--path` names another; `--url` puts
the vectors on a Qdrant server (the manifest and lexical index stay in the folder).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from baton.cli.common import CLIError, fail
from baton.core.errors import BatonError

if TYPE_CHECKING:
    from baton.knowledge import KnowledgeBase

T = TypeVar("T")

kb_app = typer.Typer(
    help="Knowledge bases: ingest documents, search them with citations.",
    no_args_is_help=True,
)
"""The `baton kb` command group."""

PathOpt = Annotated[
    Path | None,
    typer.Option("--path", help="The knowledge base's folder (default .baton/kb/NAME)."),
]
UrlOpt = Annotated[
    str | None,
    typer.Option("--url", help="A Qdrant server URL for the vectors (default: local folder)."),
]
WaitOpt = Annotated[
    float,
    typer.Option("--wait", min=0, help="Seconds to wait for another process using the folder."),
]


def _run(make: Callable[[], KnowledgeBase], work: Callable[[KnowledgeBase], Awaitable[T]]) -> T:
    """Open the knowledge base, run `work`, close it; a clear message and exit 1 on error."""
    from rich.console import Console

    async def main() -> T:
        kb = make()
        try:
            return await work(kb)
        finally:
            await kb.close()

    try:
        return asyncio.run(main())
    except (BatonError, ValueError) as exc:
        fail(Console(stderr=True, highlight=False), CLIError(str(exc), code=1))
        raise typer.Exit(1) from None
    except ImportError as exc:
        fail(Console(stderr=True, highlight=False), CLIError(str(exc), code=1))
        raise typer.Exit(1) from None


def _kb(name: str, path: Path | None, url: str | None, **kwargs: Any) -> KnowledgeBase:
    from baton.knowledge import KnowledgeBase

    return KnowledgeBase(name, path=path, url=url, **kwargs)


@kb_app.command("ingest")
def ingest(
    source: Annotated[Path, typer.Argument(metavar="PATH", help="A file or a folder.")],
    kb: Annotated[str, typer.Option("--kb", help="The knowledge base's name.")],
    path: PathOpt = None,
    url: UrlOpt = None,
    rebuild: Annotated[
        bool, typer.Option("--rebuild", help="Delete the index first and ingest from scratch.")
    ] = False,
    max_file_mb: Annotated[
        float, typer.Option("--max-file-mb", min=0.001, help="Refuse larger files.")
    ] = 20.0,
    chunk_tokens: Annotated[int, typer.Option("--chunk-tokens", min=16)] = 300,
    overlap_tokens: Annotated[int, typer.Option("--overlap-tokens", min=0)] = 40,
    wait: WaitOpt = 60.0,
    progress: Annotated[bool, typer.Option("--progress/--no-progress")] = True,
) -> None:
    """Index a file or every Markdown, text, HTML and PDF file under a folder: changed files
    are replaced, deleted ones dropped, unchanged ones skipped; an interrupted ingestion
    resumes where it stopped."""
    from rich.console import Console
    from rich.markup import escape

    from baton.observe.terminal import safe_text

    out, err = Console(highlight=False), Console(stderr=True, highlight=False)

    def make() -> KnowledgeBase:
        return _kb(
            kb,
            path,
            url,
            max_file_mb=max_file_mb,
            chunk_tokens=chunk_tokens,
            overlap_tokens=overlap_tokens,
            lock_timeout_s=wait,
        )

    report = _run(make, lambda k: k.ingest(source, progress=progress, rebuild=rebuild))
    for where, why in report.skipped:
        err.print(
            f"[yellow]skipped[/] {escape(safe_text(where))}: {escape(safe_text(why))}",
            soft_wrap=True,
        )
    out.print(
        f"{kb}: {report.added} added, {report.replaced} replaced, {report.removed} removed, "
        f"{report.unchanged} unchanged, {report.chunks} chunks stored, "
        f"{len(report.skipped)} skipped"
    )
    if report.skipped and not (report.added or report.replaced or report.unchanged):
        raise typer.Exit(1)


@kb_app.command("search")
def search(
    name: Annotated[str, typer.Argument(metavar="NAME", help="The knowledge base's name.")],
    query: Annotated[str, typer.Argument(help="What to look for.")],
    k: Annotated[int, typer.Option("-k", min=1, help="How many passages.")] = 5,
    mode: Annotated[str, typer.Option("--mode", help="hybrid, vector or lexical.")] = "hybrid",
    source: Annotated[
        list[str] | None, typer.Option("--source", help="Only passages of this file.")
    ] = None,
    heading: Annotated[
        list[str] | None, typer.Option("--heading", help="Only passages under this heading.")
    ] = None,
    path: PathOpt = None,
    url: UrlOpt = None,
    wait: WaitOpt = 60.0,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per passage.")] = False,
) -> None:
    """Search a knowledge base: the best passages, each with its citation."""
    from rich.console import Console
    from rich.markup import escape

    from baton.observe.terminal import safe_text

    where: dict[str, list[str]] = {}
    if source:
        where["source"] = source
    if heading:
        where["heading"] = heading
    hits = _run(
        lambda: _kb(name, path, url, lock_timeout_s=wait),
        lambda kb: kb.search(query, k, mode=mode, where=where or None),  # type: ignore[arg-type]
    )
    out = Console(highlight=False)
    if as_json:
        for p in hits:
            typer.echo(json.dumps(p.model_dump(mode="json"), ensure_ascii=False))
        return
    if not hits:
        out.print("no passage found")
        return
    for n, p in enumerate(hits, 1):
        c = p.citation
        title = f"{c.source}" + (f" > {c.heading}" if c.heading else "")
        where_in = f"\\[{c.start}:{c.end}] score {p.score:.3f}"
        out.print(f"[bold]{n}. {escape(safe_text(title))}[/] [dim]{where_in}[/]", soft_wrap=True)
        out.print(escape(safe_text(p.text, newlines=True)), soft_wrap=True)
        out.print()


@kb_app.command("stats")
def stats(
    name: Annotated[str, typer.Argument(metavar="NAME", help="The knowledge base's name.")],
    path: PathOpt = None,
    url: UrlOpt = None,
    wait: WaitOpt = 60.0,
) -> None:
    """Files and chunks indexed, where, and with which encoder."""
    found = _run(lambda: _kb(name, path, url, lock_timeout_s=wait), lambda kb: kb.stats())
    typer.echo(json.dumps(found, ensure_ascii=False, indent=2))


@kb_app.command("remove")
def remove(
    name: Annotated[str, typer.Argument(metavar="NAME", help="The knowledge base's name.")],
    source: Annotated[str, typer.Argument(help="The file, as it was ingested.")],
    path: PathOpt = None,
    url: UrlOpt = None,
    wait: WaitOpt = 60.0,
) -> None:
    """Drop a file's chunks from a knowledge base."""
    n = _run(lambda: _kb(name, path, url, lock_timeout_s=wait), lambda kb: kb.remove(source))
    typer.echo(f"{name}: {n} chunks of {source} removed")
