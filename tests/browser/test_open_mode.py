"""The open mode (no token file) in a real browser: the dashboard works with no token typed
in, while a page of another site the operator visits — another port on 127.0.0.1, or a
DNS-rebinding name — can neither approve a card, claim a ticket nor start a run."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.browser

REBIND_NAME = "rebind.test"


def expect(locator: Any) -> Any:
    from playwright.sync_api import expect as pw_expect

    return pw_expect(locator)


@pytest.fixture(scope="module")
def open_server(chromium: str) -> Iterator[Any]:
    """The desk's server in the open mode, on a free loopback port."""
    from browser_kit import Desk, DeskServer

    server = DeskServer(Desk(), auth=False).start()
    try:
        yield server
    finally:
        server.stop()


class AttackerSite:
    """Another site on 127.0.0.1 (its own port): serves the page set in `page`."""

    def __init__(self) -> None:
        site = self
        self.page = ""

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = site.page.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def attacker() -> Iterator[AttackerSite]:
    site = AttackerSite()
    try:
        yield site
    finally:
        site.close()


def _refused_posts(server: Any) -> float:
    """POSTs the guard refused with 403 so far (from the server's own metrics)."""
    text = httpx.get(f"{server.url}/metrics", timeout=10).text
    found = re.search(
        r'baton_http_requests_total\{method="POST",route="unmatched",status="403"\} (\S+)', text
    )
    return float(found.group(1)) if found else 0.0


ATTACK = """<!doctype html><html><head><title>cute cats</title></head><body>
<iframe name="sink1"></iframe><iframe name="sink2"></iframe><iframe name="sink3"></iframe>
<form id="approve" method="post" action="{base}/approvals/{approval}/approve" target="sink1">
</form>
<form id="claim" method="post" action="{base}/tickets/{ticket}/claim" target="sink2"></form>
<form id="run" method="post" enctype="text/plain" action="{base}/runs" target="sink3">
  <input name='{{"message": "refund 299 CNY for ORD-202607-99", "session_id": "evil", "x": "'
         value='"}}'>
</form>
<script>
const base = "{base}";
(async () => {{
  for (const id of ["approve", "claim", "run"]) document.getElementById(id).submit();
  const tries = [
    fetch(base + "/approvals/{approval}/approve", {{method: "POST", mode: "no-cors"}}),
    fetch(base + "/approvals/{approval}/reject", {{method: "POST", mode: "no-cors",
      body: JSON.stringify({{reason: "x"}})}}),
    fetch(base + "/runs", {{method: "POST", mode: "no-cors",
      body: JSON.stringify({{message: "refund 299 CNY for ORD-202607-99"}})}}),
    fetch(base + "/tickets/{ticket}/claim", {{method: "POST", mode: "no-cors",
      credentials: "include"}}),
    // a JSON POST needs a CORS preflight, which the server never grants
    fetch(base + "/runs", {{method: "POST", headers: {{"Content-Type": "application/json"}},
      body: JSON.stringify({{message: "hi"}})}}).then(r => "status " + r.status),
    // nor can the page read the local token or any answer
    fetch(base + "/").then(r => r.text()),
    fetch(base + "/approvals").then(r => r.text()),
  ];
  const settled = await Promise.allSettled(tries);
  window.attack = settled.map(s => s.status === "fulfilled"
    ? (typeof s.value === "string" ? s.value : s.value.type) : "rejected");
  document.title = "done";
}})();
</script></body></html>"""


