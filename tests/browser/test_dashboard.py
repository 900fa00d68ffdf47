"""The web dashboard in headless Chromium, against the API server of a scripted desk:
the hand-off graph of a session, an approval decided in the UI, a ticket answered in the UI
and the user's session going on, and a chat whose reply streams in."""

from __future__ import annotations

import re
from typing import Any

import pytest
from browser_kit import OPERATOR, VIEWER

pytestmark = pytest.mark.browser


def expect(locator: Any) -> Any:
    from playwright.sync_api import expect as pw_expect

    return pw_expect(locator)


def sign_in(page: Any, token: str, name: str) -> None:
    """Enter a token in the header's token field, as a person would."""
    page.get_by_test_id("token-input").fill(token)
    page.get_by_test_id("token-save").click()
    expect(page.get_by_test_id("whoami")).to_contain_text(name)


def open_page(page: Any, server: Any, route: str, token: str = OPERATOR) -> None:
    """Open the dashboard at `route` (a hash route) signed in with `token`."""
    page.goto(f"{server.url}/#/")
    sign_in(page, token, "otto" if token == OPERATOR else "vera")
    page.evaluate("route => { location.hash = route; }", route)


def test_session_page_draws_the_handoff_from_triage_to_billing(page: Any, desk_server: Any) -> None:
    run = desk_server.post(
        "/runs",
        {
            "message": "please check the invoice for ORD-202607-99, it is urgent",
            "session_id": "S-graph",
        },
    )
    assert run["status"] == "completed" and run["path"] == ["triage", "billing"]

    page.goto(f"{desk_server.url}/#/sessions/S-graph")
    banner = page.get_by_test_id("auth-banner")
    expect(banner).to_be_visible()  # no token yet: the API answers 401
    expect(banner).to_contain_text("401")
    sign_in(page, OPERATOR, "otto")
    expect(banner).to_be_hidden()

    edge = page.locator('[data-testid="graph-edge"][data-from="triage"][data-to="billing"]')
    expect(edge).to_have_count(1)
    expect(edge).to_have_attribute("data-kind", "handoff")
    expect(edge.get_by_test_id("graph-edge-label")).to_have_text("invoice or refund question")
    nodes = page.get_by_test_id("graph-node")
    expect(nodes).to_have_count(2)
    assert nodes.evaluate_all("els => els.map(e => e.dataset.agent)") == ["triage", "billing"]
    # triage passed on a customer tier nobody stated: the slot-provenance guard tripped
    triage = page.locator('[data-testid="graph-node"][data-agent="triage"]')
    expect(triage).to_have_attribute("data-tripped", "true")
    expect(triage.get_by_test_id("graph-guard")).to_contain_text("unverified_slot")
    expect(page.locator('[data-testid="graph-node"][data-agent="billing"]')).to_have_attribute(
        "data-tripped", "false"
    )

    # the timeline: model, tool and hand-off steps with tokens and latency
    steps = page.get_by_test_id("timeline-step")
    kinds = steps.evaluate_all("els => els.map(e => e.dataset.kind)")
    assert {"model_call", "tool_call", "handoff", "guard"} <= set(kinds)
    model_call = page.locator('[data-testid="timeline-step"][data-kind="model_call"]').first
    expect(model_call.get_by_test_id("step-tokens")).to_have_text(re.compile(r"^\d+ / \d+$"))
    expect(model_call.get_by_test_id("step-latency")).to_contain_text("ms")
    # the state slot and where it came from
    slot = page.locator('[data-testid="state-slot"][data-slot="order_id"]')
    expect(slot.get_by_test_id("slot-value")).to_have_text("ORD-202607-99")
    expect(slot.get_by_test_id("slot-cause")).to_contain_text(
        "hand-off triage → billing: invoice or refund question"
    )
    expect(page.get_by_test_id("session-status")).to_have_text("idle")

    # a new run of the session shows up live, without reloading the page
    finished = page.locator('[data-testid="live-event"][data-type="run_finished"]')
    expect(finished).to_have_count(1)
    desk_server.post("/runs", {"message": "and ORD-202608-17?", "session_id": "S-graph"})
    expect(finished).to_have_count(2)
    expect(page.get_by_test_id("timeline-run")).to_have_count(2)


