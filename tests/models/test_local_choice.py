"""`LocalModel.score_options` (a `ChoiceModel`) with the real embedded model, and the router's
judge choosing by the model's own probabilities.

Plumbing runs on SmolLM2-135M; one test routes a Chinese request with the default 1.5B model.
"""

from __future__ import annotations

import asyncio
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from baton.core.errors import ModelError
from baton.core.messages import Message
from baton.models.base import ChoiceModel, ModelRequest
from baton.models.local import LocalModel
from baton.routing import LLMJudge, Route
from baton.routing.judge import SCORE_PREFIX
from local_model_kit import require_local_model

SMALL = "smollm2-135m"
OPTIONS = ['billing",', 'orders",', 'order",', 'unknown",']


def request(text: str) -> ModelRequest:
    return ModelRequest(
        agent="router",
        messages=[
            Message(role="system", content="Pick the team for the request: billing or orders."),
            Message(role="user", content=text),
        ],
    )


def test_scores_match_a_from_scratch_evaluation() -> None:
    """Options are scored reusing the KV cache between them; each token's log-probability must
    be what a fresh evaluation of the same tokens gives."""
    require_local_model(SMALL)
    model = LocalModel(SMALL)
    req = request("Where is my parcel?")
    fast = asyncio.run(model.score_options(req, SCORE_PREFIX, OPTIONS))
    engine = model.load()
    messages = model.render(req)
    base = engine._prompt_tokens(messages, SCORE_PREFIX)
    texts = [engine._prompt_tokens(messages, SCORE_PREFIX + o) for o in OPTIONS]
    shared = min(
        next((i for i, (a, b) in enumerate(zip(base, t, strict=False)) if a != b), len(base))
        for t in texts
    )
    slow = []
    for full in texts:
        total = 0.0
        for i in range(shared, len(full)):
            engine.llama.reset()  # nothing reused: the whole prefix is read again
            total += float(engine._logprobs_after(full[:i])[full[i]])
        slow.append(total)
    assert all(math.isfinite(v) and v < 0 for v in fast)
    # a one-token step and a whole-prefix batch take different kernels on quantized weights:
    # they agree to a few tenths of a nat at most; a token scored against the wrong cache (an
    # option left in it) is off by nats
    assert fast == pytest.approx(slow, abs=0.5)
    assert max(range(4), key=fast.__getitem__) == max(range(4), key=slow.__getitem__)
    # scoring again, from a saved state or after the cache moved on, gives the same figures
    again = asyncio.run(model.score_options(req, SCORE_PREFIX, OPTIONS[::-1]))
    assert again[::-1] == pytest.approx(fast, abs=1e-6)
    asyncio.run(model.score_options(request("Another request."), SCORE_PREFIX, OPTIONS))
    asyncio.run(model.generate(request("Yet another one.")))
    engine.llama.reset()
    assert asyncio.run(model.score_options(req, SCORE_PREFIX, OPTIONS)) == pytest.approx(
        fast, abs=1e-6
    )
    # "order" and "orders" are told apart by the closing quote
    assert fast[1] != fast[2]


def test_generation_after_scoring_is_unchanged() -> None:
    """Scoring leaves the model's state such that the next generation reads its prompt again:
    the same request answers the same before and after."""
    require_local_model(SMALL)
    model = LocalModel(SMALL, max_tokens=24)
    req = request("My invoice shows the wrong amount.")
    before = asyncio.run(model.generate(req)).text
    asyncio.run(model.score_options(req, SCORE_PREFIX, OPTIONS))
    asyncio.run(model.score_options(request("Where is my parcel?"), SCORE_PREFIX, OPTIONS))
    after = asyncio.run(model.generate(req)).text
    assert after == before


def test_the_judge_chooses_by_the_models_probabilities() -> None:
    require_local_model()
    model = LocalModel()
    assert isinstance(model, ChoiceModel)
    routes = [
        Route("billing", description="Invoices, charges, refunds of money already paid."),
        Route("orders", description="Where a parcel is, dispatch, delivery dates, couriers."),
        Route("tech_support", description="Cloud servers: outages, restarts, alarms."),
    ]
    judge = LLMJudge(model)
    judge.bind(routes)
    answer = asyncio.run(judge.ask("我的发票金额开错了，帮我重开一张"))
    assert answer.route == "billing"
    assert answer.confidence is not None and 0.5 < answer.confidence <= 1.0
    assert answer.calls == 1 and "p billing" in answer.detail
    # the four probabilities shown add up to one
    shown = [float(part.split()[-1]) for part in answer.detail.split("(p ")[1][:-1].split(", ")]
    assert sum(shown) == pytest.approx(1.0, abs=0.02)


def test_a_lone_surrogate_in_the_request_is_read_not_fatal() -> None:
    """`router.route` may get raw text the kernel never cleaned: half a surrogate pair must
    not make the prompt unencodable, for scoring or for writing an answer."""
    require_local_model(SMALL)
    model = LocalModel(SMALL, max_tokens=16)
    req = request("my bill \ud800 is wrong")
    scores = asyncio.run(model.score_options(req, SCORE_PREFIX, OPTIONS))
    assert len(scores) == 4 and all(math.isfinite(v) for v in scores)
    assert isinstance(asyncio.run(model.generate(req)).text, str)


def test_a_prompt_over_the_context_window_is_a_clear_model_error() -> None:
    require_local_model(SMALL)
    model = LocalModel(SMALL, n_ctx=256)
    req = request("word " * 400)
    with pytest.raises(ModelError, match=r"does not fit .* context window of 256 tokens"):
        asyncio.run(model.score_options(req, SCORE_PREFIX, OPTIONS))
