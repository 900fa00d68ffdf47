"""A deterministic desk policy for tests and replays (`baton demo --model scripted`).

It reads the request the kernel built, like a rule-based desk would. It is not a language
model and the demo says so when it runs on it; the demo's default brain is the local model.
"""

from __future__ import annotations

import json
import re

from baton import ScriptedModel
from baton.models import ModelRequest, Step

ORDER_RE = re.compile(r"\bORD-\d{6}-\d+\b", re.IGNORECASE)
SERVER_RE = re.compile(r"\bsrv-[a-z]{2}-\d{3}\b", re.IGNORECASE)
ROUTES = (
    ("human", ("lawyer", "legal", "律师", "投诉")),
    ("after_sales", ("damaged", "broken", "return", "退货", "坏了")),
    ("billing", ("invoice", "refund", "bill", "发票", "退款", "金额")),
    ("tech_support", ("server", "restart", "服务器", "重启", "告警")),
    ("orders", ("where is", "deliver", "ship", "到哪", "送到", "物流")),
)


def _text(request: ModelRequest, roles: tuple[str, ...] = ("user",)) -> str:
    return " ".join(m.content or "" for m in request.messages if m.role in roles)


def _find(request: ModelRequest, pattern: re.Pattern[str]) -> str | None:
    m = pattern.search(_text(request, ("user", "system")))
    return m.group(0) if m else None


def desk_policy(request: ModelRequest) -> Step:
    """The next step of whichever agent holds the baton."""
    last = request.messages[-1]
    order, server = _find(request, ORDER_RE), _find(request, SERVER_RE)
    text = _text(request).lower()
    if request.agent == "triage":
        for target, words in ROUTES:
            if any(w in text for w in words):
                state = {"order_id": order} if order else {}
                if server:
                    state["server_id"] = server
                return ScriptedModel.call(
                    f"transfer_to_{target}",
                    reason=f"{target} owns this",
                    objective=_text(request)[:80],
                    state=state,
                )
        return ScriptedModel.say("Hello! I can help with invoices, orders, returns and servers.")
    if last.role == "tool":
        result = json.loads(last.content or "{}")
        if isinstance(result, dict) and result.get("ok") is False:
            return ScriptedModel.say(f"Sorry, that did not work: {result.get('error')}")
        if last.name == "create_return" and any(w in text for w in ("money", "refund", "退款")):
            return ScriptedModel.call(
                "transfer_to_billing",
                reason="refund after return",
                objective="refund the order",
                state={"order_id": result["order_id"]},
            )
        return ScriptedModel.say(f"Done: {json.dumps(result, ensure_ascii=False)}")
    plan = {
        "billing": (
            "issue_refund"
            if "handed over by after_sales" in _text(request, ("system",))
            else "query_invoice",
            order,
        ),
        "orders": ("get_order_status", order),
        "after_sales": ("create_return", order),
        "tech_support": ("restart_server", server),
    }.get(request.agent)
    if plan is None or plan[1] is None:
        return ScriptedModel.say("Could you give me the order or server id?")
    tool, ident = plan
    if tool == "restart_server":
        return ScriptedModel.call(tool, server_id=ident)
    if tool in ("issue_refund", "create_return"):
        return ScriptedModel.call(tool, order_id=ident, reason="item arrived damaged")
    return ScriptedModel.call(tool, order_id=ident)


def scripted_desk_model() -> ScriptedModel:
    """The desk policy as a `ScriptedModel`."""
    return ScriptedModel(desk_policy, name="scripted-desk", record=False)
