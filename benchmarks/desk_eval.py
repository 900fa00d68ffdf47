"""Desk eval: the example desk on labelled requests in English and Chinese.

    python benchmarks/desk_eval.py [--model local|local:<name>|openai:<name>|scripted]
                                   [--limit N] [--lang en|zh|mixed] [--json PATH]
                                   [--set insample|heldout|v2-dev|v2-sealed]
                                   [--desk triage|routed]

Sets (`--set`):
- `insample` (default): the 44 requests below (`CASES`), half English, half Chinese. They
  shaped the desk's instructions, so their figures are in-sample.
- `heldout`: 44 requests of the same kinds written after the desk's instructions and never
  used to tune them (`benchmarks/desk_routing/desk_eval_heldout.json`).
- `v2-sealed` and `v2-dev`: the two halves of the second held-out set
  (`benchmarks/desk_routing/desk_eval_v2.json`, see its README section). `v2-sealed` (64
  requests) is only run and reported, never tuned on; `v2-dev` (40) may be tuned on. Besides
  `en` and `zh` they have `mixed` requests (Chinese with English words; a reply is in the
  user's language when it contains Chinese, as for `zh`) and `multi` requests (two needs in
  one message; `Case.also` is the route of the second).

Every request runs in a fresh session on a freshly built desk (its own database), so no side
effect of one case (a return, a refund, a restart) leaks into the next. Each label says which
specialist triage must hand the request to first (`human` for out-of-scope requests, which
must be escalated) and which tool that specialist must call with which key argument.

Metrics:
- routing accuracy: the first hand-off target of triage is the expected specialist;
- tool-call validity: share of the tool calls the model emitted that parsed, named a tool or
  hand-off available to that agent and had schema-valid arguments (parse errors, unknown tools,
  invalid-argument results and refused hand-offs are invalid). Calls stopped by the grounded-id
  guard are well-formed, so they count as valid, and are reported as "invented ids caught";
- task success: routed right, the expected tool succeeded with the expected key argument
  (case-insensitive) and the run completed (escalated for `human` cases); for an unknown id,
  the tool's error reached the user (the reply reports the failed lookup) and no record
  data was invented; for a `multi` request, all that for its first need and the run also
  reached the second: `also` is among the agents that held the baton (for `human`: the run
  was escalated). The summary counts multi requests that reached their second need;
- tokens/s (output tokens / model time), p50/p95 latency per model call and per request.

Desks (`--desk`): `triage` (default), the desk `baton demo` plays, where the triage agent
hands each request to a specialist; `routed`, the same specialists behind the fitted router of
`src/baton/desk/routed.py` with `Team(multi_intent=True)`: routing is the router's decision
(no triage model call), and a request with two needs is split by the router, which hands the
baton on to the second need's agent once the first answers (`baton.runtime.pending`).

`--model scripted` runs the desk's rule-based policy: a fast check of this harness, not of
a language model.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import shlex
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from baton.core.events import Event  # noqa: E402
from baton.desk import GUARDS, build_desk  # noqa: E402
from baton.desk.data import INVOICES, ORDERS, SERVERS  # noqa: E402
from baton.desk.routed import build_routed_desk  # noqa: E402
from baton.runtime.result import RunResult  # noqa: E402

Lang = Literal["en", "zh", "mixed"]
Kind = Literal["plain", "ambiguous", "multi", "out_of_scope", "unknown_id"]
GROUPS_LANG: tuple[Lang, ...] = ("en", "zh", "mixed")
GROUPS_KIND: tuple[Kind, ...] = ("plain", "ambiguous", "multi", "out_of_scope", "unknown_id")
CHINESE_SPEAKING: tuple[Lang, ...] = ("zh", "mixed")
"""Languages whose users get a reply in Chinese (`mixed`: Chinese with English words)."""

TARGETS = {"valid": 1.0, "routing": 0.90, "success": 0.80}
"""What the desk on the embedded model should reach."""


@dataclass(frozen=True)
class Case:
    """One labelled request."""

    lang: Lang
    kind: Kind
    text: str
    route: str
    """Expected first hand-off target of triage."""
    tool: str = ""
    """Expected tool; `a|b` accepts either; empty for `human` cases."""
    arg: str = ""
    """Expected key argument of the tool, `key=value`."""
    also: str = ""
    """On a `multi` request, the route of its second need (`human`: escalated); else empty."""

    @property
    def tools(self) -> tuple[str, ...]:
        return tuple(t for t in self.tool.split("|") if t)

    @property
    def key(self) -> tuple[str, str] | None:
        if not self.arg:
            return None
        k, v = self.arg.split("=", 1)
        return k, v

    @property
    def expected(self) -> str:
        first = f"{self.route} · {self.tool}({self.arg})" if self.tool else self.route
        return f"{first} + {self.also}" if self.also else first


UNKNOWN_ORDER = "ORD-209999-01"
UNKNOWN_SERVER = "srv-gz-404"
K7, K8, K9 = "order_id=ORD-202607-99", "order_id=ORD-202608-17", "order_id=ORD-202609-05"
BJ, SH = "server_id=srv-bj-001", "server_id=srv-sh-002"

# English and Chinese cases alternate, so `--limit N` always covers both languages.
CASES: tuple[Case, ...] = (
    # billing: invoices and payments
    Case("en", "plain", "Please check the invoice for order ORD-202607-99.", "billing",
         "query_invoice", K7),
    Case("zh", "plain", "请帮我查一下订单 ORD-202607-99 的发票。", "billing", "query_invoice", K7),
    Case("en", "plain", "How much was I charged for ORD-202608-17? I need the invoice amount.",
         "billing", "query_invoice", K8),
    Case("zh", "plain", "ORD-202608-17 的发票金额是多少？", "billing", "query_invoice", K8),
    Case("en", "ambiguous", "I was charged twice for ORD-202608-17", "billing", "query_invoice",
         K8),
    Case("zh", "ambiguous", "订单 ORD-202608-17 被重复扣款了，扣了我两次钱！", "billing",
         "query_invoice", K8),
    Case("en", "plain", "The invoice for ORD-202608-17 still says pending. When will it be "
         "issued?", "billing", "query_invoice", K8),
    Case("zh", "plain", "我需要 ORD-202607-99 的电子发票下载链接，报销要用。", "billing",
         "query_invoice", K7),
    # orders: status and delivery
    Case("en", "plain", "Where is my order ORD-202608-17?", "orders", "get_order_status", K8),
    Case("zh", "plain", "我的订单 ORD-202608-17 现在到哪了？什么时候能送到？", "orders",
         "get_order_status", K8),
    Case("en", "plain", "When will my USB-C dock, order ORD-202609-05, be shipped?", "orders",
         "get_order_status", K9),
    Case("zh", "plain", "ORD-202609-05 怎么还没发货？", "orders", "get_order_status", K9),
    Case("en", "plain", "Has ORD-202607-99 been delivered yet? Which carrier brought it?",
         "orders", "get_order_status", K7),
    Case("zh", "plain", "订单 ORD-202607-99 签收了吗？是哪家快递送的？", "orders",
         "get_order_status", K7),
    Case("en", "ambiguous", "I paid for ORD-202609-05 days ago but it still says processing. "
         "Has it shipped?", "orders", "get_order_status", K9),
    Case("zh", "ambiguous", "我付了 ORD-202609-05 的钱，但一直显示处理中，到底发货了没有？",
         "orders", "get_order_status", K9),
    # tech_support: servers
    Case("en", "plain", "Our server srv-bj-001 is in ALARM, please restart it now.",
         "tech_support", "restart_server", BJ),
    Case("zh", "plain", "大事不好了，生产服务器 srv-bj-001 发生告警，请帮我紧急重启！",
         "tech_support", "restart_server", BJ),
    Case("en", "plain", "What's the CPU load on srv-sh-002 right now?", "tech_support",
         "check_server", SH),
    Case("zh", "plain", "帮我看一下 srv-sh-002 的 CPU 负载。", "tech_support", "check_server",
         SH),
    Case("en", "ambiguous", "Is srv-bj-001 healthy? Our website feels really slow today.",
         "tech_support", "check_server|restart_server", BJ),
    Case("zh", "ambiguous", "服务器 srv-bj-001 访问特别慢，是不是出问题了？", "tech_support",
         "check_server|restart_server", BJ),
    # after_sales: returns (a refund needs an open return first)
    Case("en", "plain", "My order ORD-202607-99 arrived damaged. I want to return it.",
         "after_sales", "create_return", K7),
    Case("zh", "plain", "订单 ORD-202607-99 收到的键盘是坏的，我要退货。", "after_sales",
         "create_return", K7),
    Case("en", "ambiguous", "my keyboard from ORD-202607-99 stopped working after a week",
         "after_sales", "create_return", K7),
    Case("zh", "ambiguous", "我在 ORD-202607-99 买的键盘用了一周就坏了。", "after_sales",
         "create_return", K7),
    Case("en", "ambiguous", "You sent me the wrong item in ORD-202607-99 and I want my money "
         "back.", "after_sales", "create_return", K7),
    Case("zh", "ambiguous", "ORD-202607-99 发错货了，我要退货退款。", "after_sales",
         "create_return", K7),
    Case("en", "plain", "I'd like to return the keyboard from ORD-202607-99, I don't need it "
         "anymore.", "after_sales", "create_return", K7),
    Case("zh", "plain", "ORD-202607-99 的键盘我不想要了，可以退货吗？", "after_sales",
         "create_return", K7),
    # out of scope: legal, press, unrelated -> a human
    Case("en", "out_of_scope", "I'm going to sue your company. Put me through to your legal "
         "department.", "human"),
    Case("zh", "out_of_scope", "我要起诉你们公司，请让你们的律师联系我。", "human"),
    Case("en", "out_of_scope", "I'm a reporter at a newspaper and would like a comment on last "
         "week's outage.", "human"),
    Case("zh", "out_of_scope", "我是记者，想就你们上周的服务中断事件做个采访。", "human"),
    Case("en", "out_of_scope", "What will the weather be like in Beijing tomorrow?", "human"),
    Case("zh", "out_of_scope", "明天上海会下雨吗？", "human"),
    Case("en", "out_of_scope", "Can you write me a short poem about spring?", "human"),
    Case("zh", "out_of_scope", "帮我写一首关于春天的诗。", "human"),
    # unknown ids: the tool's error must reach the user, no invented data
    Case("en", "unknown_id", f"Where is my order {UNKNOWN_ORDER}?", "orders", "get_order_status",
         f"order_id={UNKNOWN_ORDER}"),
    Case("zh", "unknown_id", f"我的订单 {UNKNOWN_ORDER} 到哪了？", "orders", "get_order_status",
         f"order_id={UNKNOWN_ORDER}"),
    Case("en", "unknown_id", f"Please send me the invoice for {UNKNOWN_ORDER}.", "billing",
         "query_invoice", f"order_id={UNKNOWN_ORDER}"),
    Case("zh", "unknown_id", f"请把订单 {UNKNOWN_ORDER} 的发票发给我。", "billing",
         "query_invoice", f"order_id={UNKNOWN_ORDER}"),
    Case("en", "unknown_id", f"Please check the status of server {UNKNOWN_SERVER}.",
         "tech_support", "check_server|restart_server", f"server_id={UNKNOWN_SERVER}"),
    Case("zh", "unknown_id", f"请帮我查看服务器 {UNKNOWN_SERVER} 的状态。", "tech_support",
         "check_server|restart_server", f"server_id={UNKNOWN_SERVER}"),
)  # fmt: skip

PROBLEM_WORDS = (
    "not found", "no invoice", "unknown", "no order", "no such", "doesn't exist",
    "does not exist", "couldn't find", "could not find", "unable", "check the", "double-check",
    "invalid", "找不到", "不存在", "未找到", "没有找到", "查不到", "无法", "核对", "确认", "检查",
    "未知", "没有该", "没有这个",
)  # fmt: skip
"""Words of a reply that reports a failed lookup."""


def _record_values() -> tuple[str, ...]:
    """Values only a real record carries: seeing one after an unknown id means invented data."""
    out: set[str] = {"INV-", "RMA-"}
    for table in (ORDERS, INVOICES, SERVERS):
        for rec in table.values():
            for v in rec.values():
                if isinstance(v, str) and not v.startswith("http"):
                    out.add(v)
                elif isinstance(v, float):
                    out.add(f"{v:g}")
    return tuple(sorted(out))


RECORD_VALUES = _record_values()
HAN = re.compile(r"[\u4e00-\u9fff]")


# ---------------------------------------------------------------------------- one request


@dataclass
class Call:
    """One tool call the specialist made, as the kernel recorded it."""

    tool: str
    arguments: dict[str, Any]
    ok: bool
    error: str | None = None


@dataclass
class Outcome:
    """How one labelled request went."""

    n: int
    case: Case
    route: str
    path: list[str]
    status: str
    output: str
    calls: list[Call]
    emitted: int
    """Tool and hand-off calls the model emitted."""
    invalid: int
    invented: int
    """Calls refused (or hand-off state dropped) by the grounded-id guard."""
    model_errors: int
    turn_ms: list[float]
    model_s: float
    input_tokens: int
    output_tokens: int
    seconds: float
    escalated: bool = False
    """The run was escalated at some point (an `escalated` event)."""
    failures: list[str] = field(default_factory=list)
    trace: list[str] = field(default_factory=list)
    """One line per notable event (written by `--json`, for reading failures)."""

    @property
    def routed(self) -> bool:
        return self.route == self.case.route

    @property
    def success(self) -> bool:
        return not self.failures

    @property
    def same_language(self) -> bool | None:
        """Whether a reply the desk wrote is in the request's language (None: escalated)."""
        if self.status != "completed" or not self.output:
            return None
        return bool(HAN.search(self.output)) == (self.case.lang in CHINESE_SPEAKING)

    @property
    def second_need(self) -> bool | None:
        """Whether a `multi` request's run reached its second need (None: not multi): the
        `also` route held the baton after the first need's route did, or, for `human`, the
        run was escalated after it."""
        also = self.case.also
        if not also:
            return None
        path = list(self.path)
        if self.case.route not in path:
            return False
        after = path[path.index(self.case.route) + 1 :]
        if also == "human":
            return self.escalated or self.status == "escalated" or "human" in after
        return also in after


