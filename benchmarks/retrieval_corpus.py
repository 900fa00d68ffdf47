"""The corpus of the retrieval benchmark: the τ² policies (the needles) and Debian's Python
documentation (the haystack), and the padding that brings a knowledge base to 100k chunks.

The haystack is the manual as the `python3-doc` package ships it: the HTML pages and their
reStructuredText sources (`_sources/*.rst.txt`, the same manual as plain text, so other
chunk texts and other vectors). Nothing is copied out of the workload or the documentation:
the padding re-ingests the same files under other source paths through folders of symbolic
links (same texts, so the encoder's cache answers and the index grows at no encoding cost).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

PYDOC_CANDIDATES = (
    Path("/usr/share/doc/python3-doc/html"),
    Path("/usr/share/doc/python3/html"),
)
PYDOC_FOLDERS = (
    "library",
    "c-api",
    "whatsnew",
    "howto",
    "reference",
    "tutorial",
    "faq",
    "extending",
    "distutils",
    "using",
    "install",
    "installing",
    "distributing",
)
"""The manual's parts that are ingested (the generated indexes, search page and static files
are not: they are navigation, not text)."""
QUICK_FOLDERS = ("tutorial",)
INSTALL_HINT = (
    "run scripts/install_python_doc.sh (Debian/Ubuntu: apt-get install python3-doc), or pass "
    "--python-doc DIR with the HTML folder of the Python documentation"
)


class CorpusMissing(SystemExit):
    """A part of the corpus is not on this machine; the message says how to get it."""


def python_doc(explicit: str | Path | None = None) -> Path:
    """The Python HTML documentation folder (the one holding `library/`)."""
    if explicit is not None:
        candidates = [Path(explicit).expanduser()]
    else:
        candidates = [*PYDOC_CANDIDATES, *sorted(Path("/usr/share/doc").glob("python3*/html"))]
    for path in candidates:
        if (path / "library").is_dir():
            return path.resolve()
    where = ", ".join(str(p) for p in candidates[:3])
    raise CorpusMissing(f"no Python documentation found (looked in {where}): {INSTALL_HINT}")


def policy_files(tau2: Path, documents: list[str]) -> list[Path]:
    """The policy files, in the set's order; every one must exist."""
    files = [tau2 / d for d in documents]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise CorpusMissing(
            f"τ² policies missing: {', '.join(missing)}. The benchmark reads them from the "
            "shared workload folder (<repo>/../shared/workloads/tau2); set BATON_WORKLOADS to "
            "the folder holding tau2/, or pass --tau2 DIR"
        )
    return files


def pydoc_parts(html: Path, quick: bool) -> list[Path]:
    """The folders of the manual to ingest, HTML then reStructuredText sources (`--quick`:
    the tutorial only)."""
    names = QUICK_FOLDERS if quick else PYDOC_FOLDERS
    pages = [html / n for n in names if (html / n).is_dir()]
    return pages + [html / "_sources" / n for n in names if (html / "_sources" / n).is_dir()]


def _link_tree(source: Path, dest: Path, suffixes: tuple[str, ...]) -> Path:
    """`dest` mirrors `source`'s files with `suffixes` as symbolic links (made once)."""
    if dest.is_dir():
        return dest
    partial = dest.with_name(dest.name + ".partial")
    for root, _dirs, files in os.walk(source, followlinks=True):
        for name in files:
            if name.endswith(suffixes):
                target = Path(root, name)
                link = partial / target.relative_to(source)
                link.parent.mkdir(parents=True, exist_ok=True)
                if not link.is_symlink():
                    link.symlink_to(target.resolve())
    partial.mkdir(parents=True, exist_ok=True)
    partial.rename(dest)  # a half-made tree is never taken for a whole one
    return dest


def padding(html: Path, work: Path, parts: list[Path]) -> Iterator[Path]:
    """Folders to ingest after the corpus until a knowledge base is big enough: the manual's
    parts again, under `copy-N/` prefixes."""
    n = 1
    while True:
        for part in parts:
            name = str(part.relative_to(html))
            yield _link_tree(part, work / f"copy-{n}" / name, (".html", ".txt"))
        n += 1
