"""diff_locks: which checkpoints a change of weights.lock adds, removes or pins to other bytes."""

from __future__ import annotations

from llm_fabric.review.weights_diff import diff_locks
from llm_fabric.site.weights_lock import LockedCheckpoint, LockedFile, WeightsLock


def _pin(revision: str, **files: tuple[int, str]) -> LockedCheckpoint:
    return LockedCheckpoint(
        revision=revision * 40,
        files=[LockedFile(path=p.replace("_", "."), size=s, sha256=h * 64) for p, (s, h) in files.items()],
    )


def test_added_removed_changed_and_unchanged() -> None:
    base = WeightsLock(
        checkpoints={
            "a/kept": _pin("1", config_json=(10, "a")),
            "a/gone": _pin("2", config_json=(10, "a")),
            "a/moved": _pin("3", config_json=(10, "a"), model_safetensors=(100, "b")),
        }
    )
    new = WeightsLock(
        checkpoints={
            "a/kept": _pin("1", config_json=(10, "a")),
            "a/moved": _pin("4", config_json=(10, "a"), model_safetensors=(120, "c"), tokenizer_json=(5, "d")),
            "a/new": _pin("5", config_json=(7, "e")),
        }
    )
    changes = {c.checkpoint: c for c in diff_locks(base, new)}
    assert sorted(changes) == ["a/gone", "a/moved", "a/new"]
    moved = changes["a/moved"]
    assert (moved.change, moved.revision_before, moved.revision_after) == ("changed", "3" * 40, "4" * 40)
    assert moved.files_changed == ["model.safetensors", "tokenizer.json"]
    assert (moved.bytes_before, moved.bytes_after) == (110, 135)
    assert (changes["a/gone"].change, changes["a/gone"].bytes_before, changes["a/gone"].revision_after) == (
        "removed",
        10,
        None,
    )
    assert (changes["a/new"].change, changes["a/new"].files_changed, changes["a/new"].bytes_after) == (
        "added",
        ["config.json"],
        7,
    )


def test_same_files_other_revision_is_a_change() -> None:
    base = WeightsLock(checkpoints={"a/b": _pin("1", config_json=(10, "a"))})
    new = WeightsLock(checkpoints={"a/b": _pin("2", config_json=(10, "a"))})
    [change] = diff_locks(base, new)
    assert change.change == "changed" and change.files_changed == [] and change.revision_after == "2" * 40
    assert diff_locks(new, new) == []