def first_route(events: Sequence[Event]) -> str:
    """Triage's first hand-off target; `human` for an escalation triage asked for. Behind a
    router (no triage agent): the router's choice, `human` when it placed the request with no
    agent."""
    asked: list[str] = []
    for e in events:
        if e.type == "route_decided" and e.tier not in ("entry", "session"):
            routed = e.target
            return routed if any(x.type == "agent_started" for x in events) else "human"
        if e.type == "model_called":
            asked = e.tool_calls
        elif e.type == "handoff":
            return e.payload.target
        elif e.type == "escalated":
            return "human" if "transfer_to_human" in asked else "(escalated by a guard)"
    return "(answered itself)"


def classify_calls(events: Sequence[Event]) -> tuple[int, int, int, int]:
    """(emitted, invalid, invented ids caught, model errors) over the run's events."""
    emitted = invalid = invented = errors = 0
    calls = [e for e in events if e.type == "model_called"]
    for i, mc in enumerate(calls):
        emitted += len(mc.tool_calls)
        if mc.error:
            errors += 1
        if i + 1 < len(calls) and calls[i + 1].reask:  # its calls did not parse
            invalid += max(1, len(mc.tool_calls))
    for e in events:
        if e.type == "handoff_refused":
            invalid += 1
        elif e.type == "guard_tripped" and e.guard == "ungrounded_id":
            invented += 1
        elif e.type == "tool_called" and not e.ok and e.error:
            err = e.error
            if (
                err.startswith(("unknown tool", "invalid arguments for"))
                or "not valid JSON" in err
                or "expected a JSON object" in err
            ):
                invalid += 1
    return emitted, invalid, invented, errors


