"""The customer-service desk `baton demo` plays: triage, billing, tech support, orders,
after-sales and a human queue, over a small in-memory business database.

    from baton.desk import build_desk
    desk = build_desk()            # the embedded local model
    desk.team.run_sync("Please check the invoice for order ORD-202607-99.")
"""

from .data import DeskDB
from .script import DEMO, DemoRequest
from .team import GUARDS, Desk, build_agents, build_desk, desk_team

__all__ = [
    "DEMO",
    "GUARDS",
    "DemoRequest",
    "Desk",
    "DeskDB",
    "build_agents",
    "build_desk",
    "desk_team",
]
