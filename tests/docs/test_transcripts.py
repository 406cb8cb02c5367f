"""The docs runner itself: a block whose commands did not all run fails (issue 31 point 3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.transcripts import parse_transcript, run_block


def test_a_block_bash_cannot_parse_fails_naming_how_many_commands_ran(tmp_path: Path) -> None:
    commands = parse_transcript("$ echo one   (in the background)\none\n$ echo two\ntwo\n")
    with pytest.raises(AssertionError, match=r"only 0 of the block's 2 commands ran .*syntax error"):
        run_block(commands, tmp_path, "")


def test_a_block_that_exits_early_fails(tmp_path: Path) -> None:
    commands = parse_transcript("$ echo one; exit 0\none\n$ echo two\ntwo\n")
    with pytest.raises(AssertionError, match=r"only 0 of the block's 2 commands ran"):
        run_block(commands, tmp_path, "")


def test_a_block_whose_commands_all_run_gives_each_output(tmp_path: Path) -> None:
    commands = parse_transcript("$ echo one\none\n$ false\n(exit 1)\n")
    assert [(c.line, out, rc) for c, out, rc in run_block(commands, tmp_path, "")] == [
        ("echo one", "one\n", 0),
        ("false", "", 1),
    ]
