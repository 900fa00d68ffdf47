"""Model providers behind one protocol."""

from baton.models.base import Model, ModelRequest, ModelResponse, estimate_tokens
from baton.models.registry import resolve_model
from baton.models.scripted import ScriptedModel, Step

__all__ = [
    "Model",
    "ModelRequest",
    "ModelResponse",
    "ScriptedModel",
    "Step",
    "estimate_tokens",
    "resolve_model",
]
