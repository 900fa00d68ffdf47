"""Secrets in a hand-off's state reach the receiver's tools through the kernel, never through
prompt text: known facts show `[secret:<slot>]`, `RunResult.state` shows the mask, and a
handle passed as an argument is replaced by the session's value before the tool runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.runtime.runtime_kit import handoff, of_type

from baton import Agent, ScriptedModel, Team, tool

S = ScriptedModel
PW = "Zebra-hunter2!"


def desk(script: list[Any], got: list[str], store: Any = None, **billing: Any) -> Team:
    @tool
    async def reset_password(account_id: str, password: str) -> str:
        """Set the account's new password."""
        got.append(password)
        return "reset"

    model = S({"triage": [handoff("billing", state={"password": PW, "account_id": "AC-1"})],
               "billing": script})  # fmt: skip
    return Team(
        [
            Agent(name="triage", handoffs=["billing"]),
            Agent(name="billing", tools=[reset_password], **billing),
        ],
        entry="triage",
        model=model,
        store=store,
    )


def prompts(team: Team, agent: str) -> list[str]:
    model = team._runner.plans[agent].model
    assert isinstance(model, ScriptedModel)
    return [m.content or "" for r in model.requests if r.agent == agent for m in r.messages]


async def test_the_receiver_reads_a_handle_and_its_tool_gets_the_value() -> None:
    got: list[str] = []
    team = desk(
        [
            S.call("reset_password", account_id="AC-1", password="[secret:password]"),
            S.say("Your password is reset."),
        ],
        got,
    )
    result = await team.run(f"reset AC-1, my new password is {PW}", session_id="S")
    assert result.status == "completed"
    assert got == [PW]
    system = prompts(team, "billing")[0]
    assert PW not in system
    assert '"password": "[secret:password]"' in system  # the payload and the known facts
    assert result.state["password"] == "[REDACTED:password]"
    assert result.state["account_id"] == "AC-1"
    assert result.handoffs[0].state["password"] == "[secret:password]"
    # the events show the handle, never the value
    dumped = "\n".join(e.model_dump_json() for e in result.events)
    assert PW not in dumped


async def test_a_handle_for_a_slot_the_agent_may_not_see_is_refused() -> None:
    got: list[str] = []
    team = desk(
        [
            S.call("reset_password", account_id="AC-1", password="[secret:password]"),
            S.say("I cannot."),
        ],
        got,
        accepts=["account_id"],  # billing may not see the password slot
    )
    result = await team.run(f"reset AC-1, new password {PW}", session_id="S")
    assert got == []
    [failed] = [e for e in of_type(result.events, "tool_called") if not e.ok]
    assert failed.error is not None and "names no secret you were given" in failed.error


async def test_a_later_message_holds_only_the_mask_and_the_tool_never_gets_it(
    tmp_path: Path,
) -> None:
    """The stored session keeps the slot masked at rest: in the next run the handle resolves
    to the mask, and the model is told to ask the user again."""
    got: list[str] = []
    store = f"sqlite:///{tmp_path / 'b.db'}"
    first = desk([S.say("Noted.")], got, store=store)
    await first.run(f"account AC-1: my new password is {PW}", session_id="S")
    await first.aclose()

    second = Team(
        first.agents.values(),
        entry="triage",
        model=S(
            {
                "billing": [
                    S.call("reset_password", account_id="AC-1", password="[secret:password]"),
                    S.say("Please tell me the password again."),
                ]
            }
        ),
        store=store,
    )
    result = await second.run("go ahead and reset it", session_id="S")
    assert got == []  # neither the secret nor its mask reached the tool
    [failed] = [e for e in of_type(result.events, "tool_called") if not e.ok]
    assert failed.error is not None and "ask the user for it again" in failed.error
    await second.aclose()


async def test_a_hand_off_that_carries_a_handle_carries_the_slot_as_it_is() -> None:
    got: list[str] = []

    @tool
    async def reset_password(password: str) -> str:
        """Set the new password."""
        got.append(password)
        return "reset"

    model = S(
        {
            "triage": [handoff("billing", state={"password": PW})],
            "billing": [handoff("security", state={"password": "[secret:password]"})],
            "security": [S.call("reset_password", password="[secret:password]"), S.say("ok")],
        }
    )
    team = Team(
        [
            Agent(name="triage", handoffs=["billing"]),
            Agent(name="billing", handoffs=["security"]),
            Agent(name="security", tools=[reset_password]),
        ],
        entry="triage",
        model=model,
    )
    result = await team.run(f"my password is {PW}", session_id="S")
    assert result.path == ["triage", "billing", "security"]
    assert got == [PW]
    assert [p.state for p in result.handoffs] == [{"password": "[secret:password]"}] * 2
    assert not [e for e in of_type(result.events, "guard_tripped") if e.guard != "none"]
