"""The seed 003 §4 ticket workflow: classify, retrieve from two knowledge bases in parallel,
draft a reply, review it.

    baton run examples.ticket_workflow:team "When will the invoice for ORD-202608-17 be issued?"

A `Pipeline` of four stages:

1. **classify** (typed: `Triage` — category, confidence, summary). A confidence under 0.6
   sends the ticket to a person (the human queue), with the hand-over card.
2. **retrieve**: a `Supervisor` whose lead asks the orders base and the policy base at once
   (two workers in parallel, each with its own tool over the desk's data) and sums up the facts.
3. **draft**: a writer turns the facts into a reply.
4. **review** (typed: `Reviewed`): the reviewer checks the draft against the facts and returns
   the revised answer, which is the run's output.

The agents' brain is the embedded local model unless `BATON_MODEL` names another one; the value
`scripted` selects a deterministic policy (`ticket_policy`) for tests and replays.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Literal

from pydantic import BaseModel, Field

from baton import Agent, ScriptedModel, Supervisor, tool
from baton.models import ModelRequest, Step
from baton.topologies.pipeline import Pipeline
from examples.desk.data import DeskDB

# --- the two knowledge bases --------------------------------------------------------------
POLICIES = {
    "billing": "Invoices are issued within 3 working days after delivery; a pending invoice "
    "is issued automatically, no action is needed. Refunds go back to the original payment "
    "method within 5 working days.",
    "shipping": "Orders ship within 2 days; the carrier's tracking page shows the ETA. A "
    "delayed parcel can be reported after 3 days past its ETA.",
    "technical": "Servers in ALARM are restarted by the on-call engineer; customers may "
    "request a restart through support.",
}


class Triage(BaseModel):
    """What the ticket is about."""

    category: Literal["billing", "shipping", "technical", "other"]
    confidence: float = Field(ge=0, le=1, description="How sure the category is, 0 to 1.")
    summary: str = Field(description="One line: what the customer wants, with any ids.")


class Reviewed(BaseModel):
    """The reviewer's verdict and the answer to send."""

    approved: bool = Field(description="The draft was right as it was.")
    answer: str = Field(description="The reply to send, corrected where needed.")


def build_ticket_workflow(model: Any = "local") -> Pipeline:
    """The four-stage workflow over a fresh desk database."""
    db = DeskDB()

    @tool
    def lookup_order(order_id: str) -> dict[str, Any]:
        """The order and its invoice.

        Args:
            order_id: Order number, e.g. ORD-202608-17.
        """
        key = order_id.strip().upper()
        if key not in db.orders:
            raise KeyError(f"no order {order_id}; check the number")
        return {"order_id": key, **db.orders[key], "invoice": db.invoices.get(key)}

    @tool
    def search_policy(topic: str) -> str:
        """The desk's policy on a topic: billing, shipping or technical.

        Args:
            topic: billing, shipping or technical.
        """
        return POLICIES.get(topic.strip().lower(), "No policy on that topic.")

    classify = Agent(
        name="classify",
        instructions=(
            "Classify the customer's ticket: category billing, shipping, technical or other; "
            "confidence from 0 to 1; a one-line summary keeping every order or server id."
        ),
        output_type=Triage,
    )
    retrieve = Supervisor(
        Agent(
            name="retrieve",
            instructions=(
                "You gather the facts for a support reply. First call ask_orders_kb (about the "
                "order id) and ask_policy_kb (about the ticket's category), once each, in one "
                "response. When their answers are in, do not call any tool again: reply with "
                "the facts they found, in two or three short lines."
            ),
        ),
        workers=[
            Agent(
                name="orders_kb",
                description="orders, deliveries and invoices by order id",
                instructions="Look the order up with lookup_order and report what it says.",
                tools=[lookup_order],
            ),
            Agent(
                name="policy_kb",
                description="the desk's policies on billing, shipping and technical topics",
                instructions="Find the policy with search_policy and quote it.",
                tools=[search_policy],
            ),
        ],
        model=model,
        max_parallel=2,
    )
    draft = Agent(
        name="draft",
        instructions="Write a short, friendly reply to the customer from these facts only.",
    )
    review = Agent(
        name="review",
        instructions=(
            "Check the draft reply against the facts: nothing invented, the customer's "
            "question answered. Return the reply to send, corrected if needed."
        ),
        output_type=Reviewed,
    )

    def answer(reviewed: Reviewed) -> str:
        """The reviewed reply."""
        return reviewed.answer

    return Pipeline(
        [classify, retrieve, draft, review, answer],
        escalate=_low_confidence,
        model=model,
        name="tickets",
    )


def _low_confidence(stage: str, output: str) -> str | None:
    """Tickets classified with a confidence under 0.6 go to a person."""
    if stage != "classify":
        return None
    triage = Triage.model_validate_json(output)
    if triage.confidence < 0.6:
        return f"classified {triage.category} with confidence {triage.confidence:.2f} (< 0.6)"
    return None


# --- a deterministic policy for tests and replays ----------------------------------------
_ORDER = re.compile(r"ORD-\d{6}-\d{2}", re.IGNORECASE)
_TOPICS = {
    "billing": ("invoice", "refund", "发票", "退款", "charge"),
    "shipping": ("deliver", "ship", "parcel", "物流", "快递"),
    "technical": ("server", "srv-", "restart", "服务器"),
}


def ticket_policy(request: ModelRequest) -> Step:
    """What each agent of the workflow does, scripted (not a language model)."""
    last = request.messages[-1]
    text = last.content or ""
    agent = request.agent
    if agent == "classify":
        low = text.lower()
        category = next(
            (c for c, words in _TOPICS.items() if any(w in low for w in words)), "other"
        )
        confidence = 0.9 if category != "other" else 0.3
        triage = Triage(category=category, confidence=confidence, summary=text[:200])  # type: ignore[arg-type]
        return ScriptedModel.say(triage.model_dump_json())
    if agent == "retrieve":
        if last.role == "tool":
            facts = [
                json.loads(m.content or "{}").get("answer", "")
                for m in request.messages
                if m.role == "tool"
            ]
            return ScriptedModel.say("Facts:\n" + "\n".join(f"- {f}" for f in facts))
        triage = json.loads(text)
        order = _ORDER.search(triage["summary"])
        return ScriptedModel.calls(
            ScriptedModel.call(
                "ask_orders_kb",
                question=f"What is the state of order {order.group(0) if order else 'unknown'}?",
            ),
            ScriptedModel.call(
                "ask_policy_kb", question=f"What is our {triage['category']} policy?"
            ),
        )
    if agent == "orders_kb":
        if last.role == "tool":
            return ScriptedModel.say(text)
        order = _ORDER.search(text)
        return ScriptedModel.call("lookup_order", order_id=order.group(0) if order else "?")
    if agent == "policy_kb":
        if last.role == "tool":
            return ScriptedModel.say(text)
        topic = next((c for c in POLICIES if c in text), "billing")
        return ScriptedModel.call("search_policy", topic=topic)
    if agent == "draft":
        return ScriptedModel.say(f"Hello! Here is what we found. {text}")
    if agent == "review":
        return ScriptedModel.say(
            Reviewed(approved=True, answer=text.split("Hello! ", 1)[-1]).model_dump_json()
        )
    return ScriptedModel.say("")


def _model() -> Any:
    choice = os.environ.get("BATON_MODEL") or "local"
    return ScriptedModel(ticket_policy) if choice == "scripted" else choice


team = build_ticket_workflow(_model())
"""The workflow on `BATON_MODEL` (default: the embedded model)."""
