"""Error hierarchy. Every message says what happened and what to do next."""

from __future__ import annotations


class BatonError(Exception):
    """Base class of every error Baton raises."""


class ConfigError(BatonError):
    """The team, an agent or a tool is defined wrongly; raised when it is built, never mid-run."""


class ToolError(BatonError):
    """A tool failed; the model receives it as an error result, the run goes on."""


class ToolTimeout(ToolError):
    """A tool ran longer than its timeout."""


class ModelError(BatonError):
    """A model provider failed (network, auth, bad response)."""


class ModelTimeout(ModelError):
    """A model call ran longer than `Guards.model_timeout_s`."""


class ModelUnreachable(ModelError):
    """The model's server could not be reached (connection refused, HTTP 429 or 5xx) after
    the provider's retries; the run stops resumable at its last checkpoint."""


class ParseError(BatonError):
    """Model output could not be parsed into a tool call or answer, even after repair."""


class PayloadError(BatonError):
    """A hand-off payload failed validation."""


class StoreError(BatonError):
    """A store backend failed or holds data it cannot read."""


class NewerCheckpoint(StoreError):
    """A checkpoint was written by a newer Baton, in a format this one does not read; it is
    kept (resume it with that release)."""

    def __init__(self, found: int, readable: int, where: str = "") -> None:
        self.found, self.readable = found, readable
        of = f" of {where}" if where else ""
        super().__init__(
            f"the checkpoint{of} has format {found}, written by a newer Baton; this Baton "
            f"reads formats up to {readable}. Upgrade Baton to resume it (the checkpoint is "
            "kept)"
        )


class ReplayMismatch(BatonError):
    """A graph node, run again from its checkpoint, called a different step than the one
    recorded at that place (its code changed, or it calls steps in a varying order)."""


class ModelNotAvailable(BatonError):
    """A model name cannot be resolved to an installed provider."""


class ConflictError(StoreError):
    """Another writer changed the record first (compare-and-set failed, or a lease is held).

    Nothing was written. Read the record again and retry from its fresh state, or give up.
    """

    def __init__(self, message: str, *, key: str = "") -> None:
        super().__init__(message)
        self.key = key
        """The session id (or other record key) the conflict is about."""


class ApprovalError(BatonError):
    """An approval decision was refused: unknown or already decided approval, a role that may
    not approve, the same person signing twice, or a run that is not waiting for it."""


class InterruptError(BatonError):
    """An interrupted run cannot take that step: it waits for an answer (resume it with one,
    or discard it), or the session has no interrupt to answer."""


class RunReleased(BatonError):
    """The run was released before it finished (`team.release`: its process shuts down). It
    stays unfinished at its last checkpoint, its session lease given up: `team.resume`, or a
    `team.run` of the same `request_id`, continues it, in this process or another."""


class NoRunToResume(BatonError):
    """`team.resume` named a session that has no unfinished run."""


class SessionOwnerError(BatonError, PermissionError):
    """A run named a session that belongs to another user; nothing ran and nothing changed."""


class TicketError(BatonError):
    """A human-queue ticket cannot take that step (unknown id, claimed by someone else, or
    already answered or closed)."""


class InvalidTransition(BatonError):
    """A task was asked to move to a status its state machine does not allow from where it is
    (`baton.core.tasks`); the task is left unchanged."""

    def __init__(
        self,
        message: str,
        *,
        task_id: str = "",
        current: str = "",
        requested: str = "",
        allowed: tuple[str, ...] = (),
    ) -> None:
        super().__init__(message)
        self.task_id = task_id
        """The task asked to move."""
        self.current = current
        """Its status, unchanged."""
        self.requested = requested
        """The status it was asked to move to."""
        self.allowed = allowed
        """The statuses it may move to from `current` (empty for a final task)."""


class PlanError(BatonError):
    """A plan's tasks cannot be ordered: two share an id, one depends on a task the plan does
    not have, or some depend on each other in a cycle."""


class NotifyError(BatonError):
    """A notification channel is configured wrongly, or a card could not be delivered."""


class SignatureError(NotifyError):
    """A signed notification or link failed verification (bad signature, tampered body, a
    timestamp outside the replay window, an expired or used link)."""


class EvalError(BatonError):
    """An eval cannot run as specified: a spec file that does not parse or validate (the
    message names the file and line), a team that cannot be built, a case naming an agent the
    team lacks."""

    def __init__(self, message: str, *, line: int | None = None) -> None:
        super().__init__(message)
        self.line = line
        """The 1-based line of the spec file the problem is on, when known."""