def test_approving_a_refund_in_the_queue_completes_the_run(page: Any, desk_server: Any) -> None:
    run = desk_server.post(
        "/runs",
        {"message": "I need a refund of 299 CNY for ORD-202607-99", "session_id": "S-approve"},
    )
    assert run["status"] == "awaiting_approval"
    approval_id = run["approval"]["id"]
    assert desk_server.desk.refunds == []

    open_page(page, desk_server, "#/approvals", token=VIEWER)
    card = page.locator(f'[data-testid="approval-card"][data-approval-id="{approval_id}"]')
    expect(card.get_by_test_id("approval-what")).to_have_text("tool issue_refund")
    expect(card.get_by_test_id("approval-arguments")).to_contain_text("ORD-202607-99")
    expect(card.get_by_test_id("approval-roles")).to_contain_text("finance")
    expect(card.get_by_test_id("approval-approve")).to_be_disabled()  # a viewer cannot decide

    sign_in(page, OPERATOR, "otto")  # an operator who is a finance approver
    expect(card.get_by_test_id("approval-role")).to_have_value("finance")
    card.get_by_test_id("approval-approve").click()

    decided = page.locator(f'[data-testid="decision-result"][data-approval-id="{approval_id}"]')
    expect(decided.get_by_test_id("run-status")).to_have_text("completed")
    expect(decided.get_by_test_id("run-output")).to_contain_text(
        "The refund of 299.0 CNY for ORD-202607-99 has been issued"
    )
    expect(card).to_have_count(0)  # gone from the queue
    assert desk_server.desk.refunds == [("ORD-202607-99", 299.0)]  # the tool ran, once

    page.evaluate("() => { location.hash = '#/sessions/S-approve'; }")
    expect(page.get_by_test_id("session-status")).to_have_text("idle")
    refund = page.locator('[data-testid="timeline-step"][data-kind="tool_call"]')
    expect(refund).to_contain_text("issue_refund ok")


def test_answering_a_ticket_continues_the_users_session(page: Any, desk_server: Any) -> None:
    run = desk_server.post(
        "/runs",
        {
            "message": "my invoice for ORD-202608-17 is wrong, I want to talk to a person",
            "session_id": "S-ticket",
        },
    )
    assert run["status"] == "escalated" and run["ticket_id"] is not None

    open_page(page, desk_server, "#/tickets")
    card = page.locator('[data-testid="ticket-card"][data-session-id="S-ticket"]')
    # the hand-over reads as a summary, not as raw chat
    expect(card.get_by_test_id("ticket-reasons")).to_contain_text("asks for a person")
    expect(card.get_by_test_id("ticket-user-message")).to_have_text(
        "my invoice for ORD-202608-17 is wrong, I want to talk to a person"
    )
    expect(card.get_by_test_id("ticket-state")).to_contain_text("ORD-202608-17")
    expect(card.get_by_test_id("path")).to_contain_text("triage → billing")

    card.get_by_test_id("ticket-claim").click()
    expect(card).to_have_attribute("data-status", "claimed")
    expect(card.get_by_test_id("ticket-claimed-by")).to_contain_text("otto")

    reply = "您好，我们已核对发票 ORD-202608-17：金额无误，开票后会邮件通知您。"
    card.get_by_test_id("ticket-reply").fill(reply)
    card.get_by_test_id("ticket-handback").select_option("billing")
    card.get_by_test_id("ticket-answer").click()
    done = page.locator('[data-testid="ticket-log-entry"][data-step="answered"]')
    expect(done).to_contain_text("billing holds the baton")
    expect(card).to_have_count(0)  # answered: out of the open queue

    done.get_by_role("link", name="open the conversation").click()
    expect(page.get_by_test_id("session-id")).to_have_text("S-ticket")
    person = page.locator('[data-testid="message"][data-agent="human"]')
    expect(person.get_by_test_id("message-content")).to_have_text(reply)
    expect(page.get_by_test_id("session-holder")).to_have_text("billing")

    # the user's next message goes on with billing, in the same session
    page.get_by_test_id("chat-input").fill("Thanks! Please check ORD-202608-17 once more.")
    page.get_by_test_id("chat-send").click()
    expect(page.get_by_test_id("chat-result").get_by_test_id("run-status")).to_have_text(
        "completed"
    )
    answer = page.get_by_test_id("chat-reply").last
    expect(answer).to_have_attribute("data-agent", "billing")
    expect(answer).to_contain_text("The invoice for ORD-202608-17 is PENDING")
    expect(page.get_by_test_id("chat-session")).to_have_text("S-ticket")
    expect(page.locator('[data-testid="message"][data-role="assistant"]').last).to_contain_text(
        "PENDING"
    )


