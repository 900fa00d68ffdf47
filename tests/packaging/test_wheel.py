"""The wheel and the sdist as a user gets them: built with `python -m build` from a copy of the
source tree, the wheel installed (with the `server` extra) into a fresh virtual environment and
run there with no source tree on the path: `baton --version`, `--help`, `serve --help`, and the
README's "Thirty seconds of Baton" on the scripted model.

One module of about two minutes on 2 cores: the build takes seconds, pip most of the rest
(dependencies come from the configured package index; pip's cache is used). Nothing else is
downloaded. Deselect it with `-m "not packaging"`.
"""

from __future__ import annotations

import email.parser
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.packaging

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "CHANGELOG.md", "MANIFEST.in", "src")
"""What the build reads: copied aside, so that building writes nothing into the working tree."""
EXTRAS = {"server", "postgres", "redis", "mcp", "a2a", "kb", "notify", "otlp", "local", "all"}
"""The extras the documentation names (docs/install.md)."""
NOT_IN_ALL = {"all", "bench", "dev", "testing", "st", "local-server"}
"""Extras `all` leaves out: itself, the tools of the project, PyTorch's encoder, and the llama
server's parts, which `local` holds."""
EXPECTED = "completed ['triage', 'billing']"
"""What the README's thirty seconds print first."""


@dataclass(frozen=True)
class Built:
    """The copied source tree and the distributions built from it."""

    tree: Path
    wheel: Path
    sdist: Path


def project_version() -> str:
    """[project] version in pyproject.toml, the single source of the version."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    project = text.split("\n[project]\n", 1)[1].split("\n[", 1)[0]
    found = re.search(r'^version\s*=\s*"([^"]+)"', project, re.MULTILINE)
    assert found, "pyproject.toml has no [project] version"
    return found.group(1)


def thirty_seconds(readme: str) -> str:
    """The python blocks between the README's "Thirty seconds of Baton" heading and the next
    heading (lines in a code block that start with `#` are code, not headings)."""
    lines = readme.split("## Thirty seconds of Baton\n", 1)[1].splitlines()
    blocks: list[list[str]] = []
    fence: str | None = None
    for line in lines:
        if fence is None:
            if re.match(r"#{1,6} ", line):
                break
            if line.startswith("```"):
                fence = line[3:].strip()
                if fence == "python":
                    blocks.append([])
        elif line.startswith("```"):
            fence = None
        elif fence == "python":
            blocks[-1].append(line)
    assert blocks, "README.md has no python block under 'Thirty seconds of Baton'"
    return "\n\n".join("\n".join(block) for block in blocks) + "\n"


def documented_extras() -> set[str]:
    """Every extra that README.md and docs/ tell users to install (`baton-relay[a,b]`)."""
    found: set[str] = set()
    for doc in [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]:
        for names in re.findall(r"baton-relay\[([\w,-]+)\]", doc.read_text(encoding="utf-8")):
            found.update(names.split(","))
    assert found >= EXTRAS, f"docs/install.md names no install command for {EXTRAS - found}"
    return found


def clean_env(venv: Path | None = None) -> dict[str, str]:
    """This process's environment (pip's index settings included) without anything that would
    put a source tree or another environment on the path."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV")
    }
    env["PYTHONNOUSERSITE"] = "1"
    if venv is not None:
        env["VIRTUAL_ENV"] = str(venv)
        env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


