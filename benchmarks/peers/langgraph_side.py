"""LangGraph + langgraph-swarm side: `create_swarm` of two `create_react_agent`s.

Run with the LangGraph venv's python (`pip install langgraph langgraph-swarm langchain-core`).
The chat model is a small scripted `BaseChatModel` returning `AIMessage`s with `tool_calls`.
"""

from __future__ import annotations

import asyncio
import itertools
import warnings
from typing import Any

from common import ANSWER, INVOICE, ORDER_ID, USER, RunOne, main
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

warnings.filterwarnings("ignore")  # create_react_agent deprecation notice in langgraph 1.x

from langgraph.prebuilt import create_react_agent  # noqa: E402
from langgraph_swarm import create_handoff_tool, create_swarm  # noqa: E402

_ids = itertools.count()


@tool
async def query_invoice(order_id: str) -> dict[str, Any]:
    """Look up the e-invoice of an order."""
    return INVOICE


class ScriptedChatModel(BaseChatModel):
    """triage -> transfer_to_billing; billing -> query_invoice -> answer."""

    agent: str
    latency_s: float = 0.0

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:  # type: ignore[override]
        return self

    def _step(self, messages: list[BaseMessage]) -> ChatResult:
        if self.agent == "triage":
            msg = AIMessage("", tool_calls=[_call("transfer_to_billing", {})])
        elif any(isinstance(m, ToolMessage) and m.name == "query_invoice" for m in messages):
            msg = AIMessage(ANSWER)
        else:
            msg = AIMessage("", tool_calls=[_call("query_invoice", {"order_id": ORDER_ID})])
        return ChatResult(generations=[ChatGeneration(message=msg)])

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return self._step(messages)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        return self._step(messages)


def _call(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "args": args, "id": f"call_{next(_ids)}", "type": "tool_call"}


def make_run(latency_s: float) -> RunOne:
    triage = create_react_agent(
        ScriptedChatModel(agent="triage", latency_s=latency_s),
        tools=[create_handoff_tool(agent_name="billing")],
        prompt="Route the user.",
        name="triage",
    )
    billing = create_react_agent(
        ScriptedChatModel(agent="billing", latency_s=latency_s),
        tools=[query_invoice],
        prompt="Billing.",
        name="billing",
    )
    app = create_swarm([triage, billing], default_active_agent="triage").compile()

    async def run() -> None:
        out = await app.ainvoke({"messages": [("user", USER)]})
        last = out["messages"][-1]
        if out.get("active_agent") != "billing" or last.content != ANSWER:
            raise SystemExit(f"langgraph conversation went wrong: {out.get('active_agent')} {last}")

    return run


if __name__ == "__main__":
    main("LangGraph + langgraph-swarm", make_run, "import langgraph_swarm, langgraph.prebuilt")
