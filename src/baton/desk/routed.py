"""The desk behind a router: rules -> semantic -> LLM judge -> human, no triage agent.

    baton route baton.desk.routed:team "我的订单 ORD-202608-17 到哪了？"

Routing costs ~2 ms when the rules or the semantic tier are sure, and one short, constrained
judge call when they are not (they abstain, or the semantic tier's best route leads the
runner-up by little) — instead of a full triage turn for every new conversation.
"""

from __future__ import annotations

import os
from typing import Any

from baton import Team
from baton.routing import Labelled, LLMJudge, Router, Rules, Semantic

from .data import DeskDB
from .policy import scripted_desk_model
from .team import Desk, build_agents

FIRST_NEED = r"(?s)^(?:(?!ORD-\d|\border|订单|invoice|发票).)*?"
"""Nothing about an order or invoice before what follows: the request's first need is it."""
RULES = {"tech_support": [FIRST_NEED + r"\bsrv-[a-z]{2}-\d{3}\b", FIRST_NEED + "服务器"]}
"""Deterministic first tier: a server id or the word for server goes to tech support, unless an
order or invoice is named before it (the first need decides; the semantic tier weighs it)."""

FIT = [
    Labelled("where can I download my invoice", "billing"),
    Labelled("how much was I charged for my order", "billing"),
    Labelled("I got billed two times for ORD-202608-17", "billing"),
    Labelled("please email me the invoice for ORD-202607-99", "billing"),
    Labelled("the payment went through twice on my credit card", "billing"),
    Labelled("我要退款", "billing"),
    Labelled("发票什么时候开", "billing"),
    Labelled("ORD-202607-99 的发票开了多少钱", "billing"),
    Labelled("只买了一件，为什么扣了两笔钱", "billing"),
    Labelled("ORD-202608-17 的 invoice 能发我一份吗", "billing"),
    Labelled("when will my parcel arrive", "orders"),
    Labelled("has my order shipped yet", "orders"),
    Labelled("tracking for ORD-202609-05 please", "orders"),
    Labelled("I paid for ORD-202608-17 ages ago and nothing has arrived", "orders"),
    Labelled("我的订单到哪了", "orders"),
    Labelled("ORD-202609-05 什么时候发出", "orders"),
    Labelled("ORD-202608-17 的物流到哪一步了", "orders"),
    Labelled("ORD-202609-05 还没发的话，shipping address 能改吗", "orders"),
    Labelled("the item I got is broken", "after_sales"),
    Labelled("I want to send this back", "after_sales"),
    Labelled("ORD-202607-99 came faulty, how do I return it", "after_sales"),
    Labelled("the keyboard in ORD-202607-99 isn't what I ordered", "after_sales"),
    Labelled("我要退货", "after_sales"),
    Labelled("ORD-202607-99 的键盘用不了，申请退货", "after_sales"),
    Labelled("ORD-202607-99 收到有划痕，想退钱", "after_sales"),
    Labelled("ORD-202607-99 发来的 model 不对", "after_sales"),
    Labelled("my server is not responding", "tech_support"),
    Labelled("can you restart the VM, it is stuck", "tech_support"),
    Labelled("our app on the cloud host is down and customers are complaining", "tech_support"),
    Labelled("云主机卡死了，帮忙重启", "tech_support"),
    Labelled("机器的 CPU 一直很高", "tech_support"),
    Labelled("what's the weather like tomorrow", None, "oos"),
    Labelled("tell me a joke", None, "oos"),
    Labelled("who won the football match", None, "oos"),
    Labelled("what is the longest river in the world", None, "oos"),
    Labelled("how do I sort a list in Java", None, "oos"),
    Labelled("we will take legal action against your company", None, "oos"),
    Labelled("I'm a reporter and would like a statement from your CEO", None, "oos"),
    Labelled("write a short poem about the sea", None, "oos"),
    Labelled("how do I reset my iPhone", None, "oos"),
    Labelled("我头疼得厉害，该吃什么药", None, "oos"),
    Labelled("说个段子让我开心一下", None, "oos"),
    Labelled("明天上海会下雨吗", None, "oos"),
    Labelled("我们会通过法律途径解决，等着法院传票吧", None, "oos"),
    Labelled("我是记者，想了解一下你们公司的情况", None, "oos"),
    Labelled("用 JavaScript 怎么发 HTTP 请求", None, "oos"),
    Labelled("推荐一部好看的 Netflix 剧", None, "oos"),
]
"""Labelled queries the semantic tier's thresholds are fitted on: English, Chinese and mixed,
with and without ids, and out-of-scope ones of many topics."""


def build_routed_desk(model: Any = "local", **team_kwargs: Any) -> Desk:
    """The desk's specialists fronted by a fitted router (triage is not needed)."""
    db = DeskDB()
    specialists = [a for a in build_agents(db) if a.name != "triage"]
    # with no triage agent to send a request back to, each specialist may pass it to any
    # other: a need the router split off (`Team(multi_intent=True)`) is handed on only to an
    # agent the holder lists in its hand-offs
    names = [a.name for a in specialists]
    agents = [
        a.model_copy(update={"handoffs": [*(n for n in names if n != a.name), "human"]})
        for a in specialists
    ]
    router = Router(
        [Rules(RULES), Semantic(review_margin="fit"), LLMJudge(model)], fallback="human"
    )
    team = Team(agents, entry=router, model=model, **team_kwargs)
    # measuring the judge would cost up to 40 model calls here; unmeasured, it places what the
    # semantic tier abstains on, and overturns a route the tier proposes for review (unsure by
    # its lead, `review_margin="fit"`) only when sure of it (`LLMJudge.review_threshold`)
    router.fit(FIT, judge=False)
    return Desk(team, db)


def _model() -> Any:
    choice = os.environ.get("BATON_MODEL") or "local"
    return scripted_desk_model() if choice == "scripted" else choice


team = build_routed_desk(_model()).team
"""The routed desk on `BATON_MODEL` (default: the embedded model)."""
