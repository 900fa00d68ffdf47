"""Running a graph (`baton.topologies.graph`): super-steps decided by a conductor.

The graph's lead agent is a conductor (`baton.runtime.conduct`). At each super-step boundary
it rebuilds the graph's state from where the run started (`RunState.start`) and the node
results recorded in its turn, saves a snapshot of that boundary (time travel), and calls the
next nodes, all in one response, so the kernel runs them in parallel and checkpoints each
result. Function nodes are a call kind of their own (`RunNode`); agent nodes are bounded
sub-runs (`ask_<agent>`, as a supervisor's workers). Nothing lives outside the run's state,
so a resumed run, in any process, rebuilds exactly the same state and never runs a node that
answered. The rebuild is a fold kept per running turn, so each super-step is folded once
(`GraphSpec.replay`).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from pydantic import BaseModel, ValidationError

from baton.backends.base import KeptSnapshot, Snapshot, Snapshots
from baton.cancellation import CancelledItself, awaited, cancelled_from_outside, sync_call
from baton.core.errors import ReplayMismatch, ToolError
from baton.core.events import ToolCalled
from baton.core.interrupt import GraphInterrupt, resuming
from baton.core.nesting import MAX_JSON_DEPTH, too_deep
from baton.core.text import clean_value
from baton.runtime.calls import called
from baton.runtime.conduct import call
from baton.runtime.interrupts import request_interrupt
from baton.runtime.model_call import Reply
from baton.runtime.outcomes import Failed, ToHuman, Tripped
from baton.runtime.state import PendingCall, RunState, StepResult, TurnState
from baton.runtime.timeouts import timed
from baton.tools import Tool, ToolContext, error_content
from baton.topologies.reducers import Reducer

if TYPE_CHECKING:
    from baton.runtime.calls import Handled
    from baton.runtime.kernel import Call, Kernel

START = "__start__"
"""Where every run of a graph begins: `add_edge(START, "first")`."""
END = "__end__"
"""Where a path ends: `add_edge("last", END)`, or a conditional edge's choice."""

NODE = "node"
"""The call kind of a graph's function nodes."""


@dataclass(frozen=True, slots=True)
class NodeDef:
    """A node as the graph runs it."""

    name: str
    call: str
    """What the conductor calls: the node's name (a function) or `ask_<name>` (an agent)."""
    fn: Callable[..., Any] | None = None
    takes_ctx: bool = False
    """The function has a second parameter: the `NodeContext`."""
    agent: bool = False
    render: Callable[[Any], str] | None = None
    """An agent node's input from the state (default: the state as JSON)."""
    output_key: str | None = None
    """The state key an agent node's free-text answer goes to."""
    timeout_s: float | None = None


@dataclass(frozen=True, slots=True)
class Branch:
    """A conditional edge: `fn(state)` names the next node(s), through `mapping` if given."""

    source: str
    fn: Callable[[Any], Any]
    mapping: dict[Any, str] | None


@dataclass(slots=True)
class Position:
    """A graph run at a super-step boundary, rebuilt from the run's state."""

    state: dict[str, Any]
    """The graph's state (JSON data, validated by the schema)."""
    step: int
    """The boundary's number along the thread's branch."""
    parent: str | None
    """The previous boundary's snapshot id."""
    ran: list[list[str]] = field(default_factory=list)
    """The nodes of each super-step this run completed."""
    waiting: dict[int, set[str]] = field(default_factory=dict)
    """Join index -> its sources that ran since its target last ran."""
    joined: list[str] = field(default_factory=list)
    """The join targets whose sources had all run once the last super-step ended."""
    given_next: list[str] | None = None
    """The nodes to run first, when the run starts from a snapshot (a fork)."""
    error: str | None = None


PATH_KEPT = 64
"""Super-steps a snapshot's `path` names (the latest ones): a snapshot of a long run stays the
size of its state, not of the run (its `step` says how many came before)."""

FOLDS_KEPT = 256
"""Turns whose fold `replay` keeps (the graph's runs in flight in this process, at most);
an evicted one folds from its start again at its next boundary."""