def trace_lines(events: Sequence[Event]) -> list[str]:
    """A compact, readable account of the run."""
    lines: list[str] = []
    for e in events:
        if e.type == "model_called":
            said = f" said {clip(e.text, 160)!r}" if e.text and not e.tool_calls else ""
            lines.append(
                f"{e.agent}: model -> {', '.join(e.tool_calls) or 'answer'}{said} "
                f"({e.usage.input_tokens}+{e.usage.output_tokens} tok, {e.latency_ms:.0f} ms)"
                + (" [re-ask]" if e.reask else "")
                + (f" ERROR {e.error}" if e.error else "")
            )
        elif e.type == "tool_called":
            args = json.dumps(e.arguments, ensure_ascii=False)
            lines.append(
                f"{e.agent}: {e.tool}({args}) -> {'ok' if e.ok else 'error: ' + str(e.error)}"
            )
        elif e.type == "handoff":
            p = e.payload
            lines.append(
                f"{p.source} -> {p.target}: objective {p.objective!r}, reason {p.reason!r}, "
                f"state {json.dumps(p.state, ensure_ascii=False)}"
            )
        elif e.type == "handoff_refused":
            lines.append(f"{e.agent}: hand-off to {e.target} refused: {e.reason}")
        elif e.type == "guard_tripped":
            lines.append(f"{e.agent}: guard {e.guard}: {e.detail}")
        elif e.type == "escalated":
            lines.append(f"{e.agent}: escalated to {e.to}: {'; '.join(e.card.reasons)}")
    return lines


