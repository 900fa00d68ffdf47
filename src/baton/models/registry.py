"""Resolve what users write in `Agent(model=...)` into a `Model`."""

from __future__ import annotations

from typing import Any

from baton.core.errors import ConfigError
from baton.models.base import Model


def resolve_model(spec: Any) -> Model:
    """A `Model` from a Model object or a name: `openai:<name>` (more providers later)."""
    if isinstance(spec, Model):
        return spec
    if isinstance(spec, str):
        if spec.startswith("openai:"):
            from baton.models.openai_compat import OpenAICompatible

            return OpenAICompatible(spec.split(":", 1)[1])
        if spec == "local" or spec.startswith("local:"):
            raise ConfigError(
                f"model {spec!r}: the embedded local model is not available in this build; "
                "use model='openai:<name>' with OPENAI_BASE_URL, or a ScriptedModel"
            )
        raise ConfigError(
            f"unknown model {spec!r}: use 'openai:<name>', 'local', or pass a Model object"
        )
    if spec is None:
        raise ConfigError(
            "no model configured: set Agent(model=...) or Team(..., model=...) "
            "(e.g. model='openai:gpt-4o-mini' or a ScriptedModel)"
        )
    raise ConfigError(f"model must be a name or a Model object, got {type(spec).__name__}")
