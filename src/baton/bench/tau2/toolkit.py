"""What the retail and airline tool sets share: the database slot, Baton tools, `calculate`.

A tool set is a class whose public tool methods act on `self.db`, a private copy of the
domain database. The same methods serve the team (wrapped as Baton `Tool`s, so arguments are
validated against the schema) and the oracle (which calls them through the same validation),
so a replay and its oracle can only differ by the calls made, never by the implementation.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping
from functools import cached_property
from typing import Any, ClassVar

from baton.tools import Tool

READ, WRITE, GENERIC = "READ", "WRITE", "GENERIC"
"""Tool kinds (τ²'s `x_tool_type`): reads, database writes, and neither."""

TRANSFER = "transfer_to_human_agents"
"""The τ² escalation tool; in a team it is Baton's `transfer_to_human`, not a plain tool."""


class ActionRefused(ValueError):
    """A call the domain rules refuse; its message goes back to the model as the tool error."""


def record(table: Mapping[str, Any], key: str, what: str) -> dict[str, Any]:
    """`table[key]`, or the τ² lookup failure "<what> <key> not found"."""
    found: dict[str, Any] | None = table.get(key)
    if found is None:
        raise ActionRefused(f"{what} {key} not found")
    return found


_ALLOWED = set("0123456789+-*/(). ")
_BINARY: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}


def _evaluate(node: ast.AST) -> float:
    """Arithmetic only: numbers, + - * / and unary signs (never Python's `eval`)."""
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return float(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _BINARY[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        value = _evaluate(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    raise ActionRefused("Invalid expression")


class DomainTools:
    """Base of a domain's tool set: `db` is the database the tools read and change."""

    domain: ClassVar[str] = ""
    """Domain name; also the prefix of the tools' scopes (`retail:write`)."""
    KINDS: ClassVar[Mapping[str, str]] = {}
    """Every tool of the domain -> READ, WRITE or GENERIC."""

    def __init__(self, db: dict[str, Any] | None = None) -> None:
        self.db: dict[str, Any] = db if db is not None else {}

    @cached_property
    def tools(self) -> dict[str, Tool]:
        """The domain's tools as Baton `Tool`s bound to this object, built once (the schema
        models are the costly part); writes need the `<domain>:write` scope."""
        return {
            name: Tool(getattr(self, name), scopes=[f"{self.domain}:{kind.lower()}"])
            for name, kind in self.KINDS.items()
        }

    def call(self, name: str, arguments: Mapping[str, Any]) -> Any:
        """Run tool `name` as the team would: schema validation first, then the method.

        Raises what the tool raises (`ActionRefused`, or pydantic's `ValidationError`).
        """
        tool = self.tools.get(name)
        if tool is None:
            raise ActionRefused(f"unknown tool {name!r} in the {self.domain} domain")
        return tool.fn(**tool.validate(dict(arguments)))

    # ------------------------------------------------------------------ shared tools
    def calculate(self, expression: str) -> str:
        """Calculate the result of an arithmetic expression, rounded to 2 decimals.

        Args:
            expression: Numbers, + - * /, parentheses and spaces, such as '2 + 2'.
        """
        if not expression.strip() or not set(expression) <= _ALLOWED:
            raise ActionRefused("Invalid characters in expression")
        try:
            tree = ast.parse(expression, mode="eval")
        except SyntaxError as exc:
            raise ActionRefused(f"Invalid expression: {exc.msg}") from None
        try:
            value = _evaluate(tree)
        except ZeroDivisionError:
            raise ActionRefused("Division by zero") from None
        return str(round(value, 2))

    def transfer_to_human_agents(self, summary: str) -> str:
        """Transfer the user to a human agent, with a summary of the user's issue.

        Args:
            summary: A summary of the user's issue.
        """
        return "Transfer successful"
