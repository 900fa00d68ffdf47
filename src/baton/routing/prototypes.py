"""What a route is scored against besides its example utterances: its description, and its
`not_for` as negative evidence.

A route's description is embedded as one more example of the route (its prototype), so a route
with a description and no examples still routes (zero-shot), and a route with a few examples
gains a summary of what it owns. A description is written unlike a request ("Invoices, refunds
and payments." against "where is my invoice"), so it scores lower against the route's requests
than the route's examples do against each other: its scores are raised by the description
bias, the median of that difference over the routes that have both (pooled across routes;
`DEFAULT_DESCRIPTION_BIAS` when none has). The whole description is embedded, not its clauses:
on a bilingual six-route desk, a query's best description score averaged 0.25 over in-scope
paraphrases against at most 0.07 for out-of-scope queries; embedding the clauses ("refunds",
"payments") raised the first to 0.38 but the second to 0.15-0.27.

`not_for` is embedded the same way, as evidence against the route: a query closer to a route's
`not_for` than to anything the route owns loses that route (see `penalise`). Both shape the
nearest-example head's scores; the linear head (`baton.routing.linear`) learns from vectors
alone, the description among a route's examples, and does not read `not_for`.
"""

from __future__ import annotations

from typing import Any

from baton.routing.base import Route

DEFAULT_DESCRIPTION_BIAS = 0.2
"""The description bias when no route has both a description and two examples to measure it on
(measured with the embedded encoder on a bilingual six-route desk: median 0.22)."""
MAX_DESCRIPTION_BIAS = 0.5
"""The bias is clipped to [0, this]: a larger one would let a description outscore examples."""
NOT_FOR_PENALTY = 0.1
"""How far below its positive score a route drops, beyond the excess, when a query is closer to
its `not_for` than to what it owns: far enough that another route wins or the tier abstains."""


def positive_texts(route: Route) -> list[str]:
    """The texts a route is scored against: its example utterances, then its description."""
    texts = list(route.utterances)
    if route.description.strip():
        texts.append(route.description.strip())
    return texts


def negative_texts(route: Route) -> list[str]:
    """The texts that count against a route: its `not_for`, when given."""
    return [route.not_for.strip()] if route.not_for.strip() else []


def description_bias(vectors: Any, owner: Any, is_description: Any) -> float | None:
    """The pooled description bias, or None when no route has a description and two examples.

    `vectors`: (rows, dim) unit vectors of every route's positive texts; `owner`: each row's
    route; `is_description`: True for description rows. Per example utterance of such a route:
    its best sibling's score minus its best description score; the median over all of them.
    """
    import numpy as np

    gaps: list[Any] = []
    for route in np.unique(owner):
        mine = owner == route
        examples = vectors[mine & ~is_description]
        described = vectors[mine & is_description]
        if len(examples) < 2 or len(described) == 0:
            continue
        siblings = examples @ examples.T
        np.fill_diagonal(siblings, -np.inf)
        gaps.append(siblings.max(axis=1) - (examples @ described.T).max(axis=1))
    if not gaps:
        return None
    return float(np.clip(np.median(np.concatenate(gaps)), 0.0, MAX_DESCRIPTION_BIAS))


def penalise(positive: Any, negative: Any) -> Any:
    """Route scores after negative evidence: (queries, routes) arrays of the best positive and
    the best `not_for` score (-inf or a very low value where a route has no `not_for`).

    Where a query is closer to a route's `not_for` than to its positives, the route's score
    drops by the excess plus `NOT_FOR_PENALTY`; elsewhere it is unchanged.
    """
    import numpy as np

    excess = negative - positive
    return np.where(excess > 0, positive - excess - NOT_FOR_PENALTY, positive)
