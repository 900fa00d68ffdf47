"""The wheel as a user gets it: built from a copy of the source tree, installed into a fresh
virtual environment, run there with no source tree on the path (shared by the packaging tests
through the session's `built` and `venv` fixtures, tests/packaging/conftest.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "CHANGELOG.md", "MANIFEST.in", "src")
"""What the build reads: copied aside, so that building writes nothing into the working tree."""


@dataclass(frozen=True)
class Built:
    """The copied source tree and the distributions built from it."""

    tree: Path
    wheel: Path
    sdist: Path


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


def in_venv(venv: Path, *args: str | Path, timeout: float = 120) -> str:
    """Run a program of the venv from an empty folder; its stdout."""
    work = venv.parent / "work"
    work.mkdir(exist_ok=True)
    return run([*args], cwd=work, env=clean_env(venv), timeout=timeout).stdout


def build(tmp_path_factory: pytest.TempPathFactory) -> Built:
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


def fresh_venv(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment holding the wheel with its `server` extra, nothing else."""
    home = tmp_path_factory.mktemp("venv")
    env = home / "env"
    run([sys.executable, "-m", "venv", env], cwd=home, env=clean_env(), timeout=120)
    pip = [env / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    run([*pip, f"{built.wheel}[server]"], cwd=home, env=clean_env(env), timeout=900)
    return env
