"""The ground truth of a task: its gold actions applied directly to a fresh database copy.

As upstream: the gold actions run in order; one that raises is recorded and skipped. The end
state is summarised by `db_hash`; a run matches when its database has the same hash.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from baton.bench.tau2.airline import AirlineTools
from baton.bench.tau2.data import Action, Domain, Task, db_hash
from baton.bench.tau2.retail import RetailTools
from baton.bench.tau2.toolkit import DomainTools

TOOLSETS: dict[str, type[DomainTools]] = {"retail": RetailTools, "airline": AirlineTools}
"""Tool-set class of each domain."""


def make_tools(domain: Domain | str) -> DomainTools:
    """A new, empty tool set for a domain (set `.db` before calling its tools)."""
    name = domain if isinstance(domain, str) else domain.name
    return TOOLSETS[name]()


@dataclass(frozen=True)
class GoldOutcome:
    """What the gold actions did: the end state's hash and which actions raised."""

    hash: str
    failed: tuple[int, ...]
    """Indexes of the actions that raised (and were skipped)."""
    errors: tuple[str, ...]
    """Their messages, in the same order."""


def apply_actions(domain: Domain, actions: Sequence[Action], tools: DomainTools) -> GoldOutcome:
    """Apply `actions` in order to a fresh copy of the domain database, skipping failures."""
    tools.db = domain.fresh_db()
    failed: list[int] = []
    errors: list[str] = []
    for i, action in enumerate(actions):
        try:
            tools.call(action.name, action.arguments)
        except Exception as exc:  # refusals and schema errors alike: logged and skipped
            failed.append(i)
            errors.append(f"{type(exc).__name__}: {exc}")
    outcome = GoldOutcome(hash=db_hash(tools.db), failed=tuple(failed), errors=tuple(errors))
    tools.db = {}  # drop the copy now rather than keep a database alive per tool set
    return outcome


@lru_cache(maxsize=4)
def _oracle_tools(domain: Domain) -> DomainTools:
    # the oracle's own tool set, so it never shares a database slot with a team
    return make_tools(domain)


def gold_outcome(domain: Domain, task: Task) -> GoldOutcome:
    """The gold end state of `task` (cached: each task's oracle runs once per process)."""
    return _gold(domain, task.id)


@lru_cache(maxsize=1024)
def _gold(domain: Domain, task_id: str) -> GoldOutcome:
    return apply_actions(domain, domain.task(task_id).actions, _oracle_tools(domain))
