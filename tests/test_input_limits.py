"""Bad input never gives a traceback: YAML limits, impossible dates, non-plain tags, numbers at the limits,
user text with rich markup in it (issue 20's reproductions, each through `fabric validate` or the command named).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_fabric.cli.main import main

NODE = "nodes/dgx-b200-01.yaml"
DEPLOYMENT = "deployments/deepseek-v3-2.yaml"


def _validate(site: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["validate", "-C", str(site)])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def _edit(site: Path, rel: str, old: str, new: str) -> None:
    path = site / rel
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


def test_deep_nesting_is_a_config_error(site_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (site_repo / "tenants" / "deep.yaml").write_text("name: " + "[" * 300 + "]" * 300 + "\n")
    code, out = _validate(site_repo, capsys)
    assert code == 2 and "deep.yaml:1" in out and "nested deeper than" in out


def test_an_alias_bomb_is_refused_before_it_expands(site_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    for level in range(1, 9):
        prev, cur = chr(ord("a") + level - 1), chr(ord("a") + level)
        lines.append(f"{cur}: &{cur} [" + ", ".join([f"*{prev}"] * 9) + "]")
    (site_repo / "tenants" / "bomb.yaml").write_text("\n".join(lines) + "\n")
    code, out = _validate(site_repo, capsys)
    assert code == 2 and "bomb.yaml" in out and "aliases" in out


@pytest.mark.parametrize("stamp", ["2025-02-30T09:00:00Z", "2025-01-01T09:00:00+25:00"])
def test_impossible_dates_name_the_file_and_line(
    site_repo: Path, stamp: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _edit(site_repo, NODE, "enrolled_at: 2026-10-01T09:00:00Z", f"enrolled_at: {stamp}")
    code, out = _validate(site_repo, capsys)
    assert code == 2 and "dgx-b200-01.yaml:" in out and "not a valid date" in out


def test_an_alias_inside_its_own_anchor_is_refused(site_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Found by the fuzz campaign: `&a [*a]` made the alias check loop (and the old loader recurse)."""
    (site_repo / "tenants" / "cerit-sc.yaml").write_text(
        (site_repo / "tenants" / "cerit-sc.yaml").read_text() + "extra: &a [*a]\n"
    )
    code, out = _validate(site_repo, capsys)
    assert code == 2 and "cerit-sc.yaml" in out and "contains it" in out


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("context: {p50: 879, p95: 23776}", "context: !!omap [a: 1]"),
        ("data_classes: [public, internal, sensitive]", "data_classes: !custom [1]"),
        ("data_classes: [public, internal, sensitive]", "data_classes: !!set {a}"),
        ("recipe:", "extra: !!binary aGVsbG8=\nrecipe:"),
    ],
)
def test_non_plain_tags_are_refused(site_repo: Path, old: str, new: str, capsys: pytest.CaptureFixture[str]) -> None:
    _edit(site_repo, DEPLOYMENT, old, new)
    code, out = _validate(site_repo, capsys)
    assert code == 2 and "deepseek-v3-2.yaml:" in out and "is not allowed here" in out


@pytest.mark.parametrize(
    ("rel", "old", "new"),
    [
        (DEPLOYMENT, "replicas: 1", f"replicas: {2**63}"),
        (NODE, "count: 8", "count: 2147483647"),
        (NODE, "memory_gb: 2048", "memory_gb: .inf"),
        (NODE, "memory_gb: 2048", "memory_gb: .nan"),
    ],
)
def test_numbers_beyond_sane_bounds_are_config_errors(
    site_repo: Path, rel: str, old: str, new: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _edit(site_repo, rel, old, new)
    code, out = _validate(site_repo, capsys)
    assert code == 2 and Path(rel).name in out
    capsys.readouterr()
    assert main(["plan", "-C", str(site_repo)]) == 2


def test_a_byte_that_is_not_utf8_names_its_line(site_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = site_repo / DEPLOYMENT
    path.write_bytes(path.read_bytes().replace(b"recipe:", b"# caf\xe9\nrecipe:", 1))
    code, out = _validate(site_repo, capsys)
    assert code == 2 and "not UTF-8" in out


def test_user_text_with_markup_is_printed_as_it_is(site_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _edit(site_repo, DEPLOYMENT, "recipe:", "quantization: '[/x] [bold]q'\nrecipe:")
    code, out = _validate(site_repo, capsys)
    assert code in (2, 3) and "[/x]" in out and "Traceback" not in out and "internal error" not in out
    capsys.readouterr()
    code = main(["enroll", "h", "--facts", "/nonexistent", "-C", str(site_repo), "--owner", "x[/y]", "--site", "brno"])
    captured = capsys.readouterr()
    assert code == 2 and "x[/y]" in captured.err and "internal error" not in captured.err
