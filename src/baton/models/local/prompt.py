"""The prompt and reply schema of a small model under constrained decoding.

Built here once and used by the embedded engine (`LocalModel`) and by `OpenAICompatible`'s
constrained path, so a small model served over OpenAI-compatible HTTP reads the very prompt,
and decodes under the very schema, that the embedded engine gives it. Nothing here needs
llama.cpp.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from baton.core.messages import Message, ToolSpec
from baton.core.text import clean_text
from baton.handoff import FETCH_HISTORY
from baton.models.base import ModelRequest
from baton.models.local.grammar import answer_schema, starting_with, tool_call_schema
from baton.models.textmode import json_shape, render_text_mode

_PROTOCOL = (
    "Reply with exactly one JSON object and nothing else: "
    '{"tool": "<name>", "arguments": {...}} to call a tool, or '
    '{"final": "<your answer to the user>"} to answer. '
    "Use only ids and numbers that the user wrote, that are listed as known facts, or that a "
    "tool returned; never invent them. If an id you need is missing, ask the user for it "
    "with a final answer."
)
_TYPED_PROTOCOL = (
    "Reply with exactly one JSON object and nothing else: "
    '{{"tool": "<name>", "arguments": {{...}}}} to call a tool, or '
    '{{"final": {shape}}} to answer. '
    "Use only ids and numbers that the user wrote, that are listed as known facts, or that a "
    "tool returned; never invent them."
)
"""The protocol when the agent has an output type: the answer is JSON of that shape, not a
sentence. With the shape described apart from the envelope (`{"final": <the JSON described
below>}`), a 1.5B model called the same tool again and again instead of answering."""
_TYPED_ANSWER = "Reply with exactly one JSON object of this shape and nothing else: {shape}"
"""The protocol of a typed answer without tools."""


_HANDOFF = "transfer_to_"
_HANDOFF_BOILERPLATE = re.compile(
    r"^Hand the baton to [\w.-]+\.\s*(?:It handles:\s*)?"
    r"|\s*Call it when the request belongs there\b.*$"
)
"""The generic sentences of a hand-off tool's description; only what the target handles stays."""


_SCRIPTS = (
    ("Japanese", "[\u3040-\u30ff]", "[\u3040-\u30ff\u4e00-\u9fff]"),
    ("Korean", "[\uac00-\ud7af]", "[\uac00-\ud7af]"),
    ("Chinese", "[\u4e00-\u9fff]", "[\u4e00-\u9fff]"),
)
"""(language, how to spot it, how its text may start); kana first: Japanese also uses Han."""


def user_script(messages: Sequence[Message]) -> tuple[str, str] | None:
    """(language, first-character class) of the latest user message, for scripts that name
    their language (Chinese, Japanese, Korean); None otherwise."""
    text = next((m.content or "" for m in reversed(messages) if m.role == "user"), "")
    return next(((lang, start) for lang, spot, start in _SCRIPTS if re.search(spot, text)), None)


_FETCH_HISTORY_LINE = "Read earlier turns of this conversation."
"""`fetch_history`'s line in a compact catalogue (its full description runs to ~90 tokens)."""

_FIRST_SENTENCE = re.compile(r"^(.*?[.!?。！？])(?:\s|$)")


def first_sentence(text: str) -> str:
    """The first sentence of `text` (all of it when it has one sentence): a small model's
    catalogue line. The rest of a tool's description is for larger models; the grammar
    enforces the arguments' schema either way."""
    text = " ".join(text.split())
    match = _FIRST_SENTENCE.match(text)
    return match.group(1) if match else text


def _handled(spec: ToolSpec) -> str:
    """What a hand-off's target handles: its description without the generic sentences."""
    return _HANDOFF_BOILERPLATE.sub("", " ".join(spec.description.split()))


def _signature(spec: ToolSpec) -> str:
    props = spec.parameters.get("properties", {})
    if spec.name.startswith(_HANDOFF):
        return f"{spec.name}(reason, objective, state)"
    args = ", ".join(f"{k}: {v.get('type', 'any')}" for k, v in props.items())
    return f"{spec.name}({args})"