def run(
    cmd: list[str | Path], cwd: Path, env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    """Run `cmd`; a failure shows its output."""
    done = subprocess.run(
        [str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, (
        f"{' '.join(map(str, cmd))} exited with {done.returncode}\n"
        f"--- stdout\n{done.stdout[-4000:]}\n--- stderr\n{done.stderr[-4000:]}"
    )
    return done


def package_files(root: Path) -> set[str]:
    """The files of the `baton` package under `root`, as paths relative to it."""
    return {
        p.relative_to(root).as_posix()
        for p in (root / "baton").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """`python -m build --no-isolation` (the sdist, then the wheel from the sdist) on a copy of
    the source tree, with this environment's setuptools (the `dev` extra brings it)."""
    pytest.importorskip("build", reason="the `build` package (the dev extra) builds the wheel")
    tree = tmp_path_factory.mktemp("tree")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, tree / name, ignore=ignore)
        else:
            shutil.copy2(source, tree / name)
    out = tmp_path_factory.mktemp("dist")
    run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", out, tree],
        cwd=tree,
        env=clean_env(),
        timeout=300,
    )
    (wheel,) = out.glob("*.whl")
    (sdist,) = out.glob("*.tar.gz")
    return Built(tree, wheel, sdist)


@pytest.fixture(scope="module")
def venv(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment holding the wheel with its `server` extra, nothing else."""
    home = tmp_path_factory.mktemp("venv")
    env = home / "env"
    run([sys.executable, "-m", "venv", env], cwd=home, env=clean_env(), timeout=120)
    pip = [env / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    run([*pip, f"{built.wheel}[server]"], cwd=home, env=clean_env(env), timeout=900)
    return env


def in_venv(venv: Path, *args: str | Path, timeout: float = 120) -> str:
    """Run a program of the venv from an empty folder; its stdout."""
    work = venv.parent / "work"
    work.mkdir(exist_ok=True)
    return run([*args], cwd=work, env=clean_env(venv), timeout=timeout).stdout


# ----------------------------------------------------------------------------- the files
def test_the_wheel_holds_the_whole_package(built: Built) -> None:
    """Every file of src/baton ships (modules and package data: the dashboard, py.typed, the
    weight lists), and nothing else but the metadata."""
    with zipfile.ZipFile(built.wheel) as whl:
        names = set(whl.namelist())
    dist_info = f"baton_relay-{project_version()}.dist-info/"
    assert {n for n in names if not n.startswith(dist_info)} == package_files(built.tree / "src")
    for required in ("py.typed", "server/static/index.html", "server/static/views/chat.js"):
        assert f"baton/{required}" in names
    assert any(n.startswith("baton/models/local/requirements/model-") for n in names)


def test_the_wheel_metadata_names_the_licence_the_readme_and_the_command(built: Built) -> None:
    version = project_version()
    assert built.wheel.name == f"baton_relay-{version}-py3-none-any.whl"
    dist_info = f"baton_relay-{version}.dist-info"
    with zipfile.ZipFile(built.wheel) as whl:
        metadata = email.parser.Parser().parsestr(whl.read(f"{dist_info}/METADATA").decode())
        licence = whl.read(f"{dist_info}/licenses/LICENSE").decode()
        entry_points = whl.read(f"{dist_info}/entry_points.txt").decode()
    assert metadata["Name"] == "baton-relay" and metadata["Version"] == version
    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata["License-File"] == "LICENSE"
    assert licence == (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in licence and "Version 2.0, January 2004" in licence
    assert metadata["Description-Content-Type"] == "text/markdown"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert metadata.get_payload().strip() == readme.strip()
    assert "baton = baton.cli.app:main" in entry_points

    extras = set(metadata.get_all("Provides-Extra") or [])
    assert extras >= EXTRAS
    assert extras >= documented_extras(), "the docs name an extra the package lacks"
    in_all = {
        name
        for req in metadata.get_all("Requires-Dist") or []
        if req.startswith("baton-relay[") and 'extra == "all"' in req
        for name in req.split("[", 1)[1].split("]", 1)[0].split(",")
    }
    assert in_all == extras - NOT_IN_ALL


def test_the_sdist_holds_the_licence_the_readme_and_the_changelog(built: Built) -> None:
    top = f"baton_relay-{project_version()}"
    with tarfile.open(built.sdist) as sdist:
        names = {m.name.removeprefix(f"{top}/") for m in sdist.getmembers() if m.isfile()}
    for name in ("LICENSE", "README.md", "CHANGELOG.md", "pyproject.toml", "PKG-INFO"):
        assert name in names, f"the sdist has no {name}"
    package = {n.removeprefix("src/") for n in names if n.startswith("src/baton/")}
    assert package == package_files(built.tree / "src")
    assert not any(n.startswith("tests/") for n in names)


def test_the_changelog_has_an_entry_for_this_version() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert re.search(rf"^## {re.escape(project_version())}\b", changelog, re.MULTILINE)


# ------------------------------------------------------------------ in a fresh environment
def test_baton_imports_from_the_venv_not_the_source_tree(venv: Path) -> None:
    out = in_venv(
        venv, venv / "bin" / "python", "-c", "import baton, sys; print(baton.__file__, sys.path)"
    )
    where = Path(out.split(" ", 1)[0]).resolve()
    assert where.is_relative_to(venv.resolve()), where
    assert "site-packages" in where.parts
    assert str(ROOT) not in out, out


def test_baton_version_and_help(venv: Path) -> None:
    baton = venv / "bin" / "baton"
    assert in_venv(venv, baton, "--version") == f"baton {project_version()}\n"
    listing = in_venv(venv, baton, "--help")
    for command in ("run", "serve", "demo", "install-local-model"):
        assert command in listing
    serve = in_venv(venv, baton, "serve", "--help")
    assert "Usage: baton serve" in serve and "--host" in serve


def test_the_server_and_its_dashboard_files_load(venv: Path) -> None:
    """The `server` extra is enough for the API server, and its static files are found."""
    code = (
        "import baton.server.app; from baton.server.ops import STATIC_DIR; "
        "print((STATIC_DIR / 'index.html').is_file(), STATIC_DIR)"
    )
    out = in_venv(venv, venv / "bin" / "python", "-c", code)
    assert out.startswith("True ") and str(venv) in out, out


def test_the_local_model_installer_finds_its_weight_lists(venv: Path) -> None:
    code = "from baton.models.local.install import known_models; print(known_models())"
    out = in_venv(venv, venv / "bin" / "python", "-c", code)
    assert "qwen2.5-coder-1.5b" in out and "smollm2-135m" in out


def test_the_readme_thirty_seconds_run(venv: Path) -> None:
    script = venv.parent / "thirty_seconds.py"
    script.write_text(thirty_seconds((ROOT / "README.md").read_text(encoding="utf-8")))
    out = in_venv(venv, venv / "bin" / "python", script)
    assert EXPECTED in out, out


def test_the_all_extra_resolves(built: Built, venv: Path) -> None:
    """`pip install 'baton-relay[all]'` finds a consistent set on the package index, with a
    package of each runtime extra (resolved only: nothing is installed)."""
    report = venv.parent / "all.json"
    in_venv(
        venv,
        *(venv / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check"),
        *("--dry-run", "--report", report, f"{built.wheel}[all]"),
        timeout=600,
    )
    chosen = {
        item["metadata"]["name"].lower() for item in json.loads(report.read_text())["install"]
    }
    for extra, package in {
        "postgres": "asyncpg",
        "redis": "redis",
        "mcp": "mcp",
        "a2a": "a2a-sdk",
        "kb": "qdrant-client",
        "otlp": "opentelemetry-exporter-otlp-proto-http",
        "local": "diskcache",
    }.items():
        assert package in chosen, f"[all] brings no {package} (the {extra} extra)"
