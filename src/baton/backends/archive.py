"""Archive and trim of the audit chain: move its oldest records to a file, keep a sealed anchor.

Retention (`baton.backends.retention`) deletes old messages, events and snapshots, but every
persistent store also appends each event to the hash-chained audit trail
(`baton.backends.audit`), which would grow without bound. `store.archive_audit(to, ...)`
(`Archiving`; `baton audit archive` on the command line) writes the chain's records 1..cut
(or, after an earlier archive, the records after it up to cut) to a JSONL file, one record a
line as the store keeps it, then, in one transaction, records an `Anchor` (the last archived
record's position and hash, and the file's sha256) and deletes those records from the store.

The cut is the oldest of: the records older than an age (`max_age_s`), all but the newest
`keep` (and never the newest record, the chain's tip, which the next commit links to). It
never passes a record that vouches for an event or message row still stored (the
rows of a session holding a checkpoint, or any row retention has not deleted yet): a trimmed
chain must still vouch for every stored row, so run `baton store gc` first.

What verifies afterwards:

- the store on its own (`verify_audit`): its anchors form a sealed chain of their own, and its
  records start right after the last anchor and link to the anchored hash;
- an archive on its own (`verify_archives`): its records are a whole chain from the record
  before its first; with the store's anchors, each file's sha256 and last record are the ones
  its anchor recorded;
- archives and store together: the archives, in order from record 1, end exactly where the
  store's chain begins: one chain from the first record to the last.

What the anchor proves, and what it does not: the kept records continue, hash for hash, the
archived ones, and the archive file that was written is identified by its sha256. The anchors
are sealed like the records (HMAC-SHA256 with the audit key, `BATON_AUDIT_KEY`): without the
key nobody can add an anchor that verifies, so a delete made by an ordinary statement (an
anchor row inserted by hand, then records deleted) is reported. Without a key, someone with
write access to the database can add a well-formed anchor and delete the records below it;
the store then still verifies, and only the archive files (kept apart, e.g. on write-once
storage) show that no archive holds those records. Whoever owns the tables can also drop the
triggers: the chain detects changes, it does not prevent them. Redis has no triggers at all:
any client can delete keys, and `verify_audit` reports a record deleted without an anchor
(a gap at the chain's start), or, with a key, an anchor that is not sealed with it.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextlib import suppress
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, Field

from baton.backends.audit import (
    GENESIS,
    KEY_ENV,
    AuditRecord,
    VerifyResult,
    canonical_json,
    chain_hash,
    verify,
)
from baton.core.errors import ConfigError, StoreError

ANCHOR = "audit_anchor"
"""What an anchor's seal covers first, so that an anchor's body is never a record's."""


class ArchiveFileError(ConfigError):
    """An archive file cannot be written (it exists, or the file system refuses) or read."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Anchor:
    """One archive of the audit chain as the store recorded it: the records it moved out,
    the hash the kept chain continues from, and the file's sha256, sealed after the anchor
    before it."""

    first_seq: int
    """The first record archived (1, or the record after the anchor before)."""
    seq: int
    """The last record archived: the store's chain starts after it."""
    hash: str
    """`hash` of record `seq`: the first kept record links to it."""
    sha256: str
    """sha256 (hex) of the archive file as written."""
    archived_at: float
    """When the archive was made, epoch seconds."""
    prev_seal: str
    """`seal` of the anchor before (GENESIS for the first)."""
    seal: str
    """sha256 of `prev_seal` and the fields above, or HMAC-SHA256 with the audit key."""

    def body(self) -> str:
        """The canonical text the seal covers (after `prev_seal`)."""
        return canonical_json(
            [ANCHOR, self.first_seq, self.seq, self.hash, self.sha256, self.archived_at]
        )

    @property
    def records(self) -> int:
        """How many records the archive holds."""
        return self.seq - self.first_seq + 1


