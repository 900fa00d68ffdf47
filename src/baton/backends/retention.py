"""Retention: what a store keeps, for how long, and `gc`, which deletes the rest.

A store grows with every run: transcripts, events, graph snapshots, and the checkpoints of
runs that never finished. `Retention` says what to keep; `store.gc(policy)` (`Retaining`,
implemented by every shipped store; `baton store gc` on the command line) deletes the rest and
returns a `GcReport` with what it deleted and the store's size before and after.

The rules, per kind:

- messages and events: per session, a record is kept while it is among the newest
  `keep_messages` / `keep_events` of its session or younger than `max_age_s`, whichever keeps
  more (a rule not given keeps nothing by itself; with no rule for a kind, that kind is kept);
- graph snapshots: per thread, the same with `keep_snapshots`; a thread's newest snapshot
  (its current state) is always kept;
- checkpoints: a finished run's checkpoint is deleted by its final commit already; with
  `max_age_s`, gc deletes `cancelled` ones (the session moved on or nobody resumed them) and
  `running` ones (left by a crashed process; a live run saves after every step) not saved for
  that long. A checkpoint waiting for a person (`awaiting_approval`, `interrupted`) is never
  deleted: it is counted in `GcReport.waiting`; discard it with `team.discard` (`baton resume
  SESSION --discard`).

What gc never deletes: a session's record (its holder, state slots and version), the messages
and events of a session that still has a checkpoint (a resumed run reads what it committed back
from the store, `baton.runtime.state.Committed`), the human queue, tasks and blackboards, and the
audit chain. The chain is append-only and stays whole: it holds each event as stored, so it is
the proof of what happened after the rows are gone. For each session it prunes, gc appends one
audit record of type `retention` naming the event and message ids it deleted, in the same
transaction as the deletes; `baton audit verify` accepts a row missing from its table only when
such a record (linked into the chain like any other) names it, so a row deleted by anything
else is still reported as deleted.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from baton.backends.audit import RETENTION, Unsealed, canonical_json, record_body
from baton.backends.base import Snapshots, Store
from baton.core.errors import ConfigError

SESSIONS_PER_SCAN = 1_000_000
"""Sessions gc reads (`list_sessions(limit=...)`): in effect, every one."""


@dataclass(frozen=True, slots=True)
class Retention:
    """What a store keeps (`store.gc(policy)`); None leaves a rule out."""

    max_age_s: float | None = None
    """Keep what is younger than this many seconds; also the age past which `cancelled` and
    orphaned `running` checkpoints are deleted."""
    keep_messages: int | None = None
    """Keep the newest this many messages of each session."""
    keep_events: int | None = None
    """Keep the newest this many events of each session."""
    keep_snapshots: int | None = None
    """Keep the newest this many graph snapshots of each thread (at least 1)."""

    def __post_init__(self) -> None:
        age = self.max_age_s
        if age is not None and (
            isinstance(age, bool) or not isinstance(age, (int, float)) or not 0 < age < math.inf
        ):
            raise ConfigError(f"Retention(max_age_s={age!r}): give a positive number of seconds")
        for name, least in (("keep_messages", 0), ("keep_events", 0), ("keep_snapshots", 1)):
            n = getattr(self, name)
            if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < least):
                raise ConfigError(
                    f"Retention({name}={n!r}): give a whole number of at least {least}, or "
                    "None to leave the rule out"
                )
        if self.empty:
            raise ConfigError(
                "Retention() with no rule keeps everything: give max_age_s and/or keep_messages, "
                "keep_events, keep_snapshots"
            )

    @property
    def empty(self) -> bool:
        """No rule given."""
        return all(
            v is None
            for v in (self.max_age_s, self.keep_messages, self.keep_events, self.keep_snapshots)
        )

    def cutoff(self, now: float) -> float | None:
        """The time before which a record is old enough to delete, if `max_age_s` is set."""
        return None if self.max_age_s is None else now - self.max_age_s


KINDS = ("messages", "events", "snapshots", "checkpoints")
"""The kinds of record gc deletes, as `GcReport.deleted` names them."""


class GcReport(BaseModel):
    """What one `gc` deleted (or, with `dry_run`, would delete), and the store's size."""

    dry_run: bool = Field(description="Nothing was deleted: the counts say what would be.")
    sessions: int = Field(default=0, description="Sessions examined.")
    deleted: dict[str, int] = Field(
        default_factory=lambda: dict.fromkeys(KINDS, 0),
        description="Rows or keys deleted per kind: messages, events, snapshots, checkpoints.",
    )
    waiting: int = Field(
        default=0,
        description="Checkpoints kept because they wait for a person (approval or interrupt).",
    )
    held: int = Field(
        default=0, description="Sessions whose messages and events were kept for a checkpoint."
    )
    bytes_before: int | None = Field(default=None, description="The store's size before.")
    bytes_after: int | None = Field(default=None, description="The store's size after.")
    measured: str = Field(default="", description="What the sizes measure.")


@runtime_checkable
class Retaining(Protocol):
    """A store that can delete what a `Retention` policy does not keep."""

    async def gc(self, policy: Retention, *, dry_run: bool = False) -> GcReport:
        """Delete what `policy` does not keep (nothing with `dry_run`) and report it."""
        ...


@dataclass(frozen=True, slots=True)
class Prune:
    """What gc deletes of one session: message and event ids, and its thread's snapshot ids."""

    session_id: str
    messages: tuple[str, ...] = ()
    events: tuple[str, ...] = ()
    snapshots: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        """Nothing to delete."""
        return not (self.messages or self.events or self.snapshots)

    def audit_item(self, policy: Retention) -> Unsealed | None:
        """The `retention` audit record of this prune (None when it deletes no audited row)."""
        if not (self.messages or self.events):
            return None
        ts = time.time()
        data = canonical_json(
            {
                "events": list(self.events),
                "messages": list(self.messages),
                "policy": policy_data(policy),
            }
        )
        body = record_body("", RETENTION, self.session_id, "", ts, data)
        return Unsealed("", RETENTION, self.session_id, "", ts, data, body)


