"""`baton replay`: the demo desk's sessions replayed from a store and from an exported
fixture; a changed team shows its first divergence side by side; bad input is one clear line."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from baton.cli.app import app

CHANGED = """
from baton import Guards, Team
from baton.desk import build_agents, DeskDB
from baton.desk.policy import scripted_desk_model

def team():
    return Team(build_agents(DeskDB()), entry="triage", guards=Guards(max_hops=0),
                model=scripted_desk_model())
"""


@pytest.fixture
def recorded(in_repo: Path, store_url: str) -> str:
    """The demo's six requests on the scripted desk, stored at `store_url`."""
    from baton.desk import DEMO, build_desk
    from baton.desk.policy import scripted_desk_model

    async def play() -> None:
        desk = build_desk(scripted_desk_model(), store=store_url)
        for req in DEMO:
            await desk.team.run(req.text, session_id=req.session)
        await desk.team.aclose()

    asyncio.run(play())
    return store_url


def test_every_demo_session_replays_as_recorded(runner: CliRunner, recorded: str) -> None:
    for session in "ABCDE":
        args = ["replay", session, "--store", recorded, "--team", "baton.desk:build_desk"]
        out = runner.invoke(app, args)
        assert out.exit_code == 0, out.output
        assert "every step as recorded" in out.output


def test_a_changed_team_shows_the_first_divergence(
    runner: CliRunner, recorded: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "changed_desk.py").write_text(CHANGED, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    out = runner.invoke(app, ["replay", "B", "--store", recorded, "--team", "changed_desk:team"])
    assert out.exit_code == 1, out.output
    assert "first divergence at step" in out.output
    assert "recorded" in out.output and "replayed" in out.output
    assert "handoff triage" in out.output  # the recorded side of the parting step


def test_an_exported_fixture_replays_with_the_team_it_names(
    runner: CliRunner, recorded: str, tmp_path: Path
) -> None:
    fixture = tmp_path / "regressions" / "refund.json"
    args = ["replay", "D", "--store", recorded, "--export", str(fixture)]
    args += ["--team", "baton.desk:build_desk"]
    out = runner.invoke(app, args)
    assert out.exit_code == 0, out.output
    data = json.loads(fixture.read_text(encoding="utf-8"))
    assert data["format"] == 1 and data["team"] == "baton.desk:build_desk"
    again = runner.invoke(app, ["replay", str(fixture)])
    assert again.exit_code == 0, again.output
    assert "every step as recorded" in again.output


def test_bad_input_is_one_clear_line(runner: CliRunner, recorded: str, tmp_path: Path) -> None:
    team = ["--team", "baton.desk:build_desk"]
    out = runner.invoke(app, ["replay", "nope", "--store", recorded, *team])
    assert out.exit_code == 1 and "no session 'nope'" in out.output
    missing = f"sqlite:///{tmp_path}/none.db"
    out = runner.invoke(app, ["replay", "A", "--store", missing, *team])
    assert out.exit_code == 1 and "no store at" in out.output
    out = runner.invoke(app, ["replay", "A", "--store", recorded, "--run", "run_x", *team])
    assert out.exit_code == 1 and "has no run 'run_x'" in out.output
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"format": 0, "session_id": "A", "runs": []}), encoding="utf-8")
    out = runner.invoke(app, ["replay", str(old), *team])
    assert out.exit_code == 1 and "this Baton reads format 1" in out.output
    out = runner.invoke(app, ["replay", "A", "--store", recorded])
    assert out.exit_code == 2 and "pass --team" in out.output
    assert "Traceback" not in out.output
