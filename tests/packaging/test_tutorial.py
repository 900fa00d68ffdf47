"""The documentation's tutorial, followed as a new user would: its five steps' commands, taken
from the pages (`<!-- tutorial-step: N -->`), run in order in one empty folder, in a fresh
virtual environment holding only the built wheel (`wheel_kit`), with no source tree on the
path.

Each `pip install baton-relay[...]` line installs the built wheel (with the same extras)
instead of a published release. The embedded model's steps run on `smollm2-135m`
(`BATON_LOCAL_MODEL`, which `baton install-local-model` and `model="local"` follow): the same
commands as on the default 1.5B model, with answers that are only plumbing. Step 2's last
command, `baton demo`, plays six requests for minutes on any embedded model; here it plays on
the scripted model (`--model scripted`), which shows the desk ships in the wheel, and the
desk's requests on the 1.5B model are played by tests/models/test_demo_over_llama_server.py.
Step 3's OpenAI-compatible server is llama.cpp's own (`llama_cpp.server`, which the `local`
extra installs) serving the small model on loopback.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.test_docs_site import tutorial_steps
from wheel_kit import Built, clean_env

pytestmark = pytest.mark.packaging

SMALL = "smollm2-135m"
"""The embedded model the steps run on here (see the module docstring)."""
PIP = re.compile(r"""pip install ["']?baton-relay(\[[\w,-]+\])?["']?""")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(url: str, seconds: float, proc: subprocess.Popen[str]) -> bytes:
    """The body of `url` once it answers 200; fails if `proc` exits first or time runs out."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the server exited with {proc.returncode} before {url} answered")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return bytes(response.read())
        except OSError:
            time.sleep(0.5)
    pytest.fail(f"{url} did not answer within {seconds:.0f} s")


def stop(proc: subprocess.Popen[str]) -> None:
    """Stop a server started in its own process group, and everything it started."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=20)


class Tutorial:
    """The steps' shell, in one folder and one environment."""

    def __init__(self, built: Built, venv: Path, folder: Path) -> None:
        self.wheel = built.wheel
        self.folder = folder
        self.env = {**clean_env(venv), "BATON_LOCAL_MODEL": SMALL}
        for name in ("BATON_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL"):
            self.env.pop(name, None)
        self.steps = dict(tutorial_steps())

    def commands(self, n: int) -> str:
        """Step `n`'s commands, each `pip install baton-relay[...]` installing the wheel, and
        `baton demo` on the scripted model (the module docstring says why)."""
        out = PIP.sub(lambda m: f'pip install -q "{self.wheel}{m[1] or ""}"', self.steps[n])
        return re.sub(r"^baton demo$", "baton demo --model scripted", out, flags=re.M)

    def run(self, n: int, timeout: float = 600, **env: str) -> str:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", self.commands(n)],
            cwd=self.folder,
            env={**self.env, **env},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert done.returncode == 0, (
            f"tutorial step {n} exited with {done.returncode}\n--- commands\n{self.commands(n)}"
            f"\n--- stdout\n{done.stdout[-6000:]}\n--- stderr\n{done.stderr[-6000:]}"
        )
        return done.stdout + done.stderr

    def start(self, n: int, **env: str) -> subprocess.Popen[str]:
        """Step `n` running in the background, its output in a file (a pipe nobody reads
        would block a chatty server)."""
        log = (self.folder / f"step-{n}.log").open("w")
        return subprocess.Popen(
            ["bash", "-euo", "pipefail", "-c", self.commands(n)],
            cwd=self.folder,
            env={**self.env, **env},
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )


@pytest.fixture(scope="module")
def tutorial(built: Built, venv: Path, tmp_path_factory: pytest.TempPathFactory) -> Tutorial:
    return Tutorial(built, venv, tmp_path_factory.mktemp("tutorial"))


@pytest.fixture(scope="module")
def llama_server(tutorial: Tutorial, venv: Path) -> Iterator[str]:
    """llama.cpp's OpenAI-compatible server on the small model (after step 2 installed it)."""
    python = venv / "bin" / "python"
    where = subprocess.run(
        [
            python,
            "-c",
            f"from baton.models.local import weights_path; print(weights_path({SMALL!r}))",
        ],
        cwd=tutorial.folder,
        env=tutorial.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert where.returncode == 0, where.stderr
    port = free_port()
    server = subprocess.Popen(
        [
            python,
            "-m",
            "llama_cpp.server",
            "--model",
            where.stdout.strip(),
            "--model_alias",
            SMALL,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_ctx",
            "4096",
        ],
        cwd=tutorial.folder,
        env=tutorial.env,
        stdout=(tutorial.folder / "llama-server.log").open("w"),
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        wait_for(f"http://127.0.0.1:{port}/v1/models", 120, server)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        stop(server)


def test_step_1_the_scripted_desk(tutorial: Tutorial) -> None:
    out = tutorial.run(1)
    assert "completed" in out and "billing" in out, out


def test_step_2_the_embedded_model_and_the_demo(tutorial: Tutorial) -> None:
    out = tutorial.run(2, timeout=900)
    assert f"local:{SMALL}" in out, out  # the desk of step 1 decided by the embedded model
    assert "6 requests" in out and "6/6 as expected" in out, out  # the shipped desk


def test_step_3_an_openai_compatible_server(tutorial: Tutorial, llama_server: str) -> None:
    out = tutorial.run(3, OPENAI_BASE_URL=llama_server, OPENAI_API_KEY="none", OPENAI_MODEL=SMALL)
    assert f"openai:{SMALL}" in out or "status" in out, out


def test_step_4_approvals(tutorial: Tutorial) -> None:
    out = tutorial.run(4)
    assert "awaiting_approval" in out and "approved" in out.lower(), out


def test_step_5_the_dashboard(tutorial: Tutorial) -> None:
    with socket.socket() as s:
        if s.connect_ex(("127.0.0.1", 8000)) == 0:
            pytest.fail("port 8000, which the tutorial's `baton serve` uses, is taken")
    server = tutorial.start(5)
    try:
        assert b"ok" in wait_for("http://127.0.0.1:8000/health", 180, server).lower()
        page = wait_for("http://127.0.0.1:8000/", 30, server).decode("utf-8", "replace")
        assert "<html" in page.lower() and "baton" in page.lower()
        sessions = wait_for("http://127.0.0.1:8000/sessions", 30, server).decode("utf-8")
        assert "tutorial-4" in sessions  # the earlier steps' sessions, in the same store
    finally:
        stop(server)
