"""What `Router.fit` chose: each tier's fit, the warnings, and the cross-validated accuracy.

report = router.fit(labelled)
print(report.summary())
report.cv_accuracy            # the semantic tier's cross-validated accuracy, or None
report["semantic"].thresholds # each tier's own report, by tier name
report["llm"].enabled         # whether the LLM judge was measured to help (see judge_fit)
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class RouterFitReport(Mapping[str, Any]):
    """The result of `Router.fit`; also a mapping of tier name to that tier's fit result."""

    tiers: dict[str, Any] = field(default_factory=dict)
    """Each fitted tier's own report (`semantic`: a `baton.routing.semantic.FitReport`;
    `llm`: a `baton.routing.judge_fit.JudgeFit`, what the judge's measurement chose)."""
    warnings: tuple[str, ...] = ()
    """Every tier's warnings, prefixed by the tier's name (also logged by the tier)."""
    cv_accuracy: float | None = None
    """Cross-validated accuracy of the semantic tier as fitted (deterministic folds of the
    labelled examples, each scored without its copies); None without one, or too few examples."""

    def __getitem__(self, name: str) -> Any:
        return self.tiers[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.tiers)

    def __len__(self) -> int:
        return len(self.tiers)

    def summary(self) -> str:
        """Human-readable lines: what each tier chose, then the warnings."""
        lines, told = [], set()
        for name, fitted in self.tiers.items():
            summary = getattr(fitted, "summary", None)
            if callable(summary):  # a tier's own summary lists its warnings
                lines.append(summary())
                told.add(name)
            else:
                lines.append(f"{name}: {fitted!r}")
        if self.cv_accuracy is not None:
            lines.append(f"cross-validated accuracy: {self.cv_accuracy:.3f}")
        lines += [f"warning: {w}" for w in self.warnings if w.split(": ", 1)[0] not in told]
        return "\n".join(lines)


def collect(fitted: Mapping[str, Any]) -> RouterFitReport:
    """The router's report from each tier's fit result (warnings and `cv` read when present)."""
    warnings = tuple(
        f"{name}: {warning}"
        for name, result in fitted.items()
        for warning in getattr(result, "warnings", ())
    )
    semantic = fitted.get("semantic")
    cv = getattr(semantic, "cv", None)
    return RouterFitReport(dict(fitted), warnings, cv if isinstance(cv, float) else None)
