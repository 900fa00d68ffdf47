"""The seed 003 §4 ticket workflow: classify, retrieve from several knowledge bases in
parallel, draft a reply, review it against the citations.

    baton run examples.ticket_workflow:team "When will the invoice for ORD-202608-17 be issued?"

A `Pipeline` of four stages:

1. **classify** (typed: `Triage` — category, confidence, summary). A confidence under 0.6
   sends the ticket to a person (the human queue), with the hand-over card.
2. **retrieve**: a `Supervisor` whose lead asks, in one response, the orders worker and the
   knowledge-base workers that fit the ticket; they run in parallel. Each KB worker searches
   a real knowledge base (`KnowledgeBase`: Qdrant on disk + a lexical index) built from the
   policy files in `examples/policies/<kb>/` (English and Chinese), through `kb.as_tool`,
   which answers with cited facts. The kernel carries every citation on to the later stages.
3. **draft**: a writer turns the facts into a reply.
4. **review** (typed: `Reviewed`): the reviewer reads the citations the kernel passed on,
   checks them with `check_citations` by their numbers in its view (does each cited policy
   passage exist, unchanged? a number it was not shown is not real) and
   returns the revised answer, which is the run's output.

The knowledge bases live in `.baton/kb/ticket_workflow/` (or `BATON_KB_DIR`, or the builder's
`kb_dir`); they are ingested on the first search of each process, incrementally by content hash,
so a re-run only hashes the files. The agents' brain is the embedded local model unless
`BATON_MODEL` names another one; the value `scripted` selects a deterministic policy
(`ticket_policy`) for tests and replays.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from baton import Agent, ScriptedModel, Supervisor, tool
from baton.core.payload import REFERENCES_HEADING
from baton.desk.data import DeskDB
from baton.knowledge import KnowledgeBase
from baton.knowledge.tool import verify_tool
from baton.models import ModelRequest, Step
from baton.routing.encoders import Encoder, default_encoder
from baton.topologies.pipeline import Pipeline

POLICIES = Path(__file__).resolve().parent / "policies"
"""The example's policy files, one folder per knowledge base."""
KBS: dict[str, str] = {
    "refunds": "refunds, returns, price protection and when refunds arrive",
    "accounts": "invoices, payment methods and account changes",
    "logistics": "shipping, carriers, delivery times, delayed or lost parcels",
    "products": "product warranties, product support and cloud servers",
}
"""The knowledge bases (folders of `POLICIES`) and what each covers."""
FOR_CATEGORY: dict[str, tuple[str, ...]] = {
    "billing": ("refunds", "accounts"),
    "shipping": ("logistics", "refunds"),
    "technical": ("products",),
    "other": ("accounts", "products"),
}
"""Which knowledge bases a ticket of each category needs (the scripted lead's choice)."""


class Triage(BaseModel):
    """What the ticket is about."""

    category: Literal["billing", "shipping", "technical", "other"]
    confidence: float = Field(ge=0, le=1, description="How sure the category is, 0 to 1.")
    summary: str = Field(description="One line: what the customer wants, with any ids.")


class Reviewed(BaseModel):
    """The reviewer's verdict and the answer to send."""

    approved: bool = Field(description="The draft was right and every citation checked out.")
    answer: str = Field(description="The reply to send, corrected where needed.")


class PolicyLibrary:
    """The example's knowledge bases, one per folder of `examples/policies`, ingested on the
    first search of the process (incrementally: unchanged files are only hashed)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        encoder = _encoder()  # one model in memory for the four bases
        self.kbs = {
            name: _PolicyBase(name, self, path=root / name, encoder=encoder) for name in KBS
        }
        self._task: asyncio.Task[None] | None = None
        self._done = False

    async def ready(self) -> None:
        """Ingest every folder once (concurrent callers wait for the same ingestion; one
        that failed, or ran in another event loop, is started again)."""
        if self._done:
            return
        task = self._task
        if (
            task is None
            or task.get_loop() is not asyncio.get_running_loop()
            or (task.done() and (task.cancelled() or task.exception() is not None))
        ):
            task = self._task = asyncio.ensure_future(self._ingest())
        await asyncio.shield(task)
        self._done = True

    async def _ingest(self) -> None:
        for name, kb in self.kbs.items():
            await KnowledgeBase.ingest(kb, POLICIES / name, progress=False)

    async def aclose(self) -> None:
        """Close the bases (each holds its folder while open)."""
        for kb in self.kbs.values():
            await kb.close()


@functools.cache
def _encoder() -> Encoder:
    """The embedded encoder, shared by every library of the process (it loads on first use)."""
    return default_encoder()


class _PolicyBase(KnowledgeBase):
    """A knowledge base of the library: searched and verified once the library is ingested."""

    def __init__(self, name: str, library: PolicyLibrary, **kw: Any) -> None:
        super().__init__(name, **kw)
        self.library = library

    async def search(self, *args: Any, **kw: Any) -> Any:
        """`KnowledgeBase.search`, after the library's ingestion."""
        await self.library.ready()
        return await super().search(*args, **kw)

    async def verify(self, *args: Any, **kw: Any) -> Any:
        """`KnowledgeBase.verify`, after the library's ingestion."""
        await self.library.ready()
        return await super().verify(*args, **kw)


def kb_dir_default() -> Path:
    """Where the knowledge bases live: `BATON_KB_DIR`, or `.baton/kb/ticket_workflow`."""
    return Path(os.environ.get("BATON_KB_DIR") or ".baton/kb/ticket_workflow")


