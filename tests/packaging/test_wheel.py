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
import re
import tarfile
import zipfile
from pathlib import Path

import pytest
from wheel_kit import ROOT, Built, in_venv, package_files

pytestmark = pytest.mark.packaging

EXTRAS = {"server", "postgres", "redis", "mcp", "a2a", "kb", "notify", "otlp", "local", "all"}
"""The extras the documentation names (docs/install.md)."""
NOT_IN_ALL = {"all", "bench", "dev", "docs", "testing", "st", "local-server"}
"""Extras `all` leaves out: itself, the tools of the project (its docs site's included),
PyTorch's encoder, and the llama server's parts, which `local` holds."""
EXPECTED = "completed ['triage', 'billing']"
"""What the README's thirty seconds print first."""


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
        # --ignore-installed: the whole set, whatever another test installed here already
        *("--dry-run", "--ignore-installed", "--report", report, f"{built.wheel}[all]"),
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
