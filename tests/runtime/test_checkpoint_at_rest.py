"""A paused or crashed run's checkpoint at rest, end to end on SQLite, PostgreSQL and Redis:
with checkpoint keys it is sealed and the resumed run has the real values; without, its
secrets are masked and a call that lost one is never run with the mask (the model is told to
ask the user again). A fresh `Team` on a fresh store object is another process."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from tests.backends.sealing_kit import K1, K2, PLACES, Place, holds, keys

from baton import (
    END,
    START,
    Agent,
    Graph,
    MemoryStore,
    NodeContext,
    ScriptedModel,
    StoreError,
    Team,
    interrupt,
    tool,
)
from baton.backends.base import SessionRecord, Store
from baton.backends.sealing import KEY_ENV, PREFIX, sealed_key_id
from baton.core.messages import Message, ToolCall
from baton.models import ModelRequest, Step
from baton.runtime.at_rest import masked_state
from baton.runtime.redact import Redactor
from baton.runtime.state import PendingCall, RunState, TurnState

S = ScriptedModel
SECRET = "Zq7Hunter长城42"
ASKED = f"请把账号 li 的密码重置一下，我的新密码是{SECRET}，谢谢"


@pytest.fixture(autouse=True)
def _no_env_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)


@pytest.fixture(params=PLACES)
async def place(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Place]:
    made = Place(request.param, tmp_path)
    try:
        yield made
    finally:
        await made.close()


class Desk:
    """An IT desk whose `reset_password` tool needs a person's approval (unless `approval`
    is False) and records every password it really got."""

    def __init__(self, password: str = SECRET, approval: bool = True) -> None:
        self.password = password
        self.got: list[str] = []
        self.during: list[Any] = []
        """What `while_running` returned each time the tool ran."""
        self.while_running: Any = None
        self.gate: asyncio.Event | None = None
        """Set: the first run of the tool waits on it (a process killed mid-call)."""

        @tool(requires_approval=approval)
        async def reset_password(user: str, password: str) -> dict[str, Any]:
            """Reset a user's password.

            Args:
                user: The account.
                password: The new password.
            """
            self.got.append(password)
            if self.while_running is not None:
                self.during.append(await self.while_running())
            if self.gate is not None and len(self.got) == 1:
                await self.gate.wait()
            return {"reset": user}

        self.tool = reset_password

    def script(self, request: ModelRequest) -> Step:
        last = request.messages[-1]
        if last.role == "tool":
            return S.say(f"result: {last.content}")
        return S.call("reset_password", user="li", password=self.password)

    def team(self, store: Store, **options: Any) -> Team:
        agent = Agent(name="it", instructions="You reset passwords.", tools=[self.tool])
        return Team([agent], entry="it", model=S(self.script), store=store, **options)


async def paused(desk: Desk, store: Store, sid: str = "S1", message: str = ASKED) -> str:
    """Run until the tool waits for approval; its approval id."""
    team = desk.team(store)
    result = await team.run(message, session_id=sid, user_id="li")
    assert result.status == "awaiting_approval" and result.approval is not None
    await team.aclose()
    return result.approval.id


def tool_results(result: Any) -> list[Any]:
    return [e for e in result.events if e.type == "tool_called"]


# ---------------------------------------------------------------- without a key


async def test_without_a_key_the_paused_secret_is_masked_and_never_run_masked(
    place: Place,
) -> None:
    desk = Desk()
    approval = await paused(desk, place.open())
    dump = await place.dump()
    assert not holds(dump, SECRET), "a secret is stored in clear"
    raw = json.loads(await place.raw_data("S1"))  # in clear, but masked
    [call] = raw["turn"]["calls"]
    assert call["args"]["password"] == "[REDACTED:password]"
    assert call["masked"] == ["password"]
    # masked alike in the transcript and the checkpoint: the committed messages are named
    assert raw["messages"] == [] and raw["committed"]["messages"] == raw["saved_messages"] > 0

    other = desk.team(place.open())  # another process decides
    result = await other.approve("S1", approval, by="boss")

    assert result.status == "completed"
    assert desk.got == []  # never run with "[REDACTED:password]"
    [refused] = tool_results(result)
    assert not refused.ok and "is a mask, not the secret itself" in (refused.error or "")
    assert "ask the user for it again" in (result.output or "")
    assert not holds(await place.dump(), SECRET)


async def killed_in_the_call(desk: Desk, team: Team) -> None:
    """Run `ASKED` until its tool hangs at the desk's gate (the call's checkpoint saved before
    it), then cancel the run there: with `dies_when_cancelled`, a process killed mid-call.
    Waits for the tool itself rather than a fixed time, which a loaded machine outlasts."""
    run = asyncio.ensure_future(team.run(ASKED, session_id="S1", user_id="li"))
    for _ in range(6000):  # up to a minute
        if desk.got:
            break
        assert not run.done(), f"the run ended before its tool ran: {run.result()}"
        await asyncio.sleep(0.01)
    assert desk.got, "the tool was not reached within a minute"
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run


@pytest.mark.usefixtures("dies_when_cancelled")
async def test_without_a_key_a_crashed_call_is_not_run_again_with_the_mask(
    place: Place,
) -> None:
    desk = Desk(approval=False)
    desk.gate = asyncio.Event()  # the first attempt hangs: the process is killed there
    team = desk.team(place.open(), lease_s=0.5)
    await killed_in_the_call(desk, team)
    assert desk.got == [SECRET]  # the live run had the real value
    assert not holds(await place.raw_data("S1"), SECRET)

    result = await desk.team(place.open(), lease_s=0.5).resume("S1")

    assert desk.got == [SECRET]  # not run again with the masked text
    assert result.status == "completed" and "ask the user for it again" in (result.output or "")


# ---------------------------------------------------------------- with a key


async def test_with_a_key_the_checkpoint_is_sealed_and_the_resumed_call_gets_the_secret(
    place: Place,
) -> None:
    desk = Desk()
    approval = await paused(desk, place.open(keys(K1)))
    raw = await place.raw_data("S1")
    assert raw.startswith(f"{PREFIX}v1:k1:")
    assert not holds(await place.dump(), SECRET)
    # the transcript is stored masked, the sealed state holds the real text: the checkpoint
    # keeps the committed messages whole and names only the committed events (format 3)
    cp = await place.open(keys(K1)).get_checkpoint("S1")
    assert cp is not None and SECRET in cp.state_json()
    committed = json.loads(cp.state_json())["committed"]
    assert committed["messages"] == 0 and committed["events"] > 0

    result = await desk.team(place.open(keys(K1))).approve("S1", approval, by="boss")

    assert result.status == "completed" and desk.got == [SECRET]
    assert '"reset": "li"' in (result.output or "")


@pytest.mark.usefixtures("dies_when_cancelled")
async def test_with_a_key_a_crashed_call_runs_again_with_the_real_value(place: Place) -> None:
    desk = Desk(approval=False)
    desk.gate = asyncio.Event()
    team = desk.team(place.open(keys(K1)), lease_s=0.5)
    await killed_in_the_call(desk, team)
    assert sealed_key_id(await place.raw_data("S1")) == "k1"

    result = await desk.team(place.open(keys(K1)), lease_s=0.5).resume("S1")

    assert result.status == "completed" and desk.got == [SECRET, SECRET]


async def test_a_key_rotated_while_the_run_waits_keeps_it_resumable(place: Place) -> None:
    desk = Desk()
    approval = await paused(desk, place.open(keys(K1)))
    rotating = place.open(keys(K2, K1))  # every process now seals with k2, still opens k1
    report = await rotating.rekey_checkpoints()  # type: ignore[attr-defined]
    assert report.resealed == ["S1"] and report.complete
    assert sealed_key_id(await place.raw_data("S1")) == "k2"

    result = await desk.team(place.open(keys(K2))).approve("S1", approval, by="boss")

    assert result.status == "completed" and desk.got == [SECRET]


async def test_a_removed_key_is_a_clear_error_that_loses_nothing(place: Place) -> None:
    desk = Desk()
    approval = await paused(desk, place.open(keys(K1)))
    keyless = desk.team(place.open())
    [listed] = await keyless.unfinished()  # listed without the key
    assert listed.sealed_with == "k1" and listed.unreadable is not None
    assert [c.id for c in await keyless.approvals()] == [approval]
    with pytest.raises(StoreError, match="encrypted with checkpoint key 'k1'") as caught:
        await keyless.approve("S1", approval, by="boss")
    assert KEY_ENV in str(caught.value) and "discard" in str(caught.value)
    assert desk.got == []
    wrong = desk.team(place.open(keys(K2)))
    with pytest.raises(StoreError, match="keyring does not hold"):
        await wrong.approve("S1", approval, by="boss")

    result = await desk.team(place.open(keys(K1))).approve("S1", approval, by="boss")

    assert result.status == "completed" and desk.got == [SECRET]


async def test_a_blob_moved_or_changed_is_refused_and_nothing_runs(place: Place) -> None:
    desk = Desk()
    first = await paused(desk, place.open(keys(K1)), "S1")
    second = await paused(desk, place.open(keys(K1)), "S2")
    own = await place.raw_data("S2")
    await place.set_raw_data("S2", await place.raw_data("S1"))
    team = desk.team(place.open(keys(K1)))
    with pytest.raises(StoreError, match="copied from another session or run"):
        await team.approve("S2", second, by="boss")
    flipped = own[:30] + ("x" if own[30] != "x" else "y") + own[31:]
    await place.set_raw_data("S2", flipped)
    with pytest.raises(StoreError, match="changed or cut short"):
        await team.approve("S2", second, by="boss")
    assert desk.got == []
    await place.set_raw_data("S2", own)
    assert (await team.approve("S2", second, by="boss")).status == "completed"
    assert (await team.approve("S1", first, by="boss")).status == "completed"
    assert desk.got == [SECRET, SECRET]


async def test_a_checkpoint_saved_in_clear_resumes_with_a_key_and_is_sealed_anew(
    place: Place,
) -> None:
    desk = Desk()
    legacy = desk.team(place.open(), mask_at_rest=False)  # as stores kept checkpoints before
    result = await legacy.run(ASKED, session_id="S1", user_id="li")
    assert result.approval is not None
    assert holds(await place.raw_data("S1"), SECRET)
    desk.while_running = lambda: place.raw_data("S1")  # the row as the tool runs

    done = await desk.team(place.open(keys(K1))).approve("S1", result.approval.id, by="boss")

    assert done.status == "completed" and desk.got == [SECRET]
    [row] = desk.during  # the decision was saved, sealed, before the call ran
    assert row.startswith(f"{PREFIX}v1:k1:") and not holds(row, SECRET)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("Zq7\ud800Hunter长城42", "Zq7\ufffdHunter长城42"),  # a lone surrogate is cleaned
        ("Zq7\u200bHunter\u202e长城42", "Zq7\u200bHunter\u202e长城42"),  # kept exactly
        ("x" * 200_000 + "长城", "x" * 200_000 + "长城"),  # huge
    ],
)
async def test_odd_and_huge_secrets_seal_and_come_back_exactly(
    place: Place, given: str, expected: str
) -> None:
    desk = Desk(password=given)
    approval = await paused(desk, place.open(keys(K1)), message="reset li's password please")
    raw = await place.raw_data("S1")
    assert raw.startswith(PREFIX) and "Hunter" not in raw and "xxxxxxxx" not in raw

    result = await desk.team(place.open(keys(K1))).approve("S1", approval, by="boss")

    assert result.status == "completed" and desk.got == [expected]


async def test_odd_secrets_without_a_key_are_masked_whole(place: Place) -> None:
    desk = Desk(password="Zq7\u200bHunter\u202e长城42")
    await paused(desk, place.open(), message="reset li's password please")
    raw = await place.raw_data("S1")
    assert "Hunter" not in raw and "长城42" not in raw


async def test_a_mask_the_model_copies_from_the_masked_transcript_is_never_run() -> None:
    desk = Desk(approval=False)
    team = desk.team(MemoryStore())
    first = await team.run(ASKED, session_id="S1", user_id="li")
    assert first.status == "completed" and desk.got == [SECRET]
    earlier = [m.content for m in await team.store.get_messages("S1") if m.role == "user"]
    assert "[REDACTED:密码]" in earlier[0]  # what the next run reads
    desk.password = "[REDACTED:password]"  # the model copies the mask it was shown

    second = await team.run("用同一个密码再重置一次", session_id="S1", user_id="li")

    assert desk.got == [SECRET]  # not run with the mask
    assert "ask the user for it again" in (second.output or "")
    desk.password = "my note quotes [REDACTED:password] but is not one"
    third = await team.run("once more", session_id="S1", user_id="li")
    assert third.status == "completed" and len(desk.got) == 2  # a text quoting a mask runs


class Login(BaseModel):
    token: str = ""
    used: str = ""


async def test_a_conductor_replays_exact_results_from_a_keyless_checkpoint(
    place: Place,
) -> None:
    def build() -> Any:
        async def fetch(state: Login) -> dict[str, Any]:
            return {"token": "sk-live-Zq7Hunter0123456789abcdef"}

        async def confirm(state: Login, ctx: NodeContext) -> dict[str, Any]:
            interrupt("use this token?")
            return {"used": state.token}

        g = Graph(Login).add_node("fetch", fetch).add_node("confirm", confirm)
        g.add_edge(START, "fetch").add_edge("fetch", "confirm").add_edge("confirm", END)
        return g.compile(store=place.open())

    paused_graph = await build().invoke({}, thread_id="T1")
    assert paused_graph.status == "interrupted"

    done = await build().resume("T1", "yes")  # another process answers

    assert done.status == "completed", done.error
    assert done.final.used == "sk-live-Zq7Hunter0123456789abcdef"  # not the mask


@pytest.mark.usefixtures("dies_when_cancelled")
async def test_an_unopenable_crashed_run_stops_the_next_message_clearly_and_can_be_discarded(
    place: Place,
) -> None:
    desk = Desk(approval=False)
    desk.gate = asyncio.Event()
    team = desk.team(place.open(keys(K1)), lease_s=0.5)
    await killed_in_the_call(desk, team)
    keyless = desk.team(place.open(), lease_s=0.5)
    with pytest.raises(StoreError, match="encrypted with checkpoint key 'k1'"):
        await keyless.run("hello again", session_id="S1", user_id="li")
    assert [cp.sealed_with for cp in await keyless.unfinished()] == ["k1"]  # still there
    dropped = await keyless.discard("S1")  # no key needed to give it up
    assert dropped.unreadable is not None
    assert (await keyless.run("hello again", session_id="S1", user_id="li")).status == ("completed")


async def test_rekey_while_runs_checkpoint_never_breaks_them(place: Place) -> None:
    steps: list[int] = []

    @tool
    async def step(n: int) -> dict[str, int]:
        """One step.

        Args:
            n: Which.
        """
        steps.append(n)
        return {"n": n}

    def script(request: ModelRequest) -> Step:
        done = sum(1 for m in request.messages if m.role == "tool")
        return S.say("done") if done >= 8 else S.call("step", n=done)

    def worker(ring: Any) -> Team:
        model = S(script, latency_s=0.005)
        agent = Agent(name="w", tools=[step], max_iterations=20)
        return Team([agent], entry="w", model=model, store=place.open(ring))

    old, new = worker(keys(K1)), worker(keys(K2, K1))  # a process not yet given the new key
    rekeyer = place.open(keys(K2, K1))
    runs = [
        asyncio.create_task(old.run("go", session_id="S-old")),
        asyncio.create_task(new.run("go", session_id="S-new")),
    ]
    seen: dict[str, int] = {}
    while not all(r.done() for r in runs):
        await rekeyer.rekey_checkpoints()  # type: ignore[attr-defined]
        for cp in await rekeyer.list_checkpoints():
            cp.state_json()  # always opens: never a half-swapped or stale row
            assert cp.seq >= seen.get(cp.session_id, 0)
            seen[cp.session_id] = cp.seq
    results = [await r for r in runs]
    assert [r.status for r in results] == ["completed", "completed"]
    assert sorted(steps) == sorted(list(range(8)) * 2)  # every step once per run
    assert await rekeyer.list_checkpoints() == []


PASSWORDS = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs", "Zs", "Zl", "Zp")),
    min_size=8,
    max_size=24,
).filter(lambda p: "[" not in p and not any(c.isspace() for c in p) and p[0] not in "\"'&")
"""Secrets a redactor finds in `password: <secret>`: one word (a secret ends at whitespace,
any Unicode space included; one opened by a quote or `&` is left alone in free text); under
a key (slots, arguments) any value is masked, JSON escapes (`\\b`, `\\u00ad`) included."""


def planted(secret: str) -> RunState:
    """A run holding `secret` in its message, a session slot and a pending call."""
    session = SessionRecord("S1", state={"api_key": secret, "order_id": "ORD-1"})
    r = RunState(session, f"password: {secret}", "li", run_id="run_1", trace_id="t1")
    call = ToolCall(id="c1", name="login", arguments=json.dumps({"password": secret}))
    r.messages.append(Message(role="assistant", tool_calls=[call], agent="it", id="m1", ts=1.0))
    r.turn = TurnState(0, "it", None, None, "routed", scratch=list(r.messages))
    r.turn.calls = [PendingCall(call, {"user": "li", "password": secret}, None, key="k")]
    return r


@settings(max_examples=60, deadline=None)
@given(secret=PASSWORDS)
@example(secret="\x080000000")  # JSON writes it `\b0000000`: the text rules alone missed it
@example(secret="\xadZq7-hunter")  # `\u00ad...` in ASCII JSON
def test_a_masked_checkpoint_holds_no_planted_secret_and_leaves_the_run_as_it_was(
    secret: str,
) -> None:
    red = Redactor()
    # a secret that is a word of the state's JSON itself ("fallback") proves nothing
    assume(secret not in masked_state(red, planted("Zq7-none")).to_json())
    r = planted(secret)
    before = r.to_json()

    masked = masked_state(red, r).to_json()

    assert secret not in masked and json.dumps(secret)[1:-1] not in masked
    assert r.to_json() == before  # the live run keeps its real values
    loaded = RunState.from_json(masked)
    assert loaded.turn is not None and loaded.turn.calls[0].masked == ["password"]
    assert loaded.session.state["order_id"] == "ORD-1"
