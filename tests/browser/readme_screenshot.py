"""Take the README's dashboard screenshot (docs/images/dashboard.png) of a desk session.

    .venv/bin/python tests/browser/readme_screenshot.py [OUT.png]

Runs the browser tests' scripted desk (see `browser_kit`): an urgent invoice question (the
slot-provenance guard trips on triage's hand-off), a refund approved by a finance approver,
then an escalation to the human queue; and photographs that session's page in Debian's
headless Chromium.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from browser_kit import OPERATOR, Desk, DeskServer

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"


def main(out: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    server = DeskServer(Desk()).start()
    try:
        sid = "s_desk_1024"
        server.post(
            "/runs",
            {
                "message": "please check the invoice for ORD-202607-99, it is urgent",
                "session_id": sid,
            },
        )
        paused = server.post(
            "/runs", {"message": "I need a refund of 299 CNY for ORD-202607-99", "session_id": sid}
        )
        server.post(
            f"/approvals/{paused['approval']['id']}/approve", {"session_id": sid, "role": "finance"}
        )
        server.post(
            "/runs",
            {
                "message": "the invoice for ORD-202608-17 looks wrong, I want to talk to a person",
                "session_id": sid,
            },
        )
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=CHROMIUM, headless=True, args=["--no-sandbox"]
            )
            context = browser.new_context(
                viewport={"width": 1400, "height": 900}, device_scale_factor=1
            )
            context.add_init_script(f"localStorage.setItem('baton.token', '{OPERATOR}')")
            page = context.new_page()
            page.goto(f"{server.url}/#/sessions/{sid}")
            expect(page.get_by_test_id("graph-edge")).to_have_count(2)
            expect(page.get_by_test_id("timeline-run")).to_have_count(3)
            time.sleep(0.5)  # let the live-event list fill
            out.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(out))
            browser.close()
    finally:
        server.stop()
    print(out)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "images" / "dashboard.png")
