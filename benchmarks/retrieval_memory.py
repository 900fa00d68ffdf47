"""The memory part of the retrieval benchmark: a scripted multi-session scenario on
`baton.memory.Memory`, scored by the precision of what is recalled.

Six users, three sessions each a week apart. In every session the user tells the desk a few
things about themselves and a scripted desk keeps each with the `remember` tool, through real
team runs (so redaction, provenance and the run-completion rule apply as in production). The
users' facts are deliberately alike (everyone has a pet, a home city, a payment habit, a
delivery preference), so a memory from the wrong user would often be the most similar one:
only the per-user scope keeps it out. Then each user asks questions whose relevant memories
are labelled; `Memory.search` (what recall injects into an agent's view) is scored.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DAY = 86_400.0
K = (1, 3, 5)
"""The recall depths reported (a `Memory(k=...)` setting)."""

FACTS: dict[str, list[list[str]]] = {
    # user -> sessions -> facts the user states in that session (the memory's text)
    "alice": [
        ["Alice has a golden retriever called Biscuit.", "Alice lives in Lyon, France."],
        ["Alice prefers to pay with PayPal.", "Alice is allergic to peanuts."],
        [
            "Alice wants parcels left with the neighbour at number 12.",
            "Alice's order ORD-202607-99 arrived with a cracked screen.",
        ],
    ],
    "bob": [
        ["Bob has a tabby cat called Pepper.", "Bob lives in Austin, Texas."],
        ["Bob always pays with his Visa credit card.", "Bob is vegetarian."],
        [
            "Bob wants deliveries only on weekday mornings.",
            "Bob's server srv-bj-001 was rebooted twice last month.",
        ],
    ],
    "wang": [
        ["王先生养了一只叫豆豆的柯基犬。", "王先生住在北京朝阳区。"],
        ["王先生习惯用支付宝付款。", "王先生对海鲜过敏。"],
        ["王先生希望快递放在小区的丰巢快递柜。", "王先生的订单 ORD-202608-17 少发了一个充电器。"],
    ],
    "li": [
        ["李女士有一只叫咪咪的布偶猫。", "李女士住在上海浦东。"],
        ["李女士更喜欢用微信支付。", "李女士不吃辣。"],
        ["李女士要求只在周末送货。", "李女士的发票抬头是上海明远科技有限公司。"],
    ],
    "diego": [
        ["Diego has a parrot named Kiwi.", "Diego lives in Madrid, Spain."],
        ["Diego pays with a store gift card.", "Diego is lactose intolerant."],
        ["Diego wants every parcel delivered to his office reception.", "Diego flies gold tier."],
    ],
    "emma": [
        ["Emma has two rabbits, Daisy and Clover.", "Emma lives in Edinburgh, Scotland."],
        ["Emma pays with Apple Pay.", "Emma avoids gluten."],
        [
            "Emma wants a text message before each delivery.",
            "Emma's invoice INV-5521 was charged twice.",
        ],
    ],
}

QUERIES: list[tuple[str, str, list[int]]] = [
    # (user, query, indices of the relevant facts in the user's flattened list)
    ("alice", "What is the name of my dog?", [0]),
    ("alice", "Which city do I live in?", [1]),
    ("alice", "How do I usually pay?", [2]),
    ("alice", "Any food allergies I mentioned?", [3]),
    ("alice", "Where should the courier leave my parcel?", [4]),
    ("alice", "What went wrong with my last order?", [5]),
    ("bob", "What's my pet called?", [0]),
    ("bob", "Where am I based?", [1]),
    ("bob", "Which card do I use for payments?", [2]),
    ("bob", "Do I have any dietary restrictions?", [3]),
    ("bob", "When can you deliver to me?", [4]),
    ("bob", "What happened to my server?", [5]),
    ("wang", "我的狗叫什么名字？", [0]),
    ("wang", "我住在哪里？", [1]),
    ("wang", "我一般用什么方式付款？", [2]),
    ("wang", "我对什么食物过敏？", [3]),
    ("wang", "快递应该放在哪里？", [4]),
    ("wang", "我的订单出了什么问题？", [5]),
    ("li", "我的猫叫什么？", [0]),
    ("li", "我住在哪个城市？", [1]),
    ("li", "我喜欢用什么支付？", [2]),
    ("li", "我有什么饮食上的忌口？", [3]),
    ("li", "什么时候给我送货？", [4]),
    ("li", "发票抬头写什么？", [5]),
    ("diego", "What kind of pet do I have?", [0]),
    ("diego", "Which country do I live in?", [1]),
    ("diego", "How will I pay for this?", [2]),
    ("diego", "Is there anything I can't eat or drink?", [3]),
    ("diego", "Where do my packages go?", [4]),
    ("diego", "What is my frequent flyer tier?", [5]),
    ("emma", "What are my pets' names?", [0]),
    ("emma", "Where do I live?", [1]),
    ("emma", "What payment method do I prefer?", [2]),
    ("emma", "Which foods should I avoid?", [3]),
    ("emma", "How do I want to be told about deliveries?", [4]),
    ("emma", "Was I billed correctly on my invoice?", [5]),
]


@dataclass(frozen=True)
class Ranking:
    """How `Memory.search` did on the queries at one similarity floor."""

    min_similarity: float
    precision: dict[int, float]
    """k -> mean share of relevant memories among the (up to k) recalled, over the queries
    that recalled anything."""
    recall: dict[int, float]
    """k -> share of queries with a relevant memory among the top k recalled."""
    hit_at_1: float
    """Share of queries whose best recalled memory is a relevant one."""
    empty: int
    """Queries that recalled nothing (every memory under the similarity floor)."""
    leaks: int
    """Recalled memories that belong to another user (must be 0)."""


@dataclass(frozen=True)
class MemoryScores:
    """What the scenario measured."""

    users: int
    sessions: int
    memories: int
    queries: int
    rankings: list[Ranking]
    """As shipped (the `Memory` default floor) first, then with the floor off."""
    leaks_in_views: int
    """Another user's fact found in a desk's system prompt during a real run (must be 0)."""
    write_s: float
    query_ms_p50: float


class _Clock:
    """Scenario time: sessions a week apart, queries a day after the last one."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


