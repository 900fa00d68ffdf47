"""Constrained decoding over the wire, against llama-cpp-python's own server on loopback: the
embedded engine's "one of these calls, or an answer" schema sent as the server's form of
structured output makes even the 135M model's every reply a valid call or answer."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_openai_compat_resilience import SMALL, LlamaServer

from baton import Agent, Team, tool
from baton.core.errors import ConfigError
from baton.core.messages import Message, ToolSpec
from baton.models import ModelRequest
from baton.models.openai_compat import OpenAICompatible
from local_model_kit import require_local_model

pytestmark = pytest.mark.local_model


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    require_local_model(SMALL)
    s = LlamaServer(tmp_path_factory.mktemp("llama-server") / "server.log")
    s.start()
    try:
        yield s
    finally:
        s.kill()


LOOKED_UP: list[str] = []


@tool
def query_invoice(order_id: str) -> str:
    """Look up the invoice of an order.

    Args:
        order_id: Order number, e.g. ORD-7.
    """
    LOOKED_UP.append(order_id)
    return f"invoice of {order_id}: paid"


def test_constrain_must_be_a_known_form() -> None:
    with pytest.raises(ConfigError, match="constrain must be"):
        OpenAICompatible("m", base_url="http://127.0.0.1:1/v1", constrain="grammar")  # type: ignore[arg-type]


@pytest.mark.parametrize("constrain", ["llama.cpp", "auto"])
async def test_every_constrained_reply_is_a_valid_call_or_answer(
    server: LlamaServer, constrain: str
) -> None:
    model = OpenAICompatible(
        SMALL,
        base_url=server.url,
        # room for a whole hand-off: the 135M model writes its reason and objective out (55
        # tokens for the Chinese question); a reply cut at max_tokens is JSON cut short
        max_tokens=128,
        constrain=constrain,  # type: ignore[arg-type]
    )
    spec = query_invoice.spec
    names = {spec.name, "transfer_to_billing"}
    handoff = ToolSpec(
        name="transfer_to_billing",
        description="Hand the conversation to billing.",
        parameters={
            "type": "object",
            "properties": {"reason": {"type": "string"}, "objective": {"type": "string"}},
            "required": ["reason", "objective"],
        },
    )
    for question in ["Is the invoice of order ORD-7 paid?", "Hello!", "发票 ORD-9 开了吗？"]:
        request = ModelRequest(
            agent="desk",
            messages=[
                Message(role="system", content="You are a help desk. Use the tools."),
                Message(role="user", content=question),
            ],
            tools=[spec, handoff],
        )
        response = await model.generate(request)
        assert response.text_tool_calls  # written as JSON: the kernel's parser reads it
        reply = json.loads(response.text or "")  # valid JSON, whatever the 135M model meant
        assert set(reply) in ({"tool", "arguments"}, {"final"}), reply
        if "tool" in reply:
            assert reply["tool"] in names
            if reply["tool"] == spec.name:
                assert set(reply["arguments"]) == {"order_id"}
            else:
                assert set(reply["arguments"]) <= {"reason", "objective", "state"}
        else:
            assert isinstance(reply["final"], str) and reply["final"]
    if constrain == "auto":  # the standard form was refused (HTTP 422); llama.cpp's was kept
        assert model.constrained_as == "llama.cpp"
    await model.aclose()


async def test_a_team_runs_constrained_calls_end_to_end(server: LlamaServer) -> None:
    model = OpenAICompatible(SMALL, base_url=server.url, max_tokens=48, constrain="llama.cpp")
    desk = Agent(
        name="desk",
        instructions="Look invoices up with query_invoice, then answer.",
        tools=[query_invoice],
        model=model,
    )
    LOOKED_UP.clear()
    result = await Team([desk], entry="desk").run("Is the invoice of order ORD-7 paid?")
    # the 135M model may answer or call the tool (or escalate after max_iterations); what it
    # never does is write something the kernel cannot read
    assert result.status in ("completed", "escalated"), result.error
    for e in result.events:
        if e.type == "tool_called":
            assert e.tool == "query_invoice" and set(e.arguments) == {"order_id"}
    assert "{" not in (result.output or "") or result.status == "escalated"
    await model.aclose()