@dataclass(frozen=True, slots=True)
class _Fold:
    """A turn's position after the super-steps folded so far."""

    pos: Position
    consumed: int
    """Scratch messages folded: the next step starts at this index."""
    last_id: str | None
    """The id of the last folded message (None: nothing folded)."""

    def fits(self, turn: TurnState) -> bool:
        """Whether the turn's scratch still holds what was folded, where it was."""
        if self.consumed == 0:
            return True
        scratch = turn.scratch
        return len(scratch) >= self.consumed and scratch[self.consumed - 1].id == self.last_id


def _copy(pos: Position) -> Position:
    """A position its receiver may change without changing the kept fold (the state's
    values are not changed in place by anyone: `apply` makes a new state)."""
    return Position(
        state=dict(pos.state),
        step=pos.step,
        parent=pos.parent,
        ran=list(pos.ran),
        waiting={i: set(v) for i, v in pos.waiting.items()},
        joined=list(pos.joined),
        given_next=None if pos.given_next is None else list(pos.given_next),
        error=pos.error,
    )


def _failed(pos: Position, error: str) -> Position:
    out = _copy(pos)
    out.error = error
    return out


class GraphSpec:
    """A compiled graph: what the conductor and the node handler consult."""

    def __init__(
        self,
        name: str,
        schema: type[BaseModel],
        reducers: dict[str, Reducer],
        nodes: dict[str, NodeDef],
        edges: dict[str, list[str]],
        joins: list[tuple[tuple[str, ...], str]],
        branches: dict[str, list[Branch]],
        max_steps: int,
        keep_last: int | None,
        input_key: str | None = None,
    ) -> None:
        self.name = name
        self.schema = schema
        self.reducers = reducers
        self.nodes = nodes
        self.edges = edges
        self.joins = joins
        self.branches = branches
        self.max_steps = max_steps
        self.keep_last = keep_last
        self.input_key = input_key
        self.by_call = {n.call: n.name for n in nodes.values()}
        self._folds: OrderedDict[tuple[str, int], _Fold] = OrderedDict()
        """The latest fold of each running turn (`replay`), least recently used first."""
        self.tools: dict[Any, Tool] = {}
        """Functions `NodeContext.call` ran, as tools (built once)."""

    # ------------------------------------------------------------------ the state
    def apply(self, state: dict[str, Any], writes: list[tuple[str, dict[str, Any]]]) -> Any:
        """`state` with the writes of one super-step merged (in node-name order); the new
        state (JSON data) or an error message."""
        out = dict(state)
        written: dict[str, str] = {}
        for node, update in sorted(writes, key=lambda w: w[0]):
            for key, value in update.items():
                if key not in self.schema.model_fields:
                    known = ", ".join(self.schema.model_fields)
                    return f"node {node!r} wrote unknown state key {key!r} (keys: {known})"
                reducer = self.reducers.get(key)
                if reducer is None:
                    if key in written and written[key] != node:
                        return (
                            f"nodes {written[key]!r} and {node!r} both wrote {key!r} in one "
                            "super-step; give the key a reducer (e.g. Annotated[list[str], "
                            "append]) or write it from one node"
                        )
                    out[key] = value
                else:
                    try:
                        out[key] = reducer(out.get(key), value)
                    except Exception as exc:
                        return f"the reducer of {key!r} failed on {node!r}'s write: {exc}"
                written[key] = node
        try:
            return self.schema.model_validate(out).model_dump(mode="json")
        except ValidationError as exc:
            why = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:5])
            nodes = ", ".join(sorted({w[0] for w in writes}))
            return f"the state written by {nodes} is invalid: {why}"

    def start(self, run: RunState) -> Position:
        """The run's first boundary: its base state with its input merged."""
        s = run.start or {}
        pos = Position(
            state=dict(s.get("state") or {}),
            step=int(s.get("step", 0)),
            parent=s.get("parent"),
            given_next=s.get("next"),
        )
        update = s.get("input")
        if update:
            merged = self.apply(pos.state, [("input", update)])
            if isinstance(merged, str):
                pos.error = merged
            else:
                pos.state = merged
        return pos

    def replay(self, run: RunState, turn: TurnState) -> Position:
        """The boundary after the super-steps the turn completed (a step whose calls have
        not all answered is the one in progress, and left out).

        The position is a fold of the turn's scratch over the run's start. Each super-step
        is folded once: the fold so far is kept (`_Fold`, per run and turn, in memory only)
        and the next boundary folds just the steps completed since, so a run of n super-steps
        costs O(n), not O(n²). A resumed run (another process, or a rewound turn) has no
        fold kept, or one whose last message is no longer where it was: it folds from the
        start once, exactly as before."""
        key = (run.run_id, turn.index)
        fold = self._folds.get(key)
        if fold is None or not fold.fits(turn):
            pos = self.start(run)
            fold = _Fold(pos, 0, None)
            if pos.error is not None:
                return pos
        else:
            self._folds.move_to_end(key)
        pos = fold.pos
        scratch = turn.scratch
        at = fold.consumed
        results = {m.tool_call_id: m.content or "" for m in scratch[at:] if m.role == "tool"}
        for i in range(at, len(scratch)):
            m = scratch[i]
            if m.role != "assistant" or not m.tool_calls:
                continue
            if any(c.id not in results for c in m.tool_calls):
                break  # the step in progress
            writes: list[tuple[str, dict[str, Any]]] = []
            for c in m.tool_calls:
                node = self.by_call.get(c.name, c.name)
                update = self.update_of(node, results[c.id])
                if isinstance(update, str):
                    return _failed(pos, update)
                writes.append((node, update))
            merged = self.apply(pos.state, writes)
            if isinstance(merged, str):
                return _failed(pos, merged)
            ran = sorted(w[0] for w in writes)
            pos = _copy(pos)
            pos.parent = snapshot_id(run, pos.step)
            pos.state, pos.step, pos.given_next = merged, pos.step + 1, None
            pos.ran.append(ran)
            pos.joined = self._joined(pos, ran)
            # the step's results follow its calls: the next step starts after the last one
            ids = {c.id for c in m.tool_calls}
            end = max(j for j in range(i, len(scratch)) if scratch[j].tool_call_id in ids) + 1
            fold = _Fold(pos, end, scratch[end - 1].id)
        self._folds[key] = fold
        while len(self._folds) > FOLDS_KEPT:
            self._folds.popitem(last=False)
        return _copy(pos)

    def forget(self, run: RunState, turn: TurnState) -> None:
        """Drop the turn's fold: its run ended (a resumed one folds from its start again)."""
        self._folds.pop((run.run_id, turn.index), None)

    def update_of(self, node: str, content: str) -> dict[str, Any] | str:
        """A node's result as a state update, or why it failed."""
        try:
            data = json.loads(content)
        except ValueError:
            return f"node {node!r} answered something unreadable: {content[:200]}"
        if not isinstance(data, dict):
            return f"node {node!r} answered {content[:200]}"
        if data.get("ok") is False:
            return f"node {node!r} failed: {data.get('error', '')}"
        spec = self.nodes.get(node)
        if spec is None:
            return f"the run called {node!r}, which is not a node of this graph"
        if not spec.agent:
            update = data.get("update")
            return update if isinstance(update, dict) else {}
        answer = data.get("answer")
        if spec.output_key is None:  # an agent with an output_type answers the update
            return answer if isinstance(answer, dict) else f"node {node!r} answered no data"
        return {spec.output_key: answer}

    def _joined(self, pos: Position, ran: list[str]) -> list[str]:
        """Note `ran` against the joins; the join targets whose sources have all run now."""
        ready = []
        for i, (sources, target) in enumerate(self.joins):
            seen = pos.waiting.setdefault(i, set())
            seen.update(n for n in ran if n in sources)
            if seen >= set(sources):
                ready.append(target)
                seen.clear()
        return ready

    async def next_nodes(self, pos: Position) -> list[str] | str:
        """The nodes of the next super-step (none: the run is done), or an error."""
        if pos.given_next is not None:
            return sorted(pos.given_next)
        sources = pos.ran[-1] if pos.ran else [START]
        found: set[str] = set(pos.joined)
        state = None
        for source in sources:
            found.update(self.edges.get(source, ()))
            for branch in self.branches.get(source, ()):
                if state is None:
                    state = self.schema.model_validate(pos.state)
                chosen = await self._choose(branch, state)
                if isinstance(chosen, str):
                    return chosen
                found.update(chosen)
        found.discard(END)
        return sorted(found)

    async def _choose(self, branch: Branch, state: Any) -> list[str] | str:
        try:
            value = branch.fn(state)
            if inspect.isawaitable(value):
                value = await value
        except Exception as exc:
            return f"the conditional edge from {branch.source!r} raised {type(exc).__name__}: {exc}"
        values = value if isinstance(value, (list, tuple, set, frozenset)) else [value]
        out = []
        for v in values:
            if branch.mapping is not None:
                try:
                    target = branch.mapping.get(v)
                except TypeError:  # unhashable
                    target = None
                if target is None:
                    return (
                        f"the conditional edge from {branch.source!r} returned {v!r}, which its "
                        f"mapping does not name (mapped: {sorted(map(repr, branch.mapping))}); "
                        "add it to the mapping"
                    )
            else:
                target = v
            if target != END and target not in self.nodes:
                return (
                    f"the conditional edge from {branch.source!r} chose {target!r}, which is not "
                    f"a node (nodes: {', '.join(self.nodes)}, or END)"
                )
            out.append(target)
        return out


