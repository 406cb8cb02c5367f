"""The shipped Xid classes table: it loads, and a mistake in it is named by file, line and fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_fabric.distribution import data_path
from llm_fabric.errors import ConfigError
from llm_fabric.hardware.xids import load_xid_table

SHIPPED = data_path("enrollment", "xid-classes.yaml")


def _copy_with(tmp_path: Path, old: str, new: str) -> tuple[Path, int]:
    text = SHIPPED.read_text()
    assert old in text
    path = tmp_path / "xid-classes.yaml"
    path.write_text(text.replace(old, new, 1))
    line = next(i for i, row in enumerate(path.read_text().splitlines(), start=1) if new in row)
    return path, line


def _refusal(path: Path) -> str:
    """The ConfigError loading `path` raises, as the CLI shows it: the message and each problem."""
    with pytest.raises(ConfigError) as caught:
        load_xid_table(path)
    return str(caught.value) + "".join(f"\n{p}" for p in caught.value.problems)


def test_the_shipped_table_classifies_the_known_xids() -> None:
    table = load_xid_table()
    assert table.classify(79) == "node-fatal"
    assert table.classify(109) == "replica-fatal"
    assert table.classify(31) == "application"
    assert table.classify(154) is None


def test_a_misspelt_key_names_file_line_and_the_key_meant(tmp_path: Path) -> None:
    path, line = _copy_with(tmp_path, "{xid: 79, kind: node-fatal", "{xid: 79, kidn: node-fatal")
    message = _refusal(path)
    assert f"{path}:{line}" in message
    assert "did you mean `kind`?" in message


def test_an_unknown_class_lists_the_classes(tmp_path: Path) -> None:
    path, line = _copy_with(tmp_path, "{xid: 13, kind: application", "{xid: 13, kind: app")
    message = _refusal(path)
    assert f"{path}:{line}" in message
    assert "'node-fatal', 'replica-fatal' or 'application'" in message


def test_an_xid_listed_twice_is_refused(tmp_path: Path) -> None:
    path, _ = _copy_with(tmp_path, "{xid: 109,", "{xid: 79,")
    message = _refusal(path)
    assert "Xid 79 listed more than once" in message
