"""Baton: multi-agent LLM systems where specialised agents hand control to each other safely."""

from typing import TYPE_CHECKING, Any

from baton._version import __version__  # pyproject.toml's, from the installed metadata
from baton.agents import Agent
from baton.approvals import ApprovalPolicy
from baton.backends import (
    Checkpoint,
    Checkpoints,
    HumanQueue,
    Leases,
    MemoryStore,
    SessionRecord,
    Sessions,
    Store,
    open_store,
)
from baton.backends.retention import GcReport, Retaining, Retention
from baton.backends.sealing import CheckpointKeyProvider, CheckpointKeys
from baton.core import (
    ApprovalError,
    BatonError,
    ConfigError,
    ConflictError,
    EscalationCard,
    Event,
    HandoffPayload,
    InterruptError,
    InvalidTransition,
    Message,
    ModelError,
    ModelUnreachable,
    NewerCheckpoint,
    NoRunToResume,
    ParseError,
    PayloadError,
    PlanError,
    ReplayMismatch,
    RunReleased,
    SessionOwnerError,
    StoreError,
    TicketError,
    ToolCall,
    ToolError,
    Usage,
)
from baton.core.approval import Approval, ApprovalCard
from baton.core.interrupt import GraphInterrupt, InterruptCard, interrupt
from baton.core.nesting import MAX_JSON_DEPTH
from baton.core.policies import ContextPolicy, recent
from baton.guardrails import Guardrail, GuardrailContext, Verdict
from baton.models import Model, ModelRequest, ModelResponse, ScriptedModel
from baton.observe import ConsoleSink, EventSink, JSONLSink
from baton.runtime import Guards, RunResult
from baton.runtime.redact import Redactor
from baton.tools import Tool, ToolContext, Toolset, tool, tool_context
from baton.topologies import Team

if TYPE_CHECKING:
    from baton.a2a import RemoteAgent, RemoteAgentError
    from baton.backends.sqlite import SQLiteStore
    from baton.knowledge import KnowledgeBase
    from baton.mcp import MCPServer, MCPServerError, MCPToolset
    from baton.models.local import LocalModel
    from baton.models.openai_compat import OpenAICompatible
    from baton.notify import Notifier, NotifyConfig
    from baton.observe import MetricsSink, OTelSink
    from baton.topologies.blackboard import Blackboard
    from baton.topologies.debate import Debate
    from baton.topologies.graph import END, START, CompiledGraph, Graph, NodeContext
    from baton.topologies.pipeline import Pipeline
    from baton.topologies.plan_execute_review import PlanExecuteReview
    from baton.topologies.supervisor import Supervisor
    from baton.worker import Worker


__all__ = [
    "END",
    "MAX_JSON_DEPTH",
    "START",
    "Agent",
    "Approval",
    "ApprovalCard",
    "ApprovalError",
    "ApprovalPolicy",
    "BatonError",
    "Blackboard",
    "Checkpoint",
    "CheckpointKeyProvider",
    "CheckpointKeys",
    "Checkpoints",
    "CompiledGraph",
    "ConfigError",
    "ConflictError",
    "ConsoleSink",
    "ContextPolicy",
    "Debate",
    "EscalationCard",
    "Event",
    "EventSink",
    "GcReport",
    "Graph",
    "GraphInterrupt",
    "Guardrail",
    "GuardrailContext",
    "Guards",
    "HandoffPayload",
    "HumanQueue",
    "InterruptCard",
    "InterruptError",
    "InvalidTransition",
    "JSONLSink",
    "KnowledgeBase",
    "Leases",
    "LocalModel",
    "MCPServer",
    "MCPServerError",
    "MCPToolset",
    "MemoryStore",
    "Message",
    "MetricsSink",
    "Model",
    "ModelError",
    "ModelRequest",
    "ModelResponse",
    "ModelUnreachable",
    "NewerCheckpoint",
    "NoRunToResume",
    "NodeContext",
    "Notifier",
    "NotifyConfig",
    "OTelSink",
    "OpenAICompatible",
    "ParseError",
    "PayloadError",
    "Pipeline",
    "PlanError",
    "PlanExecuteReview",
    "Redactor",
    "RemoteAgent",
    "RemoteAgentError",
    "ReplayMismatch",
    "Retaining",
    "Retention",
    "RunReleased",
    "RunResult",
    "SQLiteStore",
    "ScriptedModel",
    "SessionOwnerError",
    "SessionRecord",
    "Sessions",
    "Store",
    "StoreError",
    "Supervisor",
    "Team",
    "TicketError",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolError",
    "Toolset",
    "Usage",
    "Verdict",
    "Worker",
    "__version__",
    "interrupt",
    "open_store",
    "recent",
    "tool",
    "tool_context",
]


def __getattr__(name: str) -> Any:
    """Lazy exports: `openai`, opentelemetry and prometheus_client load only on first use, and
    so do the embedded model's and the SQLite store's modules, which a program using neither
    never runs."""
    if name == "LocalModel":
        from baton.models.local import LocalModel

        return LocalModel
    if name == "SQLiteStore":
        from baton.backends.sqlite import SQLiteStore

        return SQLiteStore
    if name == "Supervisor":
        from baton.topologies.supervisor import Supervisor

        return Supervisor
    if name == "Worker":
        from baton.worker import Worker

        return Worker
    if name == "Blackboard":  # the topology; the store capability stays in baton.backends
        from baton.topologies.blackboard import Blackboard

        return Blackboard
    if name in ("Graph", "CompiledGraph", "NodeContext", "START", "END"):
        import baton.topologies.graph

        return getattr(baton.topologies.graph, name)
    if name == "Pipeline":
        from baton.topologies.pipeline import Pipeline

        return Pipeline
    if name == "PlanExecuteReview":
        from baton.topologies.plan_execute_review import PlanExecuteReview

        return PlanExecuteReview
    if name == "Debate":
        from baton.topologies.debate import Debate

        return Debate
    if name == "OpenAICompatible":
        from baton.models.openai_compat import OpenAICompatible

        return OpenAICompatible
    if name in ("RemoteAgent", "RemoteAgentError"):  # the `a2a-sdk`, an extra
        import baton.a2a

        return getattr(baton.a2a, name)
    if name == "KnowledgeBase":  # qdrant-client, bm25s and pypdf: the `kb` extra
        from baton.knowledge import KnowledgeBase

        return KnowledgeBase
    if name in ("MCPServer", "MCPServerError", "MCPToolset"):  # the `mcp` SDK, an extra
        import baton.mcp

        return getattr(baton.mcp, name)
    if name in ("Notifier", "NotifyConfig"):
        import baton.notify

        return getattr(baton.notify, name)
    if name in ("OTelSink", "MetricsSink"):  # opentelemetry / prometheus load on first use
        import baton.observe

        return getattr(baton.observe, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