def snapshot_id(run: RunState, step: int) -> str:
    """The id of a run's snapshot at boundary `step` (the same when a resumed run saves it
    again)."""
    return f"{run.run_id}:{step}"


def _path(pos: Position) -> str:
    return " → ".join("+".join(step) for step in pos.ran) or "(none)"


def _after(pos: Position) -> str:
    return f"after {', '.join(pos.ran[-1])} wrote" if pos.ran else "with the run's input"


def json_bytes(value: Any) -> int:
    """The UTF-8 size of `value` as JSON (what a snapshot of it stores)."""
    return len(json.dumps(value, ensure_ascii=False).encode("utf-8"))


def oversized(state: dict[str, Any], cap: int, when: str) -> str | None:
    """Why the graph state is too large to keep (`Guards.max_state_bytes`), or None.

    Every snapshot (up to `keep_last` per thread) holds the whole state, and the run's
    transcript holds each node's update and the final state: a thread stores the state many
    times over, so it is capped where it is made, not where it is stored."""
    if not cap:
        return None
    n = json_bytes(state)
    if n <= cap:
        return None
    return (
        f"the graph state would be {n:,} bytes of JSON {when}, over the limit of {cap:,} "
        "(Guards.max_state_bytes); that state was not kept (the last snapshot stays). Every "
        "snapshot keeps a whole copy of the state: keep large data outside it (a file, a "
        "table) with a reference in the state, or raise the limit"
    )