def test_chat_streams_the_reply_in(page: Any, desk_server: Any) -> None:
    open_page(page, desk_server, "#/chat", token=VIEWER)
    page.get_by_test_id("chat-input").fill("please check the invoice for ORD-202607-99")
    page.get_by_test_id("chat-send").click()
    # a viewer may not talk to the team: the 403 is shown, in the chat and in the banner
    expect(page.get_by_test_id("chat-status").get_by_test_id("error")).to_contain_text("403")
    expect(page.get_by_test_id("auth-banner")).to_contain_text("403")

    sign_in(page, OPERATOR, "otto")
    log = page.get_by_test_id("chat-log")
    # record the reply's length at every change the browser sees
    log.evaluate(
        """log => {
            window.replyLengths = [];
            const measure = () => {
                const n = [...log.querySelectorAll('[data-testid="chat-reply"] .reply-text')]
                    .map(e => e.textContent).join('').length;
                const seen = window.replyLengths;
                if (!seen.length || seen[seen.length - 1] !== n) seen.push(n);
            };
            new MutationObserver(measure).observe(
                log, {subtree: true, childList: true, characterData: true});
        }"""
    )
    page.get_by_test_id("chat-input").fill("please check the invoice for ORD-202607-99")
    page.get_by_test_id("chat-send").click()
    expect(page.get_by_test_id("chat-result").get_by_test_id("run-status")).to_have_text(
        "completed"
    )
    reply = page.get_by_test_id("chat-reply").last
    expected = "The invoice for ORD-202607-99 is ISSUED: 299.0 CNY."
    expect(reply.locator(".reply-text")).to_have_text(expected)
    expect(reply).to_have_attribute("data-agent", "billing")
    deltas = int(reply.get_attribute("data-deltas") or 0)
    lengths = page.evaluate("() => window.replyLengths")
    assert deltas > 1, f"the reply came in {deltas} delta(s)"
    growing = [n for n in lengths if 0 < n < len(expected)]
    assert len(growing) >= 2, f"the reply did not grow on screen: lengths seen {lengths}"
    assert lengths == sorted(lengths), lengths

    # a follow-up keeps the session
    session = page.get_by_test_id("chat-session").inner_text()
    assert session and session != "(new session)"
    page.get_by_test_id("chat-input").fill("and the invoice for ORD-202608-17?")
    page.get_by_test_id("chat-send").click()
    expect(page.get_by_test_id("chat-reply").last).to_contain_text("PENDING")
    expect(page.get_by_test_id("chat-session")).to_have_text(session)
    expect(page.get_by_test_id("chat-session-link").get_by_role("link")).to_have_attribute(
        "href", f"#/sessions/{session}"
    )


def test_graph_marks_refusals_escalations_and_guard_trips_and_escapes_text(
    page: Any, desk_server: Any
) -> None:
    """The graph module on a made-up trace: a hand-off there and back, a refused one, an
    escalation and a guard trip; names and reasons are text, never markup."""
    page.goto(f"{desk_server.url}/static/index.html#/nowhere")
    evil = "<img src=x onerror=window.pwned=1>"
    model = page.evaluate(
        """async evil => {
            const {graphModel, graphSvg} = await import('/static/graph.js');
            const step = (kind, agent, detail, extra = {}) =>
                ({kind, agent, detail, target: null, failed: false, subruns: [], ...extra});
            const runs = [{turns: [
                {agent: "triage", steps: [
                    step("handoff", "triage", "triage -> billing: invoice", {target: "billing"}),
                ]},
                {agent: "billing", steps: [
                    step("refusal", "billing", "-> payments: not in billing's hand-offs",
                         {failed: true}),
                    step("handoff", "billing", `billing -> triage: ${evil}`, {target: "triage"}),
                ]},
                {agent: "triage", steps: [
                    step("guard", "triage", "ping_pong: triage -> billing again", {failed: true}),
                    step("escalation", "triage", "to human: triage asked for a human: stuck",
                         {target: "human"}),
                ]},
            ]}];
            const svg = graphSvg(runs);
            const box = document.createElement('div');
            box.id = 'graph-test';
            document.body.append(box);
            box.replaceChildren(svg);
            const m = graphModel(runs);
            return {
                nodes: m.nodes.map(n => [n.name, n.guards.map(g => g.guard)]),
                edges: m.edges.map(e => [e.kind, e.from, e.to, e.reasons]),
            };
        }""",
        evil,
    )
    assert model["nodes"] == [
        ["triage", ["ping_pong"]],
        ["billing", []],
        ["payments", []],
        ["human", []],
    ]
    assert model["edges"] == [
        ["handoff", "triage", "billing", ["invoice"]],
        ["refusal", "billing", "payments", ["not in billing's hand-offs"]],
        ["handoff", "billing", "triage", [evil]],
        ["escalation", "triage", "human", ["stuck"]],
    ]
    graph = page.locator("#graph-test").get_by_test_id("handoff-graph")
    expect(graph.locator('[data-kind="refusal"] path.edge-refusal-line')).to_have_count(1)
    expect(graph.locator('[data-kind="escalation"][data-to="human"]')).to_have_count(1)
    expect(graph.locator('[data-agent="triage"]')).to_have_attribute("data-tripped", "true")
    expect(graph.get_by_test_id("graph-guard")).to_have_text("⚠ ping_pong")
    back = graph.locator('[data-testid="graph-edge"][data-from="billing"][data-to="triage"]')
    expect(back.get_by_test_id("graph-edge-label")).to_contain_text("<img src=x")
    assert page.locator("#graph-test img").count() == 0
    assert page.evaluate("() => window.pwned") is None
