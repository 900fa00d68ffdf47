"""The documentation site: `mkdocs build --strict` passes (a broken link, a missing page or
anchor, an unresolved API reference or a page left out of the navigation fails it), the API
reference covers `baton.__all__`, and every code block in docs/ is run by a test or says why not.

The rule for a fenced code block (``` or ~~~) in docs/**/*.md:

- A `python` block is executed when its page is one whose python blocks `tests/test_docs.py`
  runs (the pages of `test_python_blocks_run`), or one this file runs (`EXECUTED_HERE`, in
  `test_python_blocks_of_the_new_pages_run`). Such a block carries no marker.
- A block right after a line `<!-- tutorial-step: N -->` is step N of the tutorial: a `bash`
  block, in docs/tutorial/, whose commands the tutorial's test runs from the built wheel
  (`tutorial_steps()` reads them). The steps are numbered 1, 2, ... once each, in page order.
- Every other block needs the line right before its opening fence to be
  `<!-- not-run: REASON -->` with a reason: shell commands that need a service or a clone,
  configuration files, request and response shapes, output, diagrams, a python fragment. No
  language is exempt, `text` and unlabelled blocks included, so nothing that is code hides in
  an output block; their reason says "output, not code" or "diagram, not code".

A block that a test executes must not carry a not-run marker (it would say something false).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

EXECUTED_HERE = [
    "docs/concepts/baton.md",
    "docs/concepts/handoffs.md",
    "docs/concepts/payload.md",
    "docs/concepts/guards.md",
    "docs/concepts/routing.md",
    "docs/concepts/context-policies.md",
    "docs/concepts/checkpoints.md",
    "docs/concepts/bindings.md",
]
"""Pages whose python blocks this file executes (the pages of tests/test_docs.py are run
there)."""

TUTORIAL_STEPS = 5
"""The tutorial's steps: scripted desk, embedded model, OpenAI-compatible server, approvals,
dashboard."""

FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
NOT_RUN = re.compile(r"^\s*<!--\s*not-run:(?P<reason>.*?)-->\s*$")
STEP = re.compile(r"^\s*<!--\s*tutorial-step:\s*(?P<n>\d+)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page."""

    page: str
    line: int
    lang: str
    marker: str
    code: str

    @property
    def where(self) -> str:
        """`page:line` of the opening fence."""
        return f"{self.page}:{self.line}"