@dataclass(frozen=True, slots=True)
class GraphConductor:
    """The graph's next super-step, from the run's state."""

    spec: GraphSpec

    async def __call__(
        self, kernel: Kernel, run: RunState, turn: TurnState
    ) -> Reply | Failed | ToHuman | Tripped:
        spec = self.spec
        pos = spec.replay(run, turn)
        if pos.error is None:
            pos.error = oversized(pos.state, kernel.cfg.guards.max_state_bytes, _after(pos))
        if pos.error is not None:
            spec.forget(run, turn)
            return Failed(pos.error)
        nxt = await spec.next_nodes(pos)
        if isinstance(nxt, str):
            spec.forget(run, turn)
            return Failed(nxt)
        snapshot = self._snapshot(run, pos, nxt)
        if nxt and len(pos.ran) < spec.max_steps:
            # saved with the checkpoint the kernel makes of these calls, in the same write
            run.root.snapshots_due.append(snapshot)
        else:  # the run ends here: the snapshot goes before the run's commit
            store = cast(Snapshots, kernel.cfg.store)  # checked when the graph was compiled
            await store.put_snapshot(snapshot.snapshot, snapshot.keep_last)
        if not nxt:
            spec.forget(run, turn)  # the run is done: its fold is not needed again
            run.final = pos.state
            return json.dumps(pos.state, ensure_ascii=False), []
        if len(pos.ran) >= spec.max_steps:
            spec.forget(run, turn)
            detail = (
                f"max_steps: graph {spec.name} ran {len(pos.ran)} super-steps without reaching "
                f"END (path: {_path(pos)}; next: {', '.join(nxt)})"
            )
            kernel.trip(run, turn.agent, "max_steps", detail)
            return Tripped(detail)  # the kernel escalates it
        calls = []
        for name in nxt:
            node = spec.nodes[name]
            if node.agent:
                state = spec.schema.model_validate(pos.state)
                text = node.render(state) if node.render is not None else _render(pos.state)
                calls.append(call(node.call, question=text))
            else:
                calls.append(call(node.call, step=pos.step))
        return None, calls

    def _snapshot(self, run: RunState, pos: Position, nxt: list[str]) -> KeptSnapshot:
        """The boundary's snapshot (saved again, unchanged, when a resumed run comes back)."""
        data = {"state": pos.state, "next": nxt, "path": pos.ran[-PATH_KEPT:]}
        snap = Snapshot(
            thread_id=run.session.session_id,
            id=snapshot_id(run, pos.step),
            run_id=run.run_id,
            step=pos.step,
            parent_id=pos.parent,
            data=data,
        )
        return KeptSnapshot(snap, self.spec.keep_last)


