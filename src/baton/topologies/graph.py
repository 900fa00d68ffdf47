"""`Graph`: nodes, edges, conditional edges and cycles over a typed state (seed 000 §2.3).

Build a graph like LangGraph's `StateGraph` — `Graph(State)`, `add_node`, `add_edge`,
`add_conditional_edges`, `START`/`END`, reducers per state key — then `compile()` it into a
`CompiledGraph`, a `Team` whose runs go super-step by super-step: the nodes a step calls run
in parallel, their writes merge through the reducers in node-name order, and the next step's
nodes follow from the edges. Cycles are allowed and bounded by `max_steps` (the run then
escalates, naming its path). A node is an `Agent` (a bounded sub-run that sees the state) or
a function of the state (async or not) returning the keys it writes.

Where it goes beyond LangGraph: `interrupt(value)` stops the run and `resume(thread_id,
answer)` runs only the call that asked again — not the whole node — and a function node's
steps done with `ctx.call(...)` are never repeated; checkpoints and approvals are the
kernel's; snapshots of every super-step (`history`, forks with `from_checkpoint`) are kept
within a retention bound (`keep_last`).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pydantic import BaseModel

from baton.agents import Agent
from baton.backends.base import SessionRecord, Snapshot, Snapshots
from baton.core.errors import ConfigError, InterruptError, NoRunToResume
from baton.core.nesting import too_deep, value_too_deep
from baton.core.text import clean_text, clean_value
from baton.observe.declared import DeclaredNames
from baton.runtime.blueprint import SNAPSHOTS, Blueprint
from baton.runtime.conduct import Conducted
from baton.runtime.delegation import Ask, ask_tool_name
from baton.runtime.kernel import Kind
from baton.runtime.plan import CallEntry, Extra
from baton.runtime.result import RunResult
from baton.topologies.graph_steps import (
    END,
    NODE,
    START,
    TOO_DEEP,
    Branch,
    GraphConductor,
    GraphSpec,
    NodeContext,
    NodeDef,
    RunNode,
    oversized,
)
from baton.topologies.mermaid import Flowchart
from baton.topologies.reducers import reducers_of
from baton.topologies.supervisor import delegation
from baton.topologies.team import Team

__all__ = ["END", "START", "CompiledGraph", "Graph", "NodeContext", "StateSnapshot"]

_UNSET: Any = object()


class Graph:
    """A graph under construction: `Graph(State)` with a pydantic model as its state."""

    def __init__(self, state_schema: type[BaseModel], *, name: str = "graph") -> None:
        if not (isinstance(state_schema, type) and issubclass(state_schema, BaseModel)):
            raise ConfigError("Graph(state_schema) needs a pydantic BaseModel subclass")
        self.schema = state_schema
        self.name = name
        self.reducers = reducers_of(state_schema)
        self.nodes: dict[str, NodeDef] = {}
        self.agents: dict[str, Agent] = {}
        self.edges: dict[str, list[str]] = {}
        self.joins: list[tuple[tuple[str, ...], str]] = []
        self.branches: dict[str, list[Branch]] = {}

    def add_node(
        self,
        name: str,
        node: Agent | Callable[..., Any],
        *,
        output_key: str | None = None,
        input: Callable[[Any], str] | None = None,
        timeout_s: float | None = None,
    ) -> Graph:
        """Add a node. A function gets the state (and, with a second parameter, a
        `NodeContext`) and returns a dict of the keys it writes, or None. An agent sees the
        state (or `input(state)`) and its answer is written to `output_key` (default
        `messages` when the state has it), or, for an agent with an `output_type` whose
        fields are state keys, its fields are."""
        if not isinstance(name, str) or not name.strip():
            raise ConfigError("a node needs a non-empty name")
        if name in (START, END):
            raise ConfigError(f"{name!r} is reserved; name the node otherwise")
        if name in self.nodes or name == self.name:
            raise ConfigError(f"node {name!r} already exists (or is the graph's own name)")
        if isinstance(node, Agent):
            self._agent_node(name, node, output_key, input, timeout_s)
        elif callable(node):
            if output_key is not None or input is not None:
                raise ConfigError(
                    f"node {name!r}: output_key and input are for agent nodes; a function "
                    "returns the keys it writes"
                )
            self.nodes[name] = NodeDef(
                name=name,
                call=name,
                fn=node,
                takes_ctx=_takes_ctx(name, node),
                timeout_s=timeout_s,
            )
        else:
            raise ConfigError(f"node {name!r} must be an Agent or a function")
        return self

    def _agent_node(
        self,
        name: str,
        agent: Agent,
        output_key: str | None,
        render: Callable[[Any], str] | None,
        timeout_s: float | None,
    ) -> None:
        fields = self.schema.model_fields
        if agent.handoffs:
            raise ConfigError(f"agent node {name!r} has handoffs; the graph's edges lead on")
        out = agent.output_type
        if output_key is None and out is None:
            if "messages" not in fields:
                raise ConfigError(
                    f"agent node {name!r}: say which state key its answer goes to "
                    f"(add_node({name!r}, agent, output_key=...)); keys: {', '.join(fields)}"
                )
            output_key = "messages"
        if output_key is not None and output_key not in fields:
            raise ConfigError(
                f"agent node {name!r}: output_key {output_key!r} is not a state key "
                f"(keys: {', '.join(fields)})"
            )
        if output_key is None and isinstance(out, type) and issubclass(out, BaseModel):
            unknown = set(out.model_fields) - set(fields)
            if unknown:
                raise ConfigError(
                    f"agent node {name!r}: its output_type {out.__name__} has fields "
                    f"{sorted(unknown)} that are not state keys; name an output_key instead"
                )
        if agent.name != name:
            agent = agent.model_copy(update={"name": name})
        self.agents[name] = agent
        self.nodes[name] = NodeDef(
            name=name,
            call=ask_tool_name(name),
            agent=True,
            render=render,
            output_key=output_key,
            timeout_s=timeout_s,
        )

    def add_edge(self, source: str | Sequence[str], target: str) -> Graph:
        """`source` -> `target` after each super-step in which `source` ran. With a list of
        sources, `target` runs once all of them have run (a join)."""
        if isinstance(source, str):
            self.edges.setdefault(source, [])
            if target not in self.edges[source]:
                self.edges[source].append(target)
        else:
            sources = tuple(source)
            if not sources:
                raise ConfigError("add_edge needs at least one source")
            self.joins.append((sources, target))
        return self

    def add_conditional_edges(
        self,
        source: str,
        path: Callable[[Any], Hashable | Sequence[Hashable]],
        path_map: dict[Hashable, str] | Sequence[str] | None = None,
    ) -> Graph:
        """After `source` runs, `path(state)` chooses the next node(s) (a list fans out):
        through `path_map` (value -> node) when given, else by name (or `END`). A value the
        map does not name ends the run `failed`, saying so. Keep `path` a pure function of
        the state."""
        if not callable(path):
            raise ConfigError(f"the conditional edge from {source!r} needs a callable path")
        mapping: dict[Any, str] | None
        if path_map is None:
            mapping = None
        elif isinstance(path_map, dict):
            mapping = dict(path_map)
        else:
            mapping = {name: name for name in path_map}
        self.branches.setdefault(source, []).append(Branch(source, path, mapping))
        return self

    def to_mermaid(self) -> str:
        """The graph as a Mermaid flowchart (no need to compile it first)."""
        return graph_chart(self)

    def set_entry_point(self, node: str) -> Graph:
        """`add_edge(START, node)`."""
        return self.add_edge(START, node)

    def set_finish_point(self, node: str) -> Graph:
        """`add_edge(node, END)`."""
        return self.add_edge(node, END)

    # ------------------------------------------------------------------ compile
    def validate(self) -> None:
        """Raise `ConfigError` for a graph that cannot run as built: no start, edges to or
        from unknown nodes, a mapping to an unknown node, unreachable nodes."""
        known = set(self.nodes)
        if not self.edges.get(START) and START not in self.branches:
            raise ConfigError("the graph has no entry: add_edge(START, '<first node>')")
        problems = []
        for source, targets in self.edges.items():
            if source not in known and source != START:
                problems.append(f"an edge starts at unknown node {source!r}")
            if source == END:
                problems.append("an edge starts at END")
            problems += [
                f"edge {source!r} -> unknown node {t!r}" for t in targets if _bad(t, known)
            ]
        for sources, target in self.joins:
            problems += [f"a join starts at unknown node {s!r}" for s in sources if s not in known]
            if _bad(target, known):
                problems.append(f"a join leads to unknown node {target!r}")
        for source, branches in self.branches.items():
            if source not in known and source != START:
                problems.append(f"a conditional edge starts at unknown node {source!r}")
            for b in branches:
                for value, t in (b.mapping or {}).items():
                    if _bad(t, known):
                        problems.append(
                            f"the conditional edge from {source!r} maps {value!r} to unknown "
                            f"node {t!r}"
                        )
        if problems:
            raise ConfigError("; ".join(problems) + f" (nodes: {', '.join(self.nodes) or 'none'})")
        unreachable = known - self._reachable()
        if unreachable:
            raise ConfigError(
                f"nodes {sorted(unreachable)} cannot be reached from START; connect them with "
                "an edge or remove them"
            )

    def _reachable(self) -> set[str]:
        seen: set[str] = set()
        todo = [START]
        while todo:
            at = todo.pop()
            nxt = list(self.edges.get(at, ()))
            for b in self.branches.get(at, ()):
                nxt += list(b.mapping.values()) if b.mapping is not None else list(self.nodes)
            nxt += [t for sources, t in self.joins if at in sources]
            for n in nxt:
                if n in self.nodes and n not in seen:
                    seen.add(n)
                    todo.append(n)
        return seen

    def compile(
        self,
        *,
        max_steps: int = 25,
        keep_last: int | None = 100,
        input_key: str | None = None,
        **team: Any,
    ) -> CompiledGraph:
        """Check the graph and make it runnable: `max_steps` super-steps per run (a cycle
        that goes on longer escalates), `keep_last` snapshots kept per thread (None: all),
        `input_key` the state key a plain-text message goes to (`graph.run("...")`, `baton
        run`); every other keyword is `Team`'s (store, model, guards, sinks, ...)."""
        self.validate()
        if input_key is not None and input_key not in self.schema.model_fields:
            raise ConfigError(
                f"input_key {input_key!r} is not a state key "
                f"(keys: {', '.join(self.schema.model_fields)})"
            )
        if max_steps < 1:
            raise ConfigError("max_steps must be at least 1 (super-steps per run)")
        if keep_last is not None and keep_last < 1:
            raise ConfigError("keep_last must be at least 1, or None to keep every snapshot")
        spec = GraphSpec(
            name=self.name,
            schema=self.schema,
            reducers=dict(self.reducers),
            nodes=dict(self.nodes),
            edges={k: list(v) for k, v in self.edges.items()},
            joins=list(self.joins),
            branches={k: list(v) for k, v in self.branches.items()},
            max_steps=max_steps,
            keep_last=keep_last,
            input_key=input_key,
        )
        return CompiledGraph(spec, list(self.agents.values()), **team)


