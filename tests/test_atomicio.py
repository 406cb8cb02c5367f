from __future__ import annotations

import os
from pathlib import Path

import pytest

from llm_fabric.atomicio import write_atomic


def test_replaces_content_and_sets_mode(tmp_path: Path) -> None:
    path = tmp_path / "a" / "key"
    write_atomic(path, "one")
    write_atomic(path, b"two", mode=0o600)
    assert path.read_text() == "two"
    assert (os.stat(path).st_mode & 0o777) == 0o600
    assert [p.name for p in path.parent.iterdir()] == ["key"]


def test_failure_leaves_old_file_and_no_temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "manifest.yaml"
    write_atomic(path, "old")

    def broken_replace(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError):
        write_atomic(path, "new")
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["manifest.yaml"]
