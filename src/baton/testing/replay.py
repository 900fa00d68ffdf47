"""A recorded incident as a regression test: replay a fixture written by
`baton replay SESSION --export tests/regressions/NAME.json` through the current team.

    # tests/test_regressions.py
    from pathlib import Path

    import pytest
    from baton.testing.replay import assert_replays

    from myapp import build_team

    @pytest.mark.parametrize("fixture", sorted(Path("tests/regressions").glob("*.json")))
    async def test_recorded_conversations_still_go_the_same_way(fixture: Path) -> None:
        await assert_replays(fixture, build_team())

Tools never run (each call answers with its recorded result) and the model answers from the
record, so the test is offline and deterministic; it fails with the first step where the
current code takes another way, both versions side by side.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from baton.replay import Recording, ReplayReport, replay

if TYPE_CHECKING:
    from baton.topologies.team import Team


async def replay_fixture(
    fixture: str | Path | Recording, team: Team, *, live_model: bool = False
) -> ReplayReport:
    """Replay `fixture` (a file written by `--export`, or a `Recording`) through `team`."""
    recording = fixture if isinstance(fixture, Recording) else Recording.load(fixture)
    return await replay(team, recording, live_model=live_model)


async def assert_replays(
    fixture: str | Path | Recording, team: Team, *, live_model: bool = False
) -> ReplayReport:
    """Replay `fixture` through `team`; `AssertionError` showing the first divergence (or the
    end state that differs) unless every step is as recorded."""
    report = await replay_fixture(fixture, team, live_model=live_model)
    if not report.ok:
        raise AssertionError(f"replay of session {report.session_id!r}: {report.describe()}")
    return report
