"""The `fabric` CLI edge: exit codes, messages without tracebacks, help with examples."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest

from llm_fabric import __version__
from llm_fabric.cli.main import cli, main


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "--version")
    assert code == 0 and __version__ in out


def _walk(group: click.Group, prefix: str) -> list[tuple[str, click.Command]]:
    ctx = click.Context(group)
    found: list[tuple[str, click.Command]] = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None
        found.append((f"{prefix} {name}", command))
        if isinstance(command, click.Group):
            found.extend(_walk(command, f"{prefix} {name}"))
    return found


def test_every_command_has_help_with_an_example() -> None:
    commands = _walk(cli, "fabric")
    assert len(commands) >= 10
    missing = [name for name, command in commands if "Example" not in (command.help or "")]
    assert not missing, f"commands whose --help has no example: {missing}"


def test_init_then_validate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "x"
    code, out, _ = run_cli(capsys, "init", str(target), "--example", "cerit-sc")
    assert code == 0 and "created site repo" in out
    code, out, err = run_cli(capsys, "validate", str(target))
    assert code == 0, out + err
    assert "valid" in out


def test_typo_exits_2_with_file_line_and_suggestion(site_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = site_repo / "deployments" / "qwen3-5.yaml"
    path.write_text(path.read_text().replace("replicas: 1", "replica: 2"))
    code, out, err = run_cli(capsys, "validate", str(site_repo))
    assert code == 2
    assert f"{path}:" in out and "did you mean `replicas`" in out
    assert "Traceback" not in out + err


def test_validate_json(site_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "validate", str(site_repo), "--json")
    report = json.loads(out)
    assert code == report["exit_code"] == 0
    assert report["summary"]["nodes"] == 4


def test_usage_errors_exit_2_without_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "init", str(tmp_path / "y"), "--example", "nope")
    assert code == 2 and "unknown example `nope`" in err and "Traceback" not in err
    code, _, err = run_cli(capsys, "validate", "--no-such-flag")
    assert code == 2
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "f").write_text("x")
    code, _, err = run_cli(capsys, "init", str(tmp_path / "full"))
    assert code == 2 and "not empty" in err


def test_console_script_runs_as_a_process(site_repo: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", "from llm_fabric.cli.main import run; run()", "validate", str(site_repo / "nope")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert "does not exist" in proc.stdout + proc.stderr
