"""The customer-service desk of seeds 000 and 004: five specialists and a human queue."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from baton import Agent, Guards, Team

from .data import DeskDB
from .tools import make_tools

BRIEF = "Answer in one or two short sentences, in the user's language."


def build_agents(db: DeskDB) -> list[Agent]:
    """The desk's agents, with tools bound to `db`."""
    t = make_tools(db)
    triage = Agent(
        name="triage",
        description="Front desk: works out what the user needs and routes them.",
        instructions="You are the front desk of an online shop and cloud provider. You never "
        "answer requests yourself; you pass each one on.\n"
        "First ask: is it about the user's own orders, invoices, payments, returned items or "
        "cloud servers? If not (lawsuits, lawyers, legal complaints, journalists and press, "
        "general knowledge, creative writing, chit-chat), call transfer_to_human.\n"
        "Otherwise hand it to the one specialist who owns it:\n"
        "- billing: invoices, amounts charged, payments, double charges, refunds.\n"
        "- orders: where a shop order is, shipping and delivery.\n"
        "- after_sales: returns only (a damaged, broken, wrong or unwanted item); it is not "
        "general customer service.\n"
        "- tech_support: cloud servers: status, load, alarms, outages, restarts.\n"
        "In `state`, put only ids the user wrote: an order id (ORD-...) as order_id, a server "
        "id (srv-...) as server_id; leave `state` empty when the user gave none.",
        handoffs=["billing", "tech_support", "orders", "after_sales", "human"],
    )
    billing = Agent(
        name="billing",
        description="Invoices, invoice amounts, refunds and payments.",
        not_for="Order status and deliveries, returns of goods, servers.",
        examples=["where is my invoice", "我要退款", "how much was I charged"],
        instructions="You are a billing specialist. Use query_invoice for questions about "
        "invoices, amounts and payments (a double charge too). Use issue_refund only for an "
        "order whose return is open (an rma is among the known facts): when after_sales hands "
        "you one, call issue_refund for that order_id at once; never send it back. " + BRIEF,
        tools=[t["query_invoice"], t["issue_refund"]],
        scopes=["billing:read", "billing:write"],
        handoffs=["after_sales", "human"],
    )
    tech_support = Agent(
        name="tech_support",
        description="Cloud servers (srv-...): status, load, incidents, alarms, outages and "
        "restarts.",
        not_for="Orders, invoices, refunds.",
        examples=["my server is down", "请重启服务器 srv-bj-001"],
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
        examples=["where is my order", "我的订单到哪了"],
        instructions="You track orders with get_order_status. " + BRIEF,
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
        examples=["my item arrived broken", "我要退货"],
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
        guards=Guards(max_hops=4, max_visits=2, model_timeout_s=180),
        fallback="human",
        model=model,
        store=store,
        **team_kwargs,
    )
    return Desk(team, db)
