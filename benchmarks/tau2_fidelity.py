"""τ² fidelity: the replay's end databases against those of τ²-bench's own tool code.

For every retail and airline task this runs the task's gold actions twice from the same
initial database (the workload's; no task of either domain has an `initial_state`):

* upstream: τ²-bench's real `AirlineTools` / `RetailTools` methods and pydantic data models,
  imported from an extracted copy of its sources, called the way its evaluator replays gold
  actions (`EnvironmentEvaluator.calculate_reward`: `make_tool_call(name, **arguments)` in
  order, an action that raises is skipped; the end state is `tools.db.model_dump()`);
* ours: the Baton replay (`baton.bench.tau2.replay.Replayer`: the gold actions walked through
  the domain team), whose end database is captured just before it is hashed. With `--oracle`
  the project's oracle (`apply_actions`: the same tool set called directly) is used instead,
  which is much faster; the replay's end hash is checked against it by the replay tests.

Our end database is compared with upstream's twice:

* exact: our raw database, canonical JSON (sorted keys, the form `db_hash` hashes), against
  upstream's `model_dump(exclude_unset=True)` as canonical JSON: the fields the database
  file or a tool set (the full dump adds defaults the file never holds, such as a
  reservation's `status: null`, so it would differ on every task). Type-sensitive (`51` is
  not `51.0`); sees missing and extra keys. The initial databases are checked the same way;
* via the model: our database validated by upstream's own model (`RetailDB` / `FlightDB`)
  and dumped, against upstream's full `model_dump()` (the form τ²'s `get_db_hash` hashes):
  the state τ²'s evaluator would see if our database were loaded into τ²-bench.

For each domain it prints the tasks compared, how many are equal, whether the same gold actions
raise on both sides, and for each differing task the first differing path with both values.
The exit status is 0 only when every task is exact-equal.

Upstream's sources are not part of the project. Extract them (commit a2c0247, the one the
workload was taken from) from a clone of https://github.com/sierra-research/tau2-bench:

    mkdir -p /tmp/tau2up && git -C TAU2_CLONE archive a2c024725189473d2d7cea3a5cfdbcc67478e41f \
        src/tau2 | tar -x -C /tmp/tau2up

Then run:

    .venv/bin/python benchmarks/tau2_fidelity.py --upstream /tmp/tau2up

Only the tool classes and data models are imported. τ²'s package `__init__` (which pulls in
the agent, LLM and runner stack), `tau2.utils` (io, deepdiff, dotenv), `tau2.environment.tool`
(docstring_parser, used only to build tool schemas) and `loguru` are replaced by minimal
shims; `addict` (used only to apply a task's `initialization_data`) is stubbed. The tool
methods, `ToolKitBase`, `DB` and the domain data models run unchanged.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import contextlib
import importlib
import json
import sys
import time
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from baton.bench.tau2.data import DOMAINS, Domain, Task, load_domain  # noqa: E402
from baton.bench.tau2.oracle import gold_outcome, make_tools  # noqa: E402

# the module, not the package's `replay` function of the same name
replay_module = importlib.import_module("baton.bench.tau2.replay")

UPSTREAM_COMMIT = "a2c024725189473d2d7cea3a5cfdbcc67478e41f"
DB_MODELS = {"retail": "RetailDB", "airline": "FlightDB"}
TOOL_CLASSES = {"retail": "RetailTools", "airline": "AirlineTools"}


# ---------------------------------------------------------------------------- upstream
def _package_dir(upstream: Path) -> Path:
    """The `tau2` package folder under `upstream` (the archive's root, its `src`, or itself)."""
    for cand in (upstream / "src" / "tau2", upstream / "tau2", upstream):
        if (cand / "domains" / "retail" / "tools.py").is_file():
            return cand
    raise SystemExit(
        f"no τ²-bench sources under {upstream}: expected src/tau2/domains/retail/tools.py "
        "(see this script's docstring for the extraction command)"
    )


def _shim(name: str, path: Path | None = None, **attrs: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    if path is not None:
        module.__path__ = [str(path)]  # a package: its real submodules import from `path`
    module.__dict__.update(attrs)
    sys.modules[name] = module
    return module


def _upstream_function(path: Path, name: str, namespace: dict[str, Any]) -> Any:
    """Execute one top-level function of an upstream file (its source unchanged)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    exec(compile(ast.Module([node], []), str(path), "exec"), namespace)
    return namespace[name]


class _NoLogger:
    def __getattr__(self, _name: str) -> Any:
        return lambda *args, **kwargs: None


def _not_needed(what: str) -> Any:
    def fail(*_args: Any, **_kwargs: Any) -> Any:
        raise NotImplementedError(f"{what} is shimmed out by tau2_fidelity.py")

    return fail


def load_upstream(upstream: Path) -> dict[str, tuple[type, type]]:
    """Import upstream's tool classes and database models: domain -> (DB model, tools)."""
    pkg = _package_dir(upstream)
    if "tau2" in sys.modules:
        raise RuntimeError("a tau2 package is already imported")
    if "loguru" not in sys.modules:
        _shim("loguru", logger=_NoLogger())
    if "addict" not in sys.modules:
        # only update_pydantic_model_with_dict (a task's initialization_data) uses it
        _shim("addict", Dict=_not_needed("addict.Dict"))
    _shim("tau2", pkg)  # skips tau2/__init__.py (agents, LLMs, runner)
    _shim("tau2.domains", pkg / "domains")
    # tau2.utils: the names environment/db.py and toolkit.py import; hashing is upstream's own
    utils = _shim("tau2.utils", pkg / "utils")
    namespace: dict[str, Any] = {"hashlib": importlib.import_module("hashlib"), "json": json}
    get_dict_hash = _upstream_function(pkg / "utils" / "utils.py", "get_dict_hash", namespace)
    _shim(
        "tau2.utils.utils",
        DATA_DIR=pkg.parent.parent / "data",  # only the domains' *_DB_PATH constants use it
        get_dict_hash=get_dict_hash,
    )
    pydantic_utils = importlib.import_module("tau2.utils.pydantic_utils")  # the real file
    utils.__dict__.update(
        get_dict_hash=get_dict_hash,
        get_pydantic_hash=pydantic_utils.get_pydantic_hash,
        update_pydantic_model_with_dict=pydantic_utils.update_pydantic_model_with_dict,
        load_file=_not_needed("tau2.utils.load_file"),
        dump_file=_not_needed("tau2.utils.dump_file"),
        DATA_DIR=sys.modules["tau2.utils.utils"].DATA_DIR,
    )
    # tau2.environment.tool builds tool schemas (docstring_parser); tool calls never use it
    _shim("tau2.environment.tool", Tool=object, as_tool=_not_needed("as_tool"))
    out = {}
    for domain in DOMAINS:
        models = importlib.import_module(f"tau2.domains.{domain}.data_model")
        tools = importlib.import_module(f"tau2.domains.{domain}.tools")
        out[domain] = (getattr(models, DB_MODELS[domain]), getattr(tools, TOOL_CLASSES[domain]))
    return out


def upstream_end_state(
    db_model: type, tools_cls: type, db_text: str, task: Task
) -> tuple[Any, list[int]]:
    """Upstream's gold end database of `task` (the model) and the indexes of actions that
    raised, as its EnvironmentEvaluator replays gold actions."""
    tools = tools_cls(db_model.model_validate_json(db_text))  # as DB.load, from the text
    failed = []
    for i, action in enumerate(task.actions):
        try:
            tools.use_tool(action.name, **json.loads(json.dumps(action.arguments)))
        except Exception:  # upstream logs and skips any error
            failed.append(i)
    return tools.db, failed


# ---------------------------------------------------------------------------- ours
class _Capture:
    """Wraps replay.db_hash to keep the last end database the replay hashed."""

    def __init__(self) -> None:
        self.db: Any = None
        self.original = replay_module.db_hash

    def __call__(self, db: Any) -> str:
        self.db = db  # the replay drops this object (tools.db = {}) right after hashing
        return self.original(db)


async def our_end_states(domain: Domain, tasks: Sequence[Task]) -> dict[str, dict[str, Any]]:
    """Each task's end database as the Baton replay leaves it."""
    capture = _Capture()
    replay_module.db_hash = capture
    try:
        replayer = replay_module.Replayer(domain)
        out = {}
        for task in tasks:
            capture.db = None
            await replayer.run(task)
            if capture.db is None:
                raise RuntimeError(f"the replay of {task.id} hashed no database")
            out[task.id] = capture.db
        return out
    finally:
        replay_module.db_hash = capture.original


# ---------------------------------------------------------------------------- comparison
def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def first_difference(a: Any, b: Any, path: str = "") -> tuple[str, Any, Any] | None:
    """The first path (sorted keys, list order) where `a` and `b` differ, type-sensitively."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            if key not in a or key not in b:
                return (f"{path}/{key}", a.get(key, "<missing>"), b.get(key, "<missing>"))
            found = first_difference(a[key], b[key], f"{path}/{key}")
            if found:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            found = first_difference(x, y, f"{path}[{i}]")
            if found:
                return found
        if len(a) != len(b):
            return (f"{path} (length)", len(a), len(b))
        return None
    if type(a) is not type(b) or a != b:
        return (path or "/", a, b)
    return None


def short(value: Any, limit: int = 160) -> str:
    text = json.dumps(value, sort_keys=True) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _initial_states(domain: Domain) -> int:
    """Tasks with an `initial_state` (none in retail or airline; the replay has no support)."""
    raw = json.loads((domain.root / "tasks.json").read_text(encoding="utf-8"))
    return sum(1 for t in raw if t.get("initial_state"))


def compare_domain(
    domain: Domain, db_model: type, tools_cls: type, use_oracle: bool, limit: int | None
) -> dict[str, Any]:
    tasks = list(domain.tasks)[:limit] if limit else list(domain.tasks)
    t0 = time.perf_counter()
    if use_oracle:
        ours = {}
        tools = make_tools(domain)  # the oracle's tool set (apply_actions), keeping each db
        for task in tasks:
            db = domain.fresh_db()
            tools.db = db
            for action in task.actions:
                with contextlib.suppress(Exception):  # a failing action is skipped
                    tools.call(action.name, action.arguments)
            ours[task.id] = db
    else:
        ours = asyncio.run(our_end_states(domain, tasks))
    t_ours = time.perf_counter() - t0
    initial_raw = domain.fresh_db()
    initial_model = db_model.model_validate(domain.fresh_db())
    initial_dump = initial_model.model_dump()
    rows = []
    failures: list[tuple[str, list[int], list[int]]] = []
    exact = modelled = 0
    t0 = time.perf_counter()
    for task in tasks:
        up_db, up_failed = upstream_end_state(db_model, tools_cls, domain.db_text, task)
        up_set, up = up_db.model_dump(exclude_unset=True), up_db.model_dump()
        mine = ours[task.id]
        diff_exact = (
            None if canonical(mine) == canonical(up_set) else first_difference(mine, up_set)
        )
        try:
            mine_dump = db_model.model_validate(mine).model_dump()
            diff_model = (
                None if canonical(mine_dump) == canonical(up) else first_difference(mine_dump, up)
            )
        except Exception as exc:  # it does not fit upstream's model
            diff_model = ("<model_validate>", f"{type(exc).__name__}: {exc}"[:300], None)
        exact += diff_exact is None
        modelled += diff_model is None
        rows.append((task.id, diff_exact, diff_model, up_failed, up != initial_dump))
        if list(gold_outcome(domain, task).failed) != up_failed:
            failures.append((task.id, list(gold_outcome(domain, task).failed), up_failed))
    t_up = time.perf_counter() - t0
    return {
        "domain": domain.name,
        "tasks": len(tasks),
        "exact": exact,
        "modelled": modelled,
        "rows": rows,
        "failures": failures,
        "initial_states": _initial_states(domain),
        "initial_exact": canonical(initial_raw)
        == canonical(initial_model.model_dump(exclude_unset=True)),
        "initial_first_difference": first_difference(
            initial_raw, initial_model.model_dump(exclude_unset=True)
        ),
        "seconds_ours": t_ours,
        "seconds_upstream": t_up,
    }


def report(result: dict[str, Any], source: str) -> None:
    name, n = result["domain"], result["tasks"]
    print(f"== {name}: {n} tasks compared ({source} vs upstream {UPSTREAM_COMMIT[:7]})")
    print(
        f"   initial database: raw == upstream model_dump: {result['initial_exact']}"
        + (
            ""
            if result["initial_exact"]
            else f" (first difference {result['initial_first_difference']})"
        )
    )
    print(f"   exact-equal (canonical JSON, type-sensitive): {result['exact']}/{n}")
    print(f"   equal via upstream's model (validated + dumped): {result['modelled']}/{n}")
    if result["initial_states"]:
        print(f"   WARNING: {result['initial_states']} tasks have an initial_state, not applied")
    changed = sum(1 for r in result["rows"] if r[4])
    failed = sum(len(r[3]) for r in result["rows"])
    print(f"   upstream: {changed} tasks change the database, {failed} gold actions raise")
    print(
        f"   same gold actions raise in our oracle and upstream: {n - len(result['failures'])}/{n}"
    )
    for task_id, ours, up in result["failures"]:
        print(f"   RAISE task {task_id}: ours raise at {ours}, upstream at {up}")
    for task_id, diff_exact, diff_model, _failed, _changed in result["rows"]:
        for label, diff in (("exact", diff_exact), ("model", diff_model)):
            if diff is not None:
                path, mine, up = diff
                what = f"ours={short(mine)} upstream={short(up)}"
                print(f"   DIFF task {task_id} [{label}] {path}: {what}")
    print(
        f"   time: ours {result['seconds_ours']:.1f}s, upstream {result['seconds_upstream']:.1f}s"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--upstream", required=True, type=Path, help="extracted τ² sources")
    parser.add_argument("--data", type=Path, default=None, help="the τ² workload folder")
    parser.add_argument("--domain", choices=DOMAINS, action="append", help="default: both")
    parser.add_argument(
        "--oracle", action="store_true", help="compare the oracle (direct calls), not the replay"
    )
    parser.add_argument("--limit", type=int, default=None, help="first N tasks per domain")
    args = parser.parse_args(argv)
    models = load_upstream(args.upstream.expanduser().resolve())
    all_equal = True
    for name in args.domain or DOMAINS:
        domain = load_domain(name, args.data)
        db_model, tools_cls = models[name]
        result = compare_domain(domain, db_model, tools_cls, args.oracle, args.limit)
        report(result, "oracle" if args.oracle else "replay")
        all_equal &= result["exact"] == result["tasks"]
    return 0 if all_equal else 1


if __name__ == "__main__":
    raise SystemExit(main())
