"""The eval spec: a team, a model and labelled cases, read from a YAML or JSON file.

Every model forbids unknown fields, and every problem with a file is an `EvalError` whose
message names the file and the line (`load_spec`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from baton.core.errors import EvalError

Split = Literal["dev", "test"]
"""Which half of a spec a case belongs to: `dev` may be tuned on, `test` is only reported."""

HUMAN_ROUTE = "human"
"""The route of a request escalated to the human queue."""


def _as_list(value: Any) -> Any:
    return [value] if isinstance(value, str) else value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ToolExpectation(_Strict):
    """A tool call the run must contain: its name, a subset of its arguments, its outcome."""

    name: list[str] = Field(min_length=1)
    """The tool's name; a list accepts any of them (`[check_server, restart_server]`)."""
    arguments: dict[str, Any] = Field(default_factory=dict)
    """Arguments the call must carry with these values (others may be there too)."""
    ok: bool | Literal["any"] = True
    """True: the call succeeded; false: it returned an error; `any`: it was made."""
    ignore_case: bool = False
    """Compare string arguments case-insensitively, ignoring surrounding spaces."""

    _name = field_validator("name", mode="before")(_as_list)


class JudgeCheck(_Strict):
    """An LLM verdict on the answer: the rubric says what a passing answer does."""

    rubric: str = Field(min_length=1)
    """What a passing answer does, in plain words."""
    model: str | None = None
    """The judge's model (`openai:<name>`, `local`); default: the eval's judge model."""


class AnswerExpectation(_Strict):
    """Checks on the final answer's text."""

    contains: list[str] = Field(default_factory=list)
    """Every one of these must appear."""
    contains_any: list[str] = Field(default_factory=list)
    """At least one of these must appear."""
    not_contains: list[str] = Field(default_factory=list)
    """None of these may appear."""
    regex: str | None = None
    """A regular expression the answer must match (`re.search`)."""
    ignore_case: bool = False
    """Compare `contains*` texts and the regex case-insensitively."""
    judge: JudgeCheck | None = None
    """An LLM judge's pass/fail verdict against a rubric."""

    _lists = field_validator("contains", "contains_any", "not_contains", mode="before")(_as_list)

    @field_validator("regex")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a valid regular expression: {exc}") from None
        return value


