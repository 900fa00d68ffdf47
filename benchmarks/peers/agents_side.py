"""OpenAI Agents SDK side: a scripted `Model`, two `Agent`s with a hand-off, one `@function_tool`.

Run with the Agents SDK venv's python (`pip install openai-agents==0.24.0`); tracing is off.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from typing import Any

from agents import (
    Agent,
    Model,
    ModelResponse,
    ModelSettings,
    RunConfig,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from agents.usage import Usage
from common import ANSWER, INVOICE, ORDER_ID, USER, RunOne, main
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

set_tracing_disabled(True)
_ids = itertools.count()


@function_tool
async def query_invoice(order_id: str) -> dict[str, Any]:
    """Look up the e-invoice of an order."""
    return INVOICE


def _call(name: str, arguments: str) -> ResponseFunctionToolCall:
    i = next(_ids)
    return ResponseFunctionToolCall(
        type="function_call", id=f"fc_{i}", call_id=f"call_{i}", name=name, arguments=arguments
    )


def _say(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id=f"msg_{next(_ids)}",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


def _field(item: Any, key: str) -> Any:
    return item.get(key) if isinstance(item, dict) else getattr(item, key, None)


class ScriptedModel(Model):
    """triage -> transfer_to_billing; billing -> query_invoice -> answer."""

    def __init__(self, latency_s: float = 0.0) -> None:
        self.latency_s = latency_s

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[Any],
        model_settings: ModelSettings,
        tools: list[Any],
        output_schema: Any,
        handoffs: list[Any],
        tracing: Any,
        *,
        previous_response_id: str | None = None,
        conversation_id: str | None = None,
        prompt: Any = None,
    ) -> ModelResponse:
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        items = [] if isinstance(input, str) else input
        if handoffs:  # triage
            out: Any = _call("transfer_to_billing", "{}")
        elif any(_field(it, "name") == "query_invoice" for it in items):
            out = _say(ANSWER)
        else:
            out = _call("query_invoice", f'{{"order_id": "{ORDER_ID}"}}')
        return ModelResponse(output=[out], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the benchmark does not stream")


def make_run(latency_s: float) -> RunOne:
    model = ScriptedModel(latency_s)
    billing = Agent(name="billing", instructions="Billing.", tools=[query_invoice], model=model)
    triage = Agent(name="triage", instructions="Route the user.", handoffs=[billing], model=model)
    config = RunConfig(tracing_disabled=True)

    async def run() -> None:
        r = await Runner.run(triage, USER, run_config=config)
        if r.last_agent is not billing or r.final_output != ANSWER:
            raise SystemExit(
                f"agents conversation went wrong: {r.last_agent.name} {r.final_output}"
            )

    return run


if __name__ == "__main__":
    main("OpenAI Agents SDK 0.24", make_run, "import agents")
