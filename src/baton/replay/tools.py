"""Tools that answer from a recording: the result the agent was shown when the run was
recorded, for a call of the same agent, tool and arguments. The tool's own function is never
called (no side effect, no network); a call the record does not hold fails with an error
result that says so, and the replay shows it as the step where the runs parted."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from baton.core.jsontext import to_canonical
from baton.replay.record import ToolResult
from baton.runtime.kernel import Call, Kernel
from baton.tools import Tool, ToolContext, ToolOutcome, error_content

if TYPE_CHECKING:
    from baton.runtime.calls import Handled


class RecordedResults:
    """The recorded results of one run, each given out once."""

    def __init__(self, results: Sequence[ToolResult] = ()) -> None:
        self._left: list[ToolResult] = []
        self.load(results)

    def load(self, results: Sequence[ToolResult]) -> None:
        """Answer from `results` from now on (one run's)."""
        self._left = list(results)

    def take(self, agent: str, tool: str, arguments: dict[str, Any]) -> ToolResult | None:
        """The first result not yet given of `agent` calling `tool` with `arguments`."""
        from baton.topologies.team import _default_redactor

        # the record keeps arguments as the store did (masked at rest); the call has them as
        # the tool gets them (a `[secret:...]` handle resolved): either form matches
        keys = {to_canonical(arguments), to_canonical(_default_redactor().redact_value(arguments))}
        for i, r in enumerate(self._left):
            if r.agent == agent and r.tool == tool and to_canonical(r.arguments) in keys:
                return self._left.pop(i)
        return None


class RecordedTool(Tool):
    """`tool` as `agent` has it (name, schema, scopes, approval policy, limits), answering
    from `results` instead of running its function."""

    def __init__(self, tool: Tool, agent: str, results: RecordedResults) -> None:
        # the original's compiled attributes (schema, validator, policies), not a second
        # compilation of its function: the replayed call is checked exactly as the real one
        self.__dict__.update(tool.__dict__)
        self.agent = agent
        self.results = results

    async def invoke(
        self, args: dict[str, Any], default_limit: int, context: ToolContext | None = None
    ) -> ToolOutcome:
        """The recorded outcome of this call; an error outcome when the record has none."""
        found = self.results.take(self.agent, self.name, args)
        if found is None:
            msg = (
                f"replay: the record holds no result of {self.name} called by {self.agent} "
                f"with {to_canonical(args)}"
            )
            return ToolOutcome(ok=False, content=error_content(msg), error=msg)
        content = found.content if found.content is not None else error_content(found.error or "")
        if not found.ok:
            return ToolOutcome(ok=False, content=content, error=found.error)
        return ToolOutcome(
            ok=True,
            content=content,
            truncated=found.truncated,
            raw_chars=found.chars,
            value=_value(content, found.truncated),
        )


def _value(content: str, truncated: bool) -> Any:
    """What the tool returned, as near as its shown text tells: parsed JSON, else the text."""
    if truncated:
        return content
    try:
        return json.loads(content)
    except ValueError:
        return content


class RecordedCalls:
    """The handler of a call kind that runs the user's code (`Kind.runs_code`: a graph's
    function nodes), answering each call from the record as `RecordedTool` does."""

    def __init__(self, results: RecordedResults) -> None:
        self.results = results

    async def __call__(self, kernel: Kernel, call: Call) -> Handled:
        """Record the call's `tool_called` event and answer with the recorded text."""
        from baton.runtime.calls import called

        run, turn, pending = call.run, call.turn, call.pending
        args = pending.args or {}
        pending.started = True
        found = self.results.take(turn.agent, pending.call.name, args)
        if found is None:
            msg = (
                f"replay: the record holds no result of {pending.call.name} called by "
                f"{turn.agent} with {to_canonical(args)}"
            )
            called(kernel, run, turn, pending, arguments=args, ok=False, error=msg)
            return error_content(msg), None
        called(
            kernel,
            run,
            turn,
            pending,
            arguments=args,
            ok=found.ok,
            error=found.error,
            result_chars=found.chars,
        )
        return found.content if found.content is not None else "", None
