"""Cross-validation folds for labelled routing examples, with unknown examples held out by topic.

Known unknowns come in topics (CLINC150's out-of-scope queries were collected a few per prompt),
while most unknown traffic is of topics no fitting example has. A plain random split lets a
held-out unknown be rejected by its near-duplicate sibling, which flatters every use of the
unknown examples; holding a whole topic out does not. A topic is a connected group of unknown
examples under `TOPIC_SIMILARITY`.
"""

from __future__ import annotations

import random
from typing import Any

TOPIC_SIMILARITY = 0.6
"""Unknown examples this similar (cosine) are one topic: about what a paraphrase of an intent
scores against its closest sibling with the USE encoder (CLINC150 in-scope calibration queries
against their route's best example: median 0.62 on domains10, 0.71 on intents16)."""


def topics(vectors: Any, similarity: float = TOPIC_SIMILARITY) -> list[int]:
    """The topic of each row of `vectors` (unit rows): connected groups under `similarity`."""
    import numpy as np

    close = (vectors @ vectors.T) >= similarity
    topic = [-1] * len(vectors)
    count = 0
    for start in range(len(vectors)):  # connected components, depth first
        if topic[start] >= 0:
            continue
        topic[start], stack = count, [start]
        while stack:
            j = stack.pop()
            for k in np.flatnonzero(close[j]):
                if topic[k] < 0:
                    topic[k] = count
                    stack.append(int(k))
        count += 1
    return topic


def topic_folds(
    vectors: Any, is_unknown: Any, folds: int, seed: int, similarity: float = TOPIC_SIMILARITY
) -> list[Any]:
    """`folds` arrays of held-out row numbers: in-scope rows at random, unknown rows by topic.

    `vectors`: (rows, dim) unit vectors of the labelled examples; `is_unknown`: (rows,) bool.
    """
    import numpy as np

    rng = random.Random(seed)
    unknown = [int(i) for i in np.flatnonzero(is_unknown)]
    topic = topics(vectors[unknown], similarity) if unknown else []
    order = list(range(max(topic) + 1 if topic else 0))
    rng.shuffle(order)
    fold_of_topic = {t: j % folds for j, t in enumerate(order)}
    in_scope = [int(i) for i in np.flatnonzero(~np.asarray(is_unknown, dtype=bool))]
    rng.shuffle(in_scope)
    fold = np.zeros(len(is_unknown), dtype=np.int64)
    for j, i in enumerate(in_scope):
        fold[i] = j % folds
    for j, i in enumerate(unknown):
        fold[i] = fold_of_topic[topic[j]]
    return [np.flatnonzero(fold == k) for k in range(folds)]
