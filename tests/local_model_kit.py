"""Shared checks for tests that run the embedded local model or its HTTP server."""

from __future__ import annotations

import importlib.util

import pytest

from baton.models.local.weights import installed_models


def require_local_model(name: str = "qwen2.5-coder-1.5b") -> None:
    """Skip with a clear reason when llama-cpp-python or the weights are missing."""
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed (make test installs it)")
    if name not in installed_models():
        pytest.skip(f"the weights of {name} are not installed (make test installs them)")