def build_ticket_workflow(model: Any = "local", kb_dir: str | Path | None = None) -> Pipeline:
    """The four-stage workflow over a fresh desk database and the example's knowledge bases
    (kept in `kb_dir`, default `kb_dir_default()`)."""
    db = DeskDB()
    library = PolicyLibrary(Path(kb_dir) if kb_dir is not None else kb_dir_default())

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

    workers = [
        Agent(
            name="orders_kb",
            description="orders, deliveries and invoices by order id",
            instructions="Look the order up with lookup_order and report what it says.",
            tools=[lookup_order],
        )
    ]
    for name, covers in KBS.items():
        search = library.kbs[name].as_tool(
            f"search_{name}", f"Search the {name} policies ({covers}); answers cited facts."
        )
        workers.append(
            Agent(
                name=f"{name}_kb",
                description=f"the {name} policies: {covers}",
                instructions=(
                    f"Search the {name} policies once with search_{name}, then answer with "
                    "the facts found, each with its policy number. Say so when none fits."
                ),
                tools=[search],
            )
        )
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
                "You gather the facts for a support reply. In one response, ask orders_kb about "
                "the order id (if there is one) and the knowledge bases that fit the ticket: "
                "refunds_kb and accounts_kb for billing, logistics_kb for shipping, products_kb "
                "for technical questions. When their answers are in, do not ask again: reply "
                "with the facts they found and their policy numbers, in a few short lines."
            ),
        ),
        workers=workers,
        model=model,
        max_parallel=len(workers),
    )
    draft = Agent(
        name="draft",
        instructions="Write a short, friendly reply to the customer from these facts only.",
    )
    review = Agent(
        name="review",
        instructions=(
            "Check the draft reply: first call check_citations once, with the numbers of the "
            'references you were shown (refs: ["1", "2"]); with no arguments it checks them '
            "all. Then check the draft against the facts: nothing "
            "invented, the customer's question answered. Return the reply to send, corrected "
            "if needed; approved is false when a citation did not check out."
        ),
        tools=[verify_tool(*library.kbs.values())],
        output_type=Reviewed,
    )

    def answer(reviewed: Reviewed) -> str:
        """The reviewed reply."""
        return reviewed.answer

    flow = Pipeline(
        [classify, retrieve, draft, review, answer],
        escalate=_low_confidence,
        model=model,
        name="tickets",
    )
    flow.library = library  # type: ignore[attr-defined]  # for scripts and tests
    return flow


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


def cited_references(system_prompt: str) -> list[dict[str, Any]]:
    """The citations the kernel showed an agent (the lines after `REFERENCES_HEADING`)."""
    lines = system_prompt.splitlines()
    if REFERENCES_HEADING not in lines:
        return []
    out = []
    for line in lines[lines.index(REFERENCES_HEADING) + 1 :]:
        if not line.startswith("  ["):
            break
        out.append(json.loads(line.split("] ", 1)[1]))
    return out


def _answers(request: ModelRequest) -> list[str]:
    """The answers in the tool results of this turn (a worker's `answer`)."""
    return [
        str(json.loads(m.content or "{}").get("answer", ""))
        for m in request.messages
        if m.role == "tool"
    ]


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
            return ScriptedModel.say("Facts:\n" + "\n".join(f"- {f}" for f in _answers(request)))
        triage = json.loads(text)
        order = _ORDER.search(triage["summary"])
        asks = [
            ScriptedModel.call(f"ask_{kb}_kb", question=triage["summary"])
            for kb in FOR_CATEGORY[triage["category"]]
        ]
        if order:
            asks.insert(
                0,
                ScriptedModel.call(
                    "ask_orders_kb", question=f"What is the state of order {order.group(0)}?"
                ),
            )
        return ScriptedModel.calls(*asks)
    if agent == "orders_kb":
        if last.role == "tool":
            return ScriptedModel.say(text)
        order = _ORDER.search(text)
        return ScriptedModel.call("lookup_order", order_id=order.group(0) if order else "?")
    if agent.endswith("_kb"):  # a knowledge-base worker: search once, answer the facts
        if last.role == "tool":
            found = json.loads(text)
            lines = [
                f"{f['text']} ({f['citation']['heading'].split(' > ')[-1]})"
                for f in found.get("facts", [])
            ]
            return ScriptedModel.say(" ".join(lines) or "No policy fits.")
        return ScriptedModel.call(f"search_{agent.removesuffix('_kb')}", query=text)
    if agent == "draft":
        return ScriptedModel.say(f"Hello! Here is what we found. {text}")
    if agent == "review":
        if last.role != "tool":
            cited = cited_references(request.messages[0].content or "")
            refs = [str(i) for i in range(1, len(cited) + 1)]
            return ScriptedModel.call("check_citations", refs=refs)
        checked = json.loads(text)
        draft = next(m.content or "" for m in request.messages if m.role == "user")
        return ScriptedModel.say(
            Reviewed(
                approved=checked.get("not_ok", 1) == 0 and checked.get("checked", 0) > 0,
                answer=draft.split("Hello! ", 1)[-1],
            ).model_dump_json()
        )
    return ScriptedModel.say("")


def _model() -> Any:
    choice = os.environ.get("BATON_MODEL") or "local"
    return ScriptedModel(ticket_policy) if choice == "scripted" else choice


team = build_ticket_workflow(_model())
"""The workflow on `BATON_MODEL` (default: the embedded model)."""
