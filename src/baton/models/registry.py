"""Resolve what users write in `Agent(model=...)` into a `Model`."""

from __future__ import annotations

from typing import Any

from baton.core.errors import ConfigError
from baton.models.base import Model


def _shared_local(name: str) -> Model:
    """One `LocalModel` object per name within a process (the weights load once anyway)."""
    from baton.models.local import LocalModel

    model = _LOCAL.get(name)
    if model is None:
        model = _LOCAL[name] = LocalModel(name)
    return model


_LOCAL: dict[str, Model] = {}


def resolve_model(spec: Any) -> Model:
    """A `Model` from a Model object or a name: `local`, `local:<name>`, `openai:<name>`."""
    if isinstance(spec, Model):
        return spec
    if isinstance(spec, str):
        if spec.startswith("openai:"):
            from baton.models.openai_compat import OpenAICompatible

            return OpenAICompatible(spec.split(":", 1)[1])
        if spec == "local" or spec.startswith("local:"):
            from baton.models.local.weights import default_model

            name = spec.split(":", 1)[1] if ":" in spec else default_model()
            return _shared_local(name)
        raise ConfigError(
            f"unknown model {spec!r}: use 'openai:<name>', 'local', or pass a Model object"
        )
    if spec is None:
        raise ConfigError(
            "no model configured: set Agent(model=...) or Team(..., model=...) "
            "(e.g. model='openai:gpt-4o-mini' or a ScriptedModel)"
        )
    raise ConfigError(f"model must be a name or a Model object, got {type(spec).__name__}")
