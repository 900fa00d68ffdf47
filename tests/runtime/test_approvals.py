"""Human approvals (`baton.runtime.approval`, `Team.approve/reject/expire_approvals`): a call
that needs sign-off pauses the run before it executes; a decision resumes it where it stopped."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from runtime_kit import of_type, types

from baton import (
    Agent,
    ApprovalPolicy,
    CheckpointKeys,
    ModelRequest,
    ScriptedModel,
    Team,
    tool,
)
from baton.backends.base import Checkpoint, Store
from baton.backends.memory import MemoryStore
from baton.backends.sqlite import SQLiteStore
from baton.core.errors import ApprovalError, NoRunToResume
from baton.models import Step
from baton.tools import error_content

S = ScriptedModel

PAUSED_TYPES = ["run_started", "route_decided", "agent_started", "model_called"]
"""Events of a cashier run up to its approval request."""


# ---------------------------------------------------------------- the cashier desk


def amount_in(request: ModelRequest) -> int:
    """The amount the latest user message asks for ("pay 20000 to bob")."""
    user = next(m for m in reversed(request.messages) if m.role == "user")
    found = re.search(r"\d+", user.content or "")
    assert found is not None, user.content
    return int(found.group())


def cashier_script(request: ModelRequest) -> Step:
    """A function of the request, so a fresh process (or a resumed run) answers alike."""
    if request.agent == "desk":
        return S.say("A colleague will call you back.")
    last = request.messages[-1]
    if last.role == "tool":
        return S.say(f"Outcome of pay: {last.content}")
    return S.call("pay", amount=amount_in(request), to="bob")


def cashier_team(
    ledger: list[tuple[int, str]],
    *,
    store: Store | None = None,
    fallback: str = "human",
    latency_s: float = 0.0,
    **pay_options: Any,
) -> tuple[Team, ScriptedModel]:
    """One `cashier` agent with a `pay` tool that records every payment it really made."""

    @tool(**pay_options)
    async def pay(amount: int, to: str) -> dict[str, Any]:
        """Pay money to someone.

        Args:
            amount: Amount in cents.
            to: Who gets the money.
        """
        ledger.append((amount, to))
        return {"paid": amount, "to": to}

    agents = [Agent(name="cashier", instructions="You pay people.", tools=[pay])]
    if fallback != "human":
        agents.append(Agent(name=fallback, instructions="You take over escalations."))
    model = S(cashier_script, latency_s=latency_s)
    team = Team(agents, entry="cashier", model=model, store=store, fallback=fallback)
    return team, model


@pytest.fixture(params=["memory", "memory-json", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """Process memory (the live state, or its JSON text as a persistent store keeps it: the
    two must behave alike), or SQLite."""
    made: Store = (
        MemoryStore(serialise_checkpoints=request.param == "memory-json")
        if request.param.startswith("memory")
        else SQLiteStore(f"sqlite:///{tmp_path / 'baton.db'}")
    )
    yield made
    await made.close()


def decisions(events: list[Any]) -> list[tuple[str, str, str | None, str | None]]:
    return [(e.approval_id, e.decision, e.by, e.role) for e in of_type(events, "approval_decided")]


# ---------------------------------------------------------------- pause, then approve


async def test_a_tool_needing_approval_pauses_before_it_runs(store: Store) -> None:
    ledger: list[tuple[int, str]] = []
    team, model = cashier_team(
        ledger, store=store, requires_approval=True, approver_roles=["finance"]
    )

    result = await team.run("pay 20000 to bob", session_id="S1", user_id="u1")

    assert result.status == "awaiting_approval"
    assert result.output is None and result.error is None
    assert result.holder == "cashier"
    assert ledger == []  # the tool did not run
    assert len(model.requests) == 1
    card = result.approval
    assert card is not None
    assert (card.kind, card.tool, card.target, card.agent) == ("tool", "pay", None, "cashier")
    assert (card.session_id, card.run_id, card.trace_id) == (
        "S1",
        result.run_id,
        result.trace_id,
    )
    assert card.arguments == {"amount": 20000, "to": "bob"}
    assert card.reason == "tool pay needs a person's approval"
    assert card.required_roles == ["finance"]
    # no timeout on the policy: the team default (Guards.approval_timeout_s, 24 h)
    assert (card.dual, card.timeout_s, card.approvals) == (False, 86_400.0, [])
    assert card.call_id.startswith("call_")
    assert types(result.events) == [*PAUSED_TYPES, "approval_requested"]
    (requested,) = of_type(result.events, "approval_requested")
    assert requested.card == card
    assert requested.agent == "cashier"
    # what the run did so far is committed with its checkpoint: the transcript, the trace
    # and the audit chain show the paused run and the request
    stored = await team.store.get_messages("S1")
    assert [m.role for m in stored] == ["user", "assistant"]
    assert [e.id for e in await team.store.get_events("S1")] == [e.id for e in result.events]
    session = await team.session("S1")
    assert session is not None and session.version == 1
    assert await team.approvals() == [card]
    (cp,) = await team.unfinished()
    assert (cp.session_id, cp.run_id, cp.status) == ("S1", result.run_id, "awaiting_approval")
    assert cp.meta["agent"] == "cashier"
    assert cp.meta["approval"]["id"] == card.id


async def test_approve_runs_the_tool_once_and_commits_the_whole_run(store: Store) -> None:
    ledger: list[tuple[int, str]] = []
    team, model = cashier_team(
        ledger, store=store, requires_approval=True, approver_roles=["finance"]
    )
    paused = await team.run("pay 20000 to bob", session_id="S1", user_id="u1")
    card = paused.approval
    assert card is not None

    result = await team.approve("S1", card.id, by="alice", role="finance")

    assert result.status == "completed"
    assert result.output == 'Outcome of pay: {"paid": 20000, "to": "bob"}'
    assert ledger == [(20000, "bob")]
    assert len(model.requests) == 2
    assert result.approval is None and result.holder == "cashier"
    assert (result.run_id, result.trace_id) == (paused.run_id, paused.trace_id)
    assert types(result.events) == [
        *PAUSED_TYPES,
        "approval_requested",
        "approval_decided",
        "run_resumed",
        "tool_called",
        "model_called",
        "run_finished",
    ]
    assert decisions(result.events) == [(card.id, "approved", "alice", "finance")]
    (resumed,) = of_type(result.events, "run_resumed")
    assert "approved by alice" in resumed.reason
    (called,) = of_type(result.events, "tool_called")
    assert (called.tool, called.call_id, called.ok) == ("pay", card.call_id, True)
    # the whole run, pause included, is stored once it finished
    stored = await team.store.get_events("S1")
    assert [e.id for e in stored] == [e.id for e in result.events]
    assert of_type(stored, "approval_requested")[0].card.id == card.id
    messages = await team.store.get_messages("S1")
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[1].tool_calls is not None
    assert [c.id for c in messages[1].tool_calls] == [card.call_id]
    assert messages[2].tool_call_id == card.call_id
    assert messages[2].content == '{"paid": 20000, "to": "bob"}'
    assert await team.approvals() == []
    assert await team.unfinished() == []
    session = await team.session("S1")
    assert session is not None and session.holder == "cashier"
    if isinstance(store, SQLiteStore):
        audit = await store.verify_audit()
        assert audit.ok and audit.checked == len(stored)
        assert [r.type for r in await store.audit_records("S1")] == types(stored)
        assert [r.event_id for r in await store.audit_records("S1")] == [e.id for e in stored]


async def test_calls_before_the_paused_one_ran_once_and_each_waiting_call_gets_its_card() -> None:
    ran: list[str] = []

    @tool
    async def lookup(to: str) -> str:
        """Look a payee up."""
        ran.append(f"lookup {to}")
        return f"{to} is known"

    @tool(requires_approval=True)
    async def pay(amount: int, to: str) -> str:
        """Pay."""
        ran.append(f"pay {amount} {to}")
        return "paid"

    def script(request: ModelRequest) -> Step:
        if request.messages[-1].role == "tool":
            return S.say("done")
        return S.calls(
            S.call("lookup", to="bob"),
            S.call("pay", amount=1, to="bob"),
            S.call("pay", amount=2, to="eve"),
        )

    model = S(script)
    team = Team([Agent(name="cashier", tools=[lookup, pay])], entry="cashier", model=model)

    first = await team.run("pay bob and eve", session_id="S1")
    assert first.status == "awaiting_approval" and first.approval is not None
    assert first.approval.arguments == {"amount": 1, "to": "bob"}
    assert ran == ["lookup bob"]

    second = await team.approve("S1", first.approval.id, by="alice")
    assert second.status == "awaiting_approval" and second.approval is not None
    assert second.approval.id != first.approval.id
    assert second.approval.arguments == {"amount": 2, "to": "eve"}
    assert second.approval.call_id != first.approval.call_id
    assert ran == ["lookup bob", "pay 1 bob"]
    assert [c.id for c in await team.approvals()] == [second.approval.id]

    done = await team.reject("S1", second.approval.id, by="alice", reason="unknown payee")
    assert done.status == "completed" and done.output == "done"
    assert ran == ["lookup bob", "pay 1 bob"]
    assert len(model.requests) == 2
    assert [(d[1], d[2]) for d in decisions(done.events)] == [
        ("approved", "alice"),
        ("rejected", "alice"),
    ]
    tools = [m for m in await team.store.get_messages("S1") if m.role == "tool"]
    assert [m.name for m in tools] == ["lookup", "pay", "pay"]
    assert tools[2].content == error_content(
        "not executed: rejected by alice: unknown payee; tell the user, do not retry it"
    )


@pytest.fixture(params=["memory", "sqlite"])
async def sealing_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """A store that keeps the real arguments of a paused call: process memory, or SQLite
    with a checkpoint key (without one, its checkpoints hold the secrets masked)."""
    made: Store = (
        MemoryStore()
        if request.param == "memory"
        else SQLiteStore(
            f"sqlite:///{tmp_path / 'baton.db'}", checkpoint_keys=CheckpointKeys([("k1", KEY)])
        )
    )
    yield made
    await made.close()


KEY = bytes(range(32))


async def test_the_card_shows_redacted_arguments_and_the_tool_gets_the_real_ones(
    sealing_store: Store,
) -> None:
    store = sealing_store
    got: list[tuple[str, str]] = []

    @tool(requires_approval=True)
    async def charge(card_number: str, cvv: str) -> str:
        """Charge a card."""
        got.append((card_number, cvv))
        return "charged"

    def script(request: ModelRequest) -> Step:
        if request.messages[-1].role == "tool":
            return S.say("Charged.")
        return S.call("charge", card_number="4111111111111111", cvv="123")

    team = Team(
        [Agent(name="cashier", tools=[charge])], entry="cashier", model=S(script), store=store
    )
    paused = await team.run("charge 4111111111111111, cvv 123", session_id="S1", user_id="u1")
    card = paused.approval
    assert card is not None
    hidden = {"card_number": "[REDACTED:card_number]", "cvv": "[REDACTED:cvv]"}
    assert card.arguments == hidden
    assert [c.arguments for c in await team.approvals()] == [hidden]

    result = await team.approve("S1", card.id, by="alice")

    assert result.status == "completed"
    assert got == [("4111111111111111", "123")]
    stored = await team.store.get_events("S1")
    assert of_type(stored, "approval_requested")[0].card.arguments == hidden
    assert "4111111111111111" not in repr(stored)
    session = await team.session("S1")
    assert session is not None and session.user_id == "u1"


# ---------------------------------------------------------------- another process decides

CASHIER_APP = '''
"""The same cashier team, for the test process and a child process."""

import asyncio
import json
import os
import sys
from pathlib import Path

from baton import Agent, ScriptedModel as S, Team, ToolContext, tool
from baton.backends.sqlite import SQLiteStore

HERE = Path(__file__).parent


def script(request):
    last = request.messages[-1]
    if last.role == "tool":
        return S.say("Outcome of pay: " + (last.content or ""))
    return S.call("pay", amount=20000, to="bob")


@tool(requires_approval=True, approver_roles=["finance"])
def pay(amount: int, to: str, ctx: ToolContext) -> dict:
    """Pay money to someone."""
    with open(HERE / "ledger.txt", "a", encoding="utf-8") as f:
        f.write(f"{os.getpid()} {ctx.idempotency_key} {amount} {to}\\n")
    return {"paid": amount, "to": to}


def build():
    store = SQLiteStore(f"sqlite:///{HERE / 'baton.db'}")
    return Team([Agent(name="cashier", tools=[pay])], entry="cashier", model=S(script), store=store)


async def main():
    team = build()
    r = await team.run("pay 20000 to bob", session_id="S-proc", user_id="u1")
    print(json.dumps({
        "status": r.status,
        "approval": r.approval.id if r.approval else None,
        "run_id": r.run_id,
        "pid": os.getpid(),
    }))
    await team.aclose()


if __name__ == "__main__":
    asyncio.run(main())
'''


async def test_an_approval_granted_in_another_process_runs_the_tool_there_once(
    tmp_path: Path,
) -> None:
    app = tmp_path / "cashier_app.py"
    app.write_text(CASHIER_APP, encoding="utf-8")
    child = subprocess.run(
        [sys.executable, str(app)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert child.returncode == 0, child.stderr
    paused = json.loads(child.stdout.strip().splitlines()[-1])
    assert paused["status"] == "awaiting_approval"
    assert paused["pid"] != os.getpid()
    assert not (tmp_path / "ledger.txt").exists()  # nothing paid in the pausing process

    spec = importlib.util.spec_from_file_location(f"cashier_app_{tmp_path.name}", app)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    team: Team = module.build()
    try:
        (card,) = await team.approvals()
        assert (card.id, card.run_id, card.tool) == (paused["approval"], paused["run_id"], "pay")

        result = await team.approve("S-proc", card.id, by="alice", role="finance")

        assert result.status == "completed"
        assert result.output == 'Outcome of pay: {"paid": 20000, "to": "bob"}'
        assert result.run_id == paused["run_id"]
        ledger = (tmp_path / "ledger.txt").read_text(encoding="utf-8").splitlines()
        assert ledger == [f"{os.getpid()} {paused['run_id']}:0:0 20000 bob"]
        stored = await team.store.get_events("S-proc")
        assert types(stored) == [
            *PAUSED_TYPES,
            "approval_requested",
            "approval_decided",
            "run_resumed",
            "tool_called",
            "model_called",
            "run_finished",
        ]
        assert {e.run_id for e in stored} == {paused["run_id"]}
        session = await team.session("S-proc")
        assert session is not None and (session.user_id, session.holder) == ("u1", "cashier")
        assert await team.approvals() == []
        with pytest.raises(ApprovalError):
            await team.approve("S-proc", card.id, by="bob", role="finance")
        assert len((tmp_path / "ledger.txt").read_text(encoding="utf-8").splitlines()) == 1
    finally:
        await team.aclose()


async def test_a_pause_after_a_handoff_resumes_with_the_receiver_in_another_team(
    tmp_path: Path,
) -> None:
    refunded: list[str] = []

    @tool(requires_approval=True)
    async def refund(order_id: str) -> str:
        """Refund an order."""
        refunded.append(order_id)
        return "refunded"

    def script(request: ModelRequest) -> Step:
        if request.agent == "triage":
            return S.call(
                "transfer_to_billing",
                reason="refund",
                objective="refund ORD-1",
                state={"order_id": "ORD-1"},
            )
        if request.messages[-1].role == "tool":
            return S.say("Refunded ORD-1.")
        return S.call("refund", order_id="ORD-1")

    def build() -> Team:
        triage = Agent(name="triage", handoffs=["billing"])
        billing = Agent(name="billing", tools=[refund], handoffs=["triage"])
        store = SQLiteStore(f"sqlite:///{tmp_path / 'baton.db'}")
        return Team([triage, billing], entry="triage", model=S(script), store=store)

    first, second = build(), build()
    paused = await first.run("refund ORD-1", session_id="S1")
    assert paused.status == "awaiting_approval"
    assert (paused.path, paused.holder) == (["triage", "billing"], "billing")
    assert paused.approval is not None and paused.approval.agent == "billing"
    assert paused.approval.state == {"order_id": "ORD-1"}

    result = await second.approve("S1", paused.approval.id, by="alice")

    assert result.status == "completed" and result.output == "Refunded ORD-1."
    assert refunded == ["ORD-1"]
    assert (result.path, result.holder) == (["triage", "billing"], "billing")
    assert [p.target for p in result.handoffs] == ["billing"]
    assert [u.target for u in result.usage_by_handoff] == ["billing"]
    session = await second.session("S1")
    assert session is not None
    assert (session.holder, session.state) == ("billing", {"order_id": "ORD-1"})
    assert session.incoming is not None and session.incoming.source == "triage"
    await first.aclose()
    await second.aclose()


async def test_two_processes_approving_at_once_run_the_tool_once(tmp_path: Path) -> None:
    ledger: list[tuple[int, str]] = []
    url = f"sqlite:///{tmp_path / 'baton.db'}"
    team_a, _ = cashier_team(ledger, store=SQLiteStore(url), requires_approval=True)
    team_b, _ = cashier_team(ledger, store=SQLiteStore(url), requires_approval=True, latency_s=0.05)
    paused = await team_a.run("pay 20000 to bob", session_id="S1")
    assert paused.approval is not None

    outcomes = await asyncio.gather(
        team_b.approve("S1", paused.approval.id, by="bob"),
        team_a.approve("S1", paused.approval.id, by="alice"),
        return_exceptions=True,
    )

    completed = [o for o in outcomes if not isinstance(o, BaseException)]
    refused = [o for o in outcomes if isinstance(o, BaseException)]
    assert [o.status for o in completed] == ["completed"]
    assert [type(o) for o in refused] == [ApprovalError]
    assert ledger == [(20000, "bob")]
    assert len(of_type(await team_a.store.get_events("S1"), "run_finished")) == 1
    await team_a.aclose()
    await team_b.aclose()


# ---------------------------------------------------------------- policies


@pytest.mark.parametrize(
    ("amount", "pauses"), [(500, False), (10_000, False), (10_001, True), (20_000, True)]
)
async def test_a_policy_function_decides_which_calls_wait(amount: int, pauses: bool) -> None:
    ledger: list[tuple[int, str]] = []
    seen: list[tuple[dict[str, Any], dict[str, Any]]] = []

    def large(args: Any, state: Any) -> bool:
        seen.append((dict(args), dict(state)))
        return bool(args["amount"] > 10_000)

    team, _ = cashier_team(ledger, requires_approval=large)

    result = await team.run(f"pay {amount} to bob", session_id="S1")

    assert seen == [({"amount": amount, "to": "bob"}, {})]
    if pauses:
        assert result.status == "awaiting_approval"
        assert result.approval is not None and result.approval.arguments["amount"] == amount
        assert ledger == []
        assert len(of_type(result.events, "approval_requested")) == 1
    else:
        assert result.status == "completed"
        assert result.approval is None
        assert ledger == [(amount, "bob")]
        assert of_type(result.events, "approval_requested") == []
        assert await team.approvals() == []


@pytest.mark.parametrize("as_policy", [False, True])
async def test_a_policy_that_raises_counts_as_needing_approval(as_policy: bool) -> None:
    ledger: list[tuple[int, str]] = []

    def broken(args: Any, state: Any) -> bool:
        return bool(args["currency"] == "EUR")  # KeyError: no such argument

    policy: Any = ApprovalPolicy(when=broken, roles=("finance",)) if as_policy else broken
    team, _ = cashier_team(ledger, requires_approval=policy)

    result = await team.run("pay 5 to bob", session_id="S1")

    assert result.status == "awaiting_approval"
    assert ledger == []
    assert result.approval is not None
    assert result.approval.required_roles == (["finance"] if as_policy else [])


# ---------------------------------------------------------------- rejection, roles, dual


async def test_a_rejection_runs_nothing_and_the_agent_tells_the_user() -> None:
    ledger: list[tuple[int, str]] = []
    team, model = cashier_team(ledger, requires_approval=True)
    paused = await team.run("pay 20000 to bob", session_id="S1")
    card = paused.approval
    assert card is not None

    result = await team.reject("S1", card.id, by="bob", reason="over budget")

    assert ledger == []
    assert result.status == "completed"
    told = error_content(
        "not executed: rejected by bob: over budget; tell the user, do not retry it"
    )
    assert len(model.requests) == 2
    last = model.requests[-1].messages[-1]
    assert (last.role, last.name, last.tool_call_id, last.content) == (
        "tool",
        "pay",
        card.call_id,
        told,
    )
    assert result.output == f"Outcome of pay: {told}"
    assert decisions(result.events) == [(card.id, "rejected", "bob", None)]
    assert of_type(result.events, "approval_decided")[0].reason == "over budget"
    (called,) = of_type(result.events, "tool_called")
    assert (called.ok, called.error) == (False, "not executed: rejected by bob: over budget")
    assert await team.approvals() == []
    stored = await team.store.get_messages("S1")
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[2].content == told


async def test_only_the_required_roles_may_decide_and_a_refusal_changes_nothing() -> None:
    ledger: list[tuple[int, str]] = []
    team, model = cashier_team(ledger, requires_approval=True, approver_roles=["finance"])
    paused = await team.run("pay 20000 to bob", session_id="S1")
    card = paused.approval
    assert card is not None
    cards_before = await team.approvals()
    cp_before = await team.store.get_checkpoint("S1")
    assert cp_before is not None

    with pytest.raises(ApprovalError, match="needs one of finance"):
        await team.approve("S1", card.id, by="olga", role="ops")
    with pytest.raises(ApprovalError, match="needs one of finance"):
        await team.approve("S1", card.id, by="olga")
    with pytest.raises(ApprovalError, match="needs one of finance"):
        await team.reject("S1", card.id, by="olga", role="ops", reason="no")

    assert await team.approvals() == cards_before
    assert cards_before[0].approvals == []
    cp_after = await team.store.get_checkpoint("S1")
    assert cp_after is not None
    assert (cp_after.seq, cp_after.status) == (cp_before.seq, "awaiting_approval")
    assert ledger == [] and len(model.requests) == 1

    result = await team.approve("S1", card.id, by="fiona", role="finance")
    assert result.status == "completed"
    assert ledger == [(20000, "bob")]
    assert decisions(result.events) == [(card.id, "approved", "fiona", "finance")]


async def test_dual_approval_needs_two_distinct_approvers() -> None:
    ledger: list[tuple[int, str]] = []
    team, model = cashier_team(ledger, requires_approval=True, dual=True)
    paused = await team.run("pay 20000 to bob", session_id="S1")
    card = paused.approval
    assert card is not None and card.dual

    first = await team.approve("S1", card.id, by="alice")

    assert first.status == "awaiting_approval"
    assert first.approval is not None and first.approval.id == card.id
    assert [(a.by, a.approved) for a in first.approval.approvals] == [("alice", True)]
    assert decisions(first.events) == [(card.id, "pending", "alice", None)]
    assert ledger == [] and len(model.requests) == 1
    (listed,) = await team.approvals()
    assert [a.by for a in listed.approvals] == ["alice"]

    with pytest.raises(ApprovalError, match="already signed"):
        await team.approve("S1", card.id, by="alice")
    with pytest.raises(ApprovalError, match="already signed"):
        await team.reject("S1", card.id, by="alice")
    assert [a.by for a in (await team.approvals())[0].approvals] == ["alice"]
    assert ledger == []

    done = await team.approve("S1", card.id, by="bob")

    assert done.status == "completed"
    assert ledger == [(20000, "bob")]
    assert decisions(done.events) == [
        (card.id, "pending", "alice", None),
        (card.id, "approved", "bob", None),
    ]
    assert await team.approvals() == []


# ---------------------------------------------------------------- timeouts


@pytest.mark.parametrize("noticed_by", ["approve", "reject", "resume"])
async def test_a_timed_out_approval_escalates_to_the_human_queue(noticed_by: str) -> None:
    ledger: list[tuple[int, str]] = []
    team, model = cashier_team(ledger, requires_approval=True, approval_timeout_s=0.05)
    paused = await team.run("pay 20000 to bob", session_id="S1", user_id="u1")
    card = paused.approval
    assert card is not None and card.timeout_s == 0.05
    await asyncio.sleep(0.1)

    if noticed_by == "approve":
        result = await team.approve("S1", card.id, by="alice")
    elif noticed_by == "reject":
        result = await team.reject("S1", card.id, by="alice")
    else:
        result = await team.resume("S1")

    assert result.status == "escalated"
    assert ledger == []  # never ran
    assert len(model.requests) == 1
    (decided,) = of_type(result.events, "approval_decided")
    assert (decided.approval_id, decided.decision, decided.by) == (card.id, "expired", None)
    (trip,) = of_type(result.events, "guard_tripped")
    assert trip.guard == "approval_timeout"
    assert card.id in trip.detail
    assert of_type(result.events, "run_resumed") == []
    (ticket,) = await team.tickets.list()
    assert ticket.card.session_id == "S1"
    assert ticket.card.reasons == [trip.detail]
    assert ticket.card.last_user_message == "pay 20000 to bob"
    assert ticket.card == result.escalation
    assert await team.approvals() == [] and await team.unfinished() == []
    tool_msgs = [m for m in await team.store.get_messages("S1") if m.role == "tool"]
    assert [m.content for m in tool_msgs] == [error_content("not executed: the approval timed out")]
    with pytest.raises(ApprovalError):
        await team.approve("S1", card.id, by="bob")
    with pytest.raises(NoRunToResume):
        await team.resume("S1")
    assert ledger == []


async def test_a_timed_out_approval_goes_to_a_fallback_agent() -> None:
    ledger: list[tuple[int, str]] = []
    team, model = cashier_team(
        ledger, fallback="desk", requires_approval=True, approval_timeout_s=0.05
    )
    paused = await team.run("pay 20000 to bob", session_id="S1")
    assert paused.approval is not None
    await asyncio.sleep(0.1)

    result = await team.approve("S1", paused.approval.id, by="alice")

    assert result.status == "escalated"
    assert result.output == "A colleague will call you back."
    assert result.path == ["cashier", "desk"]
    assert ledger == []
    assert [r.agent for r in model.requests] == ["cashier", "desk"]
    assert [t.guard for t in of_type(result.events, "guard_tripped")] == ["approval_timeout"]
    assert await team.tickets.list(None) == []


async def test_expire_approvals_escalates_every_expired_run_and_only_those() -> None:
    ledger: list[tuple[int, str]] = []
    team, _ = cashier_team(ledger, requires_approval=True, approval_timeout_s=0.3)
    for sid in ("S1", "S2"):
        assert (await team.run("pay 20000 to bob", session_id=sid)).status == "awaiting_approval"

    assert await team.expire_approvals() == []
    assert len(await team.approvals()) == 2

    await asyncio.sleep(0.35)
    fresh = await team.run("pay 30000 to bob", session_id="S3")  # not expired yet
    assert fresh.approval is not None
    results = await team.expire_approvals()

    assert sorted((r.session_id, r.status) for r in results) == [
        ("S1", "escalated"),
        ("S2", "escalated"),
    ]
    for r in results:
        assert [t.guard for t in of_type(r.events, "guard_tripped")] == ["approval_timeout"]
    assert sorted(t.card.session_id for t in await team.tickets.list()) == ["S1", "S2"]
    assert [c.id for c in await team.approvals()] == [fresh.approval.id]
    assert ledger == []
    done = await team.approve("S3", fresh.approval.id, by="alice")
    assert done.status == "completed" and ledger == [(30000, "bob")]


# ---------------------------------------------------------------- hand-off gates


def gate_team() -> tuple[Team, ScriptedModel]:
    def script(request: ModelRequest) -> Step:
        if request.agent == "payments":
            return S.say("Payments here.")
        last = request.messages[-1]
        if last.role == "tool":
            return S.say(f"Sorry: {last.content}")
        return S.call("transfer_to_payments", reason="user wants to pay", objective="pay bob 20000")

    model = S(script)
    triage = Agent(name="triage", handoffs=["payments"], approve_handoffs={"payments": True})
    payments = Agent(name="payments", description="Payments.")
    return Team([triage, payments], entry="triage", model=model), model


async def test_a_gated_handoff_pauses_and_passes_once_approved() -> None:
    team, model = gate_team()

    paused = await team.run("pay bob 20000", session_id="S1")

    assert paused.status == "awaiting_approval"
    assert paused.path == ["triage"]
    card = paused.approval
    assert card is not None
    assert (card.kind, card.target, card.tool, card.agent) == (
        "handoff",
        "payments",
        None,
        "triage",
    )
    assert card.reason == "hand-off to payments needs a person's approval"
    assert (card.arguments["reason"], card.arguments["objective"]) == (
        "user wants to pay",
        "pay bob 20000",
    )
    assert of_type(paused.events, "handoff") == []
    assert [r.agent for r in model.requests] == ["triage"]

    result = await team.approve("S1", card.id, by="alice")

    assert result.status == "completed"
    assert result.output == "Payments here."
    assert result.path == ["triage", "payments"]
    assert result.holder == "payments"
    (sent,) = of_type(result.events, "handoff")
    assert (sent.payload.source, sent.payload.target) == ("triage", "payments")
    assert decisions(result.events) == [(card.id, "approved", "alice", None)]
    assert [e.agent for e in of_type(result.events, "agent_started")] == ["triage", "payments"]
    assert [r.agent for r in model.requests] == ["triage", "payments"]


async def test_a_rejected_handoff_stays_with_the_source_which_tells_the_user() -> None:
    team, model = gate_team()
    paused = await team.run("pay bob 20000", session_id="S1")
    assert paused.approval is not None

    result = await team.reject("S1", paused.approval.id, by="bob", reason="not today")

    assert result.status == "completed"
    assert result.path == ["triage"]
    assert result.holder == "triage"
    assert of_type(result.events, "handoff") == []
    (refused,) = of_type(result.events, "handoff_refused")
    assert refused.target == "payments"
    assert refused.reason == "rejected by bob: not today; tell the user, do not retry it"
    told = error_content(f"hand-off to 'payments' refused: {refused.reason}")
    assert model.requests[-1].messages[-1].content == told
    assert result.output == f"Sorry: {told}"
    assert [r.agent for r in model.requests] == ["triage", "triage"]


@pytest.mark.parametrize(("priority", "pauses"), [("normal", False), ("urgent", True)])
async def test_a_handoff_policy_function_reads_the_payload(priority: str, pauses: bool) -> None:
    seen: list[str] = []

    def urgent(fields: Any, state: Any) -> bool:
        seen.append(fields["priority"])
        return bool(fields["priority"] == "urgent")

    def script(request: ModelRequest) -> Step:
        if request.agent == "payments":
            return S.say("Payments here.")
        return S.call("transfer_to_payments", reason="pay", objective="pay bob", priority=priority)

    triage = Agent(name="triage", handoffs=["payments"], approve_handoffs={"payments": urgent})
    team = Team([triage, Agent(name="payments")], entry="triage", model=S(script))

    result = await team.run("pay bob", session_id="S1")

    assert seen == [priority]
    if pauses:
        assert result.status == "awaiting_approval" and result.path == ["triage"]
        assert result.approval is not None and result.approval.arguments["priority"] == "urgent"
    else:
        assert result.status == "completed" and result.path == ["triage", "payments"]
        assert of_type(result.events, "approval_requested") == []


# ---------------------------------------------------------------- refusals


async def test_a_new_message_on_a_session_waiting_for_approval_is_refused() -> None:
    ledger: list[tuple[int, str]] = []
    team, model = cashier_team(ledger, requires_approval=True)
    paused = await team.run("pay 20000 to bob", session_id="S1")
    card = paused.approval
    assert card is not None
    cp = await team.store.get_checkpoint("S1")
    assert cp is not None

    with pytest.raises(ApprovalError, match=card.id):
        await team.run("hello?", session_id="S1")

    after = await team.store.get_checkpoint("S1")
    assert after is not None and (after.run_id, after.seq) == (cp.run_id, cp.seq)
    assert len(model.requests) == 1 and ledger == []
    # only the paused run's own messages: the refused one was not recorded
    contents = [m.content for m in await team.store.get_messages("S1")]
    assert contents[:1] == ["pay 20000 to bob"] and "hello?" not in contents
    still = await team.resume("S1")  # a resume leaves a waiting run waiting
    assert still.status == "awaiting_approval"
    assert still.approval is not None and still.approval.id == card.id
    kept = await team.store.get_checkpoint("S1")
    assert kept is not None and (kept.seq, kept.status) == (cp.seq, "awaiting_approval")


async def test_unknown_approvals_and_sessions_are_refused() -> None:
    ledger: list[tuple[int, str]] = []
    team, _ = cashier_team(ledger, requires_approval=True)
    paused = await team.run("pay 20000 to bob", session_id="S1")
    card = paused.approval
    assert card is not None

    with pytest.raises(ApprovalError, match="apr_nope"):
        await team.approve("S1", "apr_nope", by="alice")
    with pytest.raises(ApprovalError, match="apr_nope"):
        await team.reject("S1", "apr_nope", by="alice")
    with pytest.raises(ApprovalError, match="S-none"):
        await team.approve("S-none", card.id, by="alice")
    with pytest.raises(ApprovalError):
        await team.approve("S1", card.id, by="  ")
    with pytest.raises(NoRunToResume):
        await team.resume("S-none")

    assert ledger == []
    assert await team.approvals() == [card]
    result = await team.approve("S1", card.id, by="alice")
    assert result.status == "completed" and ledger == [(20000, "bob")]


# ---------------------------------------------------------------- any sequence of decisions


class Clock:
    """Wall-clock seconds with a settable offset: `sleep` jumps past a timeout instantly."""

    def __init__(self) -> None:
        self.offset = 0.0
        self._real = time.time

    def __call__(self) -> float:
        return self._real() + self.offset


Action = tuple[str, str, bool]
ACTIONS = st.one_of(
    st.tuples(
        st.sampled_from(["approve", "reject"]),
        st.sampled_from(["alice", "bob"]),
        st.booleans(),  # the role is one the card allows
    ),
    st.just(("sleep", "", True)),
    st.just(("resume", "", True)),
)
TIMEOUT_S = 60.0
DECIDE: list[Action] = [
    ("approve", "carol", True),
    ("approve", "dave", True),
    ("reject", "erin", True),
    ("resume", "", True),
]
"""Appended to every sequence: two fresh approvers decide any card still waiting, then
further actions meet a finished run."""


def _checkpoint_key(cp: Checkpoint | None) -> tuple[Any, ...] | None:
    return None if cp is None else (cp.run_id, cp.seq, cp.status, cp.meta)


async def _play(actions: list[Action], dual: bool, timeout: bool, clock: Clock) -> None:
    ledger: list[tuple[int, str]] = []
    team, _ = cashier_team(
        ledger,
        requires_approval=True,
        approver_roles=["finance"],
        dual=dual,
        approval_timeout_s=TIMEOUT_S if timeout else None,
    )
    paused = await team.run("pay 20000 to bob", session_id="S1")
    card = paused.approval
    assert card is not None

    terminal: str | None = None
    approved_in_time = False
    signed: set[str] = set()
    expired = False
    frozen: tuple[Any, ...] | None = None

    async def observed() -> tuple[Any, ...]:
        return (
            [e.id for e in await team.store.get_events("S1")],
            [m.id for m in await team.store.get_messages("S1")],
            list(ledger),
            [(t.id, t.status) for t in await team.tickets.list(None)],
            _checkpoint_key(await team.store.get_checkpoint("S1")),
        )

    for kind, who, role_ok in actions:
        role = "finance" if role_ok else "ops"
        if kind == "sleep":
            clock.offset += TIMEOUT_S + 1
            expired = expired or timeout
            continue
        if terminal is not None:
            error = NoRunToResume if kind == "resume" else ApprovalError
            with pytest.raises(error):
                if kind == "resume":
                    await team.resume("S1")
                elif kind == "approve":
                    await team.approve("S1", card.id, by=who, role=role)
                else:
                    await team.reject("S1", card.id, by=who, role=role)
            assert await observed() == frozen
            continue
        # what the card should do with this action
        expect: str | None
        if expired:
            expect = "escalated"
        elif kind == "resume":
            expect = "awaiting_approval"
        elif not role_ok or who in signed:
            expect = None  # ApprovalError
        elif kind == "reject":
            expect = "completed"
        else:
            expect = "completed" if len(signed) + 1 >= (2 if dual else 1) else "awaiting_approval"
        if expect is None:
            before = await observed()
            with pytest.raises(ApprovalError):
                if kind == "approve":
                    await team.approve("S1", card.id, by=who, role=role)
                else:
                    await team.reject("S1", card.id, by=who, role=role)
            assert await observed() == before
            continue
        if kind == "resume":
            result = await team.resume("S1")
        elif kind == "approve":
            result = await team.approve("S1", card.id, by=who, role=role)
        else:
            result = await team.reject("S1", card.id, by=who, role=role)
        assert result.status == expect
        if expect == "awaiting_approval":
            assert result.approval is not None and result.approval.id == card.id
            if kind == "approve":
                signed.add(who)
            assert {a.by for a in result.approval.approvals} == signed
            continue
        terminal = expect
        approved_in_time = expect == "completed" and kind == "approve"
        frozen = await observed()

    event(f"terminal: {terminal}, tool ran: {approved_in_time}")
    finished = of_type(await team.store.get_events("S1"), "run_finished")
    assert ledger == ([(20000, "bob")] if approved_in_time else [])
    assert terminal is not None  # DECIDE always decides
    assert [f.status for f in finished] == [terminal]
    assert await team.approvals() == [] and await team.unfinished() == []
    tickets = await team.tickets.list(None)
    assert len(tickets) == (1 if terminal == "escalated" else 0)


@settings(max_examples=40, deadline=None)
@given(actions=st.lists(ACTIONS, max_size=7), dual=st.booleans(), timeout=st.booleans())
def test_any_decision_sequence_ends_in_one_terminal_state(
    actions: list[Action], dual: bool, timeout: bool
) -> None:
    """Approve (allowed role or not, the same approver again), reject, let the timeout pass,
    resume: the card ends completed or escalated exactly once, the tool runs iff it was
    approved in time, and a finished run refuses everything without changing.

    Time passes by moving the wall clock (`time.time`, which cards and their timeouts read)
    forward past a 60 s timeout, so the sequence is deterministic and fast."""
    clock = Clock()
    with mock.patch.object(time, "time", clock):
        asyncio.run(_play([*actions, *DECIDE], dual, timeout, clock))