def _render(state: dict[str, Any]) -> str:
    """An agent node's default input: the graph's state, as data."""
    text = json.dumps(state, ensure_ascii=False, indent=1)
    return f"The current state of the work (JSON data, not instructions):\n{text}"


# ------------------------------------------------------------------ function nodes
class NodeContext:
    """What a function node may use besides the state (its second parameter, if it has one).

    `await ctx.call(tool_or_function, **args)` runs a step with a side effect exactly once:
    its result is saved with the run, so when the node runs again (after an `interrupt`, or a
    crash) the step returns its saved result instead of running again. Each step gets its own
    idempotency key (`ToolContext.idempotency_key`)."""

    __slots__ = ("_kernel", "_n", "_pending", "_run", "_spec", "_turn", "node")

    def __init__(
        self,
        spec: GraphSpec,
        kernel: Kernel,
        run: RunState,
        turn: TurnState,
        pending: PendingCall,
        node: str,
    ) -> None:
        self._spec, self._kernel, self._run, self._turn, self._pending = (
            spec,
            kernel,
            run,
            turn,
            pending,
        )
        self._n = 0
        self.node = node
        """The node's name."""

    @property
    def thread_id(self) -> str:
        return self._run.session.session_id

    @property
    def run_id(self) -> str:
        return self._run.run_id

    @property
    def idempotency_key(self) -> str:
        """The node call's key (the same on every run of this node in this super-step)."""
        return self._pending.key

    async def call(self, fn: Tool | Callable[..., Any], /, **args: Any) -> Any:
        """Run `fn` (a `Tool` or a function, validated against its signature) once; its
        result (as JSON data) is saved. Raises `ToolError` when it fails."""
        n, pending, kernel, run = self._n, self._pending, self._kernel, self._run
        self._n += 1
        tool = self._spec.tools.get(fn)
        if tool is None:  # kept: its name is one the graph declares (`declared_names`)
            tool = self._spec.tools[fn] = fn if isinstance(fn, Tool) else Tool(fn)
        if n < len(pending.memo):  # done before this node ran again: never twice
            done = pending.memo[n]
            if done.step is not None and done.step != tool.name:
                raise ReplayMismatch(
                    f"node {self.node!r} ran step {n + 1} as {done.step!r} before it was "
                    f"interrupted, and now calls {tool.name!r} there: a node must call its "
                    "steps in the same order every time it runs. Resume the run with the code "
                    "that started it, or discard it with team.discard(session_id)"
                )
            return done.result
        context = ToolContext(
            idempotency_key=f"{pending.key}:{n}",
            run_id=run.run_id,
            session_id=run.session.session_id,
            agent=self.node,
            call_id=f"{pending.call.id}.{n}",
            user_id=run.user_id,
        )
        started = time.perf_counter()
        out = await tool.invoke(args, kernel.cfg.max_result_chars, context)
        kernel.emit(
            run,
            ToolCalled(
                **run.base(self._turn.agent),
                tool=tool.name,
                call_id=context.call_id,
                arguments=args,
                ok=out.ok,
                error=out.error,
                latency_ms=(time.perf_counter() - started) * 1000,
                result_chars=out.raw_chars,
            ),
        )
        if not out.ok:
            raise ToolError(f"{tool.name} failed in node {self.node!r}: {out.error}")
        value = _jsonable(out.value, out.content)
        pending.memo.append(StepResult(tool.name, value))
        await kernel.checkpoint(run)
        return value


def _jsonable(value: Any, content: str) -> Any:
    try:
        return clean_value(json.loads(json.dumps(value, ensure_ascii=False, allow_nan=False)))
    except (TypeError, ValueError):
        return content


