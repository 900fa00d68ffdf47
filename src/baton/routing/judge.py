"""The `LLMJudge` tier: a model picks among the top candidates, or says `unknown`."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from baton.core.errors import ParseError
from baton.core.messages import Message
from baton.models.base import Model, ModelRequest
from baton.models.parsing import parse_json_object
from baton.models.registry import resolve_model
from baton.routing.base import UNKNOWN, Route, TierVerdict

_SYSTEM = (
    "You route a customer's request to the one team member who owns it. Read each "
    "candidate's job, what it must not handle, and its example requests. Answer with one JSON "
    'object: {"route": "<candidate name>"}, or {"route": "unknown"} when no candidate owns the '
    "request."
)


class LLMJudge:
    """Ask a model to choose among at most `k` candidates (the semantic tier's best, else all).

    Each candidate is shown with its description, `not_for` and two examples. The answer must
    be a candidate name or `unknown`: it is validated, and one re-ask quotes what was wrong.
    The judge abstains (lets the fallback decide) when the model still answers nonsense.
    """

    name = "llm"

    def __init__(self, model: Model | str | None = None, k: int = 3, examples: int = 2) -> None:
        if not 1 <= k <= 3:
            raise ValueError("k must be between 1 and 3: the judge compares a short list")
        self._model_spec = model
        self._model: Model | None = None
        self.k = k
        self.examples = examples
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
        """The top-k routes of the last tier that ranked any, else the first k routes."""
        for verdict in reversed(previous):
            ranked = [name for name, _ in verdict.candidates if name in self._routes]
            if ranked:
                return ranked[: self.k]
        return list(self._routes)[: self.k]

    def prompt(self, text: str, names: Sequence[str]) -> list[Message]:
        """The judge's messages: candidates with job, not_for and examples, then the request."""
        lines = ["Candidates:"]
        for name in names:
            r = self._routes[name]
            lines.append(f"- {name}: {r.description or '(no description)'}")
            if r.not_for:
                lines.append(f"  not for: {r.not_for}")
            for ex in r.utterances[: self.examples]:
                lines.append(f"  example: {ex}")
        return [
            Message(role="system", content=_SYSTEM + "\n\n" + "\n".join(lines)),
            Message(role="user", content=text),
        ]

    @staticmethod
    def schema(names: Sequence[str]) -> dict[str, Any]:
        """JSON schema of a valid answer (constrains models that support it)."""
        return {
            "type": "object",
            "properties": {"route": {"enum": [*names, UNKNOWN]}},
            "required": ["route"],
            "additionalProperties": False,
        }

    async def decide(
        self,
        text: str,
        history: Sequence[Any] | None = None,
        context: dict[str, Any] | None = None,
        previous: Sequence[TierVerdict] = (),
    ) -> TierVerdict:
        """Ask the model; validate; one re-ask; abstain if still invalid."""
        t = time.perf_counter()
        names = self.candidates(previous)
        scored = dict(next((v.candidates for v in reversed(previous) if v.candidates), []))
        ranked = [(n, scored.get(n, 0.0)) for n in names]
        messages = self.prompt(text, names)
        schema = self.schema(names)
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
            answer, problem = _read_answer(response.text, names)
            if answer is not None:
                return TierVerdict(
                    self.name,
                    answer,
                    scored.get(answer) if answer != UNKNOWN else None,
                    ranked,
                    detail=f"model chose {answer!r}" + (" after a re-ask" if attempt else ""),
                    latency_ms=(time.perf_counter() - t) * 1000,
                )
            messages = [
                *messages,
                Message(role="assistant", content=response.text or ""),
                Message(
                    role="user",
                    content=f"That answer is not valid: {problem}. Reply with one JSON object "
                    f'{{"route": ...}} whose value is one of {[*names, UNKNOWN]}.',
                ),
            ]
        return TierVerdict(
            self.name,
            None,
            candidates=ranked,
            detail=f"no valid answer after a re-ask: {problem}",
            latency_ms=(time.perf_counter() - t) * 1000,
        )


def _read_answer(text: str | None, names: Sequence[str]) -> tuple[str | None, str]:
    """(route or unknown, "") when valid, else (None, what is wrong)."""
    raw = (text or "").strip()
    try:
        obj = parse_json_object(raw) if raw.startswith(("{", "`")) else {"route": raw}
    except ParseError as exc:
        return None, str(exc)
    value = obj.get("route")
    if not isinstance(value, str):
        return None, f"expected a 'route' string, got {json.dumps(obj, ensure_ascii=False)[:120]}"
    value = value.strip()
    for name in [*names, UNKNOWN]:
        if value.casefold() == name.casefold():
            return name, ""
    return None, f"{value!r} is not a candidate"