def make_anchor(
    first_seq: int,
    last: AuditRecord,
    sha256: str,
    previous: Anchor | None,
    key: bytes | None,
    now: float | None = None,
) -> Anchor:
    """The anchor of an archive of records `first_seq`..`last.seq`, sealed after `previous`."""
    prev_seal = GENESIS if previous is None else previous.seal
    draft = Anchor(
        first_seq=first_seq,
        seq=last.seq,
        hash=last.hash,
        sha256=sha256,
        archived_at=time.time() if now is None else now,
        prev_seal=prev_seal,
        seal="",
    )
    return replace(draft, seal=chain_hash(prev_seal, draft.body(), key))


ANCHOR_FIELDS = ("first_seq", "seq", "hash", "sha256", "archived_at", "prev_seal", "seal")
"""An anchor's fields in the order stores keep them (`audit_anchor` columns)."""


def anchor_of(row: Sequence[object]) -> Anchor:
    """An anchor from its stored fields (`ANCHOR_FIELDS` order); `StoreError` if unreadable."""
    try:
        f = dict(zip(ANCHOR_FIELDS, row, strict=True))
        return Anchor(
            first_seq=int(str(f["first_seq"])),
            seq=int(str(f["seq"])),
            hash=str(f["hash"]),
            sha256=str(f["sha256"]),
            archived_at=float(str(f["archived_at"])),
            prev_seal=str(f["prev_seal"]),
            seal=str(f["seal"]),
        )
    except (TypeError, ValueError) as exc:
        raise StoreError(f"a stored audit anchor cannot be read ({exc}): {row!r}") from None


def anchor_row(a: Anchor) -> tuple[object, ...]:
    """The anchor's fields in `ANCHOR_FIELDS` order, as stores keep them."""
    return tuple(getattr(a, f) for f in ANCHOR_FIELDS)


def check_anchors(anchors: Sequence[Anchor], key: bytes | None) -> VerifyResult | None:
    """None when the anchors (oldest first) are one sealed chain, each archive starting
    after the one before; else a failed result naming the first bad anchor.

    With `key`, plain seals are accepted only before the first keyed one (archives made
    before the key was set) and the last anchor must be keyed: an anchor added by someone
    without the key fails."""
    prev_seq, prev_seal, keyed = 0, GENESIS, False
    for a in anchors:
        plain = chain_hash(a.prev_seal, a.body()) == a.seal
        with_key = key is not None and hmac.compare_digest(
            chain_hash(a.prev_seal, a.body(), key), a.seal
        )
        problem = None
        if a.first_seq != prev_seq + 1 or a.seq < a.first_seq:
            problem = (
                f"it names records {a.first_seq} to {a.seq}, but the archive before it ended "
                f"at record {prev_seq}"
            )
        elif a.prev_seal != prev_seal:
            problem = "it is not sealed after the anchor before it"
        elif not (plain or with_key):
            hint = f" (or it was sealed with an audit key: set {KEY_ENV})" if key is None else ""
            problem = f"its seal does not match its fields{hint}"
        elif key is not None and plain and keyed:
            problem = f"it is not sealed with the audit key ({KEY_ENV}) although earlier ones are"
        if problem is not None:
            return _anchor_bad(
                a,
                f"the audit anchor of records {a.first_seq} to {a.seq} "
                f"was forged or edited: {problem}",
            )
        keyed = keyed or with_key
        prev_seq, prev_seal = a.seq, a.seal
    if key is not None and anchors and not keyed:
        a = anchors[-1]
        return _anchor_bad(
            a,
            f"the audit anchor of records {a.first_seq} to {a.seq} is not sealed with the "
            f"audit key ({KEY_ENV}): it was added by someone without the key",
        )
    return None


def _anchor_bad(a: Anchor, problem: str) -> VerifyResult:
    return VerifyResult(ok=False, checked=0, first_bad_seq=a.seq, tamper="edited", problem=problem)


