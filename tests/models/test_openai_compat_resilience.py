"""A model server that goes away, or answers 429/503 for a while, against the real thing:
llama-cpp-python's own OpenAI-compatible server on loopback, serving the small embedded GGUF,
with a loopback HTTP proxy in front of it where a test needs the server to refuse."""

from __future__ import annotations

import http.server
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from baton import Agent, ModelUnreachable, Team, tool
from baton.models.local.weights import weights_path
from baton.models.openai_compat import OpenAICompatible
from baton.models.scripted import ScriptedModel
from local_model_kit import require_local_model

pytestmark = pytest.mark.local_model

SMALL = "smollm2-135m"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LlamaServer:
    """`python -m llama_cpp.server` on a fixed loopback port, started and stopped by the test."""

    def __init__(self, log: Path) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        cmd = [
            sys.executable, "-m", "llama_cpp.server",
            "--model", str(weights_path(SMALL)),
            "--host", "127.0.0.1", "--port", str(self.port),
            "--n_threads", "1", "--n_ctx", "2048",
        ]  # fmt: skip
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
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

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=20)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LlamaServer]:
    require_local_model(SMALL)
    s = LlamaServer(tmp_path / "server.log")
    s.start()
    try:
        yield s
    finally:
        s.kill()


class RefusingProxy:
    """A loopback HTTP proxy that answers the first `refuse` chat requests itself with
    `status` (and `Retry-After` when given), then forwards every request to the server."""

    def __init__(self, upstream: str, refuse: int, status: int, retry_after: str | None) -> None:
        self.upstream, self.refuse, self.status, self.retry_after = (
            upstream,
            refuse,
            status,
            retry_after,
        )
        self.seen: list[tuple[float, int]] = []
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if len([s for s in proxy.seen if s[1] != 200]) < proxy.refuse:
                    proxy.seen.append((time.monotonic(), proxy.status))
                    payload = b'{"error": {"message": "busy, try later"}}'
                    self.send_response(proxy.status)
                    if proxy.retry_after is not None:
                        self.send_header("Retry-After", proxy.retry_after)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                request = urllib.request.Request(
                    proxy.upstream + self.path.removeprefix("/v1"),
                    data=body,
                    headers={"Content-Type": "application/json"},
                )
                with urllib.request.urlopen(request, timeout=120) as answer:
                    data = answer.read()
                    proxy.seen.append((time.monotonic(), answer.status))
                    self.send_response(answer.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _writer(model: OpenAICompatible) -> Agent:
    return Agent(name="writer", instructions="Reply in one short sentence.", model=model)


@pytest.mark.parametrize(("status", "retry_after"), [(429, "1"), (503, None)])
async def test_429_and_5xx_are_retried_until_the_server_answers(
    server: LlamaServer, status: int, retry_after: str | None
) -> None:
    proxy = RefusingProxy(server.url, refuse=2, status=status, retry_after=retry_after)
    model = OpenAICompatible(
        SMALL, base_url=proxy.url, max_tokens=16, max_retries=3, retry_base_s=0.05
    )
    try:
        started = time.monotonic()
        result = await Team([_writer(model)], entry="writer").run("Say hello.")
        assert result.status == "completed", result.error
        assert [s for _, s in proxy.seen] == [status, status, 200]
        if retry_after is not None:  # each retry waited the second the server asked for
            assert proxy.seen[1][0] - proxy.seen[0][0] >= 0.95
            assert proxy.seen[2][0] - started >= 1.9
    finally:
        proxy.close()
        await model.aclose()


async def test_retry_after_is_honoured_up_to_its_cap(server: LlamaServer) -> None:
    proxy = RefusingProxy(server.url, refuse=1, status=429, retry_after="3600")
    model = OpenAICompatible(SMALL, base_url=proxy.url, max_tokens=16, retry_after_max_s=0.2)
    try:
        started = time.monotonic()
        result = await Team([_writer(model)], entry="writer").run("Say hello.")
        assert result.status == "completed", result.error
        assert proxy.seen[1][0] - started < 60  # not the hour the server asked for
    finally:
        proxy.close()
        await model.aclose()


async def test_retries_spent_on_5xx_stop_the_run_resumable(server: LlamaServer) -> None:
    proxy = RefusingProxy(server.url, refuse=3, status=502, retry_after=None)
    model = OpenAICompatible(
        SMALL, base_url=proxy.url, max_tokens=16, max_retries=2, retry_base_s=0.01
    )
    team = Team([_writer(model)], entry="writer")
    try:
        with pytest.raises(ModelUnreachable, match=r"HTTP 502 \(tried 3 times\)"):
            await team.run("Say hello.", session_id="s-502")
        assert [s for _, s in proxy.seen] == [502, 502, 502]
    finally:
        proxy.close()
        await model.aclose()


RAN: list[str] = []


async def test_a_server_killed_mid_run_stops_it_resumable_and_resume_runs_each_tool_once(
    server: LlamaServer,
) -> None:
    """The desk's tool stops the server; the writer's model call then cannot connect: the run
    stops at its last checkpoint. With the server back, `team.resume` finishes it, and the
    tool that already ran is not run again."""

    @tool
    def close_ticket(ticket: str) -> str:
        """Close a ticket (and, here, take the model server down with it)."""
        RAN.append(ticket)
        server.kill()
        return f"ticket {ticket} closed"

    RAN.clear()
    desk = Agent(
        name="desk",
        instructions="Close tickets, then pass to the writer.",
        tools=[close_ticket],
        handoffs=["writer"],
        model=ScriptedModel(
            [
                ScriptedModel.call("close_ticket", ticket="T-1"),
                ScriptedModel.call("transfer_to_writer", reason="write", objective="confirm"),
            ]
        ),
    )
    model = OpenAICompatible(
        SMALL, base_url=server.url, max_tokens=16, max_retries=1, retry_base_s=0.01
    )
    team = Team([desk, _writer(model)], entry="desk")
    with pytest.raises(ModelUnreachable, match=r"team.resume\('s-kill'\)"):
        await team.run("Close T-1 and tell me.", session_id="s-kill")
    assert RAN == ["T-1"]
    server.start()
    result = await team.resume("s-kill")
    assert result.status == "completed", result.error
    assert result.path == ["desk", "writer"]
    assert (result.output or "").strip()
    assert RAN == ["T-1"]  # answered before the checkpoint: never run twice
    await model.aclose()
