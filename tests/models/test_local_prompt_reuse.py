"""What the embedded model reads of a prompt: a prompt that shares its start with an earlier
one (an agent's instructions and tools) is read from where they differ, and the usage says how
many prompt tokens came from the saved state (`Usage.cached_input_tokens`) and how many were
read (`evaluated_input_tokens`). On SmolLM2-135M, the tests' plumbing model."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from baton.core.messages import Message
from baton.models.base import ModelRequest
from baton.models.local import LocalModel
from baton.models.local.engine import LlamaEngine
from baton.models.local.weights import weights_path
from local_model_kit import require_local_model

pytestmark = pytest.mark.local_model

SMALL = "smollm2-135m"
INSTRUCTIONS = (
    "You are billing, the desk that answers questions about invoices, refunds and payments. "
    "Look orders up before you answer, never promise a refund you have not checked, and hand "
    "the customer to tech support for anything about servers or accounts. " * 4
)


def chat(question: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": question}]


async def test_a_prompt_sharing_its_start_is_read_from_where_it_differs() -> None:
    require_local_model(SMALL)
    engine = LlamaEngine(weights_path(SMALL), n_ctx=2048)
    try:
        first = await engine.complete(chat("What is my invoice total?"), None, 4)
        assert first.cached_tokens == 0 and first.prompt_tokens > 150
        second = await engine.complete(chat("请帮我查一下订单 ORD-7 的发票。"), None, 4)
        read = second.prompt_tokens - second.cached_tokens
        assert second.cached_tokens > 150  # the instructions were not read again
        assert 5 <= read < 40  # the new question (and the chat template's tail)
        again = await engine.complete(chat("请帮我查一下订单 ORD-7 的发票。"), None, 4)
        assert again.prompt_tokens - again.cached_tokens <= 1  # all of it saved
        assert again.text == second.text
    finally:
        engine.close()


async def test_the_usage_of_a_model_call_says_what_was_read() -> None:
    require_local_model(SMALL)
    model = LocalModel(SMALL)

    def request(question: str) -> ModelRequest:
        return ModelRequest(
            agent="billing",
            messages=[
                Message(role="system", content=INSTRUCTIONS),
                Message(role="user", content=question),
            ],
        )

    await model.generate(request("Where is my refund?"))
    usage = (await model.generate(request("My invoice is wrong."))).usage
    assert 0 < usage.cached_input_tokens < usage.input_tokens
    assert usage.evaluated_input_tokens == usage.input_tokens - usage.cached_input_tokens
