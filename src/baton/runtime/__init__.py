"""The kernel: runs, guards, context views and results."""

from baton.runtime.guards import Guards, check_handoff, is_ping_pong
from baton.runtime.plan import HUMAN, AgentPlan, KernelConfig
from baton.runtime.result import RunResult, RunStatus
from baton.runtime.runner import Runner

__all__ = [
    "HUMAN",
    "AgentPlan",
    "Guards",
    "KernelConfig",
    "RunResult",
    "RunStatus",
    "Runner",
    "check_handoff",
    "is_ping_pong",
]
