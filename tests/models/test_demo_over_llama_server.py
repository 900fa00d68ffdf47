"""The demo desk over the wire: its six requests through llama-cpp-python's OpenAI-compatible
server on loopback, serving the very GGUF the embedded engine plays them with.

`OpenAICompatible(constrain="llama.cpp")` sends the embedded engine's own prompt and reply
schema, so the small model decides over HTTP as it does in process. The requests, what a
correct desk does for each, and the check of a turn against it are the demo's own
(`src/baton/desk/script.py`, `baton.cli.demo.DemoTurn`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository's `examples`
from test_openai_compat_resilience import _free_port

from baton.cli.demo import DemoTurn
from baton.desk import DEMO, build_desk
from baton.models.local.weights import DEFAULT_MODEL, weights_path
from baton.models.openai_compat import OpenAICompatible
from local_model_kit import require_local_model

pytestmark = pytest.mark.local_model

NEEDED = 5
"""Requests of the six that must end as a correct desk ends them (the issue's bar)."""


class DeskServer:
    """`python -m llama_cpp.server` serving the demo's GGUF on a loopback port.

    A RAM cache of prompt states lets each agent's stable prefix (catalogue + instructions) be
    read once, as the embedded engine does. `--logits_all false`: the server's default keeps
    the logits of every prompt token, which slows reading a prompt and makes each cached state
    copy them (about 0.5 GB a state here: the server grew to 10 GB over the six requests).
    The cache's size counts only the KV bytes (about 20 MB a state), so 128 MB keeps the last
    six or so states: each agent's latest.
    """

    def __init__(self, log: Path) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        threads = str(min(os.cpu_count() or 1, 4))
        cmd = [
            sys.executable, "-m", "llama_cpp.server",
            "--model", str(weights_path(DEFAULT_MODEL)),
            "--host", "127.0.0.1", "--port", str(self.port),
            "--n_ctx", "4096", "--n_batch", "256",
            "--n_threads", threads, "--n_threads_batch", threads,
            "--cache", "true", "--cache_type", "ram", "--cache_size", str(1 << 27),
            "--logits_all", "false", "--seed", "0",
        ]  # fmt: skip
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 180
        while True:
            try:
                urllib.request.urlopen(f"{self.url}/models", timeout=2).read()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"llama_cpp.server did not start: {self.log.read_text()[-2000:]}"
                    ) from None
                time.sleep(0.3)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=20)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DeskServer]:
    require_local_model()
    s = DeskServer(tmp_path_factory.mktemp("llama-server") / "server.log")
    s.start()
    try:
        yield s
    finally:
        s.stop()


async def test_the_demo_desk_over_llama_cpp_server_ends_at_least_five_of_six_as_expected(
    server: DeskServer,
) -> None:
    model = OpenAICompatible(
        DEFAULT_MODEL,
        base_url=server.url,
        api_key="none",
        constrain="llama.cpp",
        max_tokens=256,  # the embedded engine's cap
    )
    desk = build_desk(model=model, store="memory://")
    turns: list[DemoTurn] = []
    started = time.perf_counter()
    try:
        for req in DEMO:
            t = time.perf_counter()
            result = await desk.team.run(req.text, session_id=f"demo-{req.session}")
            seconds = time.perf_counter() - t
            turns.append(DemoTurn(req.text, req.session, result, seconds, req.note, req))
    finally:
        await model.aclose()
    report = "\n".join(
        f"{'ok ' if turn.as_expected else 'BAD'} {turn.note}: {' -> '.join(turn.result.path)} "
        f"{turn.tools} {turn.result.status} ({turn.seconds:.0f}s) "
        f"{(turn.result.output or turn.result.error or '')[:80]!r}"
        for turn in turns
    )
    total = time.perf_counter() - started
    print(f"\n{report}\n{sum(bool(t.as_expected) for t in turns)}/6 in {total:.0f}s")
    assert model.constrained_as == "llama.cpp"
    assert sum(bool(turn.as_expected) for turn in turns) >= NEEDED, report
    # whatever the score, no reply shown to a user is a tool call written as text
    for turn in turns:
        assert '"tool"' not in (turn.result.output or ""), report
