"""The demo desk (`src/baton/desk`) on its scripted policy: every demo request behaves as a
correct desk should, and the tools really change the desk's database."""

from __future__ import annotations

from baton.desk import DEMO, build_desk
from baton.desk.policy import scripted_desk_model


async def test_every_demo_request_meets_its_expectation() -> None:
    desk = build_desk(model=scripted_desk_model())
    for req in DEMO:
        result = await desk.team.run(req.text, session_id=req.session)
        ran = [e.tool for e in result.events if e.type == "tool_called" and e.ok]
        assert tuple(result.path) == req.expect_path, req.note
        assert all(t in ran for t in req.expect_tools), req.note
        assert result.status == req.expect_status, req.note
    assert desk.db.restarts == ["srv-bj-001"]
    assert "ORD-202607-99" in desk.db.returns and "ORD-202607-99" in desk.db.refunds
    assert len(await desk.team.store.list_human()) == 1


async def test_the_follow_up_reuses_the_sessions_order_id() -> None:
    desk = build_desk(model=scripted_desk_model())
    first = await desk.team.run(DEMO[0].text, session_id="S")
    again = await desk.team.run("那这张发票的金额是多少？", session_id="S")
    assert first.state["order_id"] == "ORD-202607-99"
    assert again.path == ["billing"]
    (call,) = [e for e in again.events if e.type == "tool_called"]
    assert call.arguments == {"order_id": "ORD-202607-99"}


async def test_a_refund_without_a_return_is_an_error_result_not_a_crash() -> None:
    desk = build_desk(model=scripted_desk_model())
    tools = {t.name: t for a in desk.team.agents.values() for t in a.tools}
    out = await tools["issue_refund"].invoke({"order_id": "ORD-202607-99", "reason": "x"}, 1500)
    assert not out.ok and "no return yet" in (out.error or "")
