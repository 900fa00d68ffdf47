"""What waits for a person: approvals, interrupts and the human queue's tickets."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Path, Query

from baton.core.approval import ApprovalCard
from baton.core.interrupt import InterruptCard
from baton.server.auth import Principal
from baton.server.context import Approver, Ctx, Operator, ServerContext, Viewer
from baton.server.errors import Forbidden, NotFound, responses
from baton.server.ids import CardIdPath
from baton.server.runs import summary
from baton.server.schemas import (
    DecisionIn,
    InterruptAnswerIn,
    RunSummary,
    TicketAnswerIn,
    TicketCloseIn,
    TicketFilter,
    TicketOut,
)

router = APIRouter()

TicketId = Annotated[int, Path(ge=1, le=2**63 - 1, description="The ticket's number.")]


# ---------------------------------------------------------------------------- approvals
@router.get(
    "/approvals",
    response_model=list[ApprovalCard],
    tags=["approvals"],
    summary="Every approval a run waits for, oldest first",
    responses=responses(401, 403),
)
async def list_approvals(ctx: Ctx, who: Viewer) -> list[ApprovalCard]:
    return await ctx.team.approvals()


async def approval_card(
    ctx: ServerContext, approval_id: str, session_id: str | None
) -> ApprovalCard:
    """The waiting card `approval_id` (of `session_id` if given); 404 when none waits."""
    for card in await ctx.team.approvals():
        if card.id == approval_id and session_id in (None, card.session_id):
            return card
    where = f" in session {session_id!r}" if session_id else ""
    raise NotFound(
        f"no approval {approval_id!r} waits{where}: it was decided meanwhile or the id is "
        "wrong; GET /approvals lists the waiting ones"
    )


async def _decide(
    ctx: ServerContext, approval_id: str, body: DecisionIn, who: Principal, ok: bool
) -> RunSummary:
    card = await approval_card(ctx, approval_id, body.session_id)
    try:
        role = who.approver_role_for(card.required_roles, body.role)
    except PermissionError as exc:
        raise Forbidden(str(exc)) from None
    team = ctx.team
    # the decider is the token's user; the open mode's local user was authenticated by nobody
    verified = ctx.auth is not None
    if ok:
        result = await team.approve(
            card.session_id, card.id, by=who.name, role=role, authenticated=verified
        )
    else:
        result = await team.reject(
            card.session_id,
            card.id,
            by=who.name,
            reason=body.reason,
            role=role,
            authenticated=verified,
        )
    return await summary(ctx, result)


_DECISION: dict[str, Any] = {
    "response_model": RunSummary,
    "tags": ["approvals"],
    "responses": responses(401, 403, 404, 409, 422, 503),
}


@router.post(
    "/approvals/{approval_id}/approve", summary="Sign off the call a run waits for", **_DECISION
)
async def approve(
    ctx: Ctx,
    who: Approver,
    approval_id: CardIdPath,
    body: Annotated[DecisionIn | None, Body()] = None,
) -> RunSummary:
    """Resumes the run; a `dual` card's first sign-off answers `awaiting_approval` again."""
    return await _decide(ctx, approval_id, body or DecisionIn(), who, True)


@router.post(
    "/approvals/{approval_id}/reject", summary="Refuse the call a run waits for", **_DECISION
)
async def reject(
    ctx: Ctx,
    who: Approver,
    approval_id: CardIdPath,
    body: Annotated[DecisionIn | None, Body()] = None,
) -> RunSummary:
    """Resumes the run: the agent reads the rejection and tells the user."""
    return await _decide(ctx, approval_id, body or DecisionIn(), who, False)


# --------------------------------------------------------------------------- interrupts
@router.get(
    "/interrupts",
    response_model=list[InterruptCard],
    tags=["interrupts"],
    summary="Every interrupt a run waits an answer for, oldest first",
    responses=responses(401, 403),
)
async def list_interrupts(ctx: Ctx, who: Viewer) -> list[InterruptCard]:
    return await ctx.team.interrupts()


@router.post(
    "/interrupts/{interrupt_id}/answer",
    response_model=RunSummary,
    tags=["interrupts"],
    summary="Answer an interrupt; the run goes on",
    responses=responses(401, 403, 404, 409, 422, 503),
)
async def answer_interrupt(
    ctx: Ctx, who: Operator, interrupt_id: CardIdPath, body: InterruptAnswerIn
) -> RunSummary:
    for card in await ctx.team.interrupts():
        if card.id == interrupt_id and body.session_id in (None, card.session_id):
            result = await ctx.team.answer_interrupt(
                card.session_id, body.value, interrupt_id=card.id
            )
            return await summary(ctx, result)
    raise NotFound(f"no interrupt {interrupt_id!r} waits for an answer; GET /interrupts lists them")


# ------------------------------------------------------------------------------ tickets
@router.get(
    "/tickets",
    response_model=list[TicketOut],
    tags=["tickets"],
    summary="Tickets of the human queue, oldest first",
    responses=responses(401, 403, 422),
)
async def list_tickets(
    ctx: Ctx,
    who: Viewer,
    status: Annotated[TicketFilter, Query(description="Which tickets.")] = "open",
) -> list[TicketOut]:
    found = await ctx.team.tickets.list(None if status == "all" else status)
    return [TicketOut.of(t) for t in found]


async def _known(ctx: ServerContext, ticket_id: int) -> None:
    if await ctx.team.store.get_human(ticket_id) is None:
        raise NotFound(
            f"no ticket {ticket_id} in the human queue; GET /tickets?status=all lists them"
        )


_TICKET: dict[str, Any] = {
    "response_model": TicketOut,
    "tags": ["tickets"],
    "responses": responses(401, 403, 404, 409, 422, 503),
}


@router.post("/tickets/{ticket_id}/claim", summary="Take an open ticket", **_TICKET)
async def claim_ticket(ctx: Ctx, who: Operator, ticket_id: TicketId) -> TicketOut:
    await _known(ctx, ticket_id)
    return TicketOut.of(await ctx.team.tickets.claim(ticket_id, who.name))


@router.post(
    "/tickets/{ticket_id}/answer",
    summary="Answer a ticket: the reply goes to the user's session",
    **_TICKET,
)
async def answer_ticket(
    ctx: Ctx, who: Operator, ticket_id: TicketId, body: TicketAnswerIn
) -> TicketOut:
    await _known(ctx, ticket_id)
    if not body.reply.strip():
        raise ValueError("the reply is empty; write what the user should read")
    ticket = await ctx.team.answer_ticket(
        ticket_id, by=who.name, reply=body.reply, hand_back_to=body.hand_back_to
    )
    return TicketOut.of(ticket)


@router.post("/tickets/{ticket_id}/close", summary="Close a ticket", **_TICKET)
async def close_ticket(
    ctx: Ctx,
    who: Operator,
    ticket_id: TicketId,
    body: Annotated[TicketCloseIn | None, Body()] = None,
) -> TicketOut:
    await _known(ctx, ticket_id)
    note = body.note if body is not None else ""
    return TicketOut.of(await ctx.team.tickets.close(ticket_id, who.name, note))
