"""Secret slots reach tools through the kernel, never through prompt text.

A session slot whose value is a secret (a password, a card number, a token: anything the
team's `Redactor` would mask) is shown to models as a handle, `[secret:<slot>]`: in the known
facts of a view and in a hand-off's rendered payload. A model that needs the value passes the
handle as the argument (`reset_password(password="[secret:password]")`); the kernel puts the
session's value in its place before the tool runs, and only for a slot the agent may see
(`Agent.accepts`). A hand-off that carries the handle carries the slot as it is.

The stored session keeps its slots masked at rest (`baton.runtime.at_rest`), so a later run
holds the mask, not the secret: a handle that resolves to a mask is refused with a request to
ask the user again, and the tool never receives the masked text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from baton.runtime.redact import Redactor

HANDLE = "[secret:{slot}]"
"""How a secret slot is shown to a model."""
_HANDLE = re.compile(r"\[secret:([^\]\s]{1,128})\]")


def handle(slot: str) -> str:
    """The handle that stands for slot `slot`'s value."""
    return HANDLE.format(slot=slot)


def is_secret(red: Redactor, key: str, value: Any) -> bool:
    """The slot's value is one the redactor masks (a secret key, or a secret in the value)."""
    if value is None or value == "" or type(value) is bool:
        return False
    return red.key_label(key) is not None or red.redact_value(value) is not value


def masked_facts(red: Redactor | None, state: Mapping[str, Any]) -> dict[str, Any]:
    """`state` as a model may read it: each secret slot's value replaced by its handle."""
    if red is None:
        return dict(state)
    return {k: handle(k) if is_secret(red, k, v) else v for k, v in state.items()}


def is_mask(red: Redactor, value: Any) -> bool:
    """`value` is what the redactor left of a secret (`[REDACTED:password]`), not a secret."""
    if not isinstance(value, str):
        return False
    head, _, tail = red.replacement.partition("{name}")
    return bool(head) and head in value and (not tail or tail in value)


class Unresolved(ValueError):
    """A handle names a slot the agent may not see, or whose secret is no longer held."""


def resolve(
    red: Redactor | None,
    value: Any,
    state: Mapping[str, Any],
    visible: Callable[[], Mapping[str, Any]],
) -> Any:
    """`value` (a tool's arguments, a hand-off's state) with every argument that is exactly a
    handle replaced by the session's value; `value` itself when it holds none. `visible`
    gives the slots the agent may see (asked only when a handle is met). Raises `Unresolved`
    saying what to do when a handle cannot be resolved."""
    if isinstance(value, str):
        m = _HANDLE.fullmatch(value)
        if m is None:
            return value
        slot = m.group(1)
        if slot not in state or slot not in visible():
            raise Unresolved(
                f"{value} names no secret you were given; use only the handles in your known "
                "facts, or ask the user"
            )
        real = state[slot]
        if red is not None and is_mask(red, real):
            raise Unresolved(
                f"the secret behind {value} is no longer held (secrets are not kept between "
                "messages); ask the user for it again"
            )
        return real
    if isinstance(value, dict):
        out: dict[Any, Any] | None = None
        for k, v in value.items():
            if type(v) is str and "[secret:" not in v:
                continue  # the usual argument: nothing to look at
            new = resolve(red, v, state, visible)
            if new is not v:
                if out is None:
                    out = dict(value)
                out[k] = new
        return value if out is None else out
    if isinstance(value, list):
        items = [resolve(red, v, state, visible) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    return value
