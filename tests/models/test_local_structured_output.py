"""The embedded model answers an agent's output type under a grammar built from its schema."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel, Field

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from baton import Agent, Team
from baton.models.local import LocalModel
from local_model_kit import require_local_model

SMALL = "smollm2-135m"


class Review(BaseModel):
    sentiment: Literal["positive", "negative", "neutral"]
    stars: int
    summary: str = Field(max_length=60)


@pytest.mark.local_model
async def test_the_smallest_model_gives_a_typed_answer_that_validates() -> None:
    require_local_model(SMALL)
    model = LocalModel(SMALL, max_tokens=96)
    agent = Agent(
        name="reviewer",
        instructions="You classify product reviews.",
        output_type=Review,
        model=model,
    )
    result = await Team([agent], entry="reviewer").run(
        "Review: the kettle boils fast and looks great, five stars!"
    )
    assert result.status == "completed", result.error
    assert isinstance(result.final, Review)
    assert Review.model_validate_json(result.output or "") == result.final
    reasks = [e.reask for e in result.events if e.type == "model_called"]
    assert reasks == [False]  # the grammar made the first answer valid
