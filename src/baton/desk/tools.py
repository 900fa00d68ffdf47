"""The desk's tools, bound to one `DeskDB` so every team has its own data."""

from __future__ import annotations

from typing import Any

from baton import Tool, tool

from .data import DeskDB


def _norm_order(order_id: str) -> str:
    return order_id.strip().upper()


def _no_server(server_id: str) -> str:
    """The error of a lookup of a server that does not exist: what the agent tells the user."""
    return (
        f"server {server_id} not found: no server has this id. Tell the user it was not found "
        "and ask them to check the id"
    )


def make_tools(db: DeskDB) -> dict[str, Tool]:
    """All tools of the desk, by name."""

    @tool(scopes=["billing:read"])
    async def query_invoice(order_id: str) -> dict[str, Any]:
        """Look up the e-invoice of an order: number, status, amount and download link.

        Args:
            order_id: Order number as the user wrote it, e.g. ORD-202607-99.
        """
        inv = db.invoices.get(_norm_order(order_id))
        if inv is None:
            raise KeyError(
                f"order {order_id} not found: it has no invoice. Tell the user no invoice was "
                "found for this order number and ask them to check it"
            )
        return {"order_id": _norm_order(order_id), **inv}

    @tool(scopes=["billing:write"])
    async def issue_refund(order_id: str, reason: str) -> dict[str, Any]:
        """Refund an order to the original payment method (needs an open return).

        Args:
            order_id: Order number, e.g. ORD-202607-99.
            reason: Short reason for the refund.
        """
        oid = _norm_order(order_id)
        if oid not in db.orders:
            raise KeyError(f"unknown order {order_id}")
        if oid not in db.returns:
            raise ValueError(f"order {oid} has no return yet; after-sales must open one first")
        if oid in db.refunds:
            return {"order_id": oid, "status": "ALREADY_REFUNDED", **db.refunds[oid]}
        db.refunds[oid] = {"amount": db.orders[oid]["amount"], "reason": reason}
        return {"order_id": oid, "status": "REFUNDED", "amount": db.orders[oid]["amount"]}

    @tool(scopes=["ops:read"])
    async def check_server(server_id: str) -> dict[str, Any]:
        """Show a server's status, region and CPU load.

        Args:
            server_id: Instance id, e.g. srv-bj-001.
        """
        srv = db.servers.get(server_id.strip().lower())
        if srv is None:
            raise KeyError(_no_server(server_id))
        return {"server_id": server_id.strip().lower(), **srv}

    @tool(scopes=["ops:write"], timeout_s=10)
    async def restart_server(server_id: str) -> dict[str, Any]:
        """Safely restart a cloud server instance.

        Args:
            server_id: Instance id, e.g. srv-bj-001.
        """
        sid = server_id.strip().lower()
        srv = db.servers.get(sid)
        if srv is None:
            raise KeyError(_no_server(server_id))
        srv.update(status="RUNNING", cpu=0.05)
        db.restarts.append(sid)
        return {"server_id": sid, "status": "RESTARTED", "uptime": "0 min"}

    @tool(scopes=["orders:read"])
    async def get_order_status(order_id: str) -> dict[str, Any]:
        """Where an order is: status, carrier and expected delivery date.

        Args:
            order_id: Order number, e.g. ORD-202608-17.
        """
        order = db.orders.get(_norm_order(order_id))
        if order is None:
            raise KeyError(
                f"order {order_id} not found: no order has this number. Tell the user it was "
                "not found and ask them to check it"
            )
        return {"order_id": _norm_order(order_id), **order}

    @tool(scopes=["aftersales:write"])
    async def create_return(order_id: str, reason: str) -> dict[str, Any]:
        """Open a return for a delivered order (damaged, wrong item, not wanted).

        Args:
            order_id: Order number, e.g. ORD-202607-99.
            reason: What is wrong with the item.
        """
        oid = _norm_order(order_id)
        order = db.orders.get(oid)
        if order is None:
            raise KeyError(f"unknown order {order_id}")
        if order["status"] != "DELIVERED":
            raise ValueError(f"order {oid} is {order['status']}; only delivered orders can return")
        ret = db.returns.setdefault(
            oid, {"rma": f"RMA-{len(db.returns) + 1:04d}", "reason": reason}
        )
        return {"order_id": oid, "status": "RETURN_OPENED", **ret}

    tools = [
        query_invoice,
        issue_refund,
        check_server,
        restart_server,
        get_order_status,
        create_return,
    ]
    return {t.name: t for t in tools}
