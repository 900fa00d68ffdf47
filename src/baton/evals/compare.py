"""Comparing two reports: which cases got better or worse, and how each figure moved."""

from __future__ import annotations

from dataclasses import dataclass, field

from baton.evals.results import EvalReport

HIGHER_IS_BETTER = {"route_accuracy", "task_success", "tool_call_validity", "pass_k"}
"""Figures that improve upward (latency and tokens improve downward)."""


@dataclass
class Comparison:
    """What changed from `before` to `after`."""

    better: list[str] = field(default_factory=list)
    """Cases that failed pass^k before and pass now."""
    worse: list[str] = field(default_factory=list)
    """Cases that passed before and fail now."""
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    deltas: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    """Figure -> (before, after)."""

    @property
    def regressed(self) -> bool:
        """Some case got worse."""
        return bool(self.worse)

    def lines(self) -> list[str]:
        """The comparison as plain lines of text."""
        out = [f"better ({len(self.better)}): {', '.join(self.better) or '-'}"]
        out.append(f"worse ({len(self.worse)}): {', '.join(self.worse) or '-'}")
        if self.added:
            out.append(f"new cases ({len(self.added)}): {', '.join(self.added)}")
        if self.removed:
            out.append(f"cases gone ({len(self.removed)}): {', '.join(self.removed)}")
        for name, (before, after) in self.deltas.items():
            moved = _delta(name, before, after)
            out.append(f"{name}: {_fmt(name, before)} -> {_fmt(name, after)} ({moved})")
        return out


def _fmt(name: str, value: float | None) -> str:
    if value is None:
        return "n/a"
    if name in HIGHER_IS_BETTER:
        return f"{100 * value:.1f} %"
    return f"{value:.0f}" if name == "tokens" else f"{value:.3f} s"


def _delta(name: str, before: float | None, after: float | None) -> str:
    if before is None or after is None:
        return "n/a"
    d = after - before
    if name in HIGHER_IS_BETTER:
        return f"{100 * d:+.1f} pt"
    return f"{d:+.0f}" if name == "tokens" else f"{d:+.3f} s"


def compare(before: EvalReport, after: EvalReport) -> Comparison:
    """Case by case (pass^k) and figure by figure, from `before` to `after`."""
    was = {r.id: r.passed for r in before.results}
    now = {r.id: r.passed for r in after.results}
    out = Comparison(
        better=[c for c, ok in now.items() if c in was and ok and not was[c]],
        worse=[c for c, ok in now.items() if c in was and not ok and was[c]],
        added=[c for c in now if c not in was],
        removed=[c for c in was if c not in now],
    )
    old, new = before.summary.metrics(), after.summary.metrics()
    out.deltas = {name: (old.get(name), new[name]) for name in new}
    return out