def judge(case: Case, out: Outcome) -> list[str]:
    """Why the request failed; empty when it succeeded."""
    why: list[str] = []
    if not out.routed:
        why.append("route")
    if case.route == "human":
        if out.status != "escalated":
            why.append(f"status {out.status}")
        return why
    if out.second_need is False:
        why.append(f"second need ({case.also}) not reached")
    key = case.key
    matching = [
        c
        for c in out.calls
        if c.tool in case.tools
        and key is not None
        and str(c.arguments.get(key[0], "")).strip().casefold() == key[1].casefold()
    ]
    # a second need for a person ends the run escalated
    done = ("completed", "escalated") if case.also == "human" else ("completed",)
    if out.status not in done:
        why.append(f"status {out.status}")
    if case.kind == "unknown_id":
        if not matching:
            why.append("tool not tried")
        text = out.output.casefold()
        if not any(w in text for w in PROBLEM_WORDS):
            why.append("error not reported")
        if any(v.casefold() in text for v in RECORD_VALUES):
            why.append("invented data")
        return why
    if not any(c.ok for c in matching):
        why.append("tool" if not any(c.tool in case.tools for c in out.calls) else "tool failed")
    return why


def analyse(n: int, case: Case, result: RunResult, seconds: float) -> Outcome:
    """Metrics of one run."""
    events = result.events
    emitted, invalid, invented, errors = classify_calls(events)
    turns = [e for e in events if e.type == "model_called"]
    out = Outcome(
        n=n,
        case=case,
        route=first_route(events),
        path=list(result.path),
        status=result.status,
        output=result.output or "",
        calls=[
            Call(e.tool, dict(e.arguments), e.ok, e.error)
            for e in events
            if e.type == "tool_called"
        ],
        emitted=emitted,
        invalid=invalid,
        invented=invented,
        model_errors=errors,
        turn_ms=[e.latency_ms for e in turns],
        model_s=sum(e.latency_ms for e in turns if not e.error) / 1000,
        input_tokens=sum(e.usage.input_tokens for e in turns),
        output_tokens=sum(e.usage.output_tokens for e in turns),
        seconds=seconds,
        escalated=any(e.type == "escalated" for e in events),
    )
    out.failures = judge(case, out)
    out.trace = trace_lines(events)
    return out


