"""The kernel: runs, guards, context views, checkpoints and results."""

from baton.runtime.guards import Guards, check_handoff, cycle, is_ping_pong
from baton.runtime.outcomes import Answered, Failed, HandedOff, Paused, ToHuman, Tripped
from baton.runtime.plan import HUMAN, AgentPlan, KernelSettings, SwarmPolicy, compile_plans
from baton.runtime.result import RunResult, RunStatus
from baton.runtime.runner import Runner
from baton.runtime.state import PendingCall, RunState, TurnState

__all__ = [
    "HUMAN",
    "AgentPlan",
    "Answered",
    "Failed",
    "Guards",
    "HandedOff",
    "KernelSettings",
    "Paused",
    "PendingCall",
    "RunResult",
    "RunState",
    "RunStatus",
    "Runner",
    "SwarmPolicy",
    "ToHuman",
    "Tripped",
    "TurnState",
    "check_handoff",
    "compile_plans",
    "cycle",
    "is_ping_pong",
]
