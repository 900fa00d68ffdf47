"""The errors every backend raises for the same refusals, worded once so they read alike."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from baton.backends.base import Checkpoint, HumanTicket
from baton.core.errors import ConflictError, StoreError
from baton.core.nesting import MAX_JSON_DEPTH, too_deep
from baton.core.tasks import Task

TICKET_STATUSES = ("open", "claimed", "answered", "closed")
"""Every `TicketStatus`, for checking a ticket before it is saved."""


def version_conflict(session_id: str, read: int, stored: int) -> ConflictError:
    """`commit_run` found another version of the session than the one the run read."""
    return ConflictError(
        f"session {session_id!r} was committed by another run meanwhile: this run read version "
        f"{read} but the store holds version {stored}; nothing was written. Read the session "
        "again (get_session) and retry the run from its fresh state",
        key=session_id,
    )


def stale_checkpoint(cp: Checkpoint, stored_seq: int | None) -> ConflictError:
    """`put_checkpoint` got a save of the same run that is not newer than the stored one."""
    held = "a newer one" if stored_seq is None else f"seq {stored_seq}"
    return ConflictError(
        f"stale checkpoint for session {cp.session_id!r}: run {cp.run_id!r} saved seq {cp.seq} "
        f"but the store already holds {held} of that run; nothing was written. Another "
        "process is probably running the same run: read the checkpoint again (get_checkpoint) "
        "and continue from it, or stop this copy of the run",
        key=cp.session_id,
    )


def paused_elsewhere(cp: Checkpoint, stored_run: str) -> ConflictError:
    """`put_checkpoint` of another run while the stored one waits for a person (an approval,
    or the answer to an interrupt)."""
    return ConflictError(
        f"session {cp.session_id!r} has run {stored_run!r} waiting for a person (approval or "
        f"interrupt); run {cp.run_id!r} may not replace its checkpoint. Decide, answer or "
        "discard it first",
        key=cp.session_id,
    )


def refused_checkpoint(cp: Checkpoint, stored: Sequence[Any] | None) -> ConflictError:
    """Why a running checkpoint save changed nothing, from the stored row's (seq, run_id)
    (None: no checkpoint stored, so a newer save of the run raced it away)."""
    if stored and stored[1] != cp.run_id:
        return paused_elsewhere(cp, str(stored[1]))
    return stale_checkpoint(cp, int(stored[0]) if stored else None)


def check_ticket(ticket: HumanTicket) -> None:
    """Refuse a ticket whose status is not one of `TICKET_STATUSES`."""
    if ticket.status not in TICKET_STATUSES:
        raise StoreError(
            f"ticket {ticket.id} has status {ticket.status!r}; use one of "
            f"{', '.join(TICKET_STATUSES)}"
        )


def ticket_conflict(ticket: HumanTicket, expect: str, stored: str) -> ConflictError:
    """`update_human` found the ticket in another status than the caller expected."""
    return ConflictError(
        f"ticket {ticket.id} is {stored!r}, not {expect!r}: someone else changed it first; "
        "nothing was written. Read it again (get_human) and decide from its fresh status",
        key=str(ticket.id),
    )


def unknown_ticket(ticket_id: int) -> StoreError:
    """`update_human` got a ticket id the queue does not hold."""
    return StoreError(
        f"there is no ticket {ticket_id} in the human queue; check the id against "
        "list_human(status=None)"
    )


def check_task_owner(session_id: str, run_id: str, task: Task) -> None:
    """Refuse to save a task that names another session or run than the one given."""
    for what, given, named in (
        ("session", session_id, task.session_id),
        ("run", run_id, task.run_id),
    ):
        if named is not None and named != given:
            raise StoreError(
                f"task {task.task_id!r} belongs to {what} {named!r}, not {given!r}; nothing was "
                "written. Save it under its own run, or build a new Task for the other one"
            )


def task_elsewhere(run_id: str, task_id: str, stored: str, given: str) -> StoreError:
    """`put_task` of a (run, task id) already stored under another session."""
    return StoreError(
        f"task {task_id!r} of run {run_id!r} is stored under session {stored!r}, not "
        f"{given!r}; nothing was written. A run's tasks belong to its one session"
    )


def task_conflict(run_id: str, task_id: str, expected: int, stored: int) -> ConflictError:
    """`put_task` found another version of the task than the one the caller read."""
    held = "no such task" if stored == 0 else f"version {stored}"
    return ConflictError(
        f"task {task_id!r} of run {run_id!r} was saved by someone else meanwhile: expected "
        f"version {expected} but the store holds {held}; nothing was written. Read it again "
        "(get_task), redo the step from its fresh state, or leave it to whoever moved it",
        key=f"{run_id}/{task_id}",
    )


def board_json(board: str, key: str, value: Any) -> str:
    """`value` as the JSON text a store keeps for a blackboard entry; `StoreError` if it is
    not JSON or nests deeper than `MAX_JSON_DEPTH` (so every backend refuses the same values
    and returns the same ones, and every value it returns can be read without a
    `RecursionError`)."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
        text.encode("utf-8")  # a lone surrogate: no store could keep it
    except RecursionError:  # thousands of levels: past the encoder's stack
        text = None
    except (TypeError, ValueError) as exc:  # (UnicodeEncodeError is a ValueError)
        raise StoreError(
            f"entry {key!r} of board {board!r} cannot be saved as JSON ({exc}); nothing was "
            "written. Keep board values to strings (without lone surrogates: clean them with "
            "baton.core.text.clean_value), finite numbers, booleans, None, lists and dicts "
            "with string keys"
        ) from exc
    if text is None or too_deep(text):
        raise StoreError(
            f"entry {key!r} of board {board!r} nests lists or dicts more than "
            f"{MAX_JSON_DEPTH} levels deep (MAX_JSON_DEPTH, the limit for board values); "
            "nothing was written. Flatten the value (e.g. a list of records instead of records "
            "inside records) or split it into several entries"
        )
    return text


def board_conflict(board: str, key: str, expected: int, stored: int) -> ConflictError:
    """`write_entry` found another version of the entry than the one the caller read."""
    held = "no such entry" if stored == 0 else f"version {stored}"
    return ConflictError(
        f"entry {key!r} of board {board!r} was written by someone else meanwhile: expected "
        f"version {expected} but the store holds {held}; nothing was written. Read it again "
        "(read_entry) and retry the write from its fresh value (write_with_retry does both)",
        key=f"{board}/{key}",
    )
