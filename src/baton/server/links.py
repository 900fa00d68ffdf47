"""Signed approve/reject links (`baton.notify.links`): `GET /approvals/links/{token}` (the
link itself) shows what it would decide, `POST /approvals/links/{token}/use` decides, once, as
the authenticated approver who opens it.

A GET never decides: chat clients fetch links to preview them, and that must not approve a
refund. Both need the server's auth (a bearer token with an `approver:<role>` role that the
card needs), so a link that leaks is useless to anyone who is not such an approver.
"""

from __future__ import annotations

import time
import uuid
from typing import Annotated

from fastapi import APIRouter, Path
from pydantic import BaseModel, Field

from baton.core.approval import ApprovalCard
from baton.core.errors import SignatureError
from baton.notify.links import MAX_TOKEN_CHARS, LinkClaims, read_link
from baton.server.auth import Principal
from baton.server.context import Approver, Ctx, ServerContext
from baton.server.desk import approval_card
from baton.server.errors import Conflict, Forbidden, NotFound, responses
from baton.server.runs import summary
from baton.server.schemas import RunSummary

router = APIRouter()

TokenPath = Annotated[
    str,
    Path(
        max_length=MAX_TOKEN_CHARS,
        pattern=r"^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$",
        description="The signed token of the link.",
    ),
]


class LinkOut(BaseModel):
    """What a link decides, for whom, until when."""

    decision: str = Field(description="approve or reject.")
    role: str | None = Field(description="The role the opener decides in.")
    expires_at: float = Field(description="Seconds since the epoch.")
    card: ApprovalCard


async def _checked(
    ctx: ServerContext, token: str, who: Principal
) -> tuple[LinkClaims, ApprovalCard, str | None]:
    """The link's claims, its card (still waiting) and the opener's role; 404 when links are
    off or the card is gone, 403 for a bad signature, an expired link or a wrong role."""
    if ctx.link_secret is None:
        raise NotFound(
            "approval links are not enabled on this server; start it with a link secret "
            "($BATON_APPROVAL_LINK_SECRET, or create_app(link_secret=...))"
        )
    try:
        claims = read_link(ctx.link_secret, token)
    except SignatureError as exc:
        raise Forbidden(str(exc)) from None
    card = await approval_card(ctx, claims.approval_id, claims.session_id)
    if sorted(card.required_roles) != claims.roles:
        raise Forbidden(
            "the card's approver roles changed since the link was made; decide in the "
            "dashboard or CLI"
        )
    try:
        role = who.approver_role_for(card.required_roles, None)
    except PermissionError as exc:
        raise Forbidden(str(exc)) from None
    return claims, card, role


@router.get(
    "/approvals/links/{token}",
    response_model=LinkOut,
    tags=["approvals"],
    summary="What a signed approval link would decide (decides nothing)",
    responses=responses(401, 403, 404),
)
async def preview_link(ctx: Ctx, who: Approver, token: TokenPath) -> LinkOut:
    claims, card, role = await _checked(ctx, token, who)
    return LinkOut(decision=claims.decision, role=role, expires_at=claims.exp, card=card)


@router.post(
    "/approvals/links/{token}/use",
    response_model=RunSummary,
    tags=["approvals"],
    summary="Decide through a signed approval link (once)",
    responses=responses(401, 403, 404, 409, 503),
)
async def use_link(ctx: Ctx, who: Approver, token: TokenPath) -> RunSummary:
    """Resumes the run as `POST /approvals/{id}/approve|reject` does."""
    claims, card, role = await _checked(ctx, token, who)
    store, key, holder = ctx.team.store, f"approval-link:{claims.nonce}", uuid.uuid4().hex
    # single use: the nonce is taken until the link expires (both links of a card share it)
    if not await store.acquire_lease(key, holder, max(1.0, claims.exp - time.time() + 1)):
        raise Conflict("this approval link was used already; each link works once")
    verified = ctx.auth is not None
    try:
        if claims.decision == "approve":
            result = await ctx.team.approve(
                card.session_id, card.id, by=who.name, role=role, authenticated=verified
            )
        else:
            result = await ctx.team.reject(
                card.session_id,
                card.id,
                by=who.name,
                reason="rejected through a signed link",
                role=role,
                authenticated=verified,
            )
    except BaseException:
        await store.release_lease(key, holder)  # nothing was decided: the link still works
        raise
    return await summary(ctx, result)
