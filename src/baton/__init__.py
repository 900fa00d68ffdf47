"""Baton: multi-agent LLM systems where specialised agents hand control to each other safely."""

from baton.agents import Agent
from baton.backends import MemoryStore, SessionRecord, Store, open_store
from baton.core import (
    BatonError,
    ConfigError,
    EscalationCard,
    Event,
    HandoffPayload,
    Message,
    ModelError,
    ParseError,
    PayloadError,
    StoreError,
    ToolCall,
    ToolError,
    Usage,
)
from baton.models import Model, ModelRequest, ModelResponse, ScriptedModel
from baton.observe.base import EventSink
from baton.runtime import Guards, RunResult
from baton.tools import Tool, tool
from baton.topologies import Team

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "BatonError",
    "ConfigError",
    "EscalationCard",
    "Event",
    "EventSink",
    "Guards",
    "HandoffPayload",
    "MemoryStore",
    "Message",
    "Model",
    "ModelError",
    "ModelRequest",
    "ModelResponse",
    "ParseError",
    "PayloadError",
    "RunResult",
    "ScriptedModel",
    "SessionRecord",
    "Store",
    "StoreError",
    "Team",
    "Tool",
    "ToolCall",
    "ToolError",
    "Usage",
    "__version__",
    "open_store",
    "tool",
]