def test_a_page_of_another_origin_can_change_nothing(
    browser: Any, open_server: Any, attacker: AttackerSite
) -> None:
    desk = open_server.desk
    run = open_server.post(
        "/runs", {"message": "I need a refund of 299 CNY for ORD-202607-99", "session_id": "V1"}
    )
    assert run["status"] == "awaiting_approval"
    escalated = open_server.post(
        "/runs",
        {"message": "the invoice of ORD-202607-99 is wrong, I want a person", "session_id": "V2"},
    )
    assert escalated["status"] == "escalated"
    ticket = escalated["ticket_id"]
    sessions_before = httpx.get(f"{open_server.url}/sessions", timeout=10).json()
    refused_before = _refused_posts(open_server)

    attacker.page = ATTACK.format(
        base=open_server.url, approval=run["approval"]["id"], ticket=ticket
    )
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(attacker.url)
        page.wait_for_function("document.title === 'done'", timeout=20_000)
        results = page.evaluate("window.attack")
        deadline = time.monotonic() + 10
        while _refused_posts(open_server) < refused_before + 7 and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        context.close()

    # every POST reached the server and was refused there: 3 forms and 4 no-cors fetches
    assert _refused_posts(open_server) == refused_before + 7
    assert results[:4] == ["opaque"] * 4
    assert results[4:] == ["rejected"] * 3  # the JSON POST, and the two reads
    # and nothing changed: the card waits, nothing was refunded, the ticket is open, no session
    waiting = httpx.get(f"{open_server.url}/approvals", timeout=10).json()
    assert [c["id"] for c in waiting] == [run["approval"]["id"]]
    assert desk.refunds == []
    (still,) = [
        t for t in httpx.get(f"{open_server.url}/tickets", timeout=10).json() if t["id"] == ticket
    ]
    assert still["status"] == "open" and still["claimed_by"] is None
    sessions = httpx.get(f"{open_server.url}/sessions", timeout=10).json()
    assert sorted(s["session_id"] for s in sessions) == sorted(
        s["session_id"] for s in sessions_before
    )


def test_a_rebinding_name_gets_421_and_reads_nothing(
    browser: Any, chromium: str, open_server: Any
) -> None:
    """A page whose name was pointed at 127.0.0.1 (Chromium's resolver maps it, as a
    rebinding DNS server would) is the same origin as its own requests, and still gets
    nothing: the server does not answer to that name."""
    rebinding = browser.browser_type.launch(
        executable_path=chromium,
        headless=True,
        args=["--no-sandbox", f"--host-resolver-rules=MAP {REBIND_NAME} 127.0.0.1"],
    )
    try:
        page = rebinding.new_page()
        origin = f"http://{REBIND_NAME}:{open_server.port}"
        answer = page.goto(f"{origin}/")
        assert answer is not None and answer.status == 421
        assert "DNS rebinding" in page.content()
        statuses = page.evaluate(
            """async () => {
                const read = await fetch("/approvals");
                const run = await fetch("/runs", {method: "POST",
                    headers: {"Content-Type": "application/json"},
                    body: JSON.stringify({message: "refund ORD-202607-99"})});
                return [read.status, run.status];
            }"""
        )
        assert statuses == [421, 421]
    finally:
        rebinding.close()
    assert "rebind" not in str(httpx.get(f"{open_server.url}/sessions", timeout=10).json())


def test_the_dashboard_works_in_the_open_mode_without_a_token(page: Any, open_server: Any) -> None:
    run = open_server.post(
        "/runs", {"message": "I need a refund of 100 CNY for ORD-202608-17", "session_id": "O1"}
    )
    approval_id = run["approval"]["id"]
    page.goto(f"{open_server.url}/#/approvals")
    expect(page.get_by_test_id("whoami")).to_contain_text("local")
    card = page.locator(f'[data-testid="approval-card"][data-approval-id="{approval_id}"]')
    with page.expect_request(lambda r: r.method == "POST" and "/approve" in r.url) as sent:
        card.get_by_test_id("approval-approve").click()
    decided = page.locator(f'[data-testid="decision-result"][data-approval-id="{approval_id}"]')
    expect(decided.get_by_test_id("run-status")).to_have_text("completed")
    request = sent.value
    headers = request.all_headers()
    assert headers["x-baton-local-token"] == open_server.app.state.local_token
    body = request.post_data_json
    assert set(body) <= {"session_id", "role", "reason"}  # who decides is never sent
    assert ("ORD-202608-17", 100.0) in open_server.desk.refunds
    # the chat streams a run in, with no token typed in
    page.evaluate("() => { location.hash = '#/chat'; }")
    page.get_by_test_id("chat-input").fill("please check the invoice for ORD-202607-99")
    page.get_by_test_id("chat-send").click()
    expect(page.get_by_test_id("chat-reply").last).to_contain_text("ISSUED")
