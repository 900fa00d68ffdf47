"""The seed 004 desk fronted by a router (rules -> semantic -> LLM judge -> human), end to end
on the scripted desk policy: no agent spends a model call on routing."""

from __future__ import annotations

import json

from baton import ScriptedModel, Team
from baton.desk import DeskDB
from baton.desk.policy import desk_policy
from baton.desk.routed import build_routed_desk
from baton.models import ModelRequest, Step


def judge(request: ModelRequest) -> Step:
    """The judge's answers: it knows a double charge is billing and a lawsuit is nobody's."""
    text = request.messages[-1].content or ""
    route = "billing" if "charged" in text else "unknown"
    return ScriptedModel.say(json.dumps({"route": route}))


def brain(request: ModelRequest) -> Step:
    return judge(request) if request.agent == "router" else desk_policy(request)


def routed_desk() -> tuple[Team, DeskDB, ScriptedModel]:
    model = ScriptedModel(brain)
    desk = build_routed_desk(model)
    return desk.team, desk.db, model


async def test_the_router_sends_each_request_to_its_specialist() -> None:
    team, db, model = routed_desk()

    ops = await team.run("请立即重启服务器 srv-bj-001")
    assert ops.path == ["tech_support"] and ops.status == "completed"
    assert db.restarts == ["srv-bj-001"]
    assert next(e for e in ops.events if e.type == "route_decided").tier == "rules"
    assert [r.agent for r in model.requests] == ["tech_support", "tech_support"]  # no judge call

    invoice = await team.run("where is my invoice for order ORD-202607-99?")
    assert invoice.path == ["billing"]
    routed = next(e for e in invoice.events if e.type == "route_decided")
    assert routed.tier in ("semantic", "llm")
    assert any(e.type == "tool_called" and e.tool == "query_invoice" for e in invoice.events)

    charged = await team.run("I was charged twice for ORD-202608-17")
    assert charged.path == ["billing"]

    lawsuit = await team.run("I am going to sue your company")
    assert lawsuit.status == "escalated" and lawsuit.path == []
    assert len(await team.store.list_human()) == 1
