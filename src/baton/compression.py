"""Tool-result compression: a long tool result reaches the next model call as its core facts
and key references, written by a light model (seed 001 §4.5).

Set it per tool (`@tool(compress=True)`) or per agent (`Agent(compress_results=True)`); a
tool's own setting wins (`compress=False` keeps a tool's results whole under an agent policy).
The full result stays in the run's transcript, and the holder can read it with
`fetch_result(call_id)`. See docs/context.md, "Compressed tool results".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from baton.core.errors import ConfigError

DEFAULT_THRESHOLD_TOKENS = 600
"""Results estimated longer than this many tokens are compressed."""


@dataclass(frozen=True)
class Compression:
    """When and how a tool result is compressed before the next model call."""

    threshold_tokens: int = DEFAULT_THRESHOLD_TOKENS
    """Compress results estimated (`baton.models.base.estimate_tokens`) above this."""
    model: Any = None
    """The light model that compresses (a `Model`, or a name such as 'local' or
    'openai:<name>', resolved when the `Compression` is made); None: the team's summariser,
    else the holder's own model (as the `summary` context policy does)."""
    max_words: int = 120
    """The words the compressor is asked for at most; an answer over twice as many words, or
    not shorter than the result, counts as a failed compression."""

    def __post_init__(self) -> None:
        if isinstance(self.threshold_tokens, bool) or not isinstance(self.threshold_tokens, int):
            raise ConfigError("Compression.threshold_tokens must be an int (tokens)")
        if self.threshold_tokens < 1:
            raise ConfigError("Compression.threshold_tokens must be at least 1")
        if isinstance(self.max_words, bool) or not isinstance(self.max_words, int):
            raise ConfigError("Compression.max_words must be an int")
        if self.max_words < 10:
            raise ConfigError("Compression.max_words must be at least 10")
        if self.model is not None:  # a name is resolved once, here: one client for every call
            from baton.models.registry import resolve_model

            object.__setattr__(self, "model", resolve_model(self.model))


CompressLike = Compression | bool | int | None
"""`True` (defaults), an int (the threshold in tokens), a `Compression`, `False` (never) or
None (a tool: follow the agent's policy; an agent: off)."""


def compression_setting(value: Any, where: str) -> Compression | bool | None:
    """`value` as a `Compression`, `False` (never) or None (not set); `ConfigError` naming
    `where` for anything else."""
    if value is None:
        return None
    if value is False:
        return False
    if isinstance(value, Compression):
        return value
    if value is True:
        return Compression()
    if isinstance(value, int) and not isinstance(value, bool):
        return Compression(threshold_tokens=value)
    raise ConfigError(
        f"{where} takes True, False, None, a threshold in tokens (int) or a Compression, "
        f"not {value!r}"
    )
