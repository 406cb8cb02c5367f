"""The wheel carries the data folders: a non-editable install works from any directory."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(REPO)],
        check=True,
        capture_output=True,
    )
    (built,) = out.glob("llm_fabric-*.whl")
    return built


def test_wheel_contains_the_data_folders(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    for required in (
        "llm_fabric/_data/examples/cerit-sc/fabric.yaml",
        "llm_fabric/_data/policies/defaults.yaml",
        "llm_fabric/cli/main.py",
    ):
        assert required in names, required


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel installed into a folder of its own (put on PYTHONPATH), as on an operator's machine."""
    target = tmp_path_factory.mktemp("installed") / "site-packages"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
    )
    return target


def test_installed_wheel_inits_from_another_directory(installed: Path, tmp_path: Path) -> None:
    target = installed
    env = dict(os.environ, PYTHONPATH=str(target))
    code = "import llm_fabric, sys; from llm_fabric.cli.main import main; print(llm_fabric.__file__); sys.exit(main())"
    site = tmp_path / "y"
    proc = subprocess.run(
        [sys.executable, "-c", code, "init", str(site), "--example", "cerit-sc"],
        cwd="/",
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0].startswith(str(target)), "the checkout was imported instead of the wheel"
    proc = subprocess.run(
        [sys.executable, "-c", code, "validate", str(site)],
        cwd="/",
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_wheel_carries_what_operators_run_and_no_test_tooling(wheel: Path) -> None:
    """`fabric engine run --local`, `tiny-model` and `burst` ship; the SGLang stand-in and every other test fixture
    stay in the checkout (tests/fixtures/)."""
    names = zipfile.ZipFile(wheel).namelist()
    for shipped in (
        "llm_fabric/engine/process.py",
        "llm_fabric/engine/local/server.py",
        "llm_fabric/engine/local/tiny_model.py",
        "llm_fabric/loadtest/burst.py",
        "llm_fabric/loadtest/sessions.py",
    ):
        assert shipped in names, shipped
    test_tooling = [n for n in names if "standin" in n or n.startswith("tests/") or "/fixtures/" in n]
    assert test_tooling == [], f"test tooling in the wheel: {test_tooling}"
    assert sorted(n for n in names if n.startswith("llm_fabric/engine/local/")) == [
        "llm_fabric/engine/local/__init__.py",
        "llm_fabric/engine/local/server.py",
        "llm_fabric/engine/local/tiny_model.py",
    ], "engine/local holds the local CPU engine and its tiny model only"


def test_wheel_ships_the_sample_machines(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert "llm_fabric/_data/enrollment/samples/h100x8/nvidia-smi-query-gpu.csv" in names


def test_installed_wheel_runs_the_tours_sample_commands(installed: Path, tmp_path: Path) -> None:
    """docs/tour.md's inputs come from the wheel: a sample machine enrolled, a sample month ingested and
    reported, in a folder outside the checkout, each command reading what the one before wrote."""
    env = dict(os.environ, PYTHONPATH=str(installed))
    code = "import sys; from llm_fabric.cli.main import main; sys.exit(main())"
    work = tmp_path / "operator"
    work.mkdir()

    def fabric(*args: str) -> str:
        proc = subprocess.run(
            [sys.executable, "-c", code, *args], cwd=work, env=env, capture_output=True, text=True, check=False
        )
        assert proc.returncode == 0, f"fabric {' '.join(args)}: {proc.stdout}{proc.stderr}"
        return proc.stdout

    fabric("init", "./site", "--example", "cerit-sc")
    assert "sample machine h100x8 as host gpu7" in fabric(
        "facts", "gpu7", "--sample", "h100x8", "-o", "gpu7.facts.json"
    )
    out = fabric(
        "enroll", "gpu7", "--facts", "gpu7.facts.json", "--site-repo", "./site", "--owner", "cerit-sc", "--site", "brno"
    )
    assert "tier: full" in out
    assert "8x h100-sxm" in fabric("nodes", "list", "-C", "./site")
    assert "2,000 sample request records of 2026-11" in fabric(
        "ledger", "sample", "-C", "./site", "--month", "2026-11", "--count", "2000", "-o", "requests-2026-11.jsonl"
    )
    assert "2,000 record(s) added, 0 already there, 0 bad" in fabric(
        "ledger", "ingest", "-C", "./site", "requests-2026-11.jsonl"
    )
    assert "report for 2026-11 in report" in fabric("report", "-C", "./site", "--month", "2026-11", "--out", "./report")