def graph_chart(graph: Graph | GraphSpec) -> str:
    """A graph (built or compiled) as a Mermaid flowchart."""
    chart = Flowchart()
    chart.node(START, "circle")
    for node in graph.nodes.values():
        chart.node(node.name, "round" if node.agent else "box")
    chart.node(END, "circle")
    for source, targets in graph.edges.items():
        for target in targets:
            chart.edge(source, target)
    for sources, target in graph.joins:
        for source in sources:
            chart.edge(source, target, "join")
    for source, branches in graph.branches.items():
        for b in branches:
            if b.mapping is None:  # any node, by name
                for target in [*graph.nodes, END]:
                    chart.edge(source, target, "?", dotted=True)
                continue
            by_target: dict[str, list[str]] = {}
            for value, target in b.mapping.items():
                by_target.setdefault(target, []).append(str(value))
            for target, values in by_target.items():
                chart.edge(source, target, " / ".join(values), dotted=True)
    return chart.text()


def _bad(target: str, known: set[str]) -> bool:
    return target != END and target not in known


def _takes_ctx(name: str, fn: Callable[..., Any]) -> bool:
    try:
        params = [
            p
            for p in inspect.signature(fn).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        return False
    if not params:
        raise ConfigError(f"node {name!r} must take the state as its first parameter")
    return len(params) >= 2


@dataclass(frozen=True, slots=True)
class StateSnapshot:
    """One super-step boundary of a thread, as `history` lists it."""

    id: str
    """Name it in `resume(thread_id, from_checkpoint=id)` to fork from here."""
    thread_id: str
    run_id: str
    step: int
    parent_id: str | None
    values: Any
    """The state, as the schema's model."""
    next: list[str]
    """The nodes the run called next (none: the run ended here)."""
    path: list[list[str]]
    """The nodes of each super-step of its run before this boundary: the latest 64 of them
    (`graph_steps.PATH_KEPT`) in a longer run, so that a snapshot's size does not grow with
    the run."""
    created_at: float


class CompiledGraph(Team):
    """A runnable graph. `await graph.invoke({...}, thread_id=...)` runs it; a thread keeps
    its state between runs (the next input merges into it through the reducers)."""

    def __init__(self, spec: GraphSpec, agents: list[Agent], **team: Any) -> None:
        lead = Agent(
            name=spec.name,
            description=f"Runs the graph {spec.name}.",
            output_type=spec.schema,
        )
        functions = tuple(
            Extra(n.call, CallEntry(NODE, target=n.name), None, f"the call of node {n.name!r}")
            for n in spec.nodes.values()
            if not n.agent
        )
        blueprint = Blueprint(
            entries={spec.name: functions},
            conductors={
                spec.name: Conducted(GraphConductor(spec), spec.max_steps + 2, settles=True)
            },
            kinds={NODE: Kind(RunNode(spec), parallel=16, runs_code=True)},
            needs=(SNAPSHOTS,),
            topology="graph",
        )
        if agents:
            limits = {n.name: n.timeout_s for n in spec.nodes.values() if n.agent and n.timeout_s}
            asks = Ask(max_delegations=spec.max_steps * len(agents) + 1, timeouts=limits)
            blueprint |= delegation(spec.name, agents, 16, asks, "graph")
        super().__init__([lead, *agents], entry=spec.name, blueprint=blueprint, **team)
        self.spec = spec

    # ------------------------------------------------------------------ runs
    async def invoke(
        self,
        input: dict[str, Any] | BaseModel | None = None,
        thread_id: str | None = None,
        user_id: str | None = None,
    ) -> RunResult:
        """Run the graph from START with `input` (state keys) merged into the thread's
        state. `RunResult.final` is the final state (the schema's model)."""
        if isinstance(input, BaseModel):
            input = input.model_dump(mode="json", exclude_unset=True)
        if value_too_deep(input):
            raise ValueError(f"invalid graph input: it is a value {TOO_DEEP}")
        return await self.run(json.dumps(input or {}, ensure_ascii=False), thread_id, user_id)

    async def _start(self, message: str, session_id: str) -> Any:
        """Where a new run of the thread starts: its latest snapshot's state, the input
        (the message: a JSON object of state keys, or text for `input_key`) merged in, from
        START."""
        deep = too_deep(message)  # never parsed: as text it may still be the input_key's
        try:
            update = None if deep else json.loads(message)
        except ValueError:
            update = None
        if not isinstance(update, dict):
            if deep and self.spec.input_key is None:
                raise ValueError(f"invalid graph input: it is JSON {TOO_DEEP}")
            if self.spec.input_key is None:
                raise ValueError(
                    "a graph's input is a JSON object of state keys (graph.invoke({...})), or "
                    "text when the graph was compiled with input_key=...; got "
                    f"{message[:80]!r}"
                )
            update = {self.spec.input_key: message}
        latest = await self._snapshots().list_snapshots(session_id, limit=1)
        base = latest[0] if latest else None
        state = base.data["state"] if base is not None else self._initial()
        merged = self.spec.apply(state, [("input", update)])
        if isinstance(merged, str):
            raise ValueError(f"invalid graph input: {merged}")
        too_large = oversized(merged, self.guards.max_state_bytes, "with this input")
        if too_large is not None:
            raise ValueError(f"invalid graph input: {too_large}")
        return {
            "state": state,
            "input": update,
            "step": base.step + 1 if base is not None else 0,
            "parent": base.id if base is not None else None,
        }

    def _initial(self) -> dict[str, Any]:
        try:
            state: dict[str, Any] = self.spec.schema().model_dump(mode="json")
        except Exception as exc:
            raise ValueError(
                f"the state schema {self.spec.schema.__name__} has required keys without "
                f"defaults ({exc}); give them defaults or pass them in the first input"
            ) from None
        return state

    async def resume(  # adds the answer and the fork
        self,
        session_id: str,
        value: Any = _UNSET,
        *,
        from_checkpoint: str | None = None,
        update: dict[str, Any] | None = None,
    ) -> RunResult:
        """Continue the thread: with `value`, answer the interrupt its run waits for (the
        call that asked runs again and gets `value`); with `from_checkpoint`, fork a new run
        from that snapshot (with `update` merged into its state), leaving the later
        snapshots as they are and discarding an unfinished run of the thread; with neither,
        continue a run that crashed."""
        if from_checkpoint is not None:
            if value is not _UNSET:
                raise InterruptError("give either an answer (value) or from_checkpoint, not both")
            return await self._fork(session_id, from_checkpoint, update or {})
        if update is not None:
            raise ValueError("update= goes with from_checkpoint=")
        if value is not _UNSET:
            return await self.answer_interrupt(session_id, value)
        return await super().resume(session_id)

    async def _fork(self, session_id: str, snapshot_id: str, update: dict[str, Any]) -> RunResult:
        if value_too_deep(update):
            raise ValueError(f"invalid update: it is a value {TOO_DEEP}")
        update = clean_value(update)
        store = self._snapshots()
        snap = await store.get_snapshot(session_id, snapshot_id)
        if snap is None:
            raise NoRunToResume(
                f"thread {session_id!r} has no snapshot {snapshot_id!r} (graph.history lists "
                "them; older ones may have been dropped by keep_last)"
            )
        merged = self.spec.apply(snap.data["state"], [("update", update)])
        if isinstance(merged, str):
            raise ValueError(f"invalid update: {merged}")
        too_large = oversized(merged, self.guards.max_state_bytes, "with this update")
        if too_large is not None:
            raise ValueError(f"invalid update: {too_large}")
        start = {
            "state": snap.data["state"],
            "input": update,
            "step": snap.step + 1,
            "parent": snap.id,
            "next": list(snap.data.get("next") or []),
        }
        message = clean_text(json.dumps(update, ensure_ascii=False))
        async with self._held(session_id):
            cp = await self.store.get_checkpoint(session_id)
            if cp is not None:  # the unfinished run of the newer branch is left behind
                await self.store.delete_checkpoint(session_id, cp.run_id)
            session = await self.store.get_session(session_id) or SessionRecord(session_id)
            return await self._runner.run(message, session, session.user_id, None, start)

    # ------------------------------------------------------------------ history
    async def history(self, thread_id: str, limit: int | None = None) -> list[StateSnapshot]:
        """The thread's snapshots, newest first (every branch; at most `keep_last`)."""
        found = await self._snapshots().list_snapshots(thread_id, limit=limit)
        return [self._view(s) for s in found]

    async def get_state(self, thread_id: str) -> StateSnapshot | None:
        """The thread's latest snapshot, or None for a thread never run."""
        found = await self.history(thread_id, limit=1)
        return found[0] if found else None

    def _view(self, snapshot: Snapshot) -> StateSnapshot:
        data = snapshot.data or {}
        return StateSnapshot(
            id=snapshot.id,
            thread_id=snapshot.thread_id,
            run_id=snapshot.run_id,
            step=snapshot.step,
            parent_id=snapshot.parent_id,
            values=self.spec.schema.model_validate(data.get("state") or {}),
            next=list(data.get("next") or []),
            path=[list(p) for p in data.get("path") or []],
            created_at=snapshot.created_at,
        )

    def _snapshots(self) -> Snapshots:
        store = self.store
        self.blueprint.check_store(store)  # the one capability check, also for a store set by hand
        assert isinstance(store, Snapshots)
        return store

    def declared_names(self) -> DeclaredNames:
        """The team's names, with the tools its function nodes have called through
        `ctx.call` (declared by the graph's code, learnt as they run)."""
        names = super().declared_names()
        called = [t.name for t in list(self.spec.tools.values())]
        return replace(names, tools=names.tools | frozenset(called))

    # ------------------------------------------------------------------ pictures
    def to_mermaid(self) -> str:
        """START, the nodes (agents rounded), edges, joins, and conditional edges labelled
        with their values (dotted)."""
        return graph_chart(self.spec)

    def describe(self) -> dict[str, Any]:
        """The team summary, with the graph's nodes and edges."""
        out = super().describe()
        spec = self.spec
        out.update(
            topology="graph",
            nodes={n.name: "agent" if n.agent else "function" for n in spec.nodes.values()},
            edges={k: list(v) for k, v in spec.edges.items()},
            conditional=sorted(spec.branches),
            max_steps=spec.max_steps,
        )
        return out
