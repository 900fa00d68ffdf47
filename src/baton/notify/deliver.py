"""The deliverer: takes notifications from the store's outbox and posts them to channels,
at least once.

`Notifier.run_once` claims due outbox items under a lease (another deliverer skips them while
the lease lives), turns each into a card (`baton.notify.cards`), posts it to every channel
that takes its kind and has not taken it yet, and settles the item: `delivered` when every
channel answered 2xx, else retried after an exponential backoff with jitter (a 429's
`Retry-After` is honoured), and `dead` after `max_attempts` tries. Every try on every channel
goes to the item's delivery log. A deliverer that dies mid-delivery leaves its items leased;
once the lease ends another claims them and sends again with the same `Idempotency-Key`
(`<event id>:<channel>`), so a receiver that dedupes on it shows the card once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import random
import socket
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from baton.backends.outbox import Delivery, Outbox, OutboxItem
from baton.core.errors import ConfigError, StoreError
from baton.core.ids import now
from baton.notify.cards import Card, GuardRate, card_for
from baton.notify.channels import Channel, ChannelConfig
from baton.notify.links import ApprovalLinks
from baton.runtime.redact import Redactor

if TYPE_CHECKING:
    import httpx

__all__ = ["Notifier", "NotifyConfig", "backoff_s"]

log = logging.getLogger("baton.notify")

_ERROR_CHARS = 300
"""How much of a failed answer the delivery log keeps."""
_PRUNE_EVERY_S = 3600.0
"""How often `Notifier.run` drops old settled items (`NotifyConfig.keep_s`)."""


class NotifyConfig(BaseModel):
    """Where notifications go and how hard delivery tries (a JSON file: `NotifyConfig.load`)."""

    model_config = ConfigDict(extra="forbid")

    channels: list[ChannelConfig] = Field(min_length=1)
    """The destinations; each card goes to every channel whose `kinds` include its kind."""
    max_attempts: int = Field(default=8, ge=1)
    """Tries per item before it is dead (the dead letter, `status` `dead`)."""
    backoff_s: float = Field(default=2.0, gt=0)
    """The first retry's delay; each later one doubles it (with jitter)."""
    max_backoff_s: float = Field(default=600.0, gt=0)
    """The longest delay between two tries."""
    timeout_s: float = Field(default=10.0, gt=0)
    """How long one POST may take."""
    lease_s: float = Field(default=120.0, gt=0)
    """How long a claimed item is this deliverer's alone; must exceed one try on every
    channel (`timeout_s` x channels), else another deliverer could send it meanwhile."""
    batch: int = Field(default=16, ge=1)
    """Items claimed (and delivered concurrently) at once."""
    guard_rate: GuardRate = Field(default_factory=GuardRate)
    """When guard trips become an alert."""
    redact_keys: list[str] = Field(default_factory=list)
    """Sensitive key names beyond the redactor's defaults."""
    links: ApprovalLinks | None = None
    """Signed approve/reject links on approval cards (None: cards carry no links)."""
    keep_s: float | None = Field(default=7 * 86400.0, gt=0)
    """`run` drops settled items (delivered, dead, skipped) older than this, once an hour;
    None keeps them (drop them with `prune_outbox`)."""

    @model_validator(mode="after")
    def _check(self) -> NotifyConfig:
        names = [c.name for c in self.channels]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"channel names must be unique (they key deliveries): {dupes}")
        need = self.timeout_s * len(self.channels)
        if self.lease_s <= need:
            raise ValueError(
                f"lease_s ({self.lease_s:g}) must exceed timeout_s x channels ({need:g}): "
                "raise lease_s, or lower timeout_s"
            )
        return self

    @classmethod
    def load(cls, path: str | Path) -> NotifyConfig:
        """The config in a JSON file; ConfigError naming what is wrong."""
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read the notification config {p}: {exc}") from None
        try:
            data: Any = json.loads(text)
        except ValueError as exc:
            raise ConfigError(f"the notification config {p} is not valid JSON: {exc}") from None
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(f"the notification config {p} is wrong:\n{exc}") from None


def backoff_s(attempt: int, base: float, cap: float, rng: random.Random | None = None) -> float:
    """The delay after failed try number `attempt` (1 for the first): `base * 2**(attempt-1)`
    capped at `cap`, of which a random half is dropped (jitter, so that deliverers that
    failed together do not retry together)."""
    full: float = min(cap, base * 2.0 ** (attempt - 1))
    jitter: float = (rng or random).uniform(0, full / 2)
    return full / 2 + jitter


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After", "")
    return float(value) if value.strip().isdigit() else None


def _refused(response: httpx.Response) -> str:
    """Why a 2xx answer still refused the message (WeCom and DingTalk answer 200 with a
    non-zero `errcode`); empty when it took it."""
    with contextlib.suppress(ValueError):
        data = response.json()
        if isinstance(data, dict) and data.get("errcode", 0) not in (0, "0"):
            return f"errcode {data['errcode']}: {data.get('errmsg', '')}"
    return ""


