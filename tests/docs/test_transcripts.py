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


def test_a_block_reading_a_file_only_its_hidden_set_up_creates_fails(tmp_path: Path) -> None:
    # issue 41 point 1: the stage block read hf-mirror.url, which only `<!-- doc-setup -->` wrote
    commands = parse_transcript("$ cat hf-mirror.url\nhttp://127.0.0.1:1\n")
    with pytest.raises(AssertionError, match=r"the block reads hf-mirror.url, which only its hidden `doc-setup`"):
        run_block(commands, tmp_path, "echo http://127.0.0.1:1 > hf-mirror.url")


def test_a_hidden_set_up_may_change_what_the_reader_has_or_make_what_the_block_does_not_name(tmp_path: Path) -> None:
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "fabric.yaml").write_text("name: a\n")
    commands = parse_transcript("$ cat site/fabric.yaml\nname: b\n")
    results = run_block(commands, tmp_path, "echo 'name: b' > site/fabric.yaml && mkdir scratch")
    assert [(out, rc) for _, out, rc in results] == [("name: b\n", 0)]


def test_a_folder_the_set_up_creates_is_named_once(tmp_path: Path) -> None:
    commands = parse_transcript("$ ls crds\nkueue\n")
    with pytest.raises(AssertionError, match=r"the block reads crds, which"):
        run_block(commands, tmp_path, "mkdir -p crds/kueue")
