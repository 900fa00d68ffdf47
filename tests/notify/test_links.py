"""Signed approve/reject links: the card delivered to a loopback receiver carries them; the
server checks the signature, the expiry and the opener's approver role (its own auth), a GET
decides nothing, and a link works once."""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from tests.notify.notify_kit import Receiver
from tests.server.server_kit import (
    BASE_URL,
    FINANCE,
    LEGAL,
    OPERATOR,
    REFUNDED,
    auth,
    bearer,
    client_for,
    desk,
)

from baton import Agent, ScriptedModel, Team, tool
from baton.backends import MemoryStore
from baton.core.errors import SignatureError
from baton.notify import LinkClaims, Notifier, NotifyConfig, read_link, sign_link
from baton.server import AuthConfig, create_app

LINK_SECRET = "link-secret-0123456789"


async def delivered_links(store: Any, receiver: Receiver) -> dict[str, str]:
    """Deliver the outbox to the receiver; the paths of the approval card's links by label."""
    cfg = NotifyConfig.model_validate(
        {
            "channels": [{"type": "slack", "name": "s", "url": f"{receiver.url}/slack"}],
            "links": {"base_url": BASE_URL, "secret": LINK_SECRET, "ttl_s": 600},
        }
    )
    n = Notifier(store, cfg)
    await n.run_once()
    await n.close()
    body = json.loads(receiver.received[-1].body)
    (actions,) = [b for b in body["blocks"] if b["type"] == "actions"]
    return {e["text"]["text"]: urlsplit(e["url"]).path for e in actions["elements"]}


async def test_an_approve_link_decides_once_as_the_approver_who_opens_it(
    receiver: Receiver,
) -> None:
    REFUNDED.clear()
    store = MemoryStore()
    app = create_app(desk(store), auth=auth(), link_secret=LINK_SECRET)
    async with client_for(app) as client:
        paused = await client.post(
            "/runs", json={"message": "refund ORD-5 please"}, headers=bearer(OPERATOR)
        )
        assert paused.json()["status"] == "awaiting_approval"
        links = await delivered_links(store, receiver)
        approve, reject = links["Approve"], links["Reject"]
        assert approve.startswith("/approvals/links/") and approve != reject

        # a preview decides nothing; it needs an approver of the card's role
        preview = await client.get(approve, headers=bearer(FINANCE))
        assert preview.status_code == 200, preview.text
        assert preview.json()["decision"] == "approve" and preview.json()["role"] == "finance"
        assert (await client.get(approve)).status_code == 401
        legal = await client.post(f"{approve}/use", headers=bearer(LEGAL))
        assert legal.status_code == 403 and "finance" in legal.json()["detail"]
        assert (await client.post(f"{approve}/use", headers=bearer(OPERATOR))).status_code == 403
        # a changed token is refused
        head, mac = approve.rsplit(".", 1)
        forged = f"{head}.{mac[:-2]}{'AA' if not mac.endswith('AA') else 'BB'}"
        bad = await client.post(f"{forged}/use", headers=bearer(FINANCE))
        assert bad.status_code == 403 and "signature does not match" in bad.json()["detail"]
        assert REFUNDED == []

        done = await client.post(f"{approve}/use", headers=bearer(FINANCE))
        assert done.status_code == 200, done.text
        assert done.json()["status"] == "completed" and REFUNDED == ["ORD-5"]
        # decided: neither link does anything any more
        for path in (approve, reject):
            again = await client.post(f"{path}/use", headers=bearer(FINANCE))
            assert again.status_code in (404, 409), again.text
        assert REFUNDED == ["ORD-5"]


async def test_a_link_works_once_even_while_the_card_still_waits(receiver: Receiver) -> None:
    @tool(requires_approval=True, approver_roles=["finance"], dual=True)
    async def wire(amount: int) -> str:
        """Wire money."""
        return "sent"

    store = MemoryStore()
    team = Team(
        [Agent(name="treasury", tools=[wire])],
        entry="treasury",
        model=ScriptedModel([ScriptedModel.call("wire", amount=5), ScriptedModel.say("Done.")]),
        store=store,
    )
    tokens = AuthConfig.from_mapping(
        {
            "tokens": {
                "alice-token-0123456789": {"name": "alice", "roles": ["approver:finance"]},
                "bob-token-01234567890": {"name": "bob", "roles": ["approver:finance"]},
                "ops-token-01234567890": {"name": "otto", "roles": ["operator"]},
            }
        }
    )
    app = create_app(team, auth=tokens, link_secret=LINK_SECRET)
    async with client_for(app) as client:
        await client.post(
            "/runs", json={"message": "wire 5"}, headers=bearer("ops-token-01234567890")
        )
        links = await delivered_links(store, receiver)
        first = await client.post(
            f"{links['Approve']}/use", headers=bearer("alice-token-0123456789")
        )
        assert first.json()["status"] == "awaiting_approval"  # a dual card needs a second
        reused = await client.post(
            f"{links['Approve']}/use", headers=bearer("bob-token-01234567890")
        )
        assert reused.status_code == 409 and "used already" in reused.json()["detail"]
        other = await client.post(f"{links['Reject']}/use", headers=bearer("bob-token-01234567890"))
        assert other.status_code == 409  # the card's links share one use
        (card,) = (await client.get("/approvals", headers=bearer("alice-token-0123456789"))).json()
        done = await client.post(
            f"/approvals/{card['id']}/approve", headers=bearer("bob-token-01234567890")
        )
        assert done.json()["status"] == "completed"


async def test_expired_links_and_servers_without_links_are_refused() -> None:
    claims = LinkClaims(
        approval_id="ap-1",
        session_id="S1",
        decision="approve",
        roles=["finance"],
        exp=time.time() - 1,
        nonce="n",
    )
    token = sign_link(LINK_SECRET, claims)
    with pytest.raises(SignatureError, match="expired"):
        read_link(LINK_SECRET, token)
    with pytest.raises(SignatureError, match="another secret"):
        read_link("other", sign_link(LINK_SECRET, claims.model_copy(update={"exp": 2e9})))
    async with client_for(create_app(desk(), auth=auth(), link_secret=LINK_SECRET)) as client:
        old = await client.post(f"/approvals/links/{token}/use", headers=bearer(FINANCE))
        assert old.status_code == 403 and "expired" in old.json()["detail"]
    async with client_for(create_app(desk(), auth=auth())) as client:
        off = await client.get(f"/approvals/links/{token}", headers=bearer(FINANCE))
        assert off.status_code == 404 and "not enabled" in off.json()["detail"]


def test_links_are_the_same_on_every_try() -> None:
    from tests.notify.notify_kit import approval

    from baton.notify import ApprovalLinks, card_for
    from baton.runtime.redact import Redactor

    links = ApprovalLinks(base_url="https://baton.example.com/", secret="s")
    card = card_for(approval(), Redactor())
    assert links.for_card(card) == links.for_card(card)
    assert links.for_card(card)[0].url.startswith("https://baton.example.com/approvals/links/")
    assert httpx.URL(links.for_card(card)[1].url).path.count("/") == 3
