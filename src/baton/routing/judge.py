"""The `LLMJudge` tier: a model picks among the top candidates, or says `unknown`.

The judge sees the request, the conversation's last turns (the router's `history`) and the
semantic tier's best candidates, and answers with a choice constrained to those candidates or
`unknown`. A model that can score answers (`ChoiceModel`, e.g. the embedded local model) gives
its own probability of each candidate and of `unknown`: the judge takes the most probable, with
that probability as its confidence. Other models write an answer with how confident they are
(`low`, `medium`, `high`); where their answer carries token log-probabilities, the probability
of the chosen answer is the confidence instead.

Whether the judge acts at all is measured: `Router.fit` runs it on the labelled queries the
tiers before it abstain on (`baton.routing.judge_fit`) and turns it off when it does not beat
abstaining there, or on with a fitted confidence threshold below which it defers (abstains, so
the fallback decides).

A route the semantic tier proposed for review (accepted, but unsure by score or by its lead
over the runner-up) stands unless the judge overturns it with a confidence of at least
`review_threshold` (by default the "high" level, `CONFIDENCE["high"]`; `Router.fit` fits it
where it measures the judge): overturning a route that is probably right needs more certainty
than placing a query nobody placed.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from baton.core.errors import ModelNotAvailable, ParseError
from baton.core.messages import Message
from baton.models.base import ChoiceModel, Model, ModelRequest, ModelResponse
from baton.models.parsing import parse_json_object
from baton.models.registry import resolve_model
from baton.routing.base import UNKNOWN, Route, TierVerdict

_SYSTEM = (
    "You route a customer's request to the one team member who owns it. Read each "
    "candidate's job, what it must not handle, and its example requests; the conversation so "
    "far, when given, tells what the request refers to. Answer with one JSON object: "
    '{"route": "<candidate name>", "confidence": "high" | "medium" | "low"}, or '
    '{"route": "unknown", "confidence": ...} when no candidate owns the request. Say "high" '
    "only when the request clearly belongs to that candidate."
)

CONFIDENCE = {"low": 0.25, "medium": 0.5, "high": 0.75}
"""The value of each self-reported confidence level (only their order matters: the threshold
is fitted on the same model's answers)."""
SCORE_PREFIX = '{"route": "'
"""The start of the judge's reply after which a `ChoiceModel` scores each answer."""
SCORE_END = '",'
"""What follows each answer in the reply (the next key comes after it). It tells `order` from
`orders`; a lone closing quote would not do: the reply goes on with `",` as one token, so a
lone `"` is an unlikely token of its own and its cost would swamp the choice."""
HISTORY_TURNS = 4
"""How many of the conversation's last turns the judge sees by default."""
TURN_CHARS = 300
"""Each turn shown to the judge is cut to this many characters."""


@dataclass(frozen=True)
class JudgeAnswer:
    """What the model answered, before the fitted gate decides whether the judge acts."""

    route: str | None
    """A candidate name, `UNKNOWN`, or None (no valid answer after a re-ask)."""
    confidence: float | None
    """In [0, 1]: log-probability based when the model gives them, else the self-reported
    level (`CONFIDENCE`); None when the answer named none."""
    candidates: list[tuple[str, float]]
    """The candidates shown, with the previous tier's scores."""
    detail: str
    latency_ms: float
    calls: int = 1
    """Model calls made (2 after a re-ask)."""


class LLMJudge:
    """Ask a model to choose among at most `k` candidates (the semantic tier's best, else all).

    Each candidate is shown with its description, `not_for` and two examples, after the last
    `turns` turns of the conversation (the router's `history`). The answer must be a candidate
    name or `unknown`, with a confidence: it is validated, and one re-ask quotes what was wrong.
    The judge abstains (lets the fallback decide) when the model still answers nonsense, when
    `Router.fit` measured it and turned it off (`enabled`), and when its confidence is below
    the fitted `threshold`.
    """

    name = "llm"

    def __init__(
        self,
        model: Model | str | None = None,
        k: int = 3,
        examples: int = 2,
        *,
        turns: int = HISTORY_TURNS,
        threshold: float | None = None,
        review_threshold: float | None = CONFIDENCE["high"],
    ) -> None:
        """`threshold`: the confidence below which a named route is not acted on (None: any);
        `Router.fit` replaces it with one fitted on labelled data. `review_threshold`: the
        confidence needed, besides, to overturn a route the tier before proposed for review
        (another route, or unknown; None: `threshold` alone); `Router.fit` fits it too.
        `turns`: how many of the conversation's last turns are shown (0: the request
        alone)."""
        if not 1 <= k <= 3:
            raise ValueError("k must be between 1 and 3: the judge compares a short list")
        if turns < 0:
            raise ValueError("turns must be 0 or more")
        self._model_spec = model
        self._model: Model | None = None
        self.k = k
        self.examples = examples
        self.turns = turns
        self.threshold = threshold
        self.review_threshold = review_threshold
        self.enabled = True
        """False when `Router.fit` measured the judge not to beat abstaining: it then abstains
        at once, without a model call."""
        self.reason = ""
        """Why the judge is on or off, from the last measurement (empty before one)."""
        self._routes: dict[str, Route] = {}

    @property
    def model(self) -> Model:
        """The judging model (resolved on first use; `local` when none was given)."""
        if self._model is None:
            self._model = resolve_model(self._model_spec or "local")
        return self._model

    def bind(self, routes: Sequence[Route]) -> None:
        """Remember the routes' descriptions and examples."""
        self._routes = {r.name: r for r in routes}

    def candidates(self, previous: Sequence[TierVerdict]) -> list[str]:
        """The top-k routes of the last tier that ranked any (else the first k routes), in
        the routes' own order: the judge's opinion is its own, not a nudge toward the previous
        tier's first pick, and a model reuses the prompt it read for the same candidates."""
        order = {name: i for i, name in enumerate(self._routes)}
        for verdict in reversed(previous):
            ranked = [name for name, _ in verdict.candidates if name in self._routes]
            if ranked:
                return sorted(ranked[: self.k], key=order.__getitem__)
        return list(self._routes)[: self.k]

    def prompt(
        self, text: str, names: Sequence[str], history: Sequence[Any] | None = None
    ) -> list[Message]:
        """The judge's messages: candidates with job, not_for and examples, the conversation's
        last turns, then the request."""
        lines = ["Candidates:"]
        for name in names:
            r = self._routes[name]
            lines.append(f"- {name}: {r.description or '(no description)'}")
            if r.not_for:
                lines.append(f"  not for: {r.not_for}")
            for ex in r.utterances[: self.examples]:
                lines.append(f"  example: {ex}")
        turns = recent_turns(history, self.turns)
        if turns:
            lines += ["", "Conversation so far (oldest first; the request follows it):"]
            lines += [f"  {role}: {content}" for role, content in turns]
        return [
            Message(role="system", content=_SYSTEM + "\n\n" + "\n".join(lines)),
            Message(role="user", content=text),
        ]

    @staticmethod
    def schema(names: Sequence[str]) -> dict[str, Any]:
        """JSON schema of a valid answer (constrains models that support it)."""
        return {
            "type": "object",
            "properties": {
                "route": {"enum": [*names, UNKNOWN]},
                "confidence": {"enum": list(CONFIDENCE)},
            },
            "required": ["route", "confidence"],
            "additionalProperties": False,
        }

    async def ask(
        self,
        text: str,
        history: Sequence[Any] | None = None,
        previous: Sequence[TierVerdict] = (),
    ) -> JudgeAnswer:
        """The model's answer, validated (one re-ask), whatever `enabled` and `threshold` say."""
        t = time.perf_counter()
        names = self.candidates(previous)
        scored = dict(next((v.candidates for v in reversed(previous) if v.candidates), []))
        ranked = [(n, scored.get(n, 0.0)) for n in names]
        messages = self.prompt(text, names, history)
        schema = self.schema(names)
        if isinstance(self.model, ChoiceModel):
            scored_answer = await self._score(messages, schema, names, ranked, t)
            if scored_answer is not None:
                return scored_answer
        problem = ""
        for attempt in range(2):
            request = ModelRequest(
                agent="router",
                messages=messages,
                output_schema=schema,
                output_name="route",
                reask=attempt > 0,
            )
            response = await self.model.generate(request)
            answer, level, problem = _read_answer(response.text, names)
            if answer is not None:
                confidence = _logprob_confidence(response)
                if confidence is None and level is not None:
                    confidence = CONFIDENCE[level]
                said = f"model chose {answer!r}" + (f" ({level})" if level else "")
                return JudgeAnswer(
                    answer,
                    confidence,
                    ranked,
                    said + (" after a re-ask" if attempt else ""),
                    (time.perf_counter() - t) * 1000,
                    attempt + 1,
                )
            messages = [
                *messages,
                Message(role="assistant", content=response.text or ""),
                Message(
                    role="user",
                    content=f"That answer is not valid: {problem}. Reply with one JSON object "
                    f'{{"route": ..., "confidence": ...}} whose route is one of '
                    f"{[*names, UNKNOWN]} and confidence one of {list(CONFIDENCE)}.",
                ),
            ]
        return JudgeAnswer(
            None,
            None,
            ranked,
            f"no valid answer after a re-ask: {problem}",
            (time.perf_counter() - t) * 1000,
            2,
        )

    async def _score(
        self,
        messages: list[Message],
        schema: dict[str, Any],
        names: Sequence[str],
        ranked: list[tuple[str, float]],
        started: float,
    ) -> JudgeAnswer | None:
        """The model's own distribution over the candidates and `unknown` (a `ChoiceModel`):
        the most probable answer, with its probability as the confidence. None when the model
        cannot score this prompt (then the judge asks for a written answer)."""
        assert isinstance(self.model, ChoiceModel)
        options = [*names, UNKNOWN]
        request = ModelRequest(
            agent="router", messages=messages, output_schema=schema, output_name="route"
        )
        try:
            logp = await self.model.score_options(
                request, SCORE_PREFIX, [f"{o}{SCORE_END}" for o in options]
            )
        except ModelNotAvailable:
            return None
        top = max(logp)
        weights = [math.exp(v - top) for v in logp]
        total = sum(weights)
        probs = [w / total for w in weights]
        best = max(range(len(options)), key=probs.__getitem__)
        shown = ", ".join(f"{o} {p:.2f}" for o, p in zip(options, probs, strict=True))
        return JudgeAnswer(
            options[best],
            probs[best],
            ranked,
            f"model chose {options[best]!r} (p {shown})",
            (time.perf_counter() - started) * 1000,
        )

    def acts(self, answer: JudgeAnswer, proposal: str | None = None) -> bool:
        """Whether an answer (a route or `unknown`) is confident enough to act on under
        `threshold` and, when it overturns `proposal` (the route the tier before proposed for
        review), under `review_threshold`; else the judge defers: the fallback decides, or the
        proposed route stands."""
        return self._short_of(answer, proposal) is None

    def _short_of(self, answer: JudgeAnswer, proposal: str | None) -> tuple[str, float] | None:
        """(which threshold, its value) the answer's confidence falls short of, or None."""
        confidence = answer.confidence if answer.confidence is not None else 0.0
        if self.threshold is not None and confidence < self.threshold:
            return "threshold", self.threshold
        overturns = proposal is not None and answer.route != proposal
        if overturns and self.review_threshold is not None and confidence < self.review_threshold:
            return "review threshold", self.review_threshold
        return None

    async def decide(
        self,
        text: str,
        history: Sequence[Any] | None = None,
        context: dict[str, Any] | None = None,
        previous: Sequence[TierVerdict] = (),
    ) -> TierVerdict:
        """Ask the model unless turned off; act on an answer only at the fitted threshold or
        above it, and at the review threshold when it overturns a proposed route."""
        if not self.enabled:
            return TierVerdict(self.name, None, detail=f"off: {self.reason or 'turned off'}")
        answer = await self.ask(text, history, previous)
        scored = dict(answer.candidates)
        target = answer.route
        detail = answer.detail
        proposal = next((v.proposal for v in reversed(previous) if v.proposal is not None), None)
        short = self._short_of(answer, proposal) if target is not None else None
        if short is not None:
            shown = f"{answer.confidence:.2f}" if answer.confidence is not None else "none"
            detail += f"; confidence {shown} < {short[0]} {short[1]:.2f}: defers"
            if short[0] == "review threshold":
                detail += f" to the proposed {proposal}"
            target = None
        return TierVerdict(
            self.name,
            target,
            scored.get(target) if target not in (None, UNKNOWN) else None,
            answer.candidates,
            detail=detail,
            latency_ms=answer.latency_ms,
        )


def recent_turns(history: Sequence[Any] | None, turns: int) -> list[tuple[str, str]]:
    """The last `turns` (role, text) pairs of a conversation with text, each cut short.

    `history`: `Message`s, mappings with `role` and `content`, or plain strings (user turns).
    """
    if not history or turns <= 0:
        return []
    out: list[tuple[str, str]] = []
    for item in history:
        content: Any
        if isinstance(item, str):
            role, content = "user", item
        elif isinstance(item, Mapping):
            role, content = str(item.get("role", "user")), item.get("content")
        else:
            role, content = str(getattr(item, "role", "user")), getattr(item, "content", None)
        if role not in ("user", "assistant") or not isinstance(content, str):
            continue  # system prompts, tool results and tool-call turns say nothing here
        said = " ".join(content.split())
        if not said:
            continue
        if len(said) > TURN_CHARS:
            said = said[: TURN_CHARS - 1] + "…"
        out.append((role, said))
    return out[-turns:]


def _logprob_confidence(response: ModelResponse) -> float | None:
    """The probability of the answer's tokens when the response carries log-probabilities
    (OpenAI-style `choices[0].logprobs.content[*].logprob` in `raw`), else None."""

    def field(node: Any, name: str) -> Any:
        return node[name] if isinstance(node, Mapping) else getattr(node, name)

    try:
        first = field(response.raw, "choices")[0]
        content = field(field(first, "logprobs"), "content")
        values = [float(field(token, "logprob")) for token in content or ()]
    except (AttributeError, KeyError, IndexError, TypeError, ValueError):
        return None
    if not values:
        return None
    return math.exp(sum(values))


def _read_answer(text: str | None, names: Sequence[str]) -> tuple[str | None, str | None, str]:
    """(route or unknown, confidence level or None, "") when valid, else (None, None, why)."""
    raw = (text or "").strip()
    try:
        obj = parse_json_object(raw) if raw.startswith(("{", "`")) else {"route": raw}
    except ParseError as exc:
        return None, None, str(exc)
    value = obj.get("route")
    if not isinstance(value, str):
        shown = json.dumps(obj, ensure_ascii=False)[:120]
        return None, None, f"expected a 'route' string, got {shown}"
    value = value.strip()
    said = obj.get("confidence")
    level = said.strip().casefold() if isinstance(said, str) else None
    if level not in CONFIDENCE:
        level = None  # a missing or odd confidence is no reason to re-ask
    for name in [*names, UNKNOWN]:
        if value.casefold() == name.casefold():
            return name, level, ""
    return None, None, f"{value!r} is not a candidate"