def start_of(anchors: Sequence[Anchor]) -> tuple[int, str] | None:
    """(seq, hash) the store's chain continues from: its last anchor's, None if never archived."""
    return (anchors[-1].seq, anchors[-1].hash) if anchors else None


def verify_store(
    records: Iterable[AuditRecord],
    anchors: Sequence[Anchor],
    *,
    anchor: tuple[int, str] | None,
    key: bytes | None,
) -> VerifyResult:
    """`verify` of a store's chain from its last anchor, after its anchors are checked."""
    bad = check_anchors(anchors, key)
    if bad is not None:
        return bad
    return verify(records, anchor=anchor, key=key, start=start_of(anchors))


# ------------------------------------------------------------------ archive files
def write_archive(path: Path, records: Sequence[AuditRecord]) -> str:
    """Write `records` to a new file at `path`, one JSON record a line; its sha256 (hex).

    Never overwrites: an archive is evidence (`ArchiveFileError` if the file exists). Flushed to
    disk before the store deletes anything."""
    from baton.backends._records import audit_json

    digest = hashlib.sha256()
    try:
        with path.open("xb") as f:
            for r in records:
                line = (audit_json(r) + "\n").encode("utf-8")
                digest.update(line)
                f.write(line)
            f.flush()
            os.fsync(f.fileno())
    except FileExistsError:
        raise ArchiveFileError(
            f"{path} exists: an audit archive is never overwritten; give a new file name"
        ) from None
    except OSError as exc:
        raise ArchiveFileError(f"cannot write the audit archive {path}: {exc}") from None
    return digest.hexdigest()


