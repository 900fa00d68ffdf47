"""The desk's billing tools served over MCP (the `mcp` SDK's own server, stdio), for the
cross-process desk test: `python desk_billing_mcp.py TRACE_LOG`.

The tools are the desk's own (`baton.desk.tools`), run on a desk database of this
process. Each call appends the `traceparent` of its `_meta` to TRACE_LOG, so the test can
check that one trace spans the desk and this server."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import Context, MCPServer

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from baton.desk.data import DeskDB  # noqa: E402
from baton.desk.tools import make_tools  # noqa: E402

LOG = Path(sys.argv[1])
TOOLS = make_tools(DeskDB())
server = MCPServer("desk-billing")


def _seen(ctx: Context, name: str) -> None:
    meta = dict(ctx.request_context.meta or {})
    with LOG.open("a", encoding="utf-8") as log:
        log.write(f"{name} {meta.get('traceparent', '-')}\n")


@server.tool()
async def query_invoice(order_id: str, ctx: Context) -> dict[str, Any]:
    """Look up the e-invoice of an order: number, status, amount and download link."""
    _seen(ctx, "query_invoice")
    return await TOOLS["query_invoice"].fn(order_id=order_id)


@server.tool()
async def issue_refund(order_id: str, reason: str, ctx: Context) -> dict[str, Any]:
    """Refund an order to the original payment method (needs an open return)."""
    _seen(ctx, "issue_refund")
    return await TOOLS["issue_refund"].fn(order_id=order_id, reason=reason)


if __name__ == "__main__":
    server.run("stdio")
