"""What a streamed reply may show the user while it arrives.

Text-mode providers (OpenAI-compatible servers in `tool_mode="text"`, the embedded model, a
`ScriptedModel.text(...)` step) write tool calls as JSON inside their text, so their raw output
must not be streamed as it is: the user would watch `{"tool": "transfer_to_billing", ...}`
scroll by. `VisibleText` passes prose through, holds back JSON and code fences, and streams only
the answer of a `{"final": "..."}` envelope, decoded as it arrives by `ReplyScanner`. When the
reply is complete it settles up against the text the kernel will actually show
(`parse_text_mode`): whatever of that answer has not been streamed yet comes out last, so the
deltas add up to the answer whenever what was streamed is its beginning.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from baton.models.parsing import _ANSWER_KEYS, _NAME_KEYS, parse_text_mode

_WS = " \t\r\n"
_SIMPLE_ESCAPES = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
}

# Scanner states (module constants rather than an Enum: the scanner runs once per character).
_START, _KEY_OR_END, _COLON, _VALUE, _AFTER_VALUE, _SCALAR, _NESTED, _STRING = range(8)
_DONE, _DEAD = 8, 9
# What the string being read is.
_KEY, _ANSWER, _SKIP = range(3)
# Where inside a string the scanner is.
_CHARS, _ESCAPE, _HEX = range(3)


class ReplyScanner:
    """Incremental scanner: feed a JSON object's text in pieces, get its answer's characters.

    Streams the value of the first top-level answer key (`final`, `answer`, `reply`, ...) as it
    arrives, decoding escapes (`\\n`, `\\"`, `\\u` and four hex digits, surrogate pairs) as
    `json.loads` does, whichever way the text is split. Nothing is streamed once a tool-name key
    (`tool`, `name`, ...) has appeared at the top level, nor from nested values (a tool's
    arguments), nor from text that is not a JSON object. Lenient where JSON is not: an unknown
    escape yields its character, a raw control character is kept.
    """

    def __init__(self) -> None:
        self._state = _START
        self._target = _SKIP
        self._in = _CHARS
        self._hex = ""
        self._high = ""
        """A decoded high surrogate waiting to see whether a low one follows."""
        self._key: list[str] = []
        self._current_key = ""
        self._depth = 0
        self._nested_string = False
        self._nested_escape = False
        self._seen_name = False
        self._answered = False

    @property
    def done(self) -> bool:
        """True once the object is closed or the text turned out not to be an object."""
        return self._state in (_DONE, _DEAD)

    def feed(self, chunk: str) -> str:
        """Scan the next piece of raw text; return the answer characters it completed."""
        out: list[str] = []
        for ch in chunk:
            state = self._state
            if state == _STRING:
                self._string_char(ch, out)
            elif state == _NESTED:
                self._nested_char(ch)
            elif state in (_DONE, _DEAD):
                break
            elif ch in _WS and state != _SCALAR:
                continue
            elif state == _START:
                self._state = _KEY_OR_END if ch == "{" else _DEAD
            elif state == _KEY_OR_END:
                if ch == '"':
                    self._open_string(_KEY)
                elif ch == "}":
                    self._state = _DONE
                elif ch != ",":
                    self._state = _DEAD
            elif state == _COLON:
                self._state = _VALUE if ch == ":" else _DEAD
            elif state == _VALUE:
                if ch == '"':
                    answer = (
                        self._current_key in _ANSWER_KEYS
                        and not self._seen_name
                        and not self._answered
                    )
                    self._open_string(_ANSWER if answer else _SKIP)
                elif ch in "{[":
                    self._state, self._depth = _NESTED, 1
                    self._nested_string = self._nested_escape = False
                else:
                    self._state = _SCALAR
            elif state in (_AFTER_VALUE, _SCALAR):
                if ch == ",":
                    self._state = _KEY_OR_END
                elif ch == "}":
                    self._state = _DONE
                elif state == _AFTER_VALUE:
                    self._state = _DEAD
        return "".join(out)

    def finish(self) -> str:
        """Characters still held at the end of the text (a lone high surrogate)."""
        held, self._high = self._high, ""
        return held if self._target == _ANSWER else ""

    # ------------------------------------------------------------------ strings
    def _open_string(self, target: int) -> None:
        self._state, self._target, self._in = _STRING, target, _CHARS
        self._key.clear()

    def _emit(self, text: str, out: list[str]) -> None:
        if self._high:
            text, self._high = self._high + text, ""
        if self._target == _ANSWER:
            out.append(text)
        elif self._target == _KEY:
            self._key.append(text)

    def _string_char(self, ch: str, out: list[str]) -> None:
        if self._in == _CHARS:
            if ch == '"':
                self._close_string(out)
            elif ch == "\\":
                self._in = _ESCAPE
            else:
                self._emit(ch, out)
        elif self._in == _ESCAPE:
            if ch == "u":
                self._in, self._hex = _HEX, ""
            else:
                self._in = _CHARS
                self._emit(_SIMPLE_ESCAPES.get(ch, ch), out)
        else:
            self._hex += ch
            if len(self._hex) < 4:
                return
            self._in = _CHARS
            try:
                code = int(self._hex, 16)
            except ValueError:  # not hex: keep the text as written
                self._emit("\\u" + self._hex, out)
                return
            if 0xD800 <= code <= 0xDBFF:
                self._emit("", out)  # a previous lone high surrogate goes out first
                self._high = chr(code)
            elif 0xDC00 <= code <= 0xDFFF and self._high:
                pair = 0x10000 + ((ord(self._high) - 0xD800) << 10) + (code - 0xDC00)
                self._high = ""
                self._emit(chr(pair), out)
            else:
                self._emit(chr(code), out)

    def _close_string(self, out: list[str]) -> None:
        self._emit("", out)  # flush a lone high surrogate
        if self._target == _KEY:
            self._current_key = "".join(self._key)
            if self._current_key in _NAME_KEYS:
                self._seen_name = True
            self._state = _COLON
        else:
            if self._target == _ANSWER:
                self._answered = True
            self._state = _AFTER_VALUE
        self._target = _SKIP

    def _nested_char(self, ch: str) -> None:
        if self._nested_string:
            if self._nested_escape:
                self._nested_escape = False
            elif ch == "\\":
                self._nested_escape = True
            elif ch == '"':
                self._nested_string = False
        elif ch == '"':
            self._nested_string = True
        elif ch in "{[":
            self._depth += 1
        elif ch in "}]":
            self._depth -= 1
            if self._depth == 0:
                self._state = _AFTER_VALUE


# VisibleText modes
_LEAD, _PROSE, _JSON, _HELD = range(4)
_TRIGGER = re.compile(r"\{|```|\[\s*\{")
"""Where prose stops being shown: JSON (a call may follow) or a code fence."""
_PARTIAL_TRIGGER = re.compile(r"`{1,2}$|\[\s*$")
"""A chunk ending like this may be the start of a trigger: wait for the next chunk."""
_FENCE_HEAD = re.compile(r"```[A-Za-z]*\s*")


class VisibleText:
    """The part of a reply the user may see, fed the raw text in pieces as it is generated.

    With `text_mode=False` (native tool calls, plain answers) every piece is shown as is. With
    `text_mode=True` (tool calls written as JSON inside the text):

    - prose is shown as it arrives, up to the first `{`, code fence or `[{`, from where the
      rest is held back (it may be a tool call);
    - a reply that opens with a JSON object (bare or in a ```json fence) shows only its answer
      string (`{"final": "..."}`), decoded as it arrives; a tool call shows nothing;
    - `finish` settles up with the answer the kernel will show for the whole text.
    """

    def __init__(self, text_mode: bool) -> None:
        self.text_mode = text_mode
        self._mode = _LEAD if text_mode else _PROSE
        self._hold = ""
        self._scanner: ReplyScanner | None = None
        self._shown: list[str] = []

    @property
    def shown(self) -> str:
        """Everything shown so far."""
        return "".join(self._shown)

    def feed(self, chunk: str) -> str:
        """Take the next piece of raw output; return the text to show for it ('' for none)."""
        out = self._feed(chunk) if self.text_mode else chunk
        if out:
            self._shown.append(out)
        return out

    def finish(self, text: str | None, tool_names: Iterable[str] = ()) -> str:
        """The rest of what the user should see, given the complete raw `text` of the reply.

        That is the answer the kernel will show (for text mode, what `parse_text_mode` finds in
        `text`; otherwise `text` itself) minus what was already shown, when what was shown is
        its beginning; '' otherwise (text already shown cannot be taken back).
        """
        if self.text_mode:
            try:
                answer = parse_text_mode(text, set(tool_names)).text or ""
            except Exception:  # the kernel re-asks unparseable output; nothing to show
                answer = ""
        else:
            answer = text or ""
        shown = self.shown
        rest = answer[len(shown) :] if answer.startswith(shown) else ""
        if rest:
            self._shown.append(rest)
        return rest

    def _feed(self, chunk: str) -> str:
        text, self._hold = self._hold + chunk, ""
        if self._mode == _JSON:
            assert self._scanner is not None
            return self._scanner.feed(text)
        if self._mode == _HELD:
            return ""
        if self._mode == _LEAD:
            body = text.lstrip(_WS)
            if not body:
                self._hold = text
                return ""
            if body[0] == "{":
                return self._start_json(body)
            if body[0] in "`[":
                return self._opening(text, body)
            self._mode = _PROSE
        return self._prose(text)

    def _start_json(self, body: str) -> str:
        self._mode, self._scanner = _JSON, ReplyScanner()
        return self._scanner.feed(body)

    def _opening(self, text: str, body: str) -> str:
        """A reply opening with a backtick or `[`: a fenced JSON object, a list, or prose."""
        if body[0] == "`":
            if len(body) < 3 and body == "`" * len(body):
                self._hold = text  # "`" or "``": a fence may be coming
                return ""
            if body.startswith("```"):
                head = _FENCE_HEAD.match(body)
                assert head is not None
                inner = body[head.end() :]
                if not inner:
                    self._hold = text  # the fence's language or first line is not over yet
                    return ""
                if inner[0] == "{":
                    return self._start_json(inner)
                self._mode = _HELD  # a fence of something else: settled at the end
                return ""
        else:
            inner = body[1:].lstrip(_WS)
            if not inner:
                self._hold = text
                return ""
            if inner[0] == "{":
                self._mode = _HELD  # a list of calls (or answers): settled at the end
                return ""
        self._mode = _PROSE
        return self._prose(text)

    def _prose(self, text: str) -> str:
        stop = _TRIGGER.search(text)
        if stop is not None:
            self._mode = _HELD
            return text[: stop.start()]
        partial = _PARTIAL_TRIGGER.search(text)
        if partial is not None:
            self._hold = text[partial.start() :]
            return text[: partial.start()]
        return text


def word_chunks(text: str) -> list[str]:
    """`text` cut into word-sized pieces (each word with the whitespace after it)."""
    return re.findall(r"\s*\S+\s*", text) or ([text] if text else [])
