"""The customer-service desk of seeds 000 and 004: five specialists and a human queue."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from baton import Agent, Guards, Team

from .data import DeskDB
from .tools import make_tools

BRIEF = "Answer in one or two short sentences, in the user's language."

GUARDS = Guards(max_hops=4, max_visits=2, model_timeout_s=180)
"""The desk's loop breakers: four hand-offs a run, an agent held twice at most, and three
minutes for a model call on a slow CPU."""


def build_agents(db: DeskDB) -> list[Agent]:
    """The desk's agents, with tools bound to `db`."""
    t = make_tools(db)
    triage = Agent(
        name="triage",
        description="Front desk: works out what the user needs and routes them.",
        instructions="You are the front desk of an online shop and cloud provider. You never "
        "answer requests yourself; you pass each one on.\n"
        "First ask: is it about the user's own orders, invoices, payments, the items they "
        "received or cloud servers? If not (lawsuits, lawyers, legal complaints, journalists "
        "and press, general knowledge, creative writing, chit-chat, health, coding help), "
        "call transfer_to_human.\n"
        "Otherwise hand it to the one specialist who owns it:\n"
        "- billing: invoices, amounts charged, payments, double charges, refunds.\n"
        "- orders: where a shop order is, shipping and delivery, paid but not arrived, a "
        "change of address.\n"
        "- after_sales: returns of an item that arrived damaged, scratched, broken, faulty, "
        "different from the one ordered or unwanted, even when the user wants the money "
        "back; it is not general customer service.\n"
        "- tech_support: cloud servers (srv-...) and anything running on them: status, load, "
        "alarms, outages, errors, a site or service that is down or slow, restarts.\n"
        "In `state`, put only ids the user wrote: an order id (ORD-...) as order_id, a server "
        "id (srv-...) as server_id; leave `state` empty when the user gave none.",
        handoffs=["billing", "tech_support", "orders", "after_sales", "human"],
    )
    billing = Agent(
        name="billing",
        description="Invoices, invoice amounts, refunds and payments.",
        not_for="Order status and deliveries, returns of goods, servers.",
        examples=[
            "where is my invoice",
            "我要退款",
            "how much was I charged",
            "can I download the invoice as a PDF",
            "what amount is on the invoice for my order",
            "my card was charged twice for one purchase",
            "I paid but the payment still shows as failed",
            "my refund still hasn't come through",
            "这个订单的发票金额是多少",
            "发票在哪里下载",
            "同一个订单被扣了两次钱",
            "退款怎么还没到账",
            "帮我查一下 invoice 金额",
            "我的 payment 被重复扣款了",
        ],
        instructions="You are a billing specialist. Use query_invoice for questions about "
        "invoices, amounts and payments (a double charge too). Use issue_refund only for an "
        "order whose return is open (an rma is among the known facts): when after_sales hands "
        "you one, call issue_refund for that order_id at once; never send it back. " + BRIEF,
        tools=[t["query_invoice"], t["issue_refund"]],
        scopes=["billing:read", "billing:write"],
        # no hand-off to after_sales: a return comes to billing from after_sales only for its
        # refund, and a 1.5B model offered the way back took it (after_sales <-> billing until
        # the ping-pong guard escalated); a return triage misroutes here goes to a person
        handoffs=["human"],
    )
    tech_support = Agent(
        name="tech_support",
        description="Cloud servers (srv-...): status, load, incidents, alarms, outages and "
        "restarts.",
        not_for="Orders, invoices, refunds.",
        examples=[
            "my server is down",
            "请重启服务器 srv-bj-001",
            "please reboot our cloud server",
            "our instance has been in alarm all morning",
            "CPU load on our VM is way too high",
            "the site we host with you keeps throwing errors",
            "can you check whether the server is running",
            "云主机连不上了",
            "我们部署的服务一直报错",
            "主机告警了，帮忙看一下",
            "云主机的 CPU 快满了",
            "帮我看下 VM 的 status",
        ],
        instructions="You are a cloud operations engineer. Restart a server when the user asks "
        "for it or it is in ALARM. " + BRIEF,
        tools=[t["check_server"], t["restart_server"]],
        scopes=["ops:read", "ops:write"],
        handoffs=["human"],
    )
    orders = Agent(
        name="orders",
        description="Shop orders (ORD-...): status (processing, shipped, delivered), shipping "
        "and delivery dates.",
        not_for="Invoices, refunds, returns of damaged goods.",
        examples=[
            "where is my order",
            "我的订单到哪了",
            "has my package been shipped yet",
            "any tracking update on my parcel",
            "what's the delivery status of my order",
            "can I change the delivery address before it ships",
            "I paid days ago and still haven't received anything",
            "订单什么时候发货",
            "帮我查一下物流信息",
            "钱付了好几天了，东西还没收到",
            "快递现在到哪儿了",
            "这个 order 哪天能 ship 出来",
            "帮我看看 delivery 进度",
        ],
        instructions="You track orders with get_order_status: look the order up first for any "
        "question about it (where it is, when it arrives, a change of address before it ships). "
        + BRIEF,
        tools=[t["get_order_status"]],
        scopes=["orders:read"],
        handoffs=["after_sales", "human"],
    )
    after_sales = Agent(
        name="after_sales",
        description="Returns only: opens a return for an item the user bought that is "
        "damaged, broken, wrong or unwanted.",
        not_for="General customer service, complaints, press; invoices and payments (billing "
        "issues the refund).",
        examples=[
            "my item arrived broken",
            "我要退货",
            "I want to return my keyboard, it's defective",
            "how do I send an item back",
            "you sent me the wrong model",
            "the monitor came scratched and I want my money back",
            "I don't need this anymore, can I return it",
            "东西质量有问题，想退货",
            "收到的商品跟我买的不一样",
            "键盘坏了，怎么申请退货",
            "收到就有划痕，要退货退款",
            "这个 keyboard 有问题，想 return",
            "收到的 item 是坏的，能退吗",
        ],
        instructions="You handle returns. Open the return with create_return; if the user also "
        "wants their money back, then hand off to billing with objective 'issue the refund' "
        "and the order_id and rma in `state`. " + BRIEF,
        tools=[t["create_return"]],
        scopes=["aftersales:write"],
        handoffs=["billing", "human"],
    )
    return [triage, billing, tech_support, orders, after_sales]


@dataclass
class Desk:
    """A desk: the team and the database its tools act on."""

    team: Team
    db: DeskDB


def build_desk(model: Any = "local", store: Any = None, **team_kwargs: Any) -> Desk:
    """A fresh desk (its own database) on `model` (default: the embedded local model)."""
    db = DeskDB()
    team = Team(
        build_agents(db),
        entry="triage",
        guards=GUARDS,
        fallback="human",
        model=model,
        store=store,
        **team_kwargs,
    )
    return Desk(team, db)


def desk_team(model: Any = "local") -> Team:
    """A fresh desk's team (its own database) on `model`: the factory `baton eval` calls for
    every case of `benchmarks/desk_routing/desk_eval.yaml`."""
    return build_desk(model=model).team
