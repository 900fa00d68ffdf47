"""The seed 000 §2.4 code-fix loop: plan → write code → run its unit tests → fix until green.

    baton run examples.code_fix_loop:graph "Write is_palindrome(text) ..."
    python -m examples.code_fix_loop            # the built-in task, with progress

A `Graph` of three nodes and one cycle:

1. **plan** (agent): a few lines on how to solve the task.
2. **write** (agent): the Python code of the solution, given the task, the plan and, after a
   failed run, the test failures.
3. **test** (function): writes the code and the task's unit tests to a scratch folder and runs
   them in a subprocess with a time limit (`python -m unittest`); a hanging solution is
   killed and reported as a failure.

A conditional edge goes from **test** back to **write** while tests fail, to END once they
pass; `max_steps` bounds the loop (the run then escalates, with the path). Every super-step is
a snapshot (`graph.history(thread_id)`), so a run can be inspected, or forked from any attempt.

The agents' brain is the embedded local model unless `BATON_MODEL` names another one; the value
`scripted` selects a deterministic policy (`fix_policy`: a first attempt with a bug, then the
fix) for tests and replays.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel

from baton import END, START, Agent, Graph, ScriptedModel
from baton.models import ModelRequest, Step
from baton.topologies.graph import CompiledGraph
from baton.topologies.reducers import append

TASK = (
    "Write a Python function is_palindrome(text: str) -> bool that says whether text reads "
    "the same backwards, ignoring case, spaces and punctuation."
)
TESTS = """\
import unittest

from solution import is_palindrome


class TestPalindrome(unittest.TestCase):
    def test_simple(self):
        self.assertTrue(is_palindrome("level"))
        self.assertFalse(is_palindrome("python"))

    def test_case_and_spaces(self):
        self.assertTrue(is_palindrome("Never odd or even"))

    def test_punctuation(self):
        self.assertTrue(is_palindrome("A man, a plan, a canal: Panama!"))

    def test_empty(self):
        self.assertTrue(is_palindrome(""))
"""
TEST_TIME_LIMIT_S = 10.0


class Fix(BaseModel):
    """The loop's state."""

    task: str = ""
    tests: str = TESTS
    plan: str = ""
    code: str = ""
    passed: bool = False
    attempts: int = 0
    failures: Annotated[list[str], append] = []
    """The test output of every failed attempt, oldest first."""


def _write_input(state: Fix) -> str:
    """What the writer sees: the task, the plan, what the tests check, the last failure."""
    checks = [line.strip() for line in state.tests.splitlines() if "assert" in line]
    parts = [
        f"Task: {state.task}",
        f"Plan:\n{state.plan}",
        "The tests (already written; do not write tests) check:\n" + "\n".join(checks),
    ]
    if state.failures:
        parts.append(
            f"Your previous solution.py:\n{state.code}\n\nThe tests failed:\n"
            f"{state.failures[-1]}\nFix the function."
        )
    parts.append("Answer with solution.py only: the function, in one ```python block.")
    return "\n\n".join(parts)


def _code_of(text: str) -> str:
    """The solution in a model's answer: its ``` block defining a function that is not a
    test (or the whole answer when it wrote no block)."""
    blocks = re.findall(r"```(?:python|py)?\s*\n(.*?)```", text, flags=re.S) or [text]
    good = [b for b in blocks if "def " in b and "unittest" not in b] or blocks
    return max(good, key=len).strip() + "\n"


async def run_tests(state: Fix) -> dict[str, Any]:
    """Run the unit tests against the code, in a subprocess, within the time limit."""
    with tempfile.TemporaryDirectory(prefix="baton-fix-") as folder:
        Path(folder, "solution.py").write_text(_code_of(state.code), encoding="utf-8")
        Path(folder, "test_solution.py").write_text(state.tests, encoding="utf-8")
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "unittest",
            "-q",
            "test_solution",
            cwd=folder,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        )
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), TEST_TIME_LIMIT_S)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            report = f"the tests did not finish within {TEST_TIME_LIMIT_S:g}s (an endless loop?)"
            return {"passed": False, "attempts": state.attempts + 1, "failures": [report]}
    text = out.decode("utf-8", "replace")
    if proc.returncode == 0:
        return {"passed": True, "attempts": state.attempts + 1}
    return {"passed": False, "attempts": state.attempts + 1, "failures": [text[-1500:]]}


def build_code_fix_loop(
    model: Any = "local", *, max_steps: int = 10, store: Any = None
) -> CompiledGraph:
    """The plan → write → test loop (at most `max_steps` super-steps per run)."""
    planner = Agent(
        name="plan",
        instructions=(
            "You plan Python solutions. Given a task and its unit tests, write a plan of at "
            "most four short lines. No code."
        ),
    )
    writer = Agent(
        name="write",
        instructions=(
            "You write Python code. Answer with the complete content of solution.py in one "
            "```python block: the function the task asks for, no tests, no explanations."
        ),
    )
    g = Graph(Fix, name="code_fix")
    g.add_node(
        "plan",
        planner,
        output_key="plan",
        input=lambda s: f"Task: {s.task}\n\nUnit tests:\n{s.tests}",
    )
    g.add_node("write", writer, output_key="code", input=_write_input)
    g.add_node("test", run_tests)
    g.add_edge(START, "plan").add_edge("plan", "write").add_edge("write", "test")
    g.add_conditional_edges(
        "test", lambda s: "green" if s.passed else "red", {"green": END, "red": "write"}
    )
    return g.compile(model=model, max_steps=max_steps, input_key="task", store=store)


BUGGY = """```python
def is_palindrome(text: str) -> bool:
    return text == text[::-1]
```"""
FIXED = """```python
def is_palindrome(text: str) -> bool:
    kept = [c.lower() for c in text if c.isalnum()]
    return kept == kept[::-1]
```"""


def fix_policy(request: ModelRequest) -> Step:
    """A deterministic writer for tests: a first attempt that ignores case and punctuation,
    then the fix once it has seen the failures."""
    if request.agent == "plan":
        return ScriptedModel.say("1. keep letters and digits\n2. lower-case\n3. compare reversed")
    seen = request.messages[-1].content or ""
    return ScriptedModel.say(FIXED if "The tests failed" in seen else BUGGY)


def _model() -> Any:
    choice = os.environ.get("BATON_MODEL") or "local"
    return ScriptedModel(fix_policy) if choice == "scripted" else choice


graph = build_code_fix_loop(_model())
"""The loop on `BATON_MODEL` (default: the embedded model)."""


async def main() -> None:
    from rich.console import Console

    console = Console()
    result = await graph.invoke({"task": TASK}, thread_id="code-fix-demo")
    for snap in reversed(await graph.history("code-fix-demo")):
        state = snap.values
        console.print(
            f"step {snap.step}: next {', '.join(snap.next) or 'END'}"
            f" — attempts {state.attempts}, passed {state.passed}"
        )
    latest = await graph.get_state("code-fix-demo")
    last = latest.values if latest is not None else Fix()
    console.print(f"[bold]{result.status}[/bold] after {last.attempts} test run(s)")
    if result.error:
        console.print(f"[red]{result.error}[/red]")
    console.print(_code_of(last.code), markup=False, highlight=False)


if __name__ == "__main__":
    asyncio.run(main())
