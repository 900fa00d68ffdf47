"""`LocalModel.stream` with the real embedded model: deltas, the final response, cancellation.

Plumbing runs on SmolLM2-135M (a second or two per test); one test streams a Chinese answer
from the default 1.5B model through its JSON envelope.
"""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from baton.core.errors import ModelError
from baton.core.messages import Message, ToolCall, ToolSpec
from baton.models.base import ModelRequest, ModelResponse, StreamingModel
from baton.models.local import LocalModel
from baton.models.parsing import parse_text_mode
from local_model_kit import require_local_model

SMALL = "smollm2-135m"

INVOICE = ToolSpec(
    name="query_invoice",
    description="Look up the e-invoice of an order.",
    parameters={
        "type": "object",
        "properties": {"order_id": {"type": "string"}},
        "required": ["order_id"],
    },
)


def request(text: str, tools: tuple[ToolSpec, ...] = ()) -> ModelRequest:
    return ModelRequest(
        agent="desk",
        messages=[
            Message(role="system", content="You are a helpful assistant."),
            Message(role="user", content=text),
        ],
        tools=list(tools),
    )


async def collect(model: LocalModel, req: ModelRequest) -> tuple[list[str], ModelResponse]:
    *deltas, final = [item async for item in model.stream(req)]
    assert all(isinstance(d, str) and d for d in deltas)
    assert isinstance(final, ModelResponse)
    return [str(d) for d in deltas], final


def same_reply(a: ModelResponse, b: ModelResponse) -> None:
    assert (a.text, a.tool_calls, a.usage, a.text_tool_calls) == (
        b.text,
        b.tool_calls,
        b.usage,
        b.text_tool_calls,
    )


async def generated(model: LocalModel, req: ModelRequest) -> ModelResponse:
    """`generate`'s answer once the prompt is in the model's state cache, as it is when the
    stream runs next (a cold and a cached prompt can decode differently)."""
    await model.generate(req)
    return await model.generate(req)


async def idle_context_tokens(model: LocalModel) -> int:
    """Tokens in the model's context once its worker thread is idle (it runs one job at a
    time, so this waits for any generation still running)."""
    engine = model.load()
    loop = asyncio.get_running_loop()
    return int(await loop.run_in_executor(engine._pool, lambda: engine.llama.n_tokens))


def test_local_model_is_a_streaming_model() -> None:
    assert isinstance(LocalModel(SMALL), StreamingModel)  # no weights needed


@pytest.fixture(scope="module")
def small() -> LocalModel:
    require_local_model(SMALL)
    return LocalModel(SMALL)


@pytest.mark.local_model
async def test_plain_text_streams_token_by_token_and_ends_with_generates_response(
    small: LocalModel,
) -> None:
    req = request("Say hello in one short sentence.")
    expected = await generated(small, req)

    deltas, final = await collect(small, req)

    assert len(deltas) >= 3
    assert "".join(deltas) == final.text
    same_reply(final, expected)
    assert final.usage.input_tokens > 0 and final.usage.output_tokens > 0


@pytest.mark.local_model
@pytest.mark.parametrize("text", ["Hi! How are you today?", "check invoice for order ORD-7"])
async def test_with_tools_only_the_answer_streams_never_the_json(
    small: LocalModel, text: str
) -> None:
    req = request(text, (INVOICE,))
    expected = await generated(small, req)

    deltas, final = await collect(small, req)

    same_reply(final, expected)
    assert final.text_tool_calls and (final.text or "").lstrip().startswith("{")
    found = parse_text_mode(final.text, {"query_invoice"})
    shown = "".join(deltas)
    assert shown == (found.text or "")  # the answer, or nothing for a tool call
    assert '"final"' not in shown and "query_invoice" not in shown
    if found.text and len(found.text) > 8:
        assert len(deltas) >= 2  # streamed as generated, not all at the end


@pytest.mark.local_model
@pytest.mark.parametrize("how", ["aclose", "cancel"])
async def test_stopping_the_stream_stops_the_generation(small: LocalModel, how: str) -> None:
    req = request("Write a long story about a dragon.")
    full = await generated(small, req)
    assert full.usage.output_tokens == small.max_tokens  # left alone it runs to the limit

    if how == "aclose":
        stream = small.stream(req)
        assert isinstance(await anext(stream), str)
        await stream.aclose()
    else:
        first = asyncio.Event()

        async def consume() -> None:
            async for _ in small.stream(req):
                first.set()

        task = asyncio.create_task(consume())
        await first.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    generated_tokens = await idle_context_tokens(small) - full.usage.input_tokens
    assert generated_tokens < small.max_tokens // 4, generated_tokens
    # the model is free again and answers the next call in full
    after = await small.generate(req)
    assert after.usage.output_tokens == small.max_tokens


@pytest.mark.local_model
async def test_a_prompt_over_the_context_window_fails_as_generate_does() -> None:
    require_local_model(SMALL)
    tiny = LocalModel(SMALL, n_ctx=256)
    req = request("Answer briefly. " + "Be precise and polite. " * 80)
    with pytest.raises(ModelError, match="context window of 256 tokens") as streamed:
        async for _ in tiny.stream(req):
            pass
    with pytest.raises(ModelError) as generated_error:
        await tiny.generate(req)
    assert str(streamed.value) == str(generated_error.value)
    assert "LocalModel(n_ctx=...)" in str(streamed.value)


@pytest.mark.local_model
async def test_a_chinese_answer_streams_out_of_its_json_envelope() -> None:
    require_local_model()
    model = LocalModel()
    call = ToolCall(id="c1", name="query_invoice", arguments='{"order_id": "ORD-202607-99"}')
    req = ModelRequest(
        agent="billing",
        messages=[
            Message(role="system", content="你是账单专员，用一句中文回答。"),
            Message(role="user", content="请帮我查一下订单 ORD-202607-99 的发票"),
            Message(role="assistant", tool_calls=[call]),
            Message(
                role="tool",
                tool_call_id="c1",
                name="query_invoice",
                content='{"order_id": "ORD-202607-99", "status": "ISSUED", "amount": 299.0}',
            ),
        ],
        tools=[INVOICE],
    )

    deltas, final = await collect(model, req)

    answer = parse_text_mode(final.text, {"query_invoice"}).text
    assert answer, final.text
    assert re.match(r"[\u4e00-\u9fff]", answer)  # the grammar starts it in the user's script
    assert "".join(deltas) == answer
    assert len(deltas) >= 3
    assert not any("{" in d or "final" in d for d in deltas)