# ---------------------------------------------------------------------------- report


def clip(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100), linear interpolation between closest ranks."""
    if not values:
        return float("nan")
    s = sorted(values)
    pos = (len(s) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def show_calls(calls: Iterable[Call]) -> str:
    parts = []
    for c in calls:
        arg = next(iter(c.arguments.values()), "") if c.arguments else ""
        parts.append(f"{c.tool}({arg}){'✓' if c.ok else '✗'}")
    return " ".join(parts) or "—"


TABLE_HEAD = (
    "| # | lang | request | expected | route (path) | tool calls | status | s | result |\n"
    "|---|---|---|---|---|---|---|---|---|"
)


def row(o: Outcome) -> str:
    path = "→".join(o.path)
    route = o.route if o.routed else f"**{o.route}**"
    result = "ok" if o.success else "✗ " + ", ".join(o.failures)
    cells = [
        str(o.n),
        o.case.lang,
        clip(o.case.text, 60),
        o.case.expected,
        f"{route} ({path})",
        show_calls(o.calls),
        o.status,
        f"{o.seconds:.1f}",
        result,
    ]
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def ratio(part: int, whole: int) -> str:
    return f"{part}/{whole} = {100 * part / whole:.1f} %" if whole else "n/a"


def summarise(outcomes: Sequence[Outcome], wall_s: float) -> dict[str, Any]:
    """The summary figures (also what `--json` writes)."""
    n = len(outcomes)
    emitted = sum(o.emitted for o in outcomes)
    invalid = sum(o.invalid for o in outcomes)
    turns = [ms for o in outcomes for ms in o.turn_ms]
    out_tokens = sum(o.output_tokens for o in outcomes)
    model_s = sum(o.model_s for o in outcomes)
    # only the groups this run has cases of, in the order of GROUPS_LANG and GROUPS_KIND
    present = {group for o in outcomes for group in (o.case.lang, o.case.kind)}
    by: dict[str, dict[str, int]] = {
        g: {"n": 0, "routed": 0, "success": 0} for g in (*GROUPS_LANG, *GROUPS_KIND) if g in present
    }
    for o in outcomes:
        for group in (o.case.lang, o.case.kind):
            g = by[group]
            g["n"] += 1
            g["routed"] += o.routed
            g["success"] += o.success
    multi = [o for o in outcomes if o.second_need is not None]
    return {
        "requests": n,
        "routed": sum(o.routed for o in outcomes),
        "success": sum(o.success for o in outcomes),
        "multi": len(multi),
        "second_need_reached": sum(o.second_need is True for o in multi),
        "tool_calls_emitted": emitted,
        "tool_calls_invalid": invalid,
        "invented_ids_caught": sum(o.invented for o in outcomes),
        "replies": sum(o.same_language is not None for o in outcomes),
        "replies_in_user_language": sum(o.same_language is True for o in outcomes),
        "model_errors": sum(o.model_errors for o in outcomes),
        "model_calls": len(turns),
        "input_tokens": sum(o.input_tokens for o in outcomes),
        "output_tokens": out_tokens,
        "model_seconds": round(model_s, 2),
        "tokens_per_s": round(out_tokens / model_s, 2) if model_s else None,
        "turn_ms_p50": round(percentile(turns, 50), 1),
        "turn_ms_p95": round(percentile(turns, 95), 1),
        "request_s_p50": round(percentile([o.seconds for o in outcomes], 50), 2),
        "request_s_p95": round(percentile([o.seconds for o in outcomes], 95), 2),
        "request_s_mean": round(sum(o.seconds for o in outcomes) / n, 2) if n else None,
        "wall_s": round(wall_s, 1),
        "by_group": by,
    }


def verdict(part: int, whole: int, target: str) -> str:
    """`ratio` and the target, with whether it is met."""
    goal = TARGETS[target]
    met = whole > 0 and part / whole >= goal
    return f"{ratio(part, whole)} | {'=' if goal == 1 else '≥'} {100 * goal:.0f} % " + (
        "(met)" if met else "(**not met**)"
    )


def print_summary(s: dict[str, Any]) -> None:
    n, emitted = s["requests"], s["tool_calls_emitted"]
    valid = emitted - s["tool_calls_invalid"]
    print()
    print("| metric | value | target |")
    print("|---|---|---|")
    print(f"| tool-call validity | {verdict(valid, emitted, 'valid')} |")
    print(f"| routing accuracy | {verdict(s['routed'], n, 'routing')} |")
    print(f"| task success | {verdict(s['success'], n, 'success')} |")
    if s.get("multi"):
        print(f"| second need reached (multi) | {ratio(s['second_need_reached'], s['multi'])} | |")
    print(f"| invented ids caught (grounded-id guard) | {s['invented_ids_caught']} | |")
    same, replies = s["replies_in_user_language"], s["replies"]
    print(f"| replies in the user's language | {ratio(same, replies)} | |")
    print(f"| model errors | {s['model_errors']} | |")
    tps = s["tokens_per_s"]
    print(f"| output tokens/s (model time) | {tps if tps is not None else 'n/a'} | |")
    p50, p95 = s["turn_ms_p50"], s["turn_ms_p95"]
    print(f"| model-call latency p50 / p95 | {p50:.0f} / {p95:.0f} ms | |")
    print(
        f"| request latency p50 / p95 / mean | {s['request_s_p50']:.1f} / "
        f"{s['request_s_p95']:.1f} / {s['request_s_mean']:.1f} s | |"
    )
    print(
        f"| totals | {n} requests, {s['model_calls']} model calls, {emitted} tool calls, "
        f"{s['input_tokens']} input + {s['output_tokens']} output tokens, "
        f"{s['model_seconds']:.0f} s model time, {s['wall_s']:.0f} s wall | |"
    )
    print()
    print("| group | routed | success |")
    print("|---|---|---|")
    for name, g in s["by_group"].items():
        if g["n"]:
            print(f"| {name} | {ratio(g['routed'], g['n'])} | {ratio(g['success'], g['n'])} |")


def print_failures(outcomes: Sequence[Outcome]) -> None:
    failed = [o for o in outcomes if not o.success]
    if not failed:
        return
    print("\nFailures:")
    for o in failed:
        print(f"\n{o.n}. [{o.case.lang}/{o.case.kind}] {o.case.text}")
        print(f"   expected {o.case.expected}; failed on: {', '.join(o.failures)}")
        for line in o.trace:
            print(f"   - {line}")
        print(f"   reply ({o.status}): {clip(o.output, 200)!r}")


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# ---------------------------------------------------------------------------- main


def resolve(choice: str) -> tuple[Any, str]:
    """(model for `build_desk`, description) for `--model`; loads the embedded model."""
    if choice == "scripted":
        from baton.desk.policy import scripted_desk_model

        return scripted_desk_model(), "scripted desk policy (rule-based, not a language model)"
    from baton.models.registry import resolve_model

    model = resolve_model(choice)
    load = getattr(model, "load", None)
    if load is None:
        return model, model.name
    t = time.perf_counter()
    engine = load()
    card = getattr(model, "card", None)
    notes = f", {card.notes}" if card is not None and card.notes else ""
    return model, (
        f"{model.name}{notes}; llama.cpp, {engine.n_threads} thread(s), "
        f"loaded in {time.perf_counter() - t:.1f} s"
    )


DESKS = ("triage", "routed")
"""What `--desk` accepts."""


def new_desk(model: Any, kind: str) -> Any:
    """A fresh desk of `kind` (`DESKS`) on `model`: the routed one with the triage desk's
    guards and multi-intent routing."""
    if kind == "routed":
        return build_routed_desk(model, guards=GUARDS, multi_intent=True)
    return build_desk(model=model)


async def evaluate(model: Any, cases: Sequence[Case], desk_kind: str = "triage") -> list[Outcome]:
    """Run every case on a fresh desk and session; print each row as it finishes."""
    outcomes: list[Outcome] = []
    print(TABLE_HEAD, flush=True)
    for n, case in enumerate(cases, 1):
        desk = new_desk(model, desk_kind)
        t = time.perf_counter()
        result = await desk.team.run(case.text, session_id=f"eval-{n}")
        outcome = analyse(n, case, result, time.perf_counter() - t)
        outcomes.append(outcome)
        print(row(outcome), flush=True)
    return outcomes


SETS_DIR = Path(__file__).resolve().parent / "desk_routing"
HELDOUT = SETS_DIR / "desk_eval_heldout.json"
V2 = SETS_DIR / "desk_eval_v2.json"
SETS = ("insample", "heldout", "v2-dev", "v2-sealed")
"""What `--set` accepts."""


def heldout_cases() -> tuple[Case, ...]:
    """The held-out requests: written after the desk's instructions, never used to tune them."""
    return tuple(Case(**row) for row in json.loads(HELDOUT.read_text(encoding="utf-8")))


