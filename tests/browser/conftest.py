"""Fixtures of the dashboard's browser tests: the desk's server, headless Chromium and a page
per test whose screenshot is saved as a test artifact.

The tests drive Debian's `chromium` (`/usr/bin/chromium`, or `BATON_CHROMIUM`) through
Playwright's Python API: Playwright never downloads a browser here. `make test` installs the
package with `scripts/install_browser.sh` when it is missing. Without Chromium (or without
Playwright or the server's dependencies) the tests skip, or fail under
`BATON_REQUIRE_SERVICES=1`, as the other service-backed tests do.

Screenshots go to `$BATON_ARTIFACTS/browser/` when `BATON_ARTIFACTS` is set, else to pytest's
temporary directory; their paths are listed at the end of the test run.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("BATON_CHROMIUM", "/usr/bin/chromium")

SCREENSHOTS: list[Path] = []


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "browser: drives the web dashboard in headless Chromium (Debian's package)"
    )


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if SCREENSHOTS:
        terminalreporter.write_sep("-", "dashboard screenshots")
        for path in SCREENSHOTS:
            terminalreporter.write_line(str(path))


def _missing(reason: str) -> None:
    if os.environ.get("BATON_REQUIRE_SERVICES") == "1":
        pytest.fail(f"BATON_REQUIRE_SERVICES=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def chromium() -> str:
    """The Chromium executable, or a skip (a failure under BATON_REQUIRE_SERVICES=1)."""
    if not os.access(CHROMIUM, os.X_OK):
        _missing(
            f"{CHROMIUM} is missing: install Debian's chromium and chromium-driver "
            "(scripts/install_browser.sh; `make test` runs it)"
        )
    for module, extra in (("playwright", "dev"), ("fastapi", "server"), ("uvicorn", "server")):
        if importlib.util.find_spec(module) is None:
            _missing(f"the Python package {module} is missing: pip install -e '.[{extra}]'")
    from playwright.sync_api import expect

    expect.set_options(timeout=10_000)  # a shared 2-core runner is slower than a laptop
    return CHROMIUM


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where screenshots go."""
    root = os.environ.get("BATON_ARTIFACTS")
    if root:
        path = Path(root) / "browser"
        path.mkdir(parents=True, exist_ok=True)
        return path
    return tmp_path_factory.mktemp("browser-artifacts", numbered=False)


@pytest.fixture(scope="module")
def desk_server(chromium: str) -> Iterator[Any]:
    """The desk's API server and dashboard, on a free loopback port."""
    from browser_kit import Desk, DeskServer

    server = DeskServer(Desk()).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def browser(chromium: str) -> Iterator[Any]:
    """Headless Chromium, driven by Playwright (no browser download)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        # --no-sandbox: containers and CI runners often run as root, where Chromium's sandbox
        # refuses to start
        browser = pw.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(
    browser: Any, desk_server: Any, artifacts: Path, request: pytest.FixtureRequest
) -> Iterator[Any]:
    """A fresh browser context and page; its screenshot is saved when the test ends."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(10_000)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        yield page
        assert not errors, f"the dashboard raised in the browser: {errors}"
    finally:
        shot = artifacts / f"{request.node.name}.png"
        try:
            page.screenshot(path=str(shot), full_page=True)
            SCREENSHOTS.append(shot)
        except Exception as exc:  # a crashed page still lets the test report its own failure
            print(f"no screenshot of {request.node.name}: {exc}")
        context.close()
