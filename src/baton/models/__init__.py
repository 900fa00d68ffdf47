"""Model providers behind one protocol."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from baton.models.base import (
    ChoiceModel,
    Model,
    ModelRequest,
    ModelResponse,
    StreamingModel,
    estimate_tokens,
)
from baton.models.registry import resolve_model
from baton.models.scripted import ScriptedModel, Step

if TYPE_CHECKING:
    from baton.models.openai_compat import OpenAICompatible

__all__ = [
    "ChoiceModel",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "OpenAICompatible",
    "ScriptedModel",
    "Step",
    "StreamingModel",
    "estimate_tokens",
    "resolve_model",
]


def __getattr__(name: str) -> Any:
    """Lazy exports: `OpenAICompatible` is imported on first access, keeping `import baton` fast."""
    if name == "OpenAICompatible":
        from baton.models.openai_compat import OpenAICompatible

        return OpenAICompatible
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
