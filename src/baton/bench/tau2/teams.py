"""The retail and airline domains as Baton teams of specialists.

Each agent holds only its own tools (the arithmetic helper `calculate` excepted: it touches no
data, and every specialist needs it for prices). Every specialist may pass the baton to every
other, because a τ² conversation moves freely between identity, orders, returns, ...; and
every one may call `transfer_to_human`, which plays τ²'s `transfer_to_human_agents`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from baton.agents import Agent
from baton.backends.base import Store
from baton.bench.tau2.data import Domain
from baton.bench.tau2.oracle import make_tools
from baton.bench.tau2.toolkit import TRANSFER, DomainTools
from baton.observe.base import EventSink
from baton.runtime.guards import Guards
from baton.topologies.team import Team


@dataclass(frozen=True)
class Role:
    """One specialist of a domain team: name, remit and the tools it owns."""

    name: str
    description: str
    not_for: str
    tools: tuple[str, ...]


SHARED_TOOLS = ("calculate",)
"""Tools every specialist holds: they read and change no data."""

ROLES: dict[str, tuple[Role, ...]] = {
    "retail": (
        Role(
            "triage",
            "Identifies the customer (by email, or by name and zip code) and reads their "
            "profile: orders, addresses and payment methods.",
            "Changing orders, returns, exchanges or addresses.",
            ("find_user_id_by_email", "find_user_id_by_name_zip", "get_user_details"),
        ),
        Role(
            "orders",
            "Order and product details, and changes to pending orders: cancel, change items, "
            "shipping address or payment method.",
            "Delivered orders (returns, exchanges) and the user's default address.",
            (
                "get_order_details",
                "get_product_details",
                "get_item_details",
                "list_all_product_types",
                "cancel_pending_order",
                "modify_pending_order_items",
                "modify_pending_order_address",
                "modify_pending_order_payment",
            ),
        ),
        Role(
            "returns",
            "Returns and exchanges of items from delivered orders.",
            "Pending orders and looking up orders or products.",
            ("return_delivered_order_items", "exchange_delivered_order_items"),
        ),
        Role(
            "account",
            "Changes to the user's default address.",
            "Orders, returns and exchanges.",
            ("modify_user_address",),
        ),
    ),
    "airline": (
        Role(
            "reservations",
            "Reads the user's profile (payment methods, membership, saved passengers) and "
            "reservation details.",
            "Searching or booking flights and changing or cancelling reservations.",
            ("get_user_details", "get_reservation_details"),
        ),
        Role(
            "flights",
            "Airports, flight status, searches for direct and one-stop flights, and new bookings.",
            "Changing or cancelling existing reservations.",
            (
                "list_all_airports",
                "get_flight_status",
                "search_direct_flight",
                "search_onestop_flight",
                "book_reservation",
            ),
        ),
        Role(
            "changes",
            "Changes to existing reservations: flights and cabin, checked bags, passengers.",
            "New bookings, cancellations and compensation.",
            (
                "update_reservation_flights",
                "update_reservation_baggages",
                "update_reservation_passengers",
            ),
        ),
        Role(
            "refunds",
            "Cancellations of reservations and compensation certificates.",
            "New bookings and changes to reservations.",
            ("cancel_reservation", "send_certificate"),
        ),
    ),
}
"""The specialists of each domain; the first is the entry agent."""


def owners(domain: str) -> dict[str, str]:
    """Tool name -> the specialist that owns it (shared tools: the entry agent)."""
    roles = ROLES[domain]
    out = {name: roles[0].name for name in SHARED_TOOLS}
    for role in roles:
        for name in role.tools:
            out[name] = role.name
    return out


def instructions(role: Role, domain: Domain) -> str:
    """The system prompt of a specialist: its remit, the hand-off rules and the policy."""
    team = ", ".join(r.name for r in ROLES[domain.name])
    return "\n\n".join(
        [
            f"You are the {role.name} specialist of the {domain.name} desk (team: {team}). "
            f"You handle: {role.description}",
            "Use only your own tools. When the user's next need belongs to another "
            "specialist, hand the baton over with its transfer_to_<name> tool and put the ids "
            "you know (user_id, order_id, reservation_id, ...) into `state`. In this desk, the "
            "policy's transfer_to_human_agents is the transfer_to_human tool.",
            domain.policy,
        ]
    )


RESULT_LIMIT = 32_000
"""Tool results are shown whole, as τ² shows them: Baton's default cut (1,500 characters)
would hide variants of a product (up to 3,400) and one-stop searches (up to 25,000)."""


@dataclass
class DomainTeam:
    """A τ² domain as a team, with the tool set its agents act on (`tools.db`)."""

    domain: str
    team: Team
    tools: DomainTools
    owners: dict[str, str]

    @property
    def entry(self) -> str:
        """The entry agent's name."""
        return ROLES[self.domain][0].name


def build_team(
    domain: Domain,
    model: Any,
    *,
    tools: DomainTools | None = None,
    db: dict[str, Any] | None = None,
    guards: Guards | None = None,
    store: Store | str | None = None,
    sinks: Sequence[EventSink] = (),
    max_result_chars: int = RESULT_LIMIT,
) -> DomainTeam:
    """The domain's team on `model`, acting on `tools.db` (`db`, else a fresh copy)."""
    tools = tools if tools is not None else make_tools(domain)
    if db is not None:
        tools.db = db
    elif not tools.db:
        tools.db = domain.fresh_db()
    table = tools.tools
    roles = ROLES[domain.name]
    names = [r.name for r in roles]
    agents = [
        Agent(
            name=role.name,
            description=role.description,
            not_for=role.not_for,
            instructions=instructions(role, domain),
            tools=[table[n] for n in (*role.tools, *SHARED_TOOLS) if n != TRANSFER],
            # each role holds exactly the scopes of the tools it was given
            scopes=sorted(
                {s for n in (*role.tools, *SHARED_TOOLS) if n != TRANSFER for s in table[n].scopes}
            ),
            handoffs=[*(n for n in names if n != role.name), "human"],
            max_iterations=12,
        )
        for role in roles
    ]
    team = Team(
        agents,
        entry=roles[0].name,
        guards=guards,
        fallback="human",
        store=store,
        model=model,
        sinks=sinks,
        max_result_chars=max_result_chars,
    )
    return DomainTeam(domain.name, team, tools, owners(domain.name))
