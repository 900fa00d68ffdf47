"""The human queue: escalation tickets a person claims, answers and closes.

Answering writes the person's reply into the user's session (as an assistant message from
`human`) and decides who holds the baton next: an agent, or the person (`human`), in which
case the user's next message goes to the queue again.
"""

from __future__ import annotations

from baton.backends.base import HumanTicket, SessionRecord, Store, TicketStatus
from baton.core.errors import ConflictError, TicketError
from baton.core.ids import now
from baton.core.messages import Message
from baton.runtime.at_rest import masked_message
from baton.runtime.redact import Redactor


class Tickets:
    """The store's human queue, with the steps a person takes."""

    def __init__(self, store: Store, at_rest: Redactor | None = None) -> None:
        self.store = store
        self.at_rest = at_rest
        """Masks the reply as the session's transcript keeps it (`baton.runtime.at_rest`)."""

    async def list(self, status: str | None = "open") -> list[HumanTicket]:
        """Tickets with `status` (None: all), oldest first."""
        return await self.store.list_human(status)

    async def get(self, ticket_id: int) -> HumanTicket:
        """One ticket; `TicketError` when there is none."""
        ticket = await self.store.get_human(ticket_id)
        if ticket is None:
            raise TicketError(f"no ticket {ticket_id} in the human queue (see `baton tickets`)")
        return ticket

    async def claim(self, ticket_id: int, by: str) -> HumanTicket:
        """Take an open ticket; nobody else may answer it."""
        ticket = await self.get(ticket_id)
        if ticket.status != "open":
            who = f" by {ticket.claimed_by}" if ticket.claimed_by else ""
            raise TicketError(
                f"ticket {ticket_id} is {ticket.status}{who}; only open ones can be claimed"
            )
        return await self._move(ticket, "open", "claimed", claimed_by=by)

    async def answer(self, ticket: HumanTicket, by: str, reply: str, holder: str) -> HumanTicket:
        """Send the person's reply to the user's session; `holder` takes the baton (an agent
        name, or `human`). An open ticket is claimed on the way."""
        if not reply.strip():
            raise TicketError("the reply is empty; write what the user should read")
        if ticket.status == "open":
            ticket = await self._move(ticket, "open", "claimed", claimed_by=by)
        if ticket.status != "claimed" or ticket.claimed_by != by:
            raise TicketError(
                f"ticket {ticket.id} is {ticket.status} by {ticket.claimed_by}; "
                f"{by} cannot answer it"
            )
        # the ticket moves first (compare-and-set: a close or a second answer in the meantime
        # fails here, before anything reaches the user's session)
        try:
            ticket = await self._move(ticket, "claimed", "answered", answer=reply)
        except ConflictError:
            raise TicketError(
                f"ticket {ticket.id} changed while the answer waited (closed or answered "
                "already); nothing was sent"
            ) from None
        sid = ticket.card.session_id
        session = await self.store.get_session(sid) or SessionRecord(
            sid, user_id=ticket.card.user_id
        )
        message = Message(role="assistant", content=reply, agent="human")
        if self.at_rest is not None:
            message = masked_message(self.at_rest, message)
        session.holder, session.incoming = holder, None
        session.holder_since = message.id
        session.updated_at = now()
        try:
            await self.store.commit_run(session, [message], [])
        except Exception:
            await self._move(ticket, "answered", "claimed")  # the reply did not go out
            raise
        return ticket

    async def close(self, ticket_id: int, by: str, note: str = "") -> HumanTicket:
        """Close a ticket that needs nothing more."""
        ticket = await self.get(ticket_id)
        if ticket.status == "closed":
            raise TicketError(f"ticket {ticket_id} is already closed")
        note = note or f"closed by {by}"
        return await self._move(ticket, ticket.status, "closed", note=note)

    async def _move(
        self,
        ticket: HumanTicket,
        expect: TicketStatus,
        status: TicketStatus,
        *,
        claimed_by: str | None = None,
        answer: str | None = None,
        note: str | None = None,
    ) -> HumanTicket:
        ticket.status = status
        if claimed_by is not None:
            ticket.claimed_by = claimed_by
        if answer is not None:
            ticket.answer = answer
        if note is not None:
            ticket.note = note
        ticket.updated_at = now()
        await self.store.update_human(ticket, expect)
        return ticket
