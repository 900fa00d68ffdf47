"""The semantic tier's linear head: multinomial logistic regression over the encoder's vectors.

Trained on the routes' utterances plus labelled fitting examples, with one extra class for the
known unknowns when there are any. Where the fitting data holds the traffic's neighbours (other
intents of the same product, phrasings of the same requests), a linear boundary separates routes
that share words better than "closest example wins", and it is steadier across languages: the
multilingual encoder puts a translation in the same direction as its source, a little shorter
on every axis, which moves cosine scores under thresholds but leaves the argmax of a linear
model where it was. `Semantic.fit` uses it only where cross-validation says it beats the
nearest-example head (`baton.routing.semantic`).

Why it is written here rather than taken from scikit-learn: the objective is small, smooth and
strictly convex (a few hundred rows, a few thousand weights), and scikit-learn would pull
scikit-learn and SciPy (~60 MB) into every install for this one fit. The objective is the same
as scikit-learn's `LogisticRegression(C=c)` (multinomial, L2 on the weights, intercept not
penalised); the tests check the two agree when scikit-learn is installed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class LinearHead:
    """Fitted weights: `proba(x)` gives one probability per class for each row of `x`."""

    weights: Any
    """(dim, classes) float32."""
    bias: Any
    """(classes,) float32."""
    unknown: bool
    """True when the last class is "unknown" (the known unknown examples)."""
    iterations: int
    converged: bool

    @property
    def classes(self) -> int:
        """How many classes, the unknown class included."""
        return int(self.weights.shape[1])

    def proba(self, x: Any) -> Any:
        """(rows, classes) probabilities for unit vectors `x`."""
        import numpy as np

        return _softmax(np.asarray(x, dtype=np.float32) @ self.weights + self.bias)


def _softmax(logits: Any) -> Any:
    import numpy as np

    z = logits - logits.max(axis=1, keepdims=True)
    np.exp(z, out=z)
    z /= z.sum(axis=1, keepdims=True)
    return z


def fit_linear(
    x: Any,
    y: Any,
    classes: int,
    *,
    c: float = 10.0,
    sample_weight: Any | None = None,
    unknown: bool = False,
    max_iter: int = 500,
    tol: float = 1e-5,
) -> LinearHead:
    """Minimise c * sum_i w_i * -log p(y_i | x_i) + ||W||^2 / 2 over W and the intercepts.

    `x`: (rows, dim) vectors; `y`: each row's class in [0, classes); `unknown`: the last class
    stands for unknown. Solved with L-BFGS (see `_lbfgs`); stops when the largest gradient
    entry falls under `tol` times its starting size, or after `max_iter` iterations.
    """
    import numpy as np

    x64 = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    rows, dim = x64.shape
    if rows == 0 or classes < 2:
        raise ValueError("a linear head needs rows and at least two classes")
    if y.min() < 0 or y.max() >= classes:
        raise ValueError("class labels out of range")
    w = np.ones(rows) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    onehot = np.zeros((rows, classes))
    onehot[np.arange(rows), y] = 1.0
    cw = c * w[:, None]
    size = dim * classes

    def objective(theta: Any) -> tuple[float, Any]:
        weights = theta[:size].reshape(dim, classes)
        logits = x64 @ weights + theta[size:]
        top = logits.max(axis=1, keepdims=True)
        log_norm = top[:, 0] + np.log(np.exp(logits - top).sum(axis=1))
        loss = float(np.sum(w * (log_norm - logits[np.arange(rows), y])))
        residual = cw * (np.exp(logits - log_norm[:, None]) - onehot)
        grad = np.concatenate([(x64.T @ residual + weights).ravel(), residual.sum(axis=0)])
        return c * loss + 0.5 * float(np.sum(weights * weights)), grad

    theta, iterations, converged = _lbfgs(objective, np.zeros(size + classes), max_iter, tol)
    return LinearHead(
        weights=theta[:size].reshape(dim, classes).astype(np.float32),
        bias=theta[size:].astype(np.float32),
        unknown=unknown,
        iterations=iterations,
        converged=converged,
    )


def _lbfgs(objective: Any, theta: Any, max_iter: int, tol: float) -> tuple[Any, int, bool]:
    """Limited-memory BFGS (10 pairs) with a backtracking Armijo line search.

    Enough for a smooth strictly convex objective; returns (theta, iterations, converged).
    """
    import numpy as np

    memory: list[tuple[Any, Any, float]] = []
    value, grad = objective(theta)
    stop = tol * max(float(np.abs(grad).max()), 1e-12)
    for iteration in range(1, max_iter + 1):
        # two-loop recursion: direction = -H grad
        q = grad.copy()
        alphas = []
        for s, yv, rho in reversed(memory):
            a = rho * float(s @ q)
            alphas.append(a)
            q -= a * yv
        if memory:
            s, yv, _ = memory[-1]
            q *= float(s @ yv) / float(yv @ yv)
        else:
            q /= max(float(np.abs(grad).max()), 1.0)  # a first step of modest size
        for (s, yv, rho), a in zip(memory, reversed(alphas), strict=True):
            b = rho * float(yv @ q)
            q += (a - b) * s
        direction = -q
        slope = float(grad @ direction)
        if slope >= 0:  # not a descent direction (rounding): restart from the gradient
            memory.clear()
            direction, slope = -grad, -float(grad @ grad)
        step = 1.0
        while True:
            candidate = theta + step * direction
            new_value, new_grad = objective(candidate)
            if new_value <= value + 1e-4 * step * slope or step < 1e-10:
                break
            step *= 0.5
        s, yv = candidate - theta, new_grad - grad
        sy = float(s @ yv)
        if sy > 1e-12:  # keep the curvature pair only when it is positive (always, if convex)
            memory.append((s, yv, 1.0 / sy))
            if len(memory) > 10:
                memory.pop(0)
        theta, value, grad = candidate, new_value, new_grad
        if float(np.abs(grad).max()) <= stop:
            return theta, iteration, True
    return theta, max_iter, False