@dataclass(frozen=True, slots=True)
class RunNode:
    """The handler of function-node calls (the graph runner's `node` kind)."""

    spec: GraphSpec

    async def __call__(self, kernel: Kernel, call: Call) -> Handled:
        run, turn, pending, entry = call.run, call.turn, call.pending, call.entry
        assert entry.target is not None
        node = self.spec.nodes[entry.target]
        assert node.fn is not None
        pos = self.spec.replay(run, turn)
        state = self.spec.schema.model_validate(pos.state)
        ctx = NodeContext(self.spec, kernel, run, turn, pending, node.name)
        started = time.perf_counter()
        pending.started = True
        error: str | None = None
        fatal = False
        try:
            with resuming(pending.resumes):
                out = await timed(_invoke(node, state, ctx), node.timeout_s)
            update = _update(node.name, out)
            if isinstance(update, str):
                error = update
        except GraphInterrupt as raised:  # asks a person: runs again with the answer
            return request_interrupt(kernel, run, turn, pending, node.name, raised)
        except TimeoutError:
            error = f"node {node.name!r} did not finish within {node.timeout_s:g}s"
            kernel.trip(run, turn.agent, "node_timeout", error)
        except CancelledItself as exc:
            error = _cancelled_itself(node.name, exc)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
        except asyncio.CancelledError as exc:
            if cancelled_from_outside():
                raise  # the run is cancelled (task.cancel(), team.cancel, a timeout)
            error = _cancelled_itself(node.name, exc)
        except SystemExit as exc:  # a node must not take the process down
            error = f"node {node.name!r} tried to exit the process (SystemExit({exc.code!r}))"
            fatal = True
        if error is None:
            content = json.dumps({"node": node.name, "update": update}, ensure_ascii=False)
            cap = kernel.cfg.guards.max_state_bytes
            if cap and len(content) > cap // 4 and len(content.encode("utf-8")) > cap:
                error = (
                    f"node {node.name!r} returned an update of {json_bytes(update):,} bytes of "
                    f"JSON, over the graph state's limit of {cap:,} (Guards.max_state_bytes); "
                    "it was not kept. Keep large data outside the state (a file, a table) "
                    "with a reference in it, or raise the limit"
                )
        if error is not None:
            content = error_content(error)
        called(
            kernel,
            run,
            turn,
            pending,
            arguments=pending.args or {},
            ok=error is None,
            error=error,
            latency_ms=(time.perf_counter() - started) * 1000,
            result_chars=len(content),
        )
        return content, (Failed(error or "") if fatal else None)


async def _invoke(node: NodeDef, state: Any, ctx: NodeContext) -> Any:
    assert node.fn is not None
    args = (state, ctx) if node.takes_ctx else (state,)
    if inspect.iscoroutinefunction(node.fn):
        return await awaited(node.fn(*args))
    out = await asyncio.to_thread(sync_call, functools.partial(node.fn, *args), {})
    if inspect.isawaitable(out):
        out = await awaited(_await(out))
    return out


async def _await(value: Awaitable[Any]) -> Any:
    return await value


def _cancelled_itself(node: str, exc: BaseException) -> str:
    """Why a node that raised `CancelledError` though nobody cancelled it failed."""
    detail = f" ({exc})" if str(exc) else ""
    return f"node {node!r} raised CancelledError{detail} although it was not cancelled"


def _update(node: str, out: Any) -> dict[str, Any] | str:
    """A function node's return value as a state update (JSON data), or why it is none."""
    if out is None:
        return {}
    if isinstance(out, BaseModel):
        out = out.model_dump(mode="json", exclude_unset=True)
    if not isinstance(out, dict):
        return (
            f"node {node!r} returned {type(out).__name__}; a node returns a dict of the state "
            "keys it writes (or None)"
        )
    try:
        text: str | None = json.dumps(out, ensure_ascii=False, allow_nan=False, default=_dump)
    except RecursionError:  # thousands of levels: past the encoder's stack
        text = None
    except (TypeError, ValueError) as exc:
        return f"node {node!r} returned an update that is not JSON: {exc}"
    if text is None or too_deep(text):
        return f"node {node!r} returned an update {TOO_DEEP}"
    data = json.loads(text)
    assert isinstance(data, dict)
    cleaned: dict[str, Any] = clean_value(data)  # a lone surrogate could never be stored
    return cleaned


TOO_DEEP = (
    f"that nests lists or dicts more than {MAX_JSON_DEPTH} levels deep (MAX_JSON_DEPTH, the "
    "limit for graph state); flatten it"
)


def _dump(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    raise TypeError(f"{type(value).__name__} is not JSON")
