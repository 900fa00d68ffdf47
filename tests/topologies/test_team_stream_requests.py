"""`Team.stream(..., request_id=...)` is `Team.run`'s retry key: a request the session already
answered is not run again; its recorded result is all the stream yields."""

from __future__ import annotations

from baton import Agent, ScriptedModel, Team, tool
from baton.core.events import EventBase
from baton.runtime.result import RunResult

S = ScriptedModel


async def test_a_streamed_request_answered_once_yields_its_recorded_result() -> None:
    sent: list[str] = []

    @tool
    async def send_mail(to: str) -> str:
        """Send one mail."""
        sent.append(to)
        return "sent"

    model = S(
        lambda r: (
            S.say("邮件已发送。")
            if r.messages[-1].role == "tool"
            else S.call("send_mail", to="li@example.cn")
        )
    )
    team = Team([Agent(name="desk", tools=[send_mail])], entry="desk", model=model)
    first = [item async for item in team.stream("发邮件", session_id="s", request_id="m-1")]
    again = [item async for item in team.stream("发邮件", session_id="s", request_id="m-1")]
    assert sent == ["li@example.cn"]
    assert any(isinstance(i, EventBase) and i.type == "tool_called" for i in first)
    (done,) = again
    assert isinstance(done, RunResult) and isinstance(first[-1], RunResult)
    assert done.run_id == first[-1].run_id and done.output == "邮件已发送。"
    ran = await team.run("发邮件", session_id="s", request_id="m-1")
    assert ran.run_id == done.run_id and sent == ["li@example.cn"]


async def test_a_streamed_run_joins_the_trace_it_is_given() -> None:
    """`trace_id` as for `run`: the events and the result carry the caller's trace."""
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    team = Team([Agent(name="desk")], entry="desk", model=S([S.say("hello")]))
    items = [item async for item in team.stream("hi", session_id="s", trace_id=trace)]
    result = items[-1]
    assert isinstance(result, RunResult) and result.trace_id == trace
    assert {i.trace_id for i in items if isinstance(i, EventBase)} == {trace}
