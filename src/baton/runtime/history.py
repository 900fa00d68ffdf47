"""`fetch_history`: earlier turns of the conversation, from the store on demand (seed 003 §5.2).

A receiver's default view stays small (`structured`); when it needs what was said before it
held the baton, it calls `fetch_history(ref=None, query=None, limit=5)`; `ref` is the payload's
`history_ref`. Only user messages and final replies come back — never other agents' tool
calls or raw tool outputs — and only from the run's own session.

`query` ranks turns by shared words (casefolded) and, for Chinese, Japanese and Korean text,
shared character pairs, so `退款` finds `我想申请退款` without a tokenizer; ties go to the most
recent turn. Simple lexical matching is deliberate: it needs no model and no index, and the
receiver can always ask again without a query.
"""

from __future__ import annotations

import json
import re
from typing import Any

from baton.backends.base import Store
from baton.runtime.context import conversation

MAX_LIMIT = 20
_SCAN = 500
"""Most recent transcript messages read for the latest turns (no `query`); a query searches
the whole transcript, so it reaches turns long before a run's loaded window
(`baton.runtime.rolling`)."""
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]+")


def _terms(text: str) -> set[str]:
    low = text.casefold()
    terms = {w for w in _WORD.findall(low) if not _CJK.fullmatch(w)}
    for run in _CJK.findall(low):
        terms.update(run[i : i + 2] for i in range(max(1, len(run) - 1)))
    return terms


def parse_args(args: dict[str, Any], ref: str) -> tuple[str | None, int] | str:
    """(query, limit) from the model's arguments, or an error message for the model."""
    given = args.get("ref", ref)  # optional: the hand-off's own reference by default
    if given != ref:
        return (
            f"unknown history reference {given!r}: use the history_ref of your hand-off ({ref!r})"
        )
    query = args.get("query")
    if query is not None and not isinstance(query, str):
        return "query must be a string"
    limit = args.get("limit", 5)
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
        return f"limit must be a whole number from 1 to {MAX_LIMIT}"
    return (query or None), limit


async def fetch_history(store: Store, session_id: str, query: str | None, limit: int) -> str:
    """The JSON tool result: up to `limit` turns (oldest first), matching `query` if given."""
    found = await store.get_messages(session_id, limit=None if query else _SCAN)
    said = conversation(found, None)
    if query:
        wanted = _terms(query)
        scored = [(len(wanted & _terms(m.content or "")), i) for i, m in enumerate(said)]
        best = sorted((s for s in scored if s[0] > 0), key=lambda s: (-s[0], -s[1]))[:limit]
        picked = [said[i] for _, i in sorted(best, key=lambda s: s[1])]
    else:
        picked = said[-limit:]
    turns = [
        {"role": m.role, "agent": m.agent, "text": m.content}
        if m.role == "assistant"
        else {"role": m.role, "text": m.content}
        for m in picked
    ]
    more = not query and len(said) > limit  # older turns exist beyond `limit`
    return json.dumps({"ref": session_id, "turns": turns, "more": more}, ensure_ascii=False)
