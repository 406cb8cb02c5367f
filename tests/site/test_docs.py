"""docs/site-repo.md documents every field of every site-repo file kind."""

from __future__ import annotations

import re
import typing
from pathlib import Path

from pydantic import BaseModel

from llm_fabric.site.schemas import FILE_KINDS

DOC = Path(__file__).resolve().parents[2] / "docs" / "site-repo.md"


def _field_names(model: type[BaseModel], seen: set[type[BaseModel]]) -> set[str]:
    if model in seen:
        return set()
    seen.add(model)
    names = set(model.model_fields)
    for info in model.model_fields.values():
        for arg in _flatten(info.annotation):
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                names |= _field_names(arg, seen)
    return names


def _flatten(tp: object) -> list[object]:
    args = typing.get_args(tp)
    return [tp] if not args else [x for a in args for x in _flatten(a)]


def test_every_field_is_documented() -> None:
    text = DOC.read_text()
    missing = set()
    for model, _pattern in FILE_KINDS.values():
        for name in _field_names(model, set()):
            # a field appears as a path segment inside backticks: `name`, `a.name.b`, `name[]`
            if not re.search(r"[`.]" + re.escape(name) + r"[`.\[]", text):
                missing.add(name)
    assert not missing, f"fields not in docs/site-repo.md: {sorted(missing)}"
