"""Sessions belong to users: another user id is refused before anything runs."""

from __future__ import annotations

from typing import Any

import pytest

from baton import Agent, ScriptedModel, SessionOwnerError, Team, ToolContext, tool

S = ScriptedModel


async def test_another_user_cannot_run_in_a_session_and_the_owner_stays() -> None:
    team = Team([Agent(name="a")], entry="a", model=S(lambda rq: S.say("hi")))
    first = await team.run("hello", session_id="S", user_id="alice")
    assert first.status == "completed"

    with pytest.raises(SessionOwnerError, match="belongs to another user") as info:
        await team.run("show me alice's orders", session_id="S", user_id="mallory")
    assert isinstance(info.value, PermissionError)
    session = await team.session("S")
    assert session is not None and session.user_id == "alice" and session.version == 1
    contents = [m.content for m in await team.store.get_messages("S")]
    assert "show me alice's orders" not in contents
    # the owner, and a caller that names no user, go on in the owner's session
    assert (await team.run("again", session_id="S", user_id="alice")).status == "completed"
    assert (await team.run("and again", session_id="S")).status == "completed"
    session = await team.session("S")
    assert session is not None and session.user_id == "alice"


async def test_a_tool_sees_who_calls_it() -> None:
    seen: list[Any] = []

    @tool(scopes=["orders:read"])
    async def my_orders(ctx: ToolContext) -> str:
        """The caller's orders."""
        seen.append((ctx.user_id, ctx.session_id, ctx.scopes))
        return "none"

    model = S([S.call("my_orders"), S.say("You have none.")])
    team = Team(
        [Agent(name="a", tools=[my_orders], scopes=["orders:read", "profile:read"])],
        entry="a",
        model=model,
    )
    await team.run("my orders?", session_id="S", user_id="alice")
    assert seen == [("alice", "S", ("orders:read", "profile:read"))]
