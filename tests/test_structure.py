"""The import and construction rules docs/architecture.md states, checked on the source."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "baton"
KERNEL_SIDE = {"runner.py", "resume.py", "__init__.py"}
"""Runtime modules that are the kernel itself (every other runtime module is a step)."""


def imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_no_step_module_imports_the_runner() -> None:
    steps = [p for p in (SRC / "runtime").glob("*.py") if p.name not in KERNEL_SIDE]
    steps += list((SRC / "topologies").glob("*.py"))
    offenders = [
        p.name for p in steps if p.name != "team.py" and "baton.runtime.runner" in imports(p)
    ]
    assert steps and offenders == []


def test_the_bus_imports_nothing_of_the_topologies() -> None:
    bus = list((SRC / "bus").glob("*.py"))
    offenders = {
        p.name: sorted(m for m in imports(p) if m.startswith("baton.topologies")) for p in bus
    }
    assert bus and {name: found for name, found in offenders.items() if found} == {}


def test_no_topology_assigns_into_a_runner() -> None:
    patched = []
    topologies = list((SRC / "topologies").glob("*.py"))
    assert len(topologies) > 5
    for path in topologies:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = node.targets if isinstance(node, ast.Assign) else []
            for target in targets:
                if (
                    isinstance(target, ast.Subscript)
                    and isinstance(target.value, ast.Attribute)
                    and target.value.attr in ("plans", "handlers", "parallel", "kinds")
                ):
                    patched.append(f"{path.name}:{node.lineno}")
    assert patched == []


def test_no_library_code_swaps_a_teams_store() -> None:
    """Entry points make their own binding (`team.bind`); `use_store` is kept for users only."""
    calls = []
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "use_store"
            ):
                calls.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert calls == []
