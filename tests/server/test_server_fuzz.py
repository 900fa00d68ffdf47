"""The published OpenAPI schema, fuzzed with schemathesis: no 5xx, and every answer's status,
content type and body are the ones the schema documents."""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from tests.server.server_kit import TOKENS, desk

from baton.server import AuthConfig, create_app

pytestmark = pytest.mark.filterwarnings("ignore")

ALL_ROLES = "fuzz-token-0123456789abc"
FUZZER = {"name": "fuzz", "roles": ["operator", "approver:*"]}

APP = create_app(
    desk(),
    auth=AuthConfig.from_mapping({"tokens": {**TOKENS["tokens"], ALL_ROLES: FUZZER}}),
    link_secret="fuzz-link-secret",  # the signed approval links answer, not only 404
)
schema = schemathesis.openapi.from_asgi("/openapi.json", APP)
# An invalid body over the server's limit (1 MiB) is refused with 413 before it is read,
# which is as much a rejection as 400/422: the fuzzer generates such bodies now and then.
_rejected = schema.config.checks.negative_data_rejection
_rejected.expected_statuses = [*_rejected.expected_statuses, "413"]


def test_the_schema_documents_every_endpoint_and_its_errors() -> None:
    doc: dict[str, Any] = APP.openapi()
    paths = doc["paths"]
    assert set(paths) == {
        "/runs",
        "/runs/stream",
        "/runs/{request_id}",
        "/sessions",
        "/sessions/{session_id}",
        "/sessions/{session_id}/trace",
        "/sessions/{session_id}/events",
        "/approvals",
        "/approvals/{approval_id}/approve",
        "/approvals/{approval_id}/reject",
        "/approvals/links/{token}",
        "/approvals/links/{token}/use",
        "/interrupts",
        "/interrupts/{interrupt_id}/answer",
        "/tickets",
        "/tickets/{ticket_id}/claim",
        "/tickets/{ticket_id}/answer",
        "/tickets/{ticket_id}/close",
        "/health",
        "/ready",
        "/me",
        "/team",
        "/metrics",
        "/v1/chat/completions",
        "/v1/models",
        "/v1/models/{model}",
    }
    for path, operations in paths.items():
        for method, op in operations.items():
            codes = set(op["responses"])
            if path not in ("/health", "/ready"):
                assert "401" in codes, (method, path)
            if op.get("parameters") or op.get("requestBody"):
                # the OpenAI-compatible routes answer an invalid request 400, as OpenAI does
                invalid = "400" if path.startswith("/v1/") else "422"
                assert invalid in codes and "422" not in codes - {invalid}, (method, path)
    assert doc["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"


@schema.parametrize()
@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
def test_fuzzed_requests_get_documented_4xx_answers_never_a_5xx(case: Any) -> None:
    if case.path == "/sessions/{session_id}/events":
        _briefly(case)
    headers = {"Authorization": f"Bearer {ALL_ROLES}"}
    case.call_and_validate(headers=headers)


def _briefly(case: Any) -> None:
    """A session's event stream ends after `quiet_s` without events: a valid request is made
    to end at once (still valid; an invalid value is left for the check to see refused)."""
    query = dict(case.query or {})
    if query.get("follow") in (None, True, False, "true", "false"):
        query["follow"] = "false"
    try:
        valid = query.get("quiet_s") is None or 1 <= float(query["quiet_s"]) <= 3600
    except (TypeError, ValueError):
        valid = False
    if valid:
        query["quiet_s"] = 1
    case.query = query
