"""The `AuditTrail` capability: every committed event, and the messages committed with it,
chained in commit order and verified against what the store holds; and `Archiving`: the
chain's oldest records archived to a file and trimmed, the archives and the store verifying
as one chain."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from baton.backends import Store
from baton.backends.archive import Archiving, joined, read_archive, verify_archives
from baton.backends.audit import AuditTrail
from baton.backends.base import Sessions
from baton.backends.retention import Retaining, Retention
from baton.core.errors import ConfigError, ConflictError
from baton.core.messages import Message
from baton.testing.kit import (  # baton_capability: the fixture a star import brings
    baton_capability,  # noqa: F401
    capability,
    make_events,
    new_session,
)


def trail_of(store: Store) -> AuditTrail:
    assert isinstance(store, AuditTrail)
    return store


@capability(Sessions, AuditTrail)
async def test_every_commit_is_chained_in_order_and_verifies(store: Store) -> None:
    trail = trail_of(store)
    assert (await trail.verify_audit()).ok  # an empty chain is intact
    a, b = new_session(), new_session()
    said = [Message(role="user", content="发票在哪里？"), Message(role="assistant", content="x")]
    await store.commit_run(a, said, make_events(a.session_id, "tr_a", "run_a"))
    await store.commit_run(b, [], make_events(b.session_id, "tr_b", "run_b"))
    await store.commit_run(a, [Message(role="user", content="thanks")], [])  # messages alone
    records = await trail.audit_records()
    assert [r.seq for r in records] == list(range(1, 12))
    stored = await store.get_events()
    assert [r.event_id for r in records[:10]] == [e.id for e in stored]
    assert records[10].type == "messages" and records[10].session_id == a.session_id
    assert records[4].messages and not records[3].messages  # a commit's last event vouches
    result = await trail.verify_audit()
    assert result.ok, result.problem
    assert (result.checked, result.head_seq, result.head_hash) == (11, 11, records[-1].hash)
    assert result.events == 10 and result.messages in (3, None)
    assert [r.seq for r in await trail.audit_records(b.session_id)] == list(range(6, 11))
    assert [r.seq for r in await trail.audit_records(limit=2)] == [10, 11]
    assert [r.seq for r in await trail.audit_records(a.session_id, limit=1)] == [11]
    assert await trail.audit_records(limit=0) == []


@capability(Sessions, AuditTrail)
async def test_a_refused_commit_chains_nothing(store: Store) -> None:
    trail = trail_of(store)
    rec = new_session()
    await store.commit_run(rec, [], make_events(rec.session_id, "tr_1", "run_1"))
    stale = new_session(rec.session_id)
    with pytest.raises(ConflictError):
        await store.commit_run(
            stale,
            [Message(role="user", content="lost")],
            make_events(rec.session_id, "tr_2", "run_2"),
        )
    assert len(await trail.audit_records()) == 5
    assert (await trail.verify_audit()).ok


@capability(Sessions, AuditTrail)
async def test_the_chain_verifies_against_its_anchor_only(store: Store) -> None:
    trail = trail_of(store)
    rec = new_session()
    await store.commit_run(rec, [], make_events(rec.session_id, "tr_1", "run_1"))
    head = (await trail.audit_records())[-1]
    assert (await trail.verify_audit(anchor=(head.seq, head.hash))).ok
    await store.commit_run(rec, [], make_events(rec.session_id, "tr_2", "run_2"))
    assert (await trail.verify_audit(anchor=(head.seq, head.hash))).ok  # the chain grew on
    wrong = await trail.verify_audit(anchor=(head.seq, "0" * 64))
    assert not wrong.ok and wrong.problem


# ------------------------------------------------------------------ archive and trim
DAY = 86_400.0


def archiving(store: Store) -> Archiving:
    assert isinstance(store, Archiving)
    return store


async def old_and_new(store: Store) -> tuple[str, str]:
    """Two sessions 100 days old and one of today (5 records each), the old ones' rows
    deleted by retention (one `retention` record each): records 1-10 and 16-17 vouch for
    no stored row, 11-15 do."""
    sessions = []
    for age in (100 * DAY, 100 * DAY, 0.0):
        rec = new_session()
        events = [
            e.model_copy(update={"ts": time.time() - age})
            for e in make_events(rec.session_id, "tr_1", "run_1")
        ]
        said = [Message(role="user", content="发票", ts=time.time() - age)]
        await store.commit_run(rec, said, events)
        sessions.append(rec.session_id)
    assert isinstance(store, Retaining)
    await store.gc(Retention(max_age_s=30 * DAY))
    return sessions[0], sessions[2]


async def whole(store: Store, files: list[Path]) -> None:
    """The store verifies on its own, and with `files` as one chain from record 1."""
    trail = trail_of(store)
    alone = await trail.verify_audit()
    assert alone.ok, alone.problem
    anchors = await archiving(store).audit_anchors()
    both = joined(verify_archives(files, anchors), alone, anchors)
    assert both.ok, both.problem
    assert both.start_seq == 0 and both.head_seq == alone.head_seq


@capability(Sessions, AuditTrail, Retaining, Archiving)
async def test_archive_moves_the_old_records_and_both_verify(store: Store, tmp_path: Path) -> None:
    await old_and_new(store)
    before = await trail_of(store).audit_records()
    report = await archiving(store).archive_audit(tmp_path / "a1.jsonl", max_age_s=30 * DAY)
    assert (report.archived, report.first_seq, report.last_seq) == (10, 1, 10)
    assert report.held_at is None and report.kept == 7  # 11-15 are new, 16-17 retention's
    assert report.anchor == f"10:{before[9].hash}" and report.sha256
    assert [r.hash for r in read_archive(tmp_path / "a1.jsonl")] == [r.hash for r in before[:10]]
    assert [r.seq for r in await trail_of(store).audit_records()] == list(range(11, 18))
    (anchor,) = await archiving(store).audit_anchors()
    assert (anchor.first_seq, anchor.seq, anchor.hash) == (1, 10, before[9].hash)
    await whole(store, [tmp_path / "a1.jsonl"])
    result = await trail_of(store).verify_audit()
    assert (result.start_seq, result.checked, result.events) == (10, 7, 5)


@capability(Sessions, AuditTrail, Retaining, Archiving)
async def test_the_cut_stops_before_a_record_vouching_for_a_stored_row(
    store: Store, tmp_path: Path
) -> None:
    await old_and_new(store)
    report = await archiving(store).archive_audit(tmp_path / "a.jsonl", keep=0)
    assert (report.archived, report.held_at, report.kept) == (10, 11, 7)
    await whole(store, [tmp_path / "a.jsonl"])
    again = await archiving(store).archive_audit(tmp_path / "b.jsonl", keep=0)
    assert (again.archived, again.held_at) == (0, 11)
    assert not (tmp_path / "b.jsonl").exists()  # nothing to archive: no file


@capability(Sessions, AuditTrail, Retaining, Archiving)
async def test_archive_twice_continues_the_chain_and_runs_after_it_append(
    store: Store, tmp_path: Path
) -> None:
    _, new = await old_and_new(store)
    a1, a2 = tmp_path / "a1.jsonl", tmp_path / "a2.jsonl"
    await archiving(store).archive_audit(a1, keep=12)  # records 1-5
    rec = await store.get_session(new)
    assert rec is not None
    await store.commit_run(rec, [Message(role="user", content="more")], [])
    assert isinstance(store, Retaining)
    await store.gc(Retention(keep_messages=0, keep_events=0))  # today's rows go too
    second = await archiving(store).archive_audit(a2, keep=1)
    first, then = read_archive(a1), read_archive(a2)
    assert (first[-1].seq, then[0].seq) == (5, 6)
    assert then[0].prev_hash == first[-1].hash  # the second file starts where the first ended
    assert second.last_seq == then[-1].seq and len(await archiving(store).audit_anchors()) == 2
    await whole(store, [a1, a2])
    rec = await store.get_session(new)
    assert rec is not None
    await store.commit_run(
        rec, [Message(role="user", content="after")], make_events(new, "tr_2", "run_2")
    )
    tail = await trail_of(store).audit_records()
    assert [r.seq for r in tail] == list(range(19, 25))  # 19: gc's; 20-24 the new run's
    await whole(store, [a1, a2])
    wrong_order = joined(
        verify_archives([a2, a1], await archiving(store).audit_anchors()),
        await trail_of(store).verify_audit(),
        await archiving(store).audit_anchors(),
    )
    assert not wrong_order.ok and wrong_order.tamper == "reordered"
    missing = joined(
        verify_archives([a2], await archiving(store).audit_anchors()),
        await trail_of(store).verify_audit(),
        await archiving(store).audit_anchors(),
    )
    assert missing.ok and missing.start_seq == 5  # a later archive alone: where it starts


@capability(Sessions, AuditTrail, Retaining, Archiving)
async def test_a_tampered_archive_line_is_named(store: Store, tmp_path: Path) -> None:
    await old_and_new(store)
    path = tmp_path / "a.jsonl"
    await archiving(store).archive_audit(path, keep=0)
    lines = path.read_text(encoding="utf-8").splitlines()
    anchors = await archiving(store).audit_anchors()
    edited = json.loads(lines[3])
    edited["data"] = edited["data"].replace("run_1", "run_X")
    forged = tmp_path / "forged.jsonl"
    forged.write_text("\n".join([*lines[:3], json.dumps(edited), *lines[4:]]) + "\n")
    result = verify_archives([forged], anchors)
    assert (result.ok, result.tamper, result.first_bad_seq) == (False, "edited", 4)
    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join([*lines[:6], *lines[7:]]) + "\n")
    result = verify_archives([cut], anchors)
    assert (result.ok, result.tamper, result.first_bad_seq) == (False, "deleted", 7)
    tail = tmp_path / "tail.jsonl"
    tail.write_text("\n".join(lines[:-1]) + "\n")  # intact inside, but short of the anchor
    result = verify_archives([tail], anchors)
    assert not result.ok and result.first_bad_seq == 9
    spaced = tmp_path / "spaced.jsonl"
    spaced.write_text("\n".join(lines) + "\n\n")  # same records, not the file archived
    result = verify_archives([spaced], anchors)
    assert (result.ok, result.tamper) == (False, "edited") and "sha256" in (result.problem or "")
    assert verify_archives([path], anchors).ok


@capability(Sessions, AuditTrail, Retaining, Archiving)
async def test_archive_refuses_bad_input_and_a_dry_run_changes_nothing(
    store: Store, tmp_path: Path
) -> None:
    await old_and_new(store)
    path = tmp_path / "a.jsonl"
    with pytest.raises(ConfigError, match=r"max_age_s.*keep"):
        await archiving(store).archive_audit(path)
    with pytest.raises(ConfigError, match="keep=-1"):
        await archiving(store).archive_audit(path, keep=-1)
    report = await archiving(store).archive_audit(path, keep=0, dry_run=True)
    assert report.dry_run and report.archived == 10 and not path.exists()
    assert len(await trail_of(store).audit_records()) == 17
    assert await archiving(store).audit_anchors() == []
    path.write_text("evidence\n")
    with pytest.raises(ConfigError, match="never overwritten"):
        await archiving(store).archive_audit(path, keep=0)
    assert path.read_text() == "evidence\n" and len(await trail_of(store).audit_records()) == 17
