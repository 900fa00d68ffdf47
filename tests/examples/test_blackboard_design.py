"""The blackboard design example runs as documented, on its scripted policy."""

from __future__ import annotations

from collections import Counter

import pytest
from examples.blackboard_design import LINTER_NOTE, build_blackboard, main

from baton.core.events import BoardWritten
from baton.observe import MetricsSink


async def test_the_design_board_detects_and_retries_the_planted_concurrent_write() -> None:
    metrics = MetricsSink()
    board = build_blackboard("scripted", sinks=[metrics])
    result = await board.run("Design a small shop: customers place orders.", session_id="D")
    assert result.status == "completed", result.error
    output = result.output or ""
    assert "CREATE TABLE orders" in output and "orders list" in output
    # the architect first; frontend and database together, in the next round, as sub-runs
    asks = [e for e in result.events if e.type == "tool_called" and e.tool.startswith("ask_")]
    rounds = {e.tool: e.call_id.split(":")[1] for e in asks}
    assert rounds == {"ask_architect": "1", "ask_frontend": "2", "ask_database": "2"}
    written = [e for e in result.events if isinstance(e, BoardWritten)]
    assert Counter(e.key for e in written)["decisions"] == 2
    assert sum(e.conflicts for e in written if e.key == "decisions") == 1  # detected, retried
    decisions = (await board.read("D"))["decisions"].value
    assert decisions[0] == LINTER_NOTE and len(decisions) == 3  # no update lost
    assert {d.split(":")[0] for d in decisions[1:]} == {"frontend", "database"}
    assert 'baton_board_conflicts_total{key="decisions"} 1.0' in metrics.render()


def test_the_script_prints_the_run(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BATON_MODEL", "scripted")
    assert main(["设计一个小商店"]) == 0
    out = capsys.readouterr().out
    assert "completed in" in out and "6 board writes, 1 conflict\n" in out
    assert "decisions:\n- linter: " in out
