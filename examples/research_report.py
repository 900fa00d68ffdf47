"""The seed 001 §5.1 research report: plan four subtasks, run them by dependency, review each,
send one back for missing sources, aggregate.

    baton run examples.research_report:team "Research the EV battery industry, last six months"

A `PlanExecuteReview` run over a small offline news archive: the planner splits the request
(trend overview, key events, a deep analysis of one event, a summary), a researcher and an
analyst search the archive, a writer summarises, and the reviewer passes each result or sends
it back with advice — the analysis without sources is sent back once and passes with them.

The agents' brain is the embedded local model unless `BATON_MODEL` names another one; the value
`scripted` selects a deterministic policy (`report_policy`) for tests and replays.
"""

from __future__ import annotations

import json
import os
from typing import Any

from baton import Agent, ScriptedModel, tool
from baton.models import ModelRequest, Step
from baton.topologies.plan_execute_review import Check, Plan, PlanExecuteReview, Review

ARCHIVE = [
    {
        "date": "2026-06-12",
        "title": "Sodium-ion cells enter volume production",
        "source": "https://news.example.com/2026/06/sodium-ion",
        "text": "Two cell makers started volume production of sodium-ion packs for city cars.",
    },
    {
        "date": "2026-08-03",
        "title": "Lithium carbonate price falls 18% in a quarter",
        "source": "https://news.example.com/2026/08/lithium-price",
        "text": "Spot lithium carbonate fell 18% over the quarter on new supply.",
    },
    {
        "date": "2026-09-20",
        "title": "EU battery passport rules take effect",
        "source": "https://news.example.com/2026/09/battery-passport",
        "text": "Batteries sold in the EU must carry a digital passport with origin and "
        "carbon data.",
    },
    {
        "date": "2026-11-05",
        "title": "Solid-state pilot line reaches 1 GWh",
        "source": "https://news.example.com/2026/11/solid-state",
        "text": "A pilot line for solid-state cells reached an annual capacity of 1 GWh.",
    },
]


@tool
def search_news(query: str) -> list[dict[str, str]]:
    """Search the industry news archive of the last six months.

    Args:
        query: Words to look for, e.g. "price" or "solid-state"; empty for everything.
    """
    words = [w for w in query.lower().split() if len(w) > 2]
    hits = [
        item
        for item in ARCHIVE
        if not words or any(w in (item["title"] + item["text"]).lower() for w in words)
    ]
    return hits or ARCHIVE


def build_research_desk(model: Any = "local") -> PlanExecuteReview:
    """Planner, researcher, analyst, writer and reviewer over the archive."""
    return PlanExecuteReview(
        planner=Agent(
            name="planner",
            instructions=(
                "You plan research reports. Split the request into a few tasks for the "
                "executors: facts come from researcher or analyst (they can search_news), the "
                "writing from writer. Each analysis must cite its sources."
            ),
        ),
        executors=[
            Agent(
                name="researcher",
                description="finds facts in the news archive",
                instructions=(
                    "Search the archive and report the facts with their dates and sources."
                ),
                tools=[search_news],
            ),
            Agent(
                name="analyst",
                description="analyses one event in depth",
                instructions=(
                    "Analyse the event using the archive; cite every source URL; keep a "
                    "neutral tone."
                ),
                tools=[search_news],
            ),
            Agent(
                name="writer",
                description="writes summaries from results it is given",
                instructions="Write a short, neutral summary from the results you are given.",
            ),
        ],
        reviewer=Agent(
            name="reviewer",
            instructions=(
                "Review one task's result. Pass a result that does what the task asks with "
                "facts from the archive. Ask for a fix only for a clear problem: an analysis "
                "without its sources, a fact that contradicts the archive, a wrong format, or "
                "an emotional tone; say exactly what to change."
            ),
        ),
        model=model,
        max_fix=3,
    )


# --- a deterministic policy for tests and replays ----------------------------------------
PLAN = Plan.model_validate(
    {
        "tasks": [
            {
                "task_id": "trend",
                "description": "Give an overview of the industry's trend",
                "agent_role": "researcher",
                "requires_tool": ["search_news"],
            },
            {
                "task_id": "events",
                "description": "List the key events with dates",
                "agent_role": "researcher",
                "requires_tool": ["search_news"],
                "output_format": "a dated list",
            },
            {
                "task_id": "analysis",
                "description": "Analyse the lithium price fall in depth",
                "agent_role": "analyst",
                "requires_tool": ["search_news"],
                "depends_on": ["events"],
            },
            {
                "task_id": "summary",
                "description": "Summarise the trend, the events and the analysis",
                "agent_role": "writer",
                "depends_on": ["trend", "events", "analysis"],
            },
        ]
    }
)
OK = Check(ok=True)


def report_policy(request: ModelRequest) -> Step:
    """What each agent does, scripted (not a language model)."""
    last = request.messages[-1]
    text = last.content or ""
    agent = request.agent
    if agent == "planner":
        return ScriptedModel.say(PLAN.model_dump_json())
    if agent == "planner_writer":
        return ScriptedModel.say("Report: " + text.split("Results of the tasks:", 1)[-1].strip())
    if agent == "reviewer":
        if "lithium price" in text and "Sources:" not in text:
            review = Review(
                verdict="fix",
                completeness=OK,
                accuracy=Check(ok=False, reason="no sources cited"),
                format=OK,
                safety=Check(ok=False, reason="the conclusion is emotional"),
                advice="cite the archive's source URLs and keep a neutral tone",
            )
        else:
            review = Review(verdict="pass", completeness=OK, accuracy=OK, format=OK, safety=OK)
        return ScriptedModel.say(review.model_dump_json())
    if agent in ("researcher", "analyst") and last.role == "user":
        query = "price" if agent == "analyst" else ""
        return ScriptedModel.call("search_news", query=query)
    if agent == "researcher":
        items = json.loads(text)
        return ScriptedModel.say("; ".join(f"{i['date']}: {i['title']}" for i in items))
    if agent == "analyst":
        items = json.loads(text)
        first_try = "sent back by the reviewer" not in "\n".join(
            m.content or "" for m in request.messages
        )
        if first_try:
            return ScriptedModel.say("Lithium crashed and producers are in deep trouble!")
        sources = ", ".join(i["source"] for i in items)
        return ScriptedModel.say(
            f"Spot lithium carbonate fell 18% in a quarter on new supply. Sources: {sources}"
        )
    if agent == "writer":
        return ScriptedModel.say("Summary: " + text[:300])
    return ScriptedModel.say("")


def _model() -> Any:
    choice = os.environ.get("BATON_MODEL") or "local"
    return ScriptedModel(report_policy) if choice == "scripted" else choice


team = build_research_desk(_model())
"""The research desk on `BATON_MODEL` (default: the embedded model)."""
