"""YAML positions and did-you-mean, on models of the shapes the site repo uses."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llm_fabric.basemodel import FabricModel
from llm_fabric.documents import load_model, suggest
from llm_fabric.errors import ConfigError


class Leaf(FabricModel):
    replicas: int
    context_tokens: int = 0


class Root(FabricModel):
    items: list[Leaf]
    by_name: dict[str, Leaf] = {}
    maybe: Leaf | None = None


def _load(tmp_path: Path, text: str) -> ConfigError:
    path = tmp_path / "f.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_model(path, Root)
    return info.value


def test_unknown_key_in_list_item(tmp_path: Path) -> None:
    err = _load(tmp_path, "items:\n  - replicas: 1\n  - replica: 2\n")
    (problem,) = [p for p in err.problems if "unknown key" in p.message]
    assert problem.line == 3 and problem.field == "items[1].replica"
    assert problem.hint == "did you mean `replicas`?"


def test_unknown_key_in_dict_value_and_optional(tmp_path: Path) -> None:
    err = _load(tmp_path, "items: []\nby_name:\n  a:\n    replicas: 1\n    context_token: 3\nmaybe:\n  replicass: 1\n")
    hints = {p.field: p.hint for p in err.problems if "unknown key" in p.message}
    assert hints["by_name.a.context_token"] == "did you mean `context_tokens`?"
    assert hints["maybe.replicass"] == "did you mean `replicas`?"


def test_wrong_type_points_at_the_value(tmp_path: Path) -> None:
    err = _load(tmp_path, "items:\n  - replicas: lots\n")
    assert err.problems[0].line == 2 and err.problems[0].field == "items[0].replicas"


def test_no_suggestion_for_unrelated_words() -> None:
    assert suggest("zzzz", ["replicas", "target"]) is None


@given(st.text(min_size=1, max_size=200))
def test_arbitrary_text_never_raises_anything_but_config_error(
    tmp_path_factory: pytest.TempPathFactory, text: str
) -> None:
    path = tmp_path_factory.mktemp("h") / "f.yaml"
    path.write_bytes(text.encode("utf-8", errors="replace"))
    try:
        load_model(path, Root)
    except ConfigError as exc:
        assert exc.problems