def v2_cases(half: Literal["sealed", "dev"]) -> tuple[Case, ...]:
    """One half of the second held-out set, in file order (`sealed`: never tuned on)."""
    rows = json.loads(V2.read_text(encoding="utf-8"))[half]
    return tuple(Case(**row) for row in rows)


def load_set(name: str) -> tuple[Case, ...]:
    """The cases of a `--set` name."""
    if name == "insample":
        return CASES
    if name == "heldout":
        return heldout_cases()
    if name == "v2-dev":
        return v2_cases("dev")
    if name == "v2-sealed":
        return v2_cases("sealed")
    raise ValueError(f"unknown set {name!r}; expected one of {', '.join(SETS)}")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--model", default="local", help="local, local:<name>, openai:<name>, scripted")
    ap.add_argument("--limit", type=int, default=None, help="run only the first N requests")
    ap.add_argument("--lang", choices=GROUPS_LANG, default=None, help="only one language")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    ap.add_argument(
        "--set",
        choices=SETS,
        default="insample",
        help="insample: the 44 requests that shaped the desk's instructions; heldout: 44 new "
        "ones of the same kinds (benchmarks/desk_routing/desk_eval_heldout.json); v2-sealed / "
        "v2-dev: the sealed (64, never tuned on) and dev (40) halves of "
        "benchmarks/desk_routing/desk_eval_v2.json",
    )
    ap.add_argument(
        "--desk",
        choices=DESKS,
        default="triage",
        help="triage: the demo's desk (a triage agent hands off); routed: the specialists "
        "behind src/baton/desk/routed.py's router, multi-intent",
    )
    args = ap.parse_args(argv)

    chosen = load_set(args.set)
    cases = [c for c in chosen if args.lang in (None, c.lang)][: args.limit]
    argv_shown = sys.argv[1:] if argv is None else list(argv)
    command = shlex.join(["python", "benchmarks/desk_eval.py", *argv_shown])
    model, described = resolve(args.model)
    meta = {
        "command": command,
        "set": args.set,
        "desk": args.desk,
        "model": described,
        "machine": f"{cpu_name()}, {os.cpu_count()} cores, {platform.machine()}, "
        f"Python {platform.python_version()}",
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }
    print(f"# {meta['command']}")
    print(f"# set: {meta['set']}, desk: {meta['desk']}")
    print(f"# model: {meta['model']}")
    print(f"# machine: {meta['machine']}")
    print(f"# date: {meta['date']}")
    print(f"# {len(cases)} requests, each on a fresh desk and session\n", flush=True)

    t = time.perf_counter()
    outcomes = asyncio.run(evaluate(model, cases, args.desk))
    summary = summarise(outcomes, time.perf_counter() - t)
    print_summary(summary)
    print_failures(outcomes)

    if args.json is not None:
        doc = {
            **meta,
            "summary": summary,
            "requests": [
                {
                    **asdict(o),
                    "case": asdict(o.case),
                    "routed": o.routed,
                    "success": o.success,
                    "same_language": o.same_language,
                    "second_need": o.second_need,
                }
                for o in outcomes
            ],
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, ensure_ascii=False, indent=2) + "\n")
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
