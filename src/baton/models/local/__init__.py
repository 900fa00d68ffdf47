"""The embedded local model: pinned weights, llama.cpp, schema-constrained tool calls."""

from baton.models.local.model import LocalModel
from baton.models.local.weights import CARDS, DEFAULT_MODEL, installed_models, weights_path

__all__ = ["CARDS", "DEFAULT_MODEL", "LocalModel", "installed_models", "weights_path"]
