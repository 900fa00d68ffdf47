"""An envelope as it travels: its JSON form, checked both ways.

Everything on a bus is data from outside this process: a client's envelope, or an entry that
someone (a script, an older or newer Baton, a person with `redis-cli`) wrote into a stream. So
`encode` refuses an envelope that could not be read back (a field of the wrong type, text that
is not valid Unicode, too big), and `decode` reads an entry only when it is such an envelope,
else raises `EnvelopeError` saying what is wrong: the bus then fails the delivery, and after
`max_deliveries` it is a dead letter with that error, rather than a partition stalled on it.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from baton.bus.base import Envelope, EnvelopeError

MAX_ENVELOPE_BYTES = 1024 * 1024
"""Largest envelope (its JSON, UTF-8) a bus carries: 1 MiB, room for any message the API
server accepts (100,000 characters). A larger one is refused at publish; a larger stream entry
is a dead letter."""

MAX_ID_CHARS = 512
"""Longest session or request id an envelope may carry."""

RAW_CHARS = 4096
"""How much of an unreadable entry a dead letter keeps, to show what it was."""

_FIELDS = tuple(f.name for f in dataclasses.fields(Envelope))

_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
"""One encoder, made once (json.dumps with options builds one per call)."""


class _Wire(BaseModel):
    """The fields of an envelope and their types, exactly (nothing coerced, nothing extra)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    session_id: str = Field(min_length=1, max_length=MAX_ID_CHARS)
    message: str
    user_id: str | None
    id: str = Field(min_length=1, max_length=MAX_ID_CHARS)
    headers: dict[str, str]
    submitted_at: float = Field(allow_inf_nan=False)


def encode(envelope: Envelope) -> bytes:
    """The envelope's JSON as UTF-8, after checking that `decode` reads it back the same;
    raises `EnvelopeError` saying which field is wrong."""
    if not isinstance(envelope, Envelope):
        raise EnvelopeError(
            f"the bus carries Envelope objects, got {type(envelope).__name__}: build one with "
            "baton.bus.Envelope(session_id=..., message=...)"
        )
    fields = {name: getattr(envelope, name) for name in _FIELDS}
    try:  # UTF-8 (not ASCII escapes): half the size for Chinese, and no lone surrogate passes
        data = _JSON.encode(fields).encode("utf-8")
    except UnicodeEncodeError:
        raise EnvelopeError(_surrogates(fields, "the envelope")) from None
    except (TypeError, ValueError):
        data = b""  # a value JSON cannot hold: the check below names it
    _check(fields, "the envelope")
    if len(data) > MAX_ENVELOPE_BYTES:
        raise EnvelopeError(
            f"the envelope of request {envelope.id!r} (session {envelope.session_id!r}) is "
            f"{len(data):,} bytes as JSON, over the bus's limit of {MAX_ENVELOPE_BYTES:,}: "
            "send a shorter message (keep a large document in a store and send its id)"
        )
    return data


def decode(raw: bytes | str) -> Envelope:
    """The envelope a stream entry holds; `EnvelopeError` (what is wrong) when it holds
    anything else."""
    if len(raw) > MAX_ENVELOPE_BYTES:
        raise EnvelopeError(too_big(len(raw)))
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise EnvelopeError(
                f"the entry is not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset "
                f"{exc.start} cannot be decoded); it was not written by a Baton bus"
            ) from None
    try:
        fields = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise EnvelopeError(f"the entry is not valid JSON ({exc}); it is not an envelope") from None
    if not isinstance(fields, dict):
        raise EnvelopeError(
            f"the entry is JSON {type(fields).__name__}, not an object; it is not an envelope"
        )
    # a lone surrogate can only come from a \ud800-style escape: look for one only then
    if ("\\ud" in raw or "\\uD" in raw) and _not_unicode(fields):
        raise EnvelopeError(_surrogates(fields, "the entry"))
    _check(fields, "the entry")
    return Envelope(**fields)


def too_big(size: int) -> str:
    """Why an entry of `size` bytes is not read."""
    return (
        f"the entry is {size:,} bytes, over the bus's limit of {MAX_ENVELOPE_BYTES:,} for an "
        "envelope; it was not published by a Baton bus"
    )


def shown(raw: bytes | str | None) -> str:
    """An unreadable entry as text a person can look at: at most `RAW_CHARS` characters,
    bytes that are not UTF-8 shown as escapes."""
    if raw is None:
        return ""
    if isinstance(raw, bytes):
        raw = raw[: RAW_CHARS * 4].decode("utf-8", "backslashreplace")
    return raw[:RAW_CHARS]


def scoped(session_id: str, request_id: str) -> str:
    """One key for a request of a session: `{UTF-8 length of the session id}:{session id}:
    {request id}`, so that no two (session, request) pairs share it whatever the ids hold."""
    return f"{len(session_id.encode('utf-8', 'surrogatepass'))}:{session_id}:{request_id}"


def _surrogates(fields: dict[str, Any], what: str) -> str:
    return (
        f"{what} holds a lone surrogate (half of a UTF-16 pair, not valid Unicode text) in "
        f"{', '.join(_not_unicode(fields)) or 'a field'}: clean the text first "
        "(baton.core.text.clean_text replaces each with U+FFFD)"
    )


def _check(fields: dict[str, Any], what: str) -> None:
    """Every field of the type it must have (its text known to be valid Unicode)."""
    try:
        _Wire.model_validate(fields)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'envelope'}: {e['msg'].lower()}"
            for e in exc.errors()[:5]
        )
        raise EnvelopeError(
            f"{what} is not a valid envelope ({problems}): session_id and id must be "
            f"non-empty strings of at most {MAX_ID_CHARS} characters, message a string, "
            "user_id a string or null, headers strings to strings, submitted_at a number"
        ) from None


def _not_unicode(fields: dict[str, Any]) -> list[str]:
    """The fields holding text that is not valid Unicode (a lone surrogate)."""
    bad = [name for name, value in fields.items() if isinstance(value, str) and not _unicode(value)]
    headers = fields.get("headers")
    if isinstance(headers, dict) and not all(
        _unicode(k) and _unicode(v)
        for k, v in headers.items()
        if isinstance(k, str) and isinstance(v, str)
    ):
        bad.append("headers")
    return bad


def _unicode(text: str) -> bool:
    if text.isascii():  # the usual case, checked in C
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
