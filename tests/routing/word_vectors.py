"""A sentence encoder for routing tests whose scores are placed exactly."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

DIM = 1024


class Words:
    """Bag-of-words vectors: similarity is word overlap, so scores are placed exactly."""

    dim = DIM

    def __init__(self, name: str = "test-words-v1") -> None:
        self.name = name

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), DIM), np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().split():
                out[i, int(hashlib.sha256(word.encode()).hexdigest()[:6], 16) % DIM] += 1.0
            out[i] /= np.linalg.norm(out[i]) or 1.0
        return out
