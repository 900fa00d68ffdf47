"""Replay: run a recorded session again, offline, step by step, through the current code.

    from baton.replay import read_recording, replay
    recording = await read_recording(store, "s-42")
    report = await replay(team, recording)
    report.divergence          # None, or the first step where the runs parted

`baton replay SESSION` does the same from the command line, and `--export` writes a fixture
that `baton.testing.assert_replays` turns into a regression test.
"""

from baton.replay.model import ReplayModel
from baton.replay.record import (
    FORMAT,
    Call,
    RecordedRun,
    RecordError,
    Recording,
    Response,
    ToolResult,
    read_recording,
)
from baton.replay.run import Divergence, ReplayReport, RunReplay, replay
from baton.replay.steps import Step, step_of, steps_of
from baton.replay.tools import RecordedResults, RecordedTool

__all__ = [
    "FORMAT",
    "Call",
    "Divergence",
    "RecordError",
    "RecordedResults",
    "RecordedRun",
    "RecordedTool",
    "Recording",
    "ReplayModel",
    "ReplayReport",
    "Response",
    "RunReplay",
    "Step",
    "ToolResult",
    "read_recording",
    "replay",
    "step_of",
    "steps_of",
]