def file_sha256(path: Path) -> str:
    """sha256 (hex) of a file's bytes."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_archive(path: Path) -> list[AuditRecord]:
    """The records of an archive file; a line that is not a record comes back with empty
    fields (so `verify` names it as edited). `ArchiveFileError` if the file cannot be read."""
    from baton.backends._records import audit_record_of_json

    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ArchiveFileError(f"cannot read the audit archive {path}: {exc}") from None
    if not any(lines):
        raise ArchiveFileError(f"the audit archive {path} holds no records")
    out, seq = [], 0
    for line in filter(None, lines):  # a blank line is no record (the sha256 tells of it)
        record = audit_record_of_json(seq + 1, line)
        seq = record.seq if isinstance(record.seq, int) else seq + 1
        out.append(record)
    return out


def verify_archives(
    paths: Sequence[Path],
    anchors: Sequence[Anchor] | None = None,
    *,
    key: bytes | None = None,
    anchor: tuple[int, str] | None = None,
) -> VerifyResult:
    """Verify archive files, in the order given, as one chain.

    The first file starts the chain at record 1, or right after one of `anchors` (the
    store's, when given). With `anchors`, each file must end at an anchor whose sha256 is
    the file's: a file edited after it was written, or one no archive of the store made,
    fails. `anchor` (`SEQ:HASH` of an earlier verification) must be in the files."""
    records: list[AuditRecord] = []
    lasts: list[AuditRecord] = []
    for path in paths:
        read = read_archive(path)
        records += read
        lasts.append(read[-1])
    first = records[0]
    start = None
    if first.seq != 1:
        ends = {a.seq: a for a in anchors or ()}
        before = ends.get(first.seq - 1)
        if anchors is not None and before is None:
            return VerifyResult(
                ok=False,
                checked=0,
                first_bad_seq=first.seq,
                tamper="deleted",
                problem=f"{paths[0]} starts at record {first.seq}, but no archive of the "
                f"store ends at record {first.seq - 1}: give the archives in order",
            )
        start = (first.seq - 1, before.hash if before is not None else first.prev_hash)
    result = verify(records, key=key, start=start, anchor=anchor)
    if not result.ok or anchors is None:
        return result
    ends = {a.seq: a for a in anchors}
    for path, last in zip(paths, lasts, strict=True):
        found = ends.get(last.seq)
        if found is None or found.hash != last.hash:
            return VerifyResult(
                ok=False,
                checked=result.checked,
                first_bad_seq=last.seq,
                tamper="inserted",
                problem=f"{path} ends at record {last.seq}, where no archive of the store "
                "ended: it is not a file `baton audit archive` wrote for this store",
            )
        if file_sha256(path) != found.sha256:
            return VerifyResult(
                ok=False,
                checked=result.checked,
                first_bad_seq=last.seq,
                tamper="edited",
                problem=f"{path} is not the file archived at {_when(found)}: its sha256 "
                f"differs from the one the store's anchor recorded ({found.sha256[:16]}...)",
            )
    return result


def _when(a: Anchor) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(a.archived_at))


def joined(archives: VerifyResult, store: VerifyResult, anchors: Sequence[Anchor]) -> VerifyResult:
    """One result for archives and the store's chain after them: the first that failed,
    else the store's, counting every record checked, with the archives' `start_seq` (0 when
    they start at record 1). The archives must end at the store's last anchor: the record
    its kept chain links to."""
    if not archives.ok:
        return archives
    if not store.ok:
        return store
    last = anchors[-1] if anchors else None
    if last is None or (archives.head_seq, archives.head_hash) != (last.seq, last.hash):
        begins = "record 1" if last is None else f"after record {last.seq}"
        return VerifyResult(
            ok=False,
            checked=archives.checked + store.checked,
            first_bad_seq=archives.head_seq + 1,
            tamper="deleted",
            problem=f"the archives end at record {archives.head_seq} but the store's chain "
            f"starts {begins}: give every archive of the store, in order",
        )
    return store.model_copy(
        update={"checked": archives.checked + store.checked, "start_seq": archives.start_seq}
    )


# ------------------------------------------------------------------ archive and trim
class ArchiveReport(BaseModel):
    """What one `archive_audit` moved to its file (or, with `dry_run`, would move)."""

    dry_run: bool = Field(description="Nothing was written or deleted.")
    path: str = Field(description="The archive file.")
    archived: int = Field(default=0, description="Records archived.")
    first_seq: int | None = Field(default=None, description="The first record archived.")
    last_seq: int | None = Field(default=None, description="The last record archived.")
    anchor: str | None = Field(
        default=None, description="`SEQ:HASH` of the last record archived: the store's start."
    )
    sha256: str | None = Field(default=None, description="sha256 of the archive file.")
    kept: int = Field(default=0, description="Records left in the store.")
    held_at: int | None = Field(
        default=None,
        description="The first record kept because it vouches for a row still stored "
        "(the cut stopped before it); None when the rules alone chose the cut.",
    )
    bytes_before: int | None = Field(default=None, description="The store's size before.")
    bytes_after: int | None = Field(default=None, description="The store's size after.")
    measured: str = Field(default="", description="What the sizes measure.")


@runtime_checkable
class Archiving(Protocol):
    """A store whose audit chain can be archived to a file and trimmed, with an anchor."""

    async def audit_anchors(self) -> Sequence[Anchor]:
        """The store's archive anchors, oldest first (empty when never archived)."""
        ...

    async def archive_audit(
        self,
        to: str | Path,
        *,
        max_age_s: float | None = None,
        keep: int | None = None,
        dry_run: bool = False,
    ) -> ArchiveReport:
        """Archive the chain's oldest records to the new file `to` and trim them."""
        ...


@dataclass(frozen=True, slots=True)
class Scan:
    """What a store holds for an archive: its chain from its last anchor, the anchors, and
    the ids of the event and message rows still stored."""

    records: Sequence[AuditRecord]
    anchors: Sequence[Anchor]
    stored: set[str]


def vouched(r: AuditRecord) -> list[str]:
    """The ids of the rows a record vouches for: its event's, and its messages'."""
    ids = [r.event_id] if r.event_id else []
    with suppress(ValueError):  # a forged field vouches for nothing; verify names it
        ids += [mid for mid, _ in r.message_entries()]
    return ids


def plan_cut(
    records: Sequence[AuditRecord],
    stored: set[str],
    *,
    max_age_s: float | None,
    keep: int | None,
    now: float,
) -> tuple[int, int | None]:
    """How many of `records` (oldest first) to archive, and the position of the record
    that held the cut back (one vouching for a stored row), if any. The newest record always
    stays: it is the chain's tip, which the next commit links to."""
    n = max(0, len(records) - 1)
    if keep is not None:
        n = min(n, max(0, len(records) - keep))
    if max_age_s is not None:
        cutoff = now - max_age_s
        old = next((i for i, r in enumerate(records) if not r.ts < cutoff), len(records))
        n = min(n, old)
    for i, r in enumerate(records[:n]):
        if any(rid in stored for rid in vouched(r)):
            return i, r.seq
    return n, None


def check_rules(max_age_s: float | None, keep: int | None) -> None:
    """`ConfigError` unless at least one rule is given and each is valid."""
    if max_age_s is None and keep is None:
        raise ConfigError(
            "archive_audit needs a rule: max_age_s (archive records older than this) and/or "
            "keep (keep the newest this many records)"
        )
    if max_age_s is not None and (isinstance(max_age_s, bool) or not 0 < max_age_s < 1e18):
        raise ConfigError(f"archive_audit(max_age_s={max_age_s!r}): give a positive age")
    if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int) or keep < 0):
        raise ConfigError(f"archive_audit(keep={keep!r}): give a whole number of at least 0")