def policy_data(policy: Retention) -> dict[str, Any]:
    """The rules of `policy` that are set, as JSON data."""
    return {
        k: v
        for k, v in (
            ("max_age_s", policy.max_age_s),
            ("keep_messages", policy.keep_messages),
            ("keep_events", policy.keep_events),
            ("keep_snapshots", policy.keep_snapshots),
        )
        if v is not None
    }


def beyond(
    stamped: Sequence[tuple[str, float]], keep: int | None, cutoff: float | None
) -> list[str]:
    """Ids of `stamped` ((id, time) oldest first) that no rule keeps: outside the newest
    `keep` and older than `cutoff`; none when neither rule is given."""
    if keep is None and cutoff is None:
        return []
    tail = len(stamped) - keep if keep is not None else len(stamped)
    return [
        rid for i, (rid, ts) in enumerate(stamped) if i < tail and (cutoff is None or ts < cutoff)
    ]


@dataclass(slots=True)
class Sizes:
    """How a store measures itself for a `GcReport`: a function giving its size in bytes (or
    None when it cannot tell) and what that size measures."""

    measure: Callable[[], Awaitable[int | None]]
    what: str


@dataclass(slots=True)
class _Run:
    policy: Retention
    dry_run: bool
    report: GcReport
    now: float = field(default_factory=time.time)


async def collect(
    store: Store,
    policy: Retention,
    dry_run: bool,
    prune: Callable[[Prune, Unsealed | None], Awaitable[None]],
    sizes: Sizes,
) -> GcReport:
    """The shared part of every store's `gc`: decide what `policy` does not keep, through the
    store's public reads, and hand each session's `Prune` (with its audit record) to the
    store's `prune`, which deletes it in one transaction; checkpoints go through
    `delete_checkpoint`."""
    if not isinstance(policy, Retention):
        raise ConfigError(f"gc(policy) takes a Retention, not {type(policy).__name__}")
    run = _Run(policy, dry_run, GcReport(dry_run=dry_run, measured=sizes.what))
    run.report.bytes_before = await sizes.measure()
    kept_sessions, dropped = await _checkpoints(store, run)
    for session in await store.list_sessions(limit=SESSIONS_PER_SCAN):
        run.report.sessions += 1
        sid = session.session_id
        # looked at again per session: a run that paused since the listing holds it too
        held = sid in kept_sessions or (
            sid not in dropped and await store.get_checkpoint(sid) is not None
        )
        if held:
            run.report.held += 1
        found = await _session_prune(store, run, sid, held)
        if found.empty:
            continue
        for kind, ids in (
            ("messages", found.messages),
            ("events", found.events),
            ("snapshots", found.snapshots),
        ):
            run.report.deleted[kind] += len(ids)
        if not dry_run:
            await prune(found, found.audit_item(policy))
    run.report.bytes_after = run.report.bytes_before if dry_run else await sizes.measure()
    return run.report


async def _checkpoints(store: Store, run: _Run) -> tuple[set[str], set[str]]:
    """Delete the checkpoints past the age (not those waiting for a person); the sessions
    whose checkpoint stays, and those whose checkpoint went (or, in a dry run, would go)."""
    cutoff = run.policy.cutoff(run.now)
    kept: set[str] = set()
    dropped: set[str] = set()
    for cp in await store.list_checkpoints():
        if cp.status in ("awaiting_approval", "interrupted"):
            run.report.waiting += 1
            kept.add(cp.session_id)
        elif cutoff is not None and cp.updated_at < cutoff:
            run.report.deleted["checkpoints"] += 1
            dropped.add(cp.session_id)
            if not run.dry_run:
                await store.delete_checkpoint(cp.session_id, cp.run_id)
        else:
            kept.add(cp.session_id)
    return kept, dropped


async def _session_prune(store: Store, run: _Run, sid: str, held: bool) -> Prune:
    policy, cutoff = run.policy, run.policy.cutoff(run.now)
    messages: list[str] = []
    events: list[str] = []
    if not held:
        if policy.keep_messages is not None or cutoff is not None:
            stamped = [(m.id, m.ts) for m in await store.get_messages(sid)]
            messages = beyond(stamped, policy.keep_messages, cutoff)
        if policy.keep_events is not None or cutoff is not None:
            stamped = [(e.id, e.ts) for e in await store.get_events(sid)]
            events = beyond(stamped, policy.keep_events, cutoff)
    snapshots: list[str] = []
    if isinstance(store, Snapshots) and (policy.keep_snapshots is not None or cutoff is not None):
        newest_first = await store.list_snapshots(sid)
        stamped = [(s.id, s.created_at) for s in reversed(newest_first)]
        # the newest is always kept: it is the thread's current state
        snapshots = beyond(stamped, policy.keep_snapshots or 1, cutoff)
    return Prune(sid, tuple(messages), tuple(events), tuple(snapshots))


def parse_age(text: str) -> float:
    """Seconds in an age written `90`, `45s`, `30m`, `12h`, `30d` or `2w`."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
    t = text.strip().lower()
    scale = units.get(t[-1:])
    number = t[:-1] if scale is not None else t
    try:
        value = float(number)
    except ValueError:
        raise ConfigError(
            f"bad age {text!r}: write a number with a unit, e.g. 45s, 30m, 12h, 30d or 2w"
        ) from None
    if not 0 < value < math.inf:
        raise ConfigError(f"bad age {text!r}: it must be more than zero and finite")
    return value * (scale or 1)