async def run_scenario(
    folder: Path,
    encoder: Any,
    facts: dict[str, list[list[str]]] = FACTS,
    queries: Sequence[tuple[str, str, list[int]]] = QUERIES,
) -> MemoryScores:
    """Write every user's facts through team runs, then score `Memory.search` on `queries`."""
    from baton import Agent, ScriptedModel, Team
    from baton.memory import Memory
    from baton.models import Step
    from baton.models.base import ModelRequest

    clock = _Clock()
    told: dict[str, str] = {}  # user message -> the fact the desk remembers

    def desk(req: ModelRequest) -> Step:
        said = req.messages[-1].content or ""
        first = not any(m.role == "tool" for m in req.messages)
        if first and said in told:
            return ScriptedModel.call("remember", text=told[said], kind="fact")
        return ScriptedModel.say("Noted.")

    model = ScriptedModel(desk, record=True)
    sessions = max(len(s) for s in facts.values())
    started = time.perf_counter()
    async with Memory(folder, encoder=encoder, clock=clock, k=max(K)) as memory:
        team = Team([Agent(name="desk", model=model)], entry="desk", memory=memory)
        for n in range(sessions):
            for user, per_session in facts.items():
                for fact in per_session[n] if n < len(per_session) else []:
                    message = f"Please note this for next time: {fact}"
                    told[message] = fact
                    run = await team.run(message, session_id=f"{user}-s{n + 1}", user_id=user)
                    if run.status != "completed":
                        raise RuntimeError(f"the session run for {user} ended {run.status}")
            clock.now += 7 * DAY
        write_s = time.perf_counter() - started
        clock.now -= 6 * DAY  # queries come a day after the last session
        owner = {f: u for u, per in facts.items() for s in per for f in s}
        flat = {u: [f for s in per for f in s] for u, per in facts.items()}
        times: list[float] = []
        rankings = []
        shipped = memory.min_similarity
        for floor in (shipped, 0.0):
            memory.min_similarity = floor
            rankings.append(await _rank(memory, flat, queries, floor, times))
        memory.min_similarity = shipped
        # and in real runs: a desk's view never shows another user's memory
        view_leaks = 0
        for user in facts:
            await team.run("What do you remember about me?", session_id=f"{user}-q", user_id=user)
            system = model.requests[-1].messages[0].content or ""
            view_leaks += sum(1 for f, u in owner.items() if u != user and f in system)
        count = await memory.count()
        await team.aclose()
    times.sort()
    return MemoryScores(
        users=len(facts),
        sessions=sessions,
        memories=count,
        queries=len(queries),
        rankings=rankings,
        leaks_in_views=view_leaks,
        write_s=write_s,
        query_ms_p50=times[len(times) // 2],
    )


async def _rank(
    memory: Any,
    flat: dict[str, list[str]],
    queries: Sequence[tuple[str, str, list[int]]],
    floor: float,
    times: list[float],
) -> Ranking:
    """Score `memory.search` on `queries` (its timings are appended to `times`)."""
    precision: dict[int, list[float]] = {k: [] for k in K}
    recall: dict[int, int] = dict.fromkeys(K, 0)
    hits = leaks = empty = 0
    for user, query, relevant in queries:
        wanted = {flat[user][i] for i in relevant}
        t0 = time.perf_counter()
        found = await memory.search(query, user_id=user, agent="desk", touch=False)
        times.append((time.perf_counter() - t0) * 1000)
        texts = [r.record.text for r in found]
        leaks += sum(1 for r in found if r.record.user_id != user)
        if not texts:
            empty += 1
            continue
        hits += texts[0] in wanted
        for k in K:
            top = texts[:k]
            precision[k].append(sum(t in wanted for t in top) / len(top))
            recall[k] += any(t in wanted for t in top)
    n = len(queries)
    return Ranking(
        min_similarity=floor,
        precision={k: sum(v) / len(v) if v else 0.0 for k, v in precision.items()},
        recall={k: v / n for k, v in recall.items()},
        hit_at_1=hits / n,
        empty=empty,
        leaks=leaks,
    )
