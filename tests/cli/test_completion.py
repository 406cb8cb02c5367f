"""README.md's shell completion works: click's completion over the lazily loaded command group."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

FABRIC = str(Path(sys.executable).parent / "fabric")


def complete(words: str, shell: str = "bash") -> str:
    env = os.environ | {
        "_FABRIC_COMPLETE": f"{shell}_complete",
        "COMP_WORDS": words,
        "COMP_CWORD": str(len(words.split()) - 1),
    }
    return subprocess.run([FABRIC], env=env, capture_output=True, text=True, timeout=60, check=True).stdout


def test_commands_and_subcommands_complete() -> None:
    assert "plain,models" in complete("fabric mo").splitlines()
    assert "plain,cordon" in complete("fabric nodes cor").splitlines()
    assert "plain,--dry-run" in complete("fabric enroll h --dry").splitlines()


def test_the_sourced_scripts_are_printed() -> None:
    for shell, marker in (
        ("bash", "complete -o nosort -F _fabric_completion fabric"),
        ("zsh", "#compdef fabric"),
        ("fish", "complete --no-files --command fabric"),
    ):
        env = os.environ | {"_FABRIC_COMPLETE": f"{shell}_source"}
        out = subprocess.run([FABRIC], env=env, capture_output=True, text=True, timeout=60, check=True).stdout
        assert marker in out, shell
