"""Posting to a blackboard (seed 000 §2.3, §4): the built-in `post_to_board` call.

An agent of a blackboard topology writes the board through one tool,
`post_to_board(key, value, mode="set")`: `set` replaces the entry, `append` adds the value to
the entry's list, `merge` adds the value's fields to the entry's object. The write is
compare-and-set on the entry's version (`baton.backends.board.write_with_retry`): when another
writer got there between the read and the write, the change is applied again to the fresh
value and written again, a bounded number of times, so no update is lost. Every write is a
`board_written` event carrying the conflicts it met; a post that changes nothing is not
written (no new version, so it wakes nobody); the same post made twice in one turn lands
once. A post is checkpointed as started before it writes: run again after a crash (resumed in
any process), a set or merge already applied changes nothing, and an append whose item is
already in the list is not added again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, WithJsonSchema

from baton.backends.base import Blackboard
from baton.backends.board import entry_json, write_with_retry
from baton.core.errors import ConflictError, StoreError
from baton.core.events import BoardWritten
from baton.core.messages import ToolSpec
from baton.core.nesting import too_deep
from baton.runtime.calls import called
from baton.runtime.outcomes import Failed
from baton.runtime.state import PendingCall, RunState, TurnState
from baton.tools import error_content

if TYPE_CHECKING:
    from baton.runtime.calls import Handled
    from baton.runtime.kernel import Call, Kernel

POST_TO_BOARD = "post_to_board"
BOARD = "board"
"""The call kind of `post_to_board` entries in a blackboard agent's call table."""

Mode = Literal["set", "append", "merge"]


_ANY_JSON: dict[str, Any] = {
    "anyOf": [
        {"type": "string"},
        {"type": "number"},
        {"type": "boolean"},
        {"type": "array"},
        {"type": "object"},
    ],
    "description": "What to write: text, a number, a list or an object.",
}
"""The schema of a posted value: any JSON but null, spelled out (an untyped schema with a
description is one that grammar-constrained decoders refuse)."""


class PostArgs(BaseModel):
    """What an agent's model writes when it posts to the board."""

    model_config = ConfigDict(extra="forbid")

    key: str = Field(min_length=1, max_length=200, description="The name of the entry to write.")
    value: Annotated[Any, WithJsonSchema(_ANY_JSON)]
    mode: Mode = Field(
        default="set",
        description=(
            "set (the default) replaces the entry; append adds the value to the list under "
            "the key; merge adds the value's fields to the object under the key."
        ),
    )


def post_spec() -> ToolSpec:
    """The tool a board agent's model sees for writing the board."""
    return ToolSpec(
        name=POST_TO_BOARD,
        description="Write a value on the shared board under a key; the other agents read it.",
        parameters=PostArgs.model_json_schema(),
    )


class _Unchanged(Exception):
    """The post would leave the entry as it is: nothing is written."""


class _Refused(Exception):
    """The post does not fit the entry (append to a text, merge into a list)."""


def apply(mode: Mode, current: Any, value: Any) -> Any:
    """The entry's new value after a post of `value` in `mode` onto `current` (None: the
    entry does not exist yet); raises `ValueError` when they do not fit."""
    if mode == "set":
        return value
    if mode == "append":
        if current is None:
            return [value]
        if not isinstance(current, list):
            raise ValueError(
                f"the entry holds {_kind(current)}, not a list, so nothing can be appended to "
                "it; post with mode set to replace it"
            )
        return [*current, value]
    if not isinstance(value, dict):
        raise ValueError(f"mode merge takes an object as the value, got {_kind(value)}")
    if current is None:
        return dict(value)
    if not isinstance(current, dict):
        raise ValueError(
            f"the entry holds {_kind(current)}, not an object, so nothing can be merged into "
            "it; post with mode set to replace it"
        )
    return {**current, **value}


def _check_size(board: str, key: str, value: Any, cap: int) -> None:
    """Raise `_Refused` when the entry's new value is not JSON a store keeps, or is larger
    than `cap` bytes (`Guards.max_board_value_bytes`; 0: no cap)."""
    try:
        text = entry_json(board, key, value)
    except StoreError as exc:
        raise _Refused(str(exc)) from None
    if cap and len(text) > cap // 4 and len(text.encode("utf-8")) > cap:
        raise _Refused(
            f"the entry would hold {len(text.encode('utf-8')):,} bytes of JSON, over the "
            f"limit of {cap:,} (Guards.max_board_value_bytes); nothing was written. Post a "
            "shorter value (a summary, or only what changed), or split it over several keys"
        )