async def archive(
    to: str | Path,
    *,
    max_age_s: float | None,
    keep: int | None,
    dry_run: bool,
    key: bytes | None,
    scan: Callable[[], Awaitable[Scan]],
    trim: Callable[[Anchor, Anchor | None], Awaitable[None]],
    size: Callable[[], Awaitable[int | None]],
    measured: str,
) -> ArchiveReport:
    """The shared part of every store's `archive_audit`: choose the cut, write the file,
    then have the store record the anchor and delete the records (`trim`, one transaction
    that refuses when another archive got there first). The file is removed if `trim`
    fails: the store still holds every record in it.

    The kept chain is read whole (into memory) to choose the cut and to check it before
    anything is written: archive regularly (monthly, say) so that each run handles a bounded
    part of it; in Redis the trim is one script, which holds the server while it deletes."""
    check_rules(max_age_s, keep)
    path = Path(to)
    if path.exists():
        raise ArchiveFileError(
            f"{path} exists: an audit archive is never overwritten; give a new file name"
        )
    report = ArchiveReport(dry_run=dry_run, path=str(path), measured=measured)
    report.bytes_before = await size()
    found = await scan()
    bad = check_anchors(found.anchors, key)
    if bad is not None:
        raise StoreError(f"the store's audit anchors do not verify: {bad.problem}")
    n, report.held_at = plan_cut(
        found.records, found.stored, max_age_s=max_age_s, keep=keep, now=time.time()
    )
    chosen = list(found.records[:n])
    report.kept = len(found.records) - n
    if chosen:
        start = start_of(found.anchors)
        checked = verify(chosen, key=key, start=start)
        if not checked.ok:
            raise StoreError(
                f"the audit chain does not verify, so it is not archived: {checked.problem}"
            )
        report.archived, report.first_seq, report.last_seq = n, chosen[0].seq, chosen[-1].seq
        report.anchor = f"{chosen[-1].seq}:{chosen[-1].hash}"
    if dry_run or not chosen:
        report.bytes_after = report.bytes_before
        return report
    previous = found.anchors[-1] if found.anchors else None
    report.sha256 = write_archive(path, chosen)
    anchor = make_anchor(chosen[0].seq, chosen[-1], report.sha256, previous, key)
    try:
        await trim(anchor, previous)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    report.bytes_after = await size()
    return report
