"""The six requests `baton demo` plays, with what a correct desk does for each."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DemoRequest:
    """One user message and the expected outcome."""

    session: str
    text: str
    expect_path: tuple[str, ...]
    expect_tools: tuple[str, ...] = ()
    expect_status: str = "completed"
    note: str = ""


DEMO: tuple[DemoRequest, ...] = (
    DemoRequest(
        "A",
        "Please check the invoice for order ORD-202607-99.",
        ("triage", "billing"),
        ("query_invoice",),
        note="invoice query (EN)",
    ),
    DemoRequest(
        "B",
        "大事不好了，我们的生产服务器 srv-bj-001 发生告警，请帮我紧急重启！",
        ("triage", "tech_support"),
        ("restart_server",),
        note="server restart (ZH)",
    ),
    DemoRequest(
        "C",
        "我的订单 ORD-202608-17 现在到哪了？什么时候能送到？",
        ("triage", "orders"),
        ("get_order_status",),
        note="order status (ZH)",
    ),
    DemoRequest(
        "D",
        "My order ORD-202607-99 arrived damaged. I want to return it and get my money back.",
        ("triage", "after_sales", "billing"),
        ("create_return", "issue_refund"),
        note="two hand-offs (EN)",
    ),
    DemoRequest(
        "A",
        "那这张发票的金额是多少？",
        ("billing",),
        ("query_invoice",),
        note="follow-up, same session: no new order id (ZH)",
    ),
    DemoRequest(
        "E",
        "I want to file a legal complaint about your company and talk to a lawyer.",
        ("triage",),
        (),
        expect_status="escalated",
        note="escalation to a human (EN)",
    ),
)
