"""How a turn's scratch and view name the run's recorded messages in a checkpoint.

Every scratch message, and the user's message in a view, is also in `RunState.messages`, which
the checkpoint saves (or names, once committed). A turn's list therefore saves, per message:

- its id, for a message the run recorded (format 2);
- the whole message, for one it did not (a system prompt, an earlier run's message, a
  conductor's exact results in a masked checkpoint);
- or, when the whole list is one unbroken stretch of the run's messages (a graph's turn: every
  super-step's calls and results, in order), a single `{"span": [first_id, count]}` (format 5):
  a long turn's checkpoint stays the same size at every step instead of growing by an id a
  message.

The serialisation context of one run (`context_of`) holds its messages; the ids of the saved
messages are looked up in C (`map(id, ...)`), as a long run names thousands at every step.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import is_
from typing import Any

from pydantic import SerializationInfo, TypeAdapter

from baton.core.messages import Message


@dataclass(frozen=True, slots=True)
class Span:
    """`count` consecutive messages of the run's `messages`, from the one whose id is `first`
    (as loaded, until `resolved` replaces it by those messages)."""

    first: str
    count: int


def context_of(messages: list[Message]) -> dict[str, Any]:
    """The serialisation context of one run: its recorded messages."""
    return {"messages": messages}


def save_messages(value: list[Any], info: SerializationInfo) -> list[Any]:
    """A turn's scratch or view as saved: a span, ids, or whole messages (see the module)."""
    context = info.context if isinstance(info.context, dict) else {}
    messages = context.get("messages") or []
    if not messages and not any(isinstance(m, (str, Span)) for m in value):
        whole: list[Any] = _messages().dump_python(value, mode="json")
        return whole
    span = _stretch(value, messages, context)
    if span is not None:
        return [{"span": [span.first, span.count]}]
    recorded = context.get("recorded")
    if recorded is None:
        recorded = context["recorded"] = set(_ids(messages, context))
    if recorded.issuperset(map(id, value)):  # the usual case, in C
        return [m.id for m in value]
    return [
        m
        if isinstance(m, str)  # a loaded state's, not yet resolved (`restore_committed`)
        else {"span": [m.first, m.count]}
        if isinstance(m, Span)
        else m.id
        if id(m) in recorded
        else _message().dump_python(m, mode="json")
        for m in value
    ]


def _ids(messages: list[Message], context: dict[str, Any]) -> list[int]:
    ids: list[int] | None = context.get("ids")
    if ids is None:
        ids = context["ids"] = list(map(id, messages))
    return ids


def _stretch(value: list[Any], messages: list[Message], context: dict[str, Any]) -> Span | None:
    """`value` as a span of `messages`, when it is one unbroken stretch of them (the very
    objects, in order) of two or more."""
    n = len(value)
    if n < 2 or len(messages) < n or not isinstance(value[0], Message):
        return None
    try:
        start = _ids(messages, context).index(id(value[0]))
    except ValueError:
        return None
    if start + n > len(messages) or not all(map(is_, value, messages[start : start + n])):
        return None
    return Span(value[0].id, n)


def load_messages(value: Any) -> list[Any]:
    """A saved scratch or view: whole messages are validated; ids and spans stay until
    `resolved`."""
    if not isinstance(value, list):
        raise ValueError("a turn's scratch and view must be lists")
    return [_loaded(m) for m in value]


def _loaded(m: Any) -> Any:
    if isinstance(m, (str, Message, Span)):
        return m
    if isinstance(m, dict) and "span" in m:
        first, count = m["span"]
        if not isinstance(first, str) or not isinstance(count, int) or count < 1:
            raise ValueError(f"a turn names a damaged span of messages: {m!r}")
        return Span(first, count)
    return _message().validate_python(m)


def resolved(saved: list[Any], messages: list[Message]) -> list[Message]:
    """The messages `saved` names, as the run's own objects: an id, a span, or a whole message
    equal to a recorded one (format 1 saved them whole), so the next checkpoint names them
    again. `ValueError` when the run does not hold what is named."""
    where = {m.id: i for i, m in enumerate(messages)}
    missing = [m for m in saved if isinstance(m, (str, Span)) and _key(m) not in where]
    if missing:
        raise ValueError(f"the turn names messages the run does not hold: {missing[:3]}")
    out: list[Message] = []
    for m in saved:
        if isinstance(m, str):
            out.append(messages[where[m]])
        elif isinstance(m, Span):
            start = where[m.first]
            stretch = messages[start : start + m.count]
            if len(stretch) != m.count:
                raise ValueError(
                    f"the turn names {m.count} messages from {m.first}; the run holds "
                    f"{len(stretch)} from there"
                )
            out.extend(stretch)
        else:
            i = where.get(m.id)
            held = messages[i] if i is not None else None
            out.append(held if held is not None and held == m else m)
    return out


def _key(m: str | Span) -> str:
    return m if isinstance(m, str) else m.first


_ADAPTERS: dict[str, TypeAdapter[Any]] = {}


def _message() -> TypeAdapter[Message]:
    found = _ADAPTERS.get("one")
    if found is None:
        found = _ADAPTERS["one"] = TypeAdapter(Message)
    return found


def _messages() -> TypeAdapter[list[Message]]:
    found = _ADAPTERS.get("list")
    if found is None:
        found = _ADAPTERS["list"] = TypeAdapter(list[Message])
    return found
