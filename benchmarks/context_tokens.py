"""Prompt tokens a hand-off costs the receiver under each context policy, and slots that arrive.

    python benchmarks/context_tokens.py [--turns 5 10 20] [--tokenizer estimate|local]

Each scenario is one session with a support agent over `turns` user messages. Every answered
turn calls a tool that returns a long raw record (2-4 KB); the user gives ids along the way
(an order id early on, an email and an amount later). On the last message the support agent
hands off to billing and, as small models often do, puts only the order id in the payload's
state. For each policy the receiver's first prompt is measured, and every required slot
(order id, email, amount) is checked in what the receiver saw.

Rows: `structured`, `recent(3)`, `summary` (receiver prompt; the summariser's own tokens are
printed apart), `full` — and, as references, `raw transcript`: everything the session
recorded, tool calls and raw tool outputs included, which is what a framework that forwards
the whole message list sends; and `structured` with the entity guard off, to show which slots
the payload alone would lose. Tokens: `estimate` is Baton's documented estimate
(`baton.models.base.estimate_tokens`); `local` counts with the embedded model's tokenizer.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from baton import Agent, Guards, Message, ScriptedModel, Team, tool
from baton.models import ModelRequest, Step
from baton.models.base import estimate_tokens
from baton.runtime.summary import SUMMARY_AGENT

POLICIES = ["structured", "recent(3)", "summary", "full"]
SLOTS = {"order_id": "ORD-202611-4417", "email": "wang.fang@example.cn", "amount": "¥1,299.00"}


def record(turn: int) -> dict[str, Any]:
    """A raw order-system record of 2-4 KB (varies by turn)."""
    lines = [
        {
            "sku": f"SKU-{turn:02d}{i:03d}",
            "desc": "wireless headset, charcoal, 2-year warranty",
            "qty": 1 + i % 3,
            "warehouse": "SHA-02",
            "events": ["picked", "packed", "scanned"],
        }
        for i in range(8 + turn % 3 * 4)
    ]
    return {"order_id": SLOTS["order_id"], "status": "in transit", "lines": lines}


_LOOKUPS = [0]


@tool
async def order_record(order_id: str) -> dict:
    """The raw order record, as the order system returns it."""
    _LOOKUPS[0] += 1
    return record(_LOOKUPS[0])


def user_messages(turns: int) -> list[str]:
    msgs = [f"Hi, my order {SLOTS['order_id']} has not arrived yet, can you check?"]
    for i in range(1, turns - 1):
        if i == 2:
            msgs.append(f"Please send updates to {SLOTS['email']}.")
        elif i == 3:
            msgs.append(f"I paid {SLOTS['amount']} for it, by the way.")
        else:
            msgs.append(f"Any news on the delivery? (follow-up {i})")
    msgs.append("I give up waiting: I want a refund and the invoice for that order.")
    return msgs[:turns]


def script(policy_calls: dict[str, int]) -> Callable[[ModelRequest], Step]:
    def respond(req: ModelRequest) -> Step:
        policy_calls[req.agent] = policy_calls.get(req.agent, 0) + 1
        if req.agent == SUMMARY_AGENT:
            return ScriptedModel.say(
                f"The user's order {SLOTS['order_id']} (paid {SLOTS['amount']}) has not arrived "
                f"despite several checks; it shows 'in transit'. Updates go to {SLOTS['email']}. "
                "The user now wants a refund and the invoice."
            )
        if req.agent == "billing":
            return ScriptedModel.say("I have started the refund and sent the invoice.")
        last = req.messages[-1]
        if last.role == "tool":
            return ScriptedModel.say(
                "I checked the order system: your parcel is in transit and was scanned at the "
                "Shanghai warehouse; the carrier expects delivery within two working days. "
                "I will keep an eye on it for you."
            )
        if "refund" in (last.content or ""):
            return ScriptedModel.call(
                "transfer_to_billing",
                reason="the user wants a refund and the invoice",
                objective="refund the order and send its invoice",
                state={"order_id": SLOTS["order_id"]},
                reply_to_user="I am passing you to billing for the refund.",
            )
        return ScriptedModel.call("order_record", order_id=SLOTS["order_id"])

    return respond


async def scenario(
    turns: int, policy: str, count: Callable[[str], int], entity_guard: bool = True
) -> dict[str, Any]:
    calls: dict[str, int] = {}
    model = ScriptedModel(script(calls))
    support = Agent(
        name="support",
        instructions="You are the delivery support agent of an online shop.",
        tools=[order_record],
        handoffs=["billing"],
    )
    billing = Agent(
        name="billing",
        instructions="You are the billing agent: refunds and invoices.",
        context=policy,
    )
    team = Team(
        [support, billing],
        entry="support",
        model=model,
        guards=Guards(entity_guard=entity_guard),
    )
    for text in user_messages(turns):
        result = await team.run(text, session_id="S")
    receiver = next(r for r in model.requests if r.agent == "billing")
    seen = "\n".join(m.content or "" for m in receiver.messages)
    summariser = [r for r in model.requests if r.agent == SUMMARY_AGENT]
    transcript = await team.store.get_messages("S")
    raw = [receiver.messages[0], *_raw(transcript)]
    return {
        "receiver": sum(count(m.content or "") for m in receiver.messages),
        "summariser": sum(count(m.content or "") for r in summariser for m in r.messages),
        "raw": sum(count(m.content or "") for m in raw),
        "lost": [k for k, v in SLOTS.items() if v not in seen],
        "hops": len(result.handoffs),
    }


def _raw(transcript: list[Message]) -> list[Message]:
    out = []
    for m in transcript:
        if m.tool_calls:  # the call itself is sent too
            text = json.dumps([{"name": c.name, "arguments": c.arguments} for c in m.tool_calls])
            out.append(Message(role="assistant", content=(m.content or "") + text))
        else:
            out.append(m)
    return out


def counter(kind: str) -> Callable[[str], int]:
    if kind == "estimate":
        return estimate_tokens
    from baton.models.local import LocalModel

    local = LocalModel()
    return local.count_tokens


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--turns", type=int, nargs="+", default=[5, 10, 20])
    ap.add_argument("--tokenizer", choices=["estimate", "local"], default="estimate")
    args = ap.parse_args()
    count = counter(args.tokenizer)
    print(f"receiver prompt tokens on the hand-off (tokenizer: {args.tokenizer})")
    header = f"{'turns':>5} | {'policy':<15} | {'tokens':>7} | {'vs full':>8} | slots lost"
    print(header)
    print("-" * len(header))
    ok = True
    for turns in args.turns:
        rows = {p: await scenario(turns, p, count) for p in POLICIES}
        full = rows["full"]["receiver"]
        for p in POLICIES:
            row = rows[p]
            saving = f"-{1 - row['receiver'] / full:.0%}" if p != "full" else ""
            extra = f"  (+{row['summariser']} summariser)" if row["summariser"] else ""
            lost = ", ".join(row["lost"]) or "none"
            ok &= not row["lost"]
            print(f"{turns:>5} | {p:<15} | {row['receiver']:>7} | {saving:>8} | {lost}{extra}")
        raw = rows["structured"]["raw"]
        print(f"{turns:>5} | {'raw transcript':<15} | {raw:>7} | {'':>8} | (reference)")
        bare = await scenario(turns, "structured", count, entity_guard=False)
        lost = ", ".join(bare["lost"]) or "none"
        print(f"{turns:>5} | {'(no entity grd)':<15} | {bare['receiver']:>7} | {'':>8} | {lost}")
    ten = None
    if 10 in args.turns:
        rows10 = {p: await scenario(10, p, count) for p in ("structured", "full")}
        ten = 1 - rows10["structured"]["receiver"] / rows10["full"]["receiver"]
        print(
            f"\n10 turns: structured sends {ten:.0%} fewer prompt tokens than full "
            f"(target >= 60 %): {'met' if ten >= 0.6 else 'MISSED'}"
        )
    print(f"slots lost under any policy: {'none' if ok else 'SOME (see table)'}")


if __name__ == "__main__":
    asyncio.run(main())