class Notifier:
    """Delivers the outbox of `store` to the channels of `config`, at least once.

    `owner` names this deliverer in leases (default: host, process and a random part);
    `client` may be given (an `httpx.AsyncClient`), else one is made and closed by `close`.
    """

    def __init__(
        self,
        store: Any,
        config: NotifyConfig,
        *,
        owner: str | None = None,
        redactor: Redactor | None = None,
        client: httpx.AsyncClient | None = None,
        rng: random.Random | None = None,
    ) -> None:
        if not isinstance(store, Outbox):
            raise ConfigError(
                f"{type(store).__name__} has no outbox: notifications need a store with the "
                "Outbox capability (every store Baton ships has it)"
            )
        self.store: Outbox = store
        self.config = config
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        """This deliverer's name in the outbox's leases."""
        self.redactor = redactor or Redactor(keys=config.redact_keys)
        self._client = client
        self._own_client = client is None
        self._rng = rng or random.Random()

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            import httpx

            self._client = httpx.AsyncClient(timeout=self.config.timeout_s)
        return self._client

    async def close(self) -> None:
        """Close the HTTP client this notifier made."""
        if self._client is not None and self._own_client:
            await self._client.aclose()
            self._client = None

    async def run_once(self, *, at: float | None = None) -> int:
        """Claim a batch of due items and deliver them; how many were claimed."""
        t = now() if at is None else at
        items = await self.store.claim_outbox(
            self.owner, self.config.lease_s, self.config.batch, at=t
        )
        outcomes = await asyncio.gather(
            *(self._deliver(item, t) for item in items), return_exceptions=True
        )
        # one item's failure does not stop the others; it stays leased, and is tried again
        # when its lease ends
        for item, outcome in zip(items, outcomes, strict=True):
            if isinstance(outcome, StoreError):
                raise outcome
            if isinstance(outcome, BaseException):
                log.error("notification %s failed: %r; retried after its lease", item.id, outcome)
        return len(items)

    async def run(self, *, poll_s: float = 1.0, stop: asyncio.Event | None = None) -> None:
        """Deliver until `stop` is set: a batch at a time, waiting `poll_s` when none is due.
        A store that fails (down, locked) is logged and tried again after `poll_s`: nothing
        is lost meanwhile, the items stay in the outbox."""
        stop = stop or asyncio.Event()
        pruned_at = 0.0
        while not stop.is_set():
            try:
                if self.config.keep_s is not None and now() - pruned_at > _PRUNE_EVERY_S:
                    await self.store.prune_outbox(now() - self.config.keep_s)
                    pruned_at = now()
                busy = await self.run_once() > 0
            except StoreError as exc:
                log.warning("the outbox cannot be read or settled now (%s); retrying", exc)
                busy = False
            if not busy:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), poll_s)

    async def card(self, item: OutboxItem) -> Card | None:
        """The item's card, redacted; None for a guard trip that raises no alert."""
        event = item.parsed()
        rate = self.config.guard_rate
        if item.kind != "guard_tripped":
            card = card_for(event, self.redactor)
            if self.config.links is not None:
                card.links = self.config.links.for_card(card)
            return card
        trips = await self.store.count_outbox(item.kind, item.key, item.ts - rate.window_s, item.ts)
        if trips != rate.trips:
            return None
        return card_for(event, self.redactor, trips=trips, rate=rate)

    async def _deliver(self, item: OutboxItem, t: float) -> None:
        """Send one item to the channels still owed it, and settle it."""
        try:
            card = await self.card(item)
        except (ValueError, TypeError) as exc:
            # an event this Baton cannot read would fail on every try: the dead letter at once
            why = f"no card can be made of it: {type(exc).__name__}: {exc}"[:_ERROR_CHARS]
            log.warning("notification %s is dead: %s", item.id, why)
            await self._settle(item, "dead", [Delivery("-", item.attempts + 1, False, None, why)])
            return
        done = item.delivered_to()
        owed = [] if card is None else self._channels(card, done)
        if card is None or (not owed and not done):
            await self._settle(item, "skipped", [])
            return
        attempt = item.attempts + 1
        tries = [await self._post(channel, card, item, attempt) for channel in owed]
        failed = [d for d, _ in tries if not d.ok]
        if not failed:
            await self._settle(item, "delivered", [d for d, _ in tries])
        elif attempt >= self.config.max_attempts:
            log.warning("notification %s is dead after %d tries", item.id, attempt)
            await self._settle(item, "dead", [d for d, _ in tries])
        else:
            c = self.config
            wait = backoff_s(attempt, c.backoff_s, c.max_backoff_s, self._rng)
            hinted = [r for _, r in tries if r is not None]
            if hinted:  # the receiver said when (429 Retry-After); never sooner than that
                wait = max(wait, min(c.max_backoff_s, *hinted))
            await self._settle(item, "pending", [d for d, _ in tries], next_at=t + wait)

    def _channels(self, card: Card, done: set[str]) -> list[Channel]:
        return [c for c in self.config.channels if card.kind in c.kinds and c.name not in done]

    async def _post(
        self, channel: Channel, card: Card, item: OutboxItem, attempt: int
    ) -> tuple[Delivery, float | None]:
        """One POST; its delivery log line and the receiver's Retry-After, if any."""
        import httpx

        key = f"{item.id}:{channel.name}"
        req = channel.request(card, key)
        try:
            # a total limit: httpx's timeout bounds each phase, and the lease must outlast a try
            response = await asyncio.wait_for(
                self._http().post(req.url, headers=req.headers, content=req.body),
                self.config.timeout_s,
            )
        except (httpx.HTTPError, asyncio.TimeoutError) as exc:
            error = f"{type(exc).__name__}: {exc}"[:_ERROR_CHARS]
            return Delivery(channel.name, attempt, False, None, error, key), None
        code = response.status_code
        if 200 <= code < 300:
            refused = _refused(response)
            return Delivery(channel.name, attempt, not refused, code, refused, key), None
        error = response.text[:_ERROR_CHARS]
        return Delivery(channel.name, attempt, False, code, error, key), _retry_after(response)

    async def _settle(
        self,
        item: OutboxItem,
        status: Any,
        deliveries: list[Delivery],
        *,
        next_at: float = 0.0,
    ) -> None:
        if not await self.store.settle_outbox(
            item.id, self.owner, status, deliveries, next_at=next_at
        ):
            log.warning(
                "notification %s: the lease ended before it was settled (another deliverer "
                "has it now); raise lease_s",
                item.id,
            )
