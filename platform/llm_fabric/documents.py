"""YAML documents that remember where each value came from, and validation errors mapped back.

`load_model(path, Model)` reads a YAML file with ruamel (which keeps line numbers), validates it
with a pydantic model, and turns every validation error into a `Problem` naming the file, the
line, the field path and a fix; for an unknown key it suggests the closest known one (the
SkyPilot "did you mean" approach). All errors of a file are reported together.
"""

from __future__ import annotations

import difflib
import io
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from llm_fabric.errors import ConfigError, Problem

M = TypeVar("M", bound=BaseModel)

_Loc = tuple[int | str, ...]


@dataclass
class Document:
    """Parsed YAML plus the ruamel tree that knows line numbers (1-based)."""

    path: Path
    tree: Any

    def plain(self) -> Any:
        return _to_plain(self.tree)

    def line_of(self, loc: _Loc, *, key: bool = False) -> int | None:
        """Line of the value at `loc` (or of its key, with `key=True`); nearest parent if absent."""
        node = self.tree
        line = _own_line(node)
        for step in loc:
            if isinstance(node, CommentedMap) and step in node:
                pos = node.lc.key(step) if key and step == loc[-1] else node.lc.value(step)
                line = pos[0] + 1
                node = node[step]
            elif isinstance(node, CommentedSeq) and isinstance(step, int) and 0 <= step < len(node):
                line = node.lc.item(step)[0] + 1
                node = node[step]
            else:
                break
        return line


def _own_line(node: Any) -> int | None:
    lc = getattr(node, "lc", None)
    return None if lc is None or lc.line is None else int(lc.line) + 1


def _to_plain(node: Any) -> Any:
    if isinstance(node, CommentedMap):
        return {str(k): _to_plain(v) for k, v in node.items()}
    if isinstance(node, CommentedSeq):
        return [_to_plain(v) for v in node]
    if isinstance(node, str):
        return str(node)
    return node


def read_yaml(path: Path) -> Document:
    """Read one YAML document; a syntax error becomes a ConfigError at its line."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ConfigError([Problem("file not found", file=path)]) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([Problem(f"cannot read file: {exc}", file=path)]) from exc
    return parse_yaml(text, path)


def parse_yaml(text: str, path: Path) -> Document:
    """One YAML document from `text`, named `path` in errors; a syntax error becomes a ConfigError at its line."""
    yaml = YAML(typ="rt")
    try:
        tree = yaml.load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = mark.line + 1 if mark is not None else None
        raise ConfigError(
            [Problem(f"invalid YAML: {exc.problem}", file=path, line=line, hint="fix the YAML syntax")]
        ) from exc
    except YAMLError as exc:  # e.g. ReaderError: control characters the YAML spec forbids
        raise ConfigError([Problem(f"invalid YAML: {exc}", file=path, hint="fix the YAML syntax")]) from exc
    return Document(path=path, tree=tree)


def dump_yaml(tree: Any) -> str:
    """Serialise a tree read by `read_yaml`, keeping its comments and layout (long lines unwrapped)."""
    yaml = YAML(typ="rt")
    yaml.width = 4096
    buffer = io.StringIO()
    yaml.dump(tree, buffer)
    return buffer.getvalue()


def validate_document(doc: Document, model: type[M], *, context: dict[str, Any] | None = None) -> M:
    data = doc.plain()
    if data is None:
        raise ConfigError([Problem("the file is empty", file=doc.path, hint=f"expected a {model.__name__} mapping")])
    try:
        return model.model_validate(data, context=context)
    except ValidationError as exc:
        raise ConfigError(problems_from_validation(exc, doc, model)) from exc


def load_model(path: Path, model: type[M], *, context: dict[str, Any] | None = None) -> M:
    return validate_document(read_yaml(path), model, context=context)


def problems_from_validation(exc: ValidationError, doc: Document, model: type[BaseModel]) -> list[Problem]:
    problems = []
    for err in exc.errors(include_url=False):
        loc: _Loc = tuple(err["loc"])
        field = _field_path(loc)
        if err["type"] == "extra_forbidden" and loc:
            unknown = str(loc[-1])
            known = known_fields(model, loc[:-1])
            suggestion = suggest(unknown, known)
            hint = f"did you mean `{suggestion}`?" if suggestion else _known_hint(known)
            problems.append(
                Problem(
                    f"unknown key `{unknown}`", file=doc.path, line=doc.line_of(loc, key=True), field=field, hint=hint
                )
            )
            continue
        message = str(err["msg"])
        if err["type"] == "missing":
            message = "required field is missing"
        hint = None
        if err["type"] in ("literal_error", "enum") and "expected" in err.get("ctx", {}):
            hint = f"use one of {err['ctx']['expected']}"
        problems.append(Problem(message, file=doc.path, line=doc.line_of(loc), field=field or None, hint=hint))
    return problems


def _known_hint(known: list[str]) -> str | None:
    return f"known keys: {', '.join(sorted(known))}" if known else None


def _field_path(loc: _Loc) -> str:
    out = ""
    for step in loc:
        if isinstance(step, int):
            out += f"[{step}]"
        else:
            out += ("." if out else "") + step
    return out


def suggest(word: str, candidates: list[str]) -> str | None:
    """The closest known name to a misspelt one, or None when nothing is close."""
    matches = difflib.get_close_matches(word, candidates, n=1, cutoff=0.6)
    return matches[0] if matches else None


def known_fields(model: type[BaseModel], loc: _Loc) -> list[str]:
    """Field names (as written in YAML) of the model found by walking `loc` from `model`."""
    names: set[str] = set()
    for target in _models_at(model, loc):
        for name, info in target.model_fields.items():
            names.add(info.alias or name)
    return sorted(names)


def _models_at(tp: Any, loc: _Loc) -> Iterator[type[BaseModel]]:
    if not loc:
        yield from _model_members(tp)
        return
    step, rest = loc[0], loc[1:]
    for member in _unwrap(tp):
        if isinstance(member, type) and issubclass(member, BaseModel):
            if isinstance(step, str):
                for name, info in member.model_fields.items():
                    if step in (name, info.alias):
                        yield from _models_at(info.annotation, rest)
            continue
        origin = typing.get_origin(member)
        args = typing.get_args(member)
        if origin in (list, tuple, set, frozenset) and args:
            yield from _models_at(args[0], rest)
        elif origin is dict and len(args) == 2:
            yield from _models_at(args[1], rest)
        elif isinstance(step, str) and args:
            # pydantic puts the union member's name (e.g. `Target`) in the location
            yield from _models_at(member, rest)


def _unwrap(tp: Any) -> list[Any]:
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(tp)[0])
    if origin in (typing.Union, types.UnionType):
        out: list[Any] = []
        for arg in typing.get_args(tp):
            out.extend(_unwrap(arg))
        return out
    return [tp]


def _model_members(tp: Any) -> Iterator[type[BaseModel]]:
    for member in _unwrap(tp):
        if isinstance(member, type) and issubclass(member, BaseModel):
            yield member