def catalogue(tools: Sequence[ToolSpec], output_schema: dict[str, Any] | None = None) -> str:
    """A compact tool list: signatures and descriptions; the grammar enforces the schemas.

    An agent whose only tools are hand-offs (a front desk) gets them as a list of targets by
    bare name with what each handles, and a catch-all to `human` when that is a target. With
    each target written as `transfer_to_<name>(...): Hand the baton to <name>. ...`, a 1.5B
    model routed by the sound of the names (the weather, a poem and a journalist went to
    `after_sales`, "after-sales service") and rarely chose `human`. An agent with tools of
    its own keeps hand-offs among its tools: listed apart, it stopped chaining them after its
    own tool call (after_sales no longer passed a refund on to billing).

    `output_schema`: the agent answers JSON of its output type, inside `{"final": ...}`.
    """
    if not tools or any(not s.name.startswith(_HANDOFF) for s in tools):
        lines = ["You can call these tools:"]
        for spec in tools:
            if spec.name.startswith(_HANDOFF):
                lines.append(f"- {_signature(spec)}: {_handled(spec)}")
                continue
            if spec.name == FETCH_HISTORY:  # the kernel's own tool, rarely needed here
                lines.append(f"- {_signature(spec)}: {_FETCH_HISTORY_LINE}")
                continue
            lines.append(f"- {_signature(spec)}: {first_sentence(spec.description)}")
            for k, v in spec.parameters.get("properties", {}).items():
                if v.get("description"):
                    lines.append(f"    {k}: {v['description']}")
    else:
        lines = [f"You can pass the request on with {_HANDOFF}<name>(reason, objective, state) to:"]
        for spec in tools:
            lines.append(f"- {spec.name[len(_HANDOFF) :]}: {_handled(spec)}")
        if any(s.name == f"{_HANDOFF}human" for s in tools):
            lines.append(
                "If neither your tools nor the agents above fit the request, pass it to human."
            )
    if output_schema is None:
        lines.append(_PROTOCOL)
    else:
        lines.append(_TYPED_PROTOCOL.format(shape=json_shape(output_schema)))
    return "\n".join(lines)


def compact_prompt(request: ModelRequest) -> list[dict[str, Any]]:
    """The chat messages a small model reads for `request`: the compact catalogue (or the
    typed answer's shape) first in the system message, a stable, cacheable prefix; tool calls
    and results as text, as in text mode."""
    messages = render_text_mode(request.messages, [])
    head: str | None = None
    if request.tools:
        head = catalogue(request.tools, request.output_schema)
    elif request.output_schema is not None:
        head = _TYPED_ANSWER.format(shape=json_shape(request.output_schema))
    if head is not None:
        if messages and messages[0]["role"] == "system":
            messages[0] = {"role": "system", "content": f"{head}\n\n{messages[0]['content']}"}
        else:
            messages.insert(0, {"role": "system", "content": head})
    # llama.cpp reads UTF-8: a lone surrogate (a caller that skipped the kernel's cleaning,
    # e.g. `router.route` on raw text) would make the prompt unencodable
    return [
        {**m, "content": clean_text(m["content"])} if isinstance(m.get("content"), str) else m
        for m in messages
    ]


def fixed_text(request: ModelRequest) -> str | None:
    """The leading text of `compact_prompt`'s first message that every call of this agent
    repeats: the catalogue (or a typed answer's shape) and the agent's instructions
    (`ModelRequest.fixed_prefix`), when the system message starts with them; None when
    nothing is known to be fixed."""
    system = request.messages[0] if request.messages else None
    head: str | None = None
    if request.tools:
        head = catalogue(request.tools, request.output_schema)
    elif request.output_schema is not None:
        head = _TYPED_ANSWER.format(shape=json_shape(request.output_schema))
    fixed = request.fixed_prefix
    if not (fixed and system is not None and system.role == "system"):
        return head
    if not (system.content or "").startswith(fixed):
        return head
    fixed = clean_text(fixed)
    return f"{head}\n\n{fixed}" if head is not None else fixed


def reply_schema(request: ModelRequest) -> dict[str, Any] | None:
    """The JSON schema the reply to `request` is decoded under (None: free text).

    With tools: one branch per tool or an answer. After a tool result (English JSON) a small
    model answered Chinese users in English, whatever the instructions said; a note in the
    prompt fixed the language but also made it answer instead of calling the next hand-off.
    Starting the answer text in the user's script fixes the language and leaves that choice
    alone. Without tools, an output type is the whole reply.
    """
    output = request.output_schema
    if request.tools:
        script = user_script(request.messages) if output is None else None
        pattern = starting_with(script[1]) if script else None
        return tool_call_schema(request.tools, final_pattern=pattern, final_schema=output)
    if output is not None:
        return answer_schema(output)
    return None
