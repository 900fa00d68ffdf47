"""`baton notify run|list|show|retry`: deliver the store's outbox to the configured channels, and
read its delivery log.

The deliverer is a process of its own (`baton notify run`), beside `baton serve` and the
workers: it needs only the store and the channel config, runs as many copies as wanted (each
item is leased to one at a time), and a stop or crash loses nothing (the outbox is in the
store; a killed deliverer's items are claimed again when their lease ends).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from baton.cli.common import DEFAULT_STORE_URL, CLIError, fail, open_cli_store
from baton.cli.options import StoreOption
from baton.core.errors import BatonError
from baton.observe.terminal import safe, safe_clip

if TYPE_CHECKING:
    from baton.backends.outbox import OutboxItem

notify_app = typer.Typer(
    help="Notifications: deliver the outbox (approvals, escalations, failed runs, guard "
    "alerts) to webhooks, Slack, WeCom and DingTalk, and read its delivery log.",
    no_args_is_help=True,
)
"""The `baton notify` command group."""


class OutboxStatusChoice(str, Enum):
    """Statuses `baton notify list --status` shows."""

    pending = "pending"
    delivered = "delivered"
    dead = "dead"
    skipped = "skipped"
    all = "all"


def _consoles() -> tuple[Any, Any]:
    from rich.console import Console

    return Console(highlight=False), Console(stderr=True, highlight=False)


def _outbox(url: str) -> Any:
    """The store `url`, refused with a clear error when it has no outbox."""
    from baton.backends.outbox import Outbox

    store = open_cli_store(url)
    if not isinstance(store, Outbox):
        raise CLIError(
            f"the store {url} has no outbox: notifications need a store with the Outbox "
            "capability (sqlite://, postgresql://, redis://)",
            code=2,
        )
    return store


def _run(action: Any) -> Any:
    """`asyncio.run(action)` with Baton's errors as `CLIError`s, printed, exit code kept."""
    _, err = _consoles()
    try:
        try:
            return asyncio.run(action)
        except BatonError as exc:
            raise CLIError(str(exc), code=1) from None
    except CLIError as exc:
        fail(err, exc)
        raise typer.Exit(exc.code) from None


@notify_app.command("run")
def run(
    config: Annotated[
        Path, typer.Option("--config", help="The channels and delivery settings (JSON).")
    ],
    store: StoreOption = None,
    once: Annotated[
        bool, typer.Option("--once", help="Deliver what is due now, then exit.")
    ] = False,
    poll_s: Annotated[
        float, typer.Option("--poll", min=0.05, help="Seconds between looks when none is due.")
    ] = 1.0,
) -> None:
    """Deliver the outbox until stopped (Ctrl-C or SIGTERM): at least once, with retries."""
    from baton.notify.deliver import Notifier, NotifyConfig

    out, _ = _consoles()
    url = store or DEFAULT_STORE_URL

    async def main() -> int:
        cfg = NotifyConfig.load(config)
        st = _outbox(url)
        notifier = Notifier(st, cfg)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):  # not on Windows
                loop.add_signal_handler(sig, stop.set)
        try:
            if once:
                total = 0
                while n := await notifier.run_once():
                    total += n
                return total
            names = ", ".join(c.name for c in cfg.channels)
            out.print(
                f"delivering the outbox of {safe(url)} to {safe(names)} as {notifier.owner}",
                markup=False,
            )
            await notifier.run(poll_s=poll_s, stop=stop)
            return 0
        finally:
            await notifier.close()
            await st.close()

    handled = _run(main())
    if once:
        out.print(f"{handled} notification(s) handled")


@notify_app.command("list")
def list_outbox(
    status: Annotated[
        OutboxStatusChoice, typer.Option("--status", help="Show items with this status.")
    ] = OutboxStatusChoice.all,
    store: StoreOption = None,
    limit: Annotated[int, typer.Option("--limit", min=1)] = 100,
) -> None:
    """Outbox items, oldest first: kind, status, tries, session."""
    from rich.table import Table

    out, _ = _consoles()
    url = store or DEFAULT_STORE_URL
    wanted = None if status is OutboxStatusChoice.all else status.value

    async def main() -> list[OutboxItem]:
        st = _outbox(url)
        try:
            items: list[OutboxItem] = await st.list_outbox(wanted, limit)
            return items
        finally:
            await st.close()

    items = _run(main())
    if not items:
        out.print("no notifications")
        return
    table = Table("id", "kind", "status", "tries", "session", "at")
    for i in items:
        at = datetime.fromtimestamp(i.ts, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        table.add_row(i.id, i.kind, i.status, str(i.attempts), safe_clip(i.session_id, 40), at)
    out.print(table)


@notify_app.command("show")
def show(
    item_id: Annotated[str, typer.Argument(help="The item's id (see `baton notify list`).")],
    store: StoreOption = None,
) -> None:
    """One item's delivery log: every try on every channel, with the status it got."""
    out, _ = _consoles()
    url = store or DEFAULT_STORE_URL

    async def main() -> OutboxItem:
        st = _outbox(url)
        try:
            item: OutboxItem | None = await st.get_outbox(item_id)
        finally:
            await st.close()
        if item is None:
            raise CLIError(f"no notification {item_id!r} in {url}; see `baton notify list`", 1)
        return item

    item = _run(main())
    out.print(f"{item.id}  {item.kind}  {item.status}  tries {item.attempts}", markup=False)
    for d in item.deliveries:
        code = "-" if d.status_code is None else str(d.status_code)
        at = datetime.fromtimestamp(d.at, timezone.utc).strftime("%H:%M:%S")
        mark = "ok" if d.ok else "failed"
        line = f"  #{d.attempt} {at} {safe(d.channel)} {code} {mark} {safe_clip(d.error, 120)}"
        out.print(line.rstrip(), markup=False)


@notify_app.command("retry")
def retry(
    item_id: Annotated[str, typer.Argument(help="A dead item's id (`baton notify list`).")],
    store: StoreOption = None,
) -> None:
    """Send a dead letter again once its cause is fixed: pending, due now, tries from 0."""
    out, _ = _consoles()
    url = store or DEFAULT_STORE_URL

    async def main() -> None:
        st = _outbox(url)
        try:
            done = await st.requeue_outbox(item_id)
        finally:
            await st.close()
        if not done:
            raise CLIError(
                f"no dead notification {item_id!r} in {url}; see `baton notify list --status dead`",
                1,
            )

    _run(main())
    out.print(f"{item_id} is pending again; a running `baton notify run` sends it", markup=False)