class PathExpectation(_Strict):
    """The agents that held the baton, in order: a prefix, the exact path, or a subsequence."""

    prefix: list[str] | None = None
    exact: list[str] | None = None
    includes: list[str] | None = None
    """These agents held the baton in this order (others may come between)."""

    @model_validator(mode="after")
    def _one(self) -> PathExpectation:
        given = [k for k in ("prefix", "exact", "includes") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of prefix, exact, includes")
        return self

    @property
    def agents(self) -> list[str]:
        """The agents the expectation names."""
        return self.prefix or self.exact or self.includes or []


class Case(_Strict):
    """One labelled request (or multi-turn script) and what its run must show."""

    id: str = Field(min_length=1)
    split: Split = "dev"
    request: str | None = None
    """The user's message (or give `turns`)."""
    turns: list[str] | None = None
    """User messages sent one after another in one session."""
    route: str | None = None
    """The first agent given the baton after the entry (`human`: escalated by a hand-off)."""
    path: PathExpectation | None = None
    """A list is a prefix: `path: [triage, billing]`."""
    tools: list[ToolExpectation] = Field(default_factory=list)
    state: dict[str, Any] | None = None
    """Session slots the run must end with (a subset)."""
    status: list[str] | None = None
    """The run's final status; a list accepts any of them."""
    answer: AnswerExpectation | None = None
    tags: list[str] = Field(default_factory=list)
    """Free labels (`en`, `plain`, ...) that `--tag` filters on."""

    _status = field_validator("status", "tags", mode="before")(_as_list)

    @field_validator("path", mode="before")
    @classmethod
    def _path_list(cls, value: Any) -> Any:
        return {"prefix": value} if isinstance(value, list) else value

    @model_validator(mode="after")
    def _one_request(self) -> Case:
        if (self.request is None) == (self.turns is None):
            raise ValueError("give exactly one of `request` (a message) or `turns` (a list)")
        if self.turns is not None and not self.turns:
            raise ValueError("`turns` needs at least one message")
        return self

    @property
    def messages(self) -> list[str]:
        """The user messages, in order."""
        return list(self.turns) if self.turns is not None else [self.request or ""]


class SplitOptions(_Strict):
    """Which cases run when `--split` is not given."""

    default: Literal["dev", "test", "all"] = "all"


class Spec(_Strict):
    """An eval: the team under test, its model and the cases."""

    team: str = Field(pattern=r"^[\w.]+:[\w.]+$")
    """`module:attribute`: a Team, or a factory returning a fresh one (called for every
    case; it may take a `model` argument)."""
    model: str | None = None
    """The default model: `scripted`, `local`, `local:<name>` or `openai:<name>`."""
    scripted: str | None = Field(default=None, pattern=r"^[\w.]+:[\w.]+$")
    """`module:attribute` of a zero-argument callable returning the model `--model scripted`
    means for this team (a rule-based `ScriptedModel`)."""
    judge_model: str | None = None
    """The model answer judges use unless a judge names its own; default: the eval's model."""
    split: SplitOptions = Field(default_factory=SplitOptions)
    cases: list[Case] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_ids(self) -> Spec:
        seen: set[str] = set()
        for c in self.cases:
            if c.id in seen:
                raise ValueError(f"two cases have the id {c.id!r}; every case needs its own")
            seen.add(c.id)
        return self

    def select(
        self,
        split: str | None = None,
        tags: Sequence[str] = (),
        limit: int | None = None,
    ) -> list[Case]:
        """The cases of `split` (default: the spec's), carrying every tag, the first `limit`."""
        chosen = split or self.split.default
        if chosen not in ("dev", "test", "all"):
            raise EvalError(f"unknown split {chosen!r}: use dev, test or all")
        cases = [c for c in self.cases if chosen == "all" or c.split == chosen]
        cases = [c for c in cases if all(t in c.tags for t in tags)]
        return cases if limit is None else cases[:limit]


# ----------------------------------------------------------------------------- loading


def load_spec(path: str | Path) -> Spec:
    """The spec in the YAML or JSON file `path`; `EvalError` naming the line if it is wrong."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise EvalError(f"no spec file at {p}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise EvalError(f"cannot read the spec file {p}: {exc}") from None
    return parse_spec(text, name=str(p), fmt="json" if p.suffix.lower() == ".json" else "yaml")


def parse_spec(text: str, *, name: str = "<spec>", fmt: Literal["yaml", "json"] = "yaml") -> Spec:
    """The spec in `text` (YAML or JSON); `EvalError` naming `name` and the line if wrong."""
    data, root = _parse_json(text, name) if fmt == "json" else _parse_yaml(text, name)
    if not isinstance(data, dict):
        raise EvalError(
            f"{name}: a spec is a mapping with `team` and `cases`, got {type(data).__name__}",
            line=1,
        )
    try:
        return Spec.model_validate(data)
    except ValidationError as exc:
        raise _located(exc, name, root, text) from None


def _parse_yaml(text: str, name: str) -> tuple[Any, Any]:
    try:
        import yaml
    except ImportError:  # PyYAML is optional: JSON specs need nothing
        raise EvalError(
            f"{name}: reading a YAML spec needs PyYAML (pip install pyyaml), or write it as JSON"
        ) from None
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        where = f", line {line}" if line is not None else ""
        raise EvalError(f"{name}{where}: not valid YAML: {exc.problem}", line=line) from None
    except (yaml.YAMLError, RecursionError, ValueError, TypeError) as exc:
        raise EvalError(f"{name}: not valid YAML: {exc}") from None
    return data, root


def _parse_json(text: str, name: str) -> tuple[Any, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise EvalError(
            f"{name}, line {exc.lineno}: not valid JSON: {exc.msg}", line=exc.lineno
        ) from None
    except RecursionError:
        raise EvalError(f"{name}: not valid JSON: nested too deeply") from None
    try:  # JSON is YAML too: its node marks give the lines of keys and items
        import yaml

        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except Exception:  # line numbers are a help, not a need: fall back to searching keys
        root = None
    return data, root


def _located(exc: ValidationError, name: str, root: Any, text: str) -> EvalError:
    """The first validation error, with the line its location is on."""
    err = exc.errors()[0]
    loc = tuple(err["loc"])
    line = _line_of(root, loc) if root is not None else _json_key_line(text, loc)
    where = _dotted(loc) or "the spec"
    if err["type"] == "extra_forbidden":
        allowed = _fields_at(loc[:-1])
        hint = f" (expected one of: {', '.join(allowed)})" if allowed else ""
        what = f"unknown field {loc[-1]!r}{hint}"
    else:
        what = err["msg"].removeprefix("Value error, ")
    at = f", line {line}" if line is not None else ""
    return EvalError(f"{name}{at}: {where}: {what}", line=line)


def _dotted(loc: Sequence[Any]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _line_of(root: Any, loc: Sequence[Any]) -> int | None:
    """The 1-based line of the YAML node at `loc` (the key for mapping entries)."""
    node: Any = root
    line: int = root.start_mark.line + 1
    for part in loc:
        kind = getattr(node, "id", "")
        if kind == "mapping":
            for key, value in node.value:
                if str(key.value) == str(part):
                    node, line = value, int(key.start_mark.line) + 1
                    break
            else:
                return line
        elif kind == "sequence" and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            line = int(node.start_mark.line) + 1
        else:
            return line
    return line


def _json_key_line(text: str, loc: Sequence[Any]) -> int | None:
    """The line of the last key of `loc` in JSON text (the first occurrence after its
    parent keys), when the text could not be composed."""
    pos = 0
    for part in loc:
        if isinstance(part, int):
            continue
        found = text.find(json.dumps(str(part)), pos)
        if found < 0:
            break
        pos = found
    return text.count("\n", 0, pos) + 1 if pos else None


def _fields_at(loc: Sequence[Any]) -> list[str]:
    """The fields the model at `loc` accepts (for an unknown-field error)."""
    model: Any = Spec
    for part in loc:
        if isinstance(part, int):
            continue
        field = getattr(model, "model_fields", {}).get(part)
        if field is None:
            return []
        model = _model_in(field.annotation)
        if model is None:
            return []
    return list(getattr(model, "model_fields", {}))


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_in(arg)
        if found is not None:
            return found
    return None
