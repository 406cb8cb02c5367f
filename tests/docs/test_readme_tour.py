"""The README's tour table: every `fabric ...` command it shows parses as typed (issue 41 point 4: the
"roll a change out" row ran `fabric render` without `--out`, "Missing option '--out'", exit 2).

The table's commands are not run (they need a site, a cluster, a GPU machine): each is parsed by the
real command's click parser, in a folder holding the files it names, so a missing required option, an
unknown option or command fails here; a placeholder (HOST, URL) is a value like any other.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest

from llm_fabric.cli.main import cli

README = Path(__file__).resolve().parents[2] / "README.md"


def tour_commands() -> list[str]:
    rows = [line for line in README.read_text().splitlines() if line.startswith("| ") and "`fabric " in line]
    spans = [span for row in rows for span in re.findall(r"`([^`]+)`", row)]
    return [part.strip() for span in spans for part in span.split("&&") if part.strip().startswith("fabric ")]


def _parse(argv: list[str]) -> None:
    command: click.Command = cli
    ctx = cli.make_context("fabric", list(argv), resilient_parsing=True)
    args = list(argv)
    while isinstance(command, click.Group) and args and not args[0].startswith("-"):
        sub = command.get_command(ctx, args[0])
        if sub is None:
            raise click.UsageError(f"no command {args[0]!r}")
        command, args = sub, args[1:]
        ctx = click.Context(command, info_name=command.name, parent=ctx)
    with command.make_context(command.name, args, parent=ctx.parent) as _:
        pass


@pytest.mark.parametrize("line", tour_commands())
def test_every_tour_command_parses_as_typed(line: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    argv = shlex.split(line)[1:]
    (tmp_path / "site").mkdir()
    for arg in argv:  # the files the row names, so that only the command line itself is judged
        if re.fullmatch(r"[\w.-]+\.(json|jsonl|pub|key)", arg):
            (tmp_path / arg).write_text("")
    try:
        _parse(argv)
    except (click.MissingParameter, click.NoSuchOption, click.BadOptionUsage) as exc:
        pytest.fail(f"README tour: `{line}`: {exc.format_message()}")
    except click.BadParameter:
        pass  # a value the row leaves to the reader (a placeholder): not the command line's fault
    except click.UsageError as exc:
        pytest.fail(f"README tour: `{line}`: {exc.format_message()}")


def test_the_tour_rows_are_found() -> None:
    assert any(line.startswith("fabric render") for line in tour_commands())