def blocks_of(path: Path) -> list[Block]:
    """The fenced code blocks of a Markdown page, with the line before each (its marker)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    page = path.relative_to(ROOT).as_posix()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        fence = opening["fence"]
        closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        end = next((j for j in range(i + 1, len(lines)) if closing.match(lines[j])), len(lines))
        info = opening["info"].strip()
        found.append(
            Block(
                page=page,
                line=i + 1,
                lang=info.split()[0].lstrip(".{").rstrip("}") if info else "",
                marker=lines[i - 1] if i else "",
                code="\n".join(lines[i + 1 : end]),
            )
        )
        i = end + 1
    return found


def all_blocks() -> list[Block]:
    """Every fenced block of every page under docs/."""
    return [b for path in sorted(DOCS.rglob("*.md")) for b in blocks_of(path)]


def pages_run_by_test_docs() -> set[str]:
    """The pages whose python blocks tests/test_docs.py executes (its parametrised list)."""
    from tests import test_docs

    marks = [
        m
        for m in getattr(test_docs.test_python_blocks_run, "pytestmark", [])
        if m.name == "parametrize"
    ]
    assert len(marks) == 1, "tests/test_docs.py: test_python_blocks_run lost its page list"
    return set(marks[0].args[1])


def tutorial_steps() -> list[tuple[int, str]]:
    """The tutorial's steps in order: (N, the bash commands of `<!-- tutorial-step: N -->`).

    For the test that runs them from the built wheel."""
    steps = [
        (int(m["n"]), b.code)
        for path in sorted((DOCS / "tutorial").glob("*.md"))
        for b in blocks_of(path)
        if (m := STEP.match(b.marker))
    ]
    return sorted(steps)


def _verdict(block: Block, executed_pages: set[str]) -> str | None:
    """None when the block obeys the rule (module docstring), else what is wrong."""
    executed = block.lang == "python" and block.page in executed_pages
    not_run = NOT_RUN.match(block.marker)
    step = STEP.match(block.marker)
    if executed:
        if not_run or step:
            return "a test executes this python block, yet it is marked as not run"
        return None
    if step:
        if block.lang != "bash" or not block.page.startswith("docs/tutorial/"):
            return "a tutorial step must be a bash block in docs/tutorial/"
        return None
    if not_run is None:
        return f"a {block.lang or 'plain'} block that no test runs needs <!-- not-run: REASON -->"
    reason = not_run["reason"].strip()
    if not reason:
        return "the not-run marker gives no reason"
    if "--" in reason:
        return "the reason contains '--', which an HTML comment may not contain"
    return None


def test_every_code_block_is_run_by_a_test_or_says_why_not() -> None:
    executed = pages_run_by_test_docs() | set(EXECUTED_HERE)
    blocks = all_blocks()
    assert len(blocks) > 100, "the docs lost their code blocks, or the parser its fences"
    wrong = [f"{b.where}: {why}" for b in blocks if (why := _verdict(b, executed))]
    assert not wrong, "code blocks that break the rule of tests/test_docs_site.py:\n" + "\n".join(
        wrong
    )


def test_the_rule_sees_what_it_must() -> None:
    """The checker itself: a marker counts only on the line right before the fence."""
    assert (
        _verdict(Block("docs/x.md", 3, "text", "<!-- not-run: output, not code -->", ""), set())
        is None
    )
    assert _verdict(Block("docs/x.md", 3, "bash", "", "ls"), set()) is not None
    assert _verdict(Block("docs/x.md", 3, "bash", "<!-- not-run:   -->", "ls"), set()) is not None
    assert _verdict(Block("docs/x.md", 3, "python", "", "1"), {"docs/x.md"}) is None
    assert _verdict(Block("docs/x.md", 3, "python", "", "1"), set()) is not None
    assert _verdict(Block("docs/x.md", 3, "bash", "<!-- tutorial-step: 1 -->", "ls"), set())
    assert (
        _verdict(Block("docs/tutorial/a.md", 3, "bash", "<!-- tutorial-step: 1 -->", "ls"), set())
        is None
    )


def test_the_tutorial_steps_are_numbered_once_each_and_in_order() -> None:
    steps = tutorial_steps()
    assert [n for n, _ in steps] == list(range(1, TUTORIAL_STEPS + 1)), steps
    pages = sorted((DOCS / "tutorial").glob("[0-9]*.md"))
    in_page_order = [
        int(m["n"]) for p in pages for b in blocks_of(p) if (m := STEP.match(b.marker))
    ]
    assert in_page_order == list(range(1, TUTORIAL_STEPS + 1))
    assert all(code.strip() for _, code in steps)


@pytest.mark.parametrize("doc", EXECUTED_HERE)
def test_python_blocks_of_the_new_pages_run(
    doc: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # examples may create files such as ops.db
    blocks = [b for b in blocks_of(ROOT / doc) if b.lang == "python"]
    assert blocks, f"{doc} has no python examples"
    namespace: dict[str, object] = {"__name__": f"doc_{Path(doc).stem.replace('-', '_')}"}
    for b in blocks:
        try:
            exec(compile(b.code, b.where, "exec", dont_inherit=True), namespace)
        except Exception as exc:  # pragma: no cover - the message is the point
            pytest.fail(f"{b.where} failed: {type(exc).__name__}: {exc}\n{b.code}")


def _require_mkdocs() -> None:
    """Skip when the docs tools are not installed, or fail under BATON_REQUIRE_SERVICES=1."""
    tools = {
        "mkdocs": "mkdocs",
        "mkdocs-material": "material",
        "mkdocstrings-python": "mkdocstrings_handlers",
    }
    missing = [name for name, module in tools.items() if importlib.util.find_spec(module) is None]
    if not missing:
        return
    reason = (
        f"the documentation tools are not installed ({', '.join(missing)}); "
        "install them with `pip install -e '.[docs]'`"
    )
    if os.environ.get("BATON_REQUIRE_SERVICES") == "1":
        pytest.fail(f"BATON_REQUIRE_SERVICES=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built once with `mkdocs build --strict`."""
    _require_mkdocs()
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # material's notice, not a warning of ours
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    return out


def test_the_site_builds_strict_with_every_section(site: Path) -> None:
    for page in [
        "index.html",
        "tutorial/index.html",
        "tutorial/5-dashboard/index.html",
        "concepts/bindings/index.html",
        "supervisor/index.html",
        "reference/baton/index.html",
        "reference/cli/index.html",
        "benchmarks/index.html",
        "security/index.html",
    ]:
        assert (site / page).is_file(), page
    assert not (site / "hooks").exists(), "the build hook was published as a page"
    cli = (site / "reference/cli/index.html").read_text(encoding="utf-8")
    for command in ("baton run", "baton serve", "baton approvals approve", "baton demo"):
        assert f"<code>{command}" in cli, command


def test_the_api_reference_documents_every_public_name(site: Path) -> None:
    import baton

    ids: set[str] = set()
    for page in (site / "reference").rglob("*.html"):
        ids |= set(re.findall(r'id="(baton\.[\w.]+)"', page.read_text(encoding="utf-8")))
    names = [n for n in baton.__all__ if not n.startswith("_")]
    missing = [n for n in names if f"baton.{n}" not in ids and f"baton.backends.{n}" not in ids]
    assert not missing, f"baton.__all__ names the API reference does not document: {missing}"
    for module in ("replay", "evals", "routing"):
        exported = importlib.import_module(f"baton.{module}").__all__
        gone = [  # a name shadowed by a submodule of its own (evals.compare) is rendered from it
            n
            for n in exported
            if f"baton.{module}.{n}" not in ids and f"baton.{module}.{n}.{n}" not in ids
        ]
        assert not gone, f"baton.{module}: not in the reference: {gone}"
