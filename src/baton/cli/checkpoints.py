"""`baton checkpoints rekey`: re-seal every stored checkpoint with the current checkpoint key.

The keys come from `$BATON_CHECKPOINT_KEY` (`id:base64,id:base64`, the sealing key first); a
rotation puts the new key first, keeps the old ones after it, runs `rekey`, and drops the old
keys once it reports every checkpoint sealed with the new one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from baton.backends.sealing import KEY_ENV, SealedCheckpoints
from baton.cli.common import DEFAULT_STORE_URL, CLIError, fail
from baton.cli.driver import require_store, with_store
from baton.cli.options import StoreOption
from baton.core.errors import BatonError
from baton.observe.terminal import safe

if TYPE_CHECKING:
    from baton.backends.base import Store
    from baton.backends.sealing import RekeyReport

checkpoints_app = typer.Typer(
    help="The checkpoints of unfinished runs: re-seal them under the current key.",
    no_args_is_help=True,
)
"""The `baton checkpoints` command group."""


@checkpoints_app.command("rekey")
def rekey(store: StoreOption = None) -> None:
    """Seal every stored checkpoint with the first key of $BATON_CHECKPOINT_KEY (those in clear
    and those under an older key); exit 1 naming any it could not open or that kept changing.

    Rotate a key: set BATON_CHECKPOINT_KEY="new:BASE64,old:BASE64" in every process, run this,
    then drop the old key once it says every checkpoint is sealed with the new one.
    """
    from rich.console import Console

    out, err = Console(highlight=False), Console(stderr=True, highlight=False)
    url = store or DEFAULT_STORE_URL
    try:
        require_store(url)
        report = _rekey(url)
    except CLIError as exc:
        fail(err, exc)
        raise typer.Exit(exc.code) from None
    key = report.key_id
    again = f" ({len(report.current)} already were)" if report.current else ""
    out.print(safe(f"sealed {_count(report.resealed)} with key {key!r}{again}"), soft_wrap=True)
    for sid, why in report.unreadable.items():
        err.print(safe(f"session {sid}: not re-sealed: {why}"), soft_wrap=True)
    for sid in report.busy:
        err.print(
            safe(f"session {sid}: not re-sealed: its run saved a newer checkpoint on every try"),
            soft_wrap=True,
        )
    if not report.complete:
        left = [*report.unreadable, *report.busy]
        fail(
            err,
            CLIError(
                f"{_count(left)} not sealed with key {key!r}: keep the older keys until every "
                "one is (run this again for busy ones; resume or discard the others)"
            ),
        )
        raise typer.Exit(1)
    out.print(
        safe(f"every checkpoint is sealed with key {key!r}: the older keys may be dropped"),
        soft_wrap=True,
    )


def _count(sessions: list[str]) -> str:
    return f"{len(sessions)} checkpoint{'' if len(sessions) == 1 else 's'}"


def _rekey(url: str) -> RekeyReport:
    async def work(st: Store) -> RekeyReport:
        if not isinstance(st, SealedCheckpoints):
            raise CLIError(
                f"the store {url} keeps its checkpoints in process memory, never at rest: "
                "nothing to re-seal (sqlite://, postgresql:// and redis:// stores seal them)"
            )
        if not st.seals_checkpoints:
            raise CLIError(
                f"no checkpoint keys: set {KEY_ENV} to the keyring, the new key first and the "
                "old ones after it (id:BASE64,id:BASE64)"
            )
        return await st.rekey_checkpoints()

    try:
        found: Any = with_store(url, work)
    except BatonError as exc:
        raise CLIError(f"cannot re-seal the checkpoints of {url}: {exc}", code=1) from None
    if found is None:
        raise CLIError(f"no store at {url}", code=1)
    report: RekeyReport = found
    return report