def _posted_before(turn: TurnState, pending: PendingCall) -> bool:
    """The turn already made this very post (same key, value and mode), successfully."""
    same = {
        c.id
        for m in turn.scratch
        if m.role == "assistant"
        for c in m.tool_calls or ()
        if c.id != pending.call.id
        and c.name == POST_TO_BOARD
        and _args(c.arguments) == pending.args
    }
    return any(
        m.role == "tool" and m.tool_call_id in same and (m.content or "").startswith('{"ok": true')
        for m in turn.scratch
    )


def _args(text: str) -> Any:
    if too_deep(text):  # the parser refused it: never read back recursively
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a text", bool: "a boolean"}.get(
        type(value), "a number" if isinstance(value, (int, float)) else "null"
    )


@dataclass(frozen=True, slots=True)
class Post:
    """The handler of `post_to_board` calls (registered as the runner's `board` kind)."""

    board: Callable[[str], str]
    """Session id -> the board that session's agents read and write."""
    attempts: int = 5
    """Tries of one write against other writers (`write_with_retry`)."""
    backoff_s: float = 0.005
    """First pause between two tries (doubled after each conflict, jittered)."""
    always: frozenset[str] = frozenset()
    """Writers whose posts are written even when they change nothing (the conductor's post
    of the user's message: a new message is news even when its text repeats)."""

    async def __call__(self, kernel: Kernel, call: Call) -> Handled:
        """Write one post, re-reading and re-applying it after each conflict."""
        run, turn, pending = call.run, call.turn, call.pending
        args = pending.args or {}
        started = time.perf_counter()
        try:
            post = PostArgs.model_validate(args)
        except ValidationError as exc:
            why = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors()
            )
            return self._done(
                kernel, run, turn, pending, started, error=f"invalid arguments: {why}"
            )
        store = kernel.cfg.store
        if not isinstance(store, Blackboard):
            error = (
                f"the store {type(store).__name__} has no blackboard; use a store with the "
                "Blackboard capability (every shipped store has it: MemoryStore, SQLite, "
                "PostgreSQL, Redis)"
            )
            self._done(kernel, run, turn, pending, started, error=error)
            return error_content(error), Failed(error)
        board = self.board(run.session.session_id)
        if _posted_before(turn, pending):  # a small model may repeat a call: an append lands once
            result = {"ok": True, "key": post.key, "unchanged": True, "note": "posted already"}
            return self._done(kernel, run, turn, pending, started, result=result)
        again = pending.started  # run before and interrupted: its append may be stored already
        if not again:  # saved before the write, so a resumed run in any process knows it
            pending.started = True
            await kernel.checkpoint(run)
        skip = turn.agent not in self.always

        def update(current: Any) -> Any:
            repeated = again and post.mode == "append" and isinstance(current, list)
            if repeated and post.value in current:
                raise _Unchanged
            try:
                new = apply(post.mode, current, post.value)
            except ValueError as exc:
                raise _Refused(str(exc)) from None
            if skip and current is not None and new == current:
                raise _Unchanged
            _check_size(board, post.key, new, kernel.cfg.guards.max_board_value_bytes)
            return new

        try:
            written, conflicts = await write_with_retry(
                store,
                board,
                post.key,
                update,
                writer=turn.agent,
                attempts=self.attempts,
                backoff_s=self.backoff_s,
            )
        except _Unchanged:
            held = await store.read_entry(board, post.key)
            result = {"ok": True, "key": post.key, "unchanged": True}
            if held is not None:
                result.update(version=held.version, seq=held.seq)
            return self._done(kernel, run, turn, pending, started, result=result)
        except _Refused as exc:
            return self._done(
                kernel, run, turn, pending, started, error=f"entry {post.key!r}: {exc}"
            )
        except ConflictError as exc:
            kernel.trip(run, turn.agent, "board_conflict", str(exc))
            return self._done(kernel, run, turn, pending, started, error=str(exc))
        kernel.emit(
            run,
            BoardWritten(
                **run.base(turn.agent),
                board=board,
                key=post.key,
                mode=post.mode,
                version=written.version,
                seq=written.seq,
                conflicts=conflicts,
                call_id=pending.call.id,
            ),
        )
        result = {
            "ok": True,
            "key": post.key,
            "version": written.version,
            "seq": written.seq,
            "conflicts": conflicts,
        }
        return self._done(kernel, run, turn, pending, started, result=result)

    def _done(
        self,
        kernel: Kernel,
        run: RunState,
        turn: TurnState,
        pending: PendingCall,
        started: float,
        *,
        result: dict[str, Any] | None = None,
        error: str | None = None,
    ) -> Handled:
        """The call's `tool_called` event and what the model reads back."""
        content = json.dumps(result, ensure_ascii=False) if error is None else error_content(error)
        turn.tools_called += 1
        called(
            kernel,
            run,
            turn,
            pending,
            arguments=pending.args or {},
            ok=error is None,
            error=error,
            latency_ms=(time.perf_counter() - started) * 1000,
            result_chars=len(content),
        )
        return content, None
