"""YAML documents that remember where each value came from, and validation errors mapped back.

`load_model(path, Model)` reads a YAML file with ruamel (which keeps line numbers), validates it
with a pydantic model, and turns every validation error into a `Problem` naming the file, the
line, the field path and a fix; for an unknown key it suggests the closest known one (the
SkyPilot "did you mean" approach). All errors of a file are reported together.

Reading is bounded, because site repos come from pull requests: a file larger than `MAX_BYTES`,
nesting deeper than `MAX_DEPTH`, aliases that would expand past `MAX_NODES` values (a "billion
laughs" bomb), a tag beyond YAML's plain types (`!!omap`, `!!binary`, `!custom`) and an impossible
date (`2025-02-30`) are each a ConfigError naming the file (and line), never a traceback or a hang.
"""

from __future__ import annotations

import difflib
import io
import os
import stat
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.composer import Composer, MaxDepthExceededError
from ruamel.yaml.constructor import ConstructorError, RoundTripConstructor
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.nodes import MappingNode, Node, SequenceNode

from llm_fabric.errors import ConfigError, Problem

M = TypeVar("M", bound=BaseModel)

_Loc = tuple[int | str, ...]

# the largest site repo file is a node manifest of a few KiB; these leave room for any real one
MAX_BYTES = 4 * 1024 * 1024
MAX_DEPTH = 64
MAX_NODES = 200_000
_YAML_TAG = "tag:yaml.org,2002:"
# the types a site repo file can hold; every other tag is refused rather than constructed
PLAIN_TAGS = frozenset(
    _YAML_TAG + t for t in ("str", "int", "float", "bool", "null", "map", "seq", "timestamp", "merge")
)


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
    return parse_yaml(read_text(path), path)


def read_text(path: Path, *, limit: int = MAX_BYTES) -> str:
    """A regular file's UTF-8 text, at most `limit` bytes; a FIFO or device is refused before it is read."""
    try:
        # O_NONBLOCK: opening a FIFO with no writer must not wait; it is refused just below
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError as exc:
        raise ConfigError([Problem("file not found", file=path)]) from exc
    except OSError as exc:
        raise ConfigError([Problem(f"cannot read file: {exc.strerror or exc}", file=path)]) from exc
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)  # before any read: reading a folder is IsADirectoryError, a FIFO would wait
        if stat.S_ISDIR(mode):
            raise ConfigError(
                [Problem("is a folder, not a file", file=path, hint=f"rename or remove the folder {path.name}")]
            )
        raise ConfigError([Problem("not a regular file", file=path, hint="replace it with a plain file")])
    with os.fdopen(fd, "rb") as handle:
        try:
            data = handle.read(limit + 1)
        except OSError as exc:
            raise ConfigError([Problem(f"cannot read file: {exc.strerror or exc}", file=path)]) from exc
    if len(data) > limit:
        raise ConfigError([Problem(f"file is larger than {limit // 1024} KiB", file=path, hint="split or shorten it")])
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ConfigError(
            [Problem(f"not UTF-8 (byte {exc.start})", file=path, line=line, hint="save the file as UTF-8")]
        ) from exc


class _BoundedComposer(Composer):
    """Refuses non-plain tags and alias expansion past MAX_NODES once the document is composed."""

    def get_single_node(self) -> Any:
        node = super().get_single_node()
        if node is not None:
            _check_graph(node)
        return node


def _check_graph(root: Node) -> None:
    # expanded size per node, memoised by identity: an alias costs its target's full size, counted once per use
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()  # on the current path: meeting one again is an alias inside its own anchor
    order: list[tuple[Node, bool]] = [(root, False)]
    while order:
        node, children_done = order.pop()
        if id(node) in sizes:
            continue
        children = _children(node)
        if not children_done:
            if id(node) in open_nodes:
                raise ConstructorError(None, None, "an alias refers to the value that contains it", node.start_mark)
            tag = node.tag
            if tag is not None and tag not in PLAIN_TAGS:
                raise ConstructorError(
                    None,
                    None,
                    f"the tag {tag.replace(_YAML_TAG, '!!')} is not allowed here (plain YAML only)",
                    node.start_mark,
                )
            open_nodes.add(id(node))
            order.append((node, True))
            order.extend((c, False) for c in children if id(c) not in sizes)
            continue
        open_nodes.discard(id(node))
        size = 1 + sum(sizes[id(c)] for c in children)
        if size > MAX_NODES:
            raise ConstructorError(
                None, None, f"the document expands to more than {MAX_NODES} values (aliases)", node.start_mark
            )
        sizes[id(node)] = size


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    return []


class _CheckedConstructor(RoundTripConstructor):
    def construct_checked_timestamp(self, node: Any, values: Any = None) -> Any:
        try:
            return super().construct_yaml_timestamp(node, values)
        except (ValueError, OverflowError) as exc:
            raise ConstructorError(
                None, None, f"`{node.value}` is not a valid date or time: {exc}", node.start_mark
            ) from exc


_CheckedConstructor.add_constructor(_YAML_TAG + "timestamp", _CheckedConstructor.construct_checked_timestamp)


def _loader() -> YAML:
    yaml = YAML(typ="rt")
    yaml.Composer = _BoundedComposer
    yaml.Constructor = _CheckedConstructor
    yaml.max_depth = MAX_DEPTH
    return yaml


def parse_yaml(text: str, path: Path) -> Document:
    """One YAML document from `text`, named `path` in errors; a syntax error becomes a ConfigError at its line."""
    if len(text) > MAX_BYTES:
        raise ConfigError([Problem(f"document is larger than {MAX_BYTES // 1024} KiB", file=path)])
    try:
        tree = _loader().load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        problem = f"nested deeper than {MAX_DEPTH} levels" if isinstance(exc, MaxDepthExceededError) else exc.problem
        hint = "use plain YAML values" if isinstance(exc, ConstructorError) else "fix the YAML syntax"
        raise ConfigError([Problem(f"invalid YAML: {problem}", file=path, line=line, hint=hint)]) from exc
    except YAMLError as exc:  # e.g. ReaderError: control characters the YAML spec forbids
        raise ConfigError([Problem(f"invalid YAML: {exc}", file=path, hint="fix the YAML syntax")]) from exc
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:  # a constructor on a value it cannot hold
        raise ConfigError([Problem(f"invalid YAML value: {exc}", file=path, hint="fix the value")]) from exc
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
