"""One ingestion: find the files, skip the unchanged, (re)index the rest, drop the gone."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from baton.knowledge.documents import read_document, supported
from baton.knowledge.errors import DocumentError
from baton.knowledge.passages import IngestReport

if TYPE_CHECKING:
    from baton.knowledge.kb import KnowledgeBase


def discover(target: Path) -> list[tuple[Path, str]]:
    """(file, source name) of `target` itself, or of every supported file under it (hidden
    files and folders left out), in a stable order. Source names keep the form `target` was
    given in (relative stays relative)."""
    if target.is_file():
        return [(target, target.as_posix())]
    out = []
    for p in sorted(target.rglob("*")):
        rel = p.relative_to(target)
        if any(part.startswith(".") for part in rel.parts) or not p.is_file():
            continue
        if supported(p):
            out.append((p, (target / rel).as_posix()))
    return out


def under(source: str, folder: Path) -> bool:
    """Whether the source name `source` lies under `folder` (as given)."""
    return PurePosixPath(source).is_relative_to(PurePosixPath(folder.as_posix()))


@contextmanager
def _bar(show: bool, total: int) -> Iterator[Callable[[str, int], None]]:
    """A rich progress bar over files (a no-op when `show` is false)."""
    if not show:
        yield lambda description, advance: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    with Progress(
        TextColumn("[bold]ingesting"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
        console=Console(stderr=True),
    ) as progress:
        task = progress.add_task("", total=total)

        def step(description: str, advance: int) -> None:
            progress.update(task, description=description, advance=advance)

        yield step


async def ingest(
    kb: KnowledgeBase,
    target: Path,
    *,
    progress: bool,
    on_file: Callable[[str, int], None] | None,
) -> IngestReport:
    """Ingest `target` into `kb` (open, and holding its lock)."""
    files = await asyncio.to_thread(discover, target)
    manifest = kb._need_manifest()
    known: dict[str, Any] = await asyncio.to_thread(manifest.files)
    report = IngestReport()
    changed = False
    try:
        with _bar(progress, len(files)) as step:
            for path, source in files:
                step(source, 0)
                try:
                    doc = await asyncio.to_thread(read_document, path, source, kb.max_file_mb)
                except DocumentError as exc:
                    report.skipped.append((source, str(exc)))
                    if source in known:  # its old content is no longer what the file says
                        await kb._drop_file(source)
                        report.removed += 1
                        changed = True
                    step(source, 1)
                    continue
                old = known.get(source)
                version = kb._version(doc.sha256)
                if old == (version, "done"):
                    report.unchanged += 1
                    step(source, 1)
                    continue
                rows = await asyncio.to_thread(
                    kb._chunk_rows, source, doc.text, doc.headings, version
                )
                changed = True
                await kb._store_file(source, version, rows, doc.sha256)
                if old is None or old[1] != "done":
                    report.added += 1
                else:
                    report.replaced += 1
                report.chunks += len(rows)
                if on_file is not None:
                    on_file(source, len(rows))
                step(source, 1)
        if target.is_dir():
            seen = {s for _, s in files}
            for source in known:
                if source not in seen and under(source, target):
                    await kb._drop_file(source)
                    report.removed += 1
                    changed = True
    finally:
        if changed:  # what was committed is searchable, even if a later file failed
            await kb._refresh()
    return report
