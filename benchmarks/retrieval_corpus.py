"""The corpus of the retrieval benchmark: the τ² policies (the needles) and Debian's Python
documentation (the haystack), and the padding that brings a knowledge base to 100k chunks.

The haystack is the manual as the `python3-doc` package ships it: the HTML pages and their
reStructuredText sources (`_sources/*.rst.txt`, the same manual as plain text, so other
chunk texts and other vectors). Nothing is copied out of the workload or the documentation:
the corpus is ingested through a folder of symbolic links, and the padding re-ingests the
same files under other source paths the same way (same texts, so the encoder's cache answers
and the index grows at no encoding cost).
"""

from __future__ import annotations

import os
import shutil
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
SUFFIXES = (".html", ".txt")
"""The manual's pages and their reStructuredText sources (`*.rst.txt`)."""
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


def _link(target: Path, link: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target.resolve())


def _fresh(folder: Path) -> Path:
    """An empty `folder` (whatever was there is removed: it holds links only)."""
    if folder.is_symlink() or folder.is_file():
        folder.unlink()
    elif folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    return folder


def stage(work: Path, policies: dict[str, Path], html: Path, parts: list[Path]) -> Path:
    """`work/haystack`: the corpus as one folder of symbolic links, so that one `ingest`
    call indexes it (the index is rebuilt once, not once per folder): `tau2/<doc>` for each
    policy, `python-doc/<path in the manual>` for each file of `parts`. Source names are
    stable from run to run, so a re-run finds every file unchanged."""
    root = _fresh(work / "haystack")
    for doc, path in policies.items():
        _link(path, root / "tau2" / doc)
    for part in parts:
        for root_dir, _dirs, files in os.walk(part, followlinks=True):
            for name in files:
                if name.endswith(SUFFIXES):
                    target = Path(root_dir, name)
                    _link(target, root / "python-doc" / target.relative_to(html))
    return root


def padding(work: Path, haystack: Path) -> Iterator[Path]:
    """Folders to ingest after the haystack until a knowledge base is big enough: the
    haystack's Python manual again, under `padding/copy-N/` (same texts, other sources)."""
    manual = haystack / "python-doc"
    n = 1
    while True:
        copy = _fresh(work / "padding" / f"copy-{n}")
        for root_dir, _dirs, files in os.walk(manual):
            for name in files:
                link = Path(root_dir, name)
                _link(link, copy / link.relative_to(manual))
        yield copy
        n += 1
