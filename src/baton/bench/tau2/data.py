"""Load the τ²-bench workload: each domain's database, tasks, splits, tool schemas and policy.

The workload is data only (no code) and lives outside the package: pass its folder explicitly,
or keep it at `<repo>/../shared/workloads/tau2`. Files are read once per process; every task
gets its own deep copy of the database (`Domain.fresh_db`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

DOMAINS = ("retail", "airline")
"""The τ² domains with a database-backed oracle (telecom needs a device simulator)."""

SPLITS = ("base", "train", "test")
"""Task splits of `split_tasks.json`; `base` holds every task."""

_DB_FILES = {
    "retail": ("db.json",),
    # the upstream airline db.json is not in the snapshot; the README documents the rebuild
    "airline": ("db.json", "db.reconstructed.json"),
}


class WorkloadMissing(FileNotFoundError):
    """The τ² workload folder, or a file the harness needs from it, is not there."""


def repo_root() -> Path:
    """The source checkout this module lives in (`src/baton/bench/tau2/data.py` -> repo)."""
    return Path(__file__).resolve().parents[4]


def default_data_dir() -> Path:
    """Where the workload is looked for without `--data`: `<repo>/../shared/workloads/tau2`."""
    return repo_root().parent / "shared" / "workloads" / "tau2"


def resolve_data_dir(data: str | Path | None = None) -> Path:
    """The workload folder: `data` when given, else the default; raises `WorkloadMissing`."""
    path = Path(data).expanduser() if data is not None else default_data_dir()
    if not path.is_dir():
        how = "" if data is not None else " (the default location; pass --data PATH)"
        raise WorkloadMissing(
            f"no τ²-bench workload at {path}{how}: expected a folder with retail/ and "
            "airline/ (db, tasks.json, split_tasks.json, tools.json, policy.md)"
        )
    return path.resolve()


def db_hash(db: Any) -> str:
    """sha256 of the canonical JSON of a database (sorted keys), as the τ² oracle compares."""
    # check_circular=False: a database parsed from JSON is a tree; the output is the same
    return hashlib.sha256(json.dumps(db, sort_keys=True, check_circular=False).encode()).hexdigest()


@dataclass(frozen=True)
class Action:
    """One gold tool call of a task."""

    action_id: str
    name: str
    arguments: Mapping[str, Any]


@dataclass(frozen=True)
class Task:
    """A τ² task: who the user is and wants (`user_scenario`) and the gold outcome."""

    id: str
    actions: tuple[Action, ...]
    communicate_info: tuple[str, ...]
    user_scenario: Mapping[str, Any]
    reward_basis: tuple[str, ...] = ()
    purpose: str | None = None


# eq=False: a domain is identified by the object (cached per folder), which keeps it hashable
@dataclass(frozen=True, eq=False)
class Domain:
    """One domain of the workload, loaded once: the database text, tasks, splits and schemas."""

    name: str
    root: Path
    db_text: str = field(repr=False)
    tasks: tuple[Task, ...] = field(repr=False)
    splits: Mapping[str, tuple[str, ...]] = field(repr=False)
    tool_schemas: tuple[Mapping[str, Any], ...] = field(repr=False)
    policy: str = field(repr=False)

    def fresh_db(self) -> dict[str, Any]:
        """A private deep copy of the initial database (parsing the cached text is the fastest
        deep copy of a JSON tree)."""
        db: dict[str, Any] = json.loads(self.db_text)
        return db

    @cached_property
    def initial_hash(self) -> str:
        """`db_hash` of the initial database."""
        return db_hash(self.fresh_db())

    @cached_property
    def tool_kinds(self) -> dict[str, str]:
        """Tool name -> READ, WRITE or GENERIC (`x_tool_type` of tools.json)."""
        return {
            s["function"]["name"]: str(s.get("x_tool_type", "GENERIC")) for s in self.tool_schemas
        }

    def task(self, task_id: str) -> Task:
        """The task with this id; KeyError names the domain when there is none."""
        for t in self.tasks:
            if t.id == task_id:
                return t
        raise KeyError(f"{self.name} has no task {task_id!r}")

    def split(self, split: str = "base") -> list[Task]:
        """The tasks of a split (`base`, `train` or `test`), in the split file's order."""
        if split not in self.splits:
            raise ValueError(
                f"unknown split {split!r} for {self.name}: use one of {', '.join(self.splits)}"
            )
        by_id = {t.id: t for t in self.tasks}
        return [by_id[i] for i in self.splits[split] if i in by_id]


def _read(path: Path) -> str:
    if not path.is_file():
        raise WorkloadMissing(f"missing workload file {path}")
    return path.read_text(encoding="utf-8")


def parse_task(raw: Mapping[str, Any]) -> Task:
    """A `Task` from one entry of a τ² tasks.json."""
    crit = raw.get("evaluation_criteria") or {}
    actions = tuple(
        Action(
            action_id=str(a.get("action_id", f"{raw['id']}_{i}")),
            name=a["name"],
            arguments=dict(a.get("arguments") or {}),
        )
        for i, a in enumerate(crit.get("actions") or [])
    )
    return Task(
        id=str(raw["id"]),
        actions=actions,
        communicate_info=tuple(str(s) for s in crit.get("communicate_info") or []),
        user_scenario=dict(raw.get("user_scenario") or {}),
        reward_basis=tuple(crit.get("reward_basis") or ()),
        purpose=(raw.get("description") or {}).get("purpose"),
    )


@lru_cache(maxsize=8)
def _load(root: Path, name: str) -> Domain:
    folder = root / name
    if not folder.is_dir():
        raise WorkloadMissing(f"no {name}/ folder in the τ²-bench workload at {root}")
    db_file = next((folder / f for f in _DB_FILES[name] if (folder / f).is_file()), None)
    if db_file is None:
        raise WorkloadMissing(f"no database in {folder} (looked for {', '.join(_DB_FILES[name])})")
    tasks = tuple(parse_task(t) for t in json.loads(_read(folder / "tasks.json")))
    splits_raw = json.loads(_read(folder / "split_tasks.json"))
    splits = {k: tuple(str(i) for i in v) for k, v in splits_raw.items()}
    splits.setdefault("base", tuple(t.id for t in tasks))
    return Domain(
        name=name,
        root=folder,
        db_text=db_file.read_text(encoding="utf-8"),
        tasks=tasks,
        splits=splits,
        tool_schemas=tuple(json.loads(_read(folder / "tools.json"))),
        policy=_read(folder / "policy.md"),
    )


def load_domain(name: str, data: str | Path | None = None) -> Domain:
    """Domain `name` (retail or airline) of the workload at `data` (see `resolve_data_dir`)."""
    if name not in DOMAINS:
        raise ValueError(f"unknown τ² domain {name!r}: use one of {', '.join(DOMAINS)}")
    return _load(resolve_data_dir(data), name)
