"""`OpenAICompatible` against a real OpenAI-compatible server: llama-cpp-python's own.

The provider users point at DeepSeek, Qwen, vLLM or Ollama is exercised here over real HTTP,
native tool calling included, with the embedded weights served by `python -m llama_cpp.server`.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from baton import Agent, Team, tool
from baton.models.local.weights import weights_path
from baton.models.openai_compat import OpenAICompatible
from local_model_kit import require_local_model

pytestmark = pytest.mark.local_model


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    require_local_model()
    port = _free_port()
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    cmd = [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(weights_path()),
        "--host", "127.0.0.1", "--port", str(port),
        "--n_threads", "1", "--n_ctx", "4096",
        "--chat_format", "chatml-function-calling",
    ]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                urllib.request.urlopen(f"{url}/models", timeout=2).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"llama_cpp.server did not start: {log.read_text()[-2000:]}"
                    ) from None
                time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


CALLS: list[str] = []


@tool
async def query_invoice(order_id: str) -> dict:
    """Look up the e-invoice of an order.

    Args:
        order_id: Order number, e.g. ORD-202607-99.
    """
    CALLS.append(order_id)
    return {"order_id": order_id, "status": "ISSUED", "amount": 299.0}


async def test_two_agent_handoff_with_native_tool_calls_over_http(server_url: str) -> None:
    model = OpenAICompatible("qwen2.5-coder-1.5b", base_url=server_url, api_key="none")
    triage = Agent(
        name="triage",
        instructions="You are the front desk. Route the user by calling a tool.",
        handoffs=["billing"],
    )
    billing = Agent(
        name="billing",
        description="Invoices, refunds, payments.",
        instructions="You are a billing specialist. Look invoices up by calling a tool.",
        tools=[query_invoice],
    )
    team = Team([triage, billing], entry="triage", model=model)
    CALLS.clear()
    result = await team.run("please check the invoice for order ORD-202607-99")
    # llama-cpp-python 0.3.36's `chatml-function-calling` handler decodes a chosen "message:"
    # reply under its function-name grammar, so plain-text answers come back empty from that
    # server; an empty answer is re-asked once and then fails the run (never "completed" with
    # nothing). What this test checks is the native tool-call path: hand-off, then the tool.
    if result.status != "completed":
        assert result.status == "failed" and "empty reply" in (result.error or ""), result.error
    assert result.path == ["triage", "billing"]
    assert CALLS == ["ORD-202607-99"]
    assert result.handoffs[0].source == "triage"
    assert result.usage["triage"].input_tokens > 0  # usage reported by the server
    await model.aclose()
