"""`Agent` validation and `Team` configuration: mistakes raise `ConfigError` when the team is
built, never mid-run; `run_sync` for scripts."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pydantic import ValidationError

from baton import Agent, ConfigError, Guards, MemoryStore, ScriptedModel, Team, tool
from baton.handoff import handoff_parameters, handoff_target, handoff_tool_name

S = ScriptedModel


@tool
def lookup(key: str) -> str:
    """Look something up."""
    return key


def _model() -> ScriptedModel:
    return S([S.say("hi")], loop=True)


# ---------------------------------------------------------------- Agent


def test_agent_defaults_and_coercions() -> None:
    def plain(x: int) -> int:
        """A plain function becomes a tool."""
        return x

    a = Agent(name="billing", tools=[lookup, plain], handoffs="triage", accepts="order_id")
    assert a.handoffs == ("triage",)
    assert a.accepts == ("order_id",)
    assert [t.name for t in a.tools] == ["lookup", "plain"]
    assert a.tool("plain") is a.tools[1]
    assert a.tool("missing") is None
    assert a.max_iterations == 8
    assert Agent(name="x").accepts is None


@pytest.mark.parametrize("name", ["", "9lives", "has space", "a.b", "x" * 49, "中文"])
def test_agent_names_must_be_usable_in_tool_names(name: str) -> None:
    with pytest.raises(ValidationError, match="agent names"):
        Agent(name=name)


def test_agent_rejects_duplicate_tools_non_tools_and_unknown_fields() -> None:
    with pytest.raises(ValidationError, match="duplicate tool names"):
        Agent(name="a", tools=[lookup, lookup])
    with pytest.raises(ValidationError, match="is not a tool"):
        Agent(name="a", tools=["lookup"])
    with pytest.raises(ValidationError):
        Agent(name="a", handsoff=["b"])  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        Agent(name="a", max_iterations=0)


def test_agent_is_frozen() -> None:
    a = Agent(name="a")
    with pytest.raises(ValidationError):
        a.name = "b"  # type: ignore[misc]


# ---------------------------------------------------------------- Team configuration errors


def test_unknown_handoff_target() -> None:
    with pytest.raises(ConfigError, match="hands off to 'billing', which is not in the team"):
        Team([Agent(name="triage", handoffs=["billing"])], entry="triage", model=_model())


def test_duplicate_agent_names() -> None:
    with pytest.raises(ConfigError, match="duplicate agent name 'a'"):
        Team([Agent(name="a"), Agent(name="a")], entry="a", model=_model())


def test_entry_not_in_team() -> None:
    with pytest.raises(ConfigError, match="entry 'front' is not in the team"):
        Team([Agent(name="a")], entry="front", model=_model())


def test_unknown_fallback() -> None:
    with pytest.raises(ConfigError, match="fallback 'desk' is neither 'human' nor an agent"):
        Team([Agent(name="a")], entry="a", fallback="desk", model=_model())


def test_agent_handing_off_to_itself() -> None:
    with pytest.raises(ConfigError, match="lists itself in handoffs"):
        Team([Agent(name="a", handoffs=["a"])], entry="a", model=_model())


def test_reserved_human_name() -> None:
    with pytest.raises(ConfigError, match="reserved"):
        Team([Agent(name="human")], entry="human", model=_model())


def test_tool_clashing_with_a_generated_handoff_tool() -> None:
    @tool(name="transfer_to_b")
    def sneaky() -> str:
        """Pretends to hand off."""
        return "x"

    with pytest.raises(ConfigError, match="clashes with the generated hand-off tool"):
        Team(
            [Agent(name="a", tools=[sneaky], handoffs=["b"]), Agent(name="b")],
            entry="a",
            model=_model(),
        )


def test_non_agents_and_missing_models() -> None:
    with pytest.raises(ConfigError, match="must be Agent objects"):
        Team(["a"], entry="a", model=_model())  # type: ignore[list-item]
    with pytest.raises(ConfigError, match="no model configured"):
        Team([Agent(name="a")], entry="a")
    with pytest.raises(ConfigError, match="unknown model"):
        Team([Agent(name="a")], entry="a", model="gpt-4o")
    with pytest.raises(ConfigError, match="unknown store URL"):
        Team([Agent(name="a")], entry="a", model=_model(), store="mongodb://x")


def test_a_valid_team_builds_and_describes_itself() -> None:
    own = S([S.say("own")])
    agents = [
        Agent(name="triage", handoffs=["billing"], description="Front desk."),
        Agent(name="billing", tools=[lookup], model=own),
    ]
    team = Team(
        agents, entry="triage", model=_model(), fallback="billing", guards=Guards(max_hops=1)
    )
    assert isinstance(team.store, MemoryStore)
    assert team.guards.max_hops == 1
    assert team.describe() == {
        "entry": "triage",
        "fallback": "billing",
        "agents": {
            "triage": {"description": "Front desk.", "tools": [], "handoffs": ["billing"]},
            "billing": {"description": "", "tools": ["lookup"], "handoffs": []},
        },
    }


async def test_an_agents_own_model_beats_the_team_model() -> None:
    own = S([S.say("from billing's own model")])
    team_model = S([S.call("transfer_to_billing", reason="r", objective="o")])
    agents = [Agent(name="triage", handoffs=["billing"]), Agent(name="billing", model=own)]
    team = Team(agents, entry="triage", model=team_model)

    result = await team.run("x")

    assert result.output == "from billing's own model"
    assert [r.agent for r in team_model.requests] == ["triage"]
    assert [r.agent for r in own.requests] == ["billing"]


async def test_empty_messages_are_rejected() -> None:
    team = Team([Agent(name="a")], entry="a", model=_model())
    with pytest.raises(ValueError, match="non-empty"):
        await team.run("   ")


def test_handoff_tool_names() -> None:
    assert handoff_tool_name("billing") == "transfer_to_billing"
    assert handoff_target("transfer_to_billing") == "billing"
    assert handoff_target("query_invoice") is None
    params = handoff_parameters()
    assert set(params["required"]) == {"reason", "objective"}
    assert {"state", "completed_steps", "constraints", "reply_to_user", "priority"} <= set(
        params["properties"]
    )


# ---------------------------------------------------------------- run_sync


def test_run_sync_works_outside_an_event_loop() -> None:
    team = Team([Agent(name="a")], entry="a", model=_model())
    result = team.run_sync("hello", session_id="S1")
    assert result.status == "completed"
    assert result.output == "hi"
    assert result.session_id == "S1"


def test_run_sync_works_in_a_plain_script(tmp_path: Path) -> None:
    script = tmp_path / "desk.py"
    script.write_text(
        textwrap.dedent(
            """
            from baton import Agent, ScriptedModel, Team

            model = ScriptedModel([ScriptedModel.say("hello from a script")])
            team = Team([Agent(name="a")], entry="a", model=model)
            result = team.run_sync("hi")
            print(result.status, result.output)
            """
        )
    )
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "completed hello from a script"


async def test_run_sync_inside_a_running_loop_raises_a_clear_error() -> None:
    team = Team([Agent(name="a")], entry="a", model=_model())
    with pytest.raises(RuntimeError, match=r"inside a running event loop.*await team\.run"):
        team.run_sync("hello")
