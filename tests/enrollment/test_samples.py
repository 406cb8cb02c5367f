"""`fabric facts --sample NAME`: the shipped sample machines, enrolled with `fabric enroll --facts`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llm_fabric.cli.main import main
from llm_fabric.enrollment.samples import sample_names

# the tier each sample machine enrols at: the first three for the tour, the others for docs/enroll.md's tiers
TIERS = {"h100x8": "full", "h200x4": "full", "mi355x8": "full", "l40sx8": "limited", "a100x4": "rejected",
         "mi300x8cpx": "rejected"}  # fmt: skip


@pytest.mark.parametrize("name", sample_names())
def test_every_sample_machine_enrolls_at_its_tier(
    name: str, site_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = tmp_path / f"{name}.facts.json"
    assert main(["facts", "box1", "--sample", name, "-o", str(bundle)]) == 0
    assert f"wrote {bundle}: sample machine {name} as host box1 (not gathered)" in capsys.readouterr().out
    args = ["enroll", "box1", "--facts", str(bundle), "-C", str(site_repo), "--owner", "cerit-sc", "--site", "brno"]
    assert main([*args, "--dry-run", "--json"]) == (0 if TIERS[name] != "rejected" else 3)
    assert json.loads(capsys.readouterr().out)["tier"] == TIERS[name]


def test_two_hosts_from_one_sample_have_their_own_gpus(site_repo: Path, tmp_path: Path) -> None:
    for host in ("gpu7", "gpu8"):
        assert main(["facts", host, "--sample", "h100x8", "-o", str(tmp_path / f"{host}.json")]) == 0
        args = ["enroll", host, "--facts", str(tmp_path / f"{host}.json"), "-C", str(site_repo)]
        assert main([*args, "--owner", "cerit-sc", "--site", "brno"]) == 0
    assert (site_repo / "nodes" / "gpu8.yaml").is_file()


def test_an_unknown_sample_names_the_ones_there_are(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["facts", "--sample", "h100x9", "-o", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err
    assert "no sample machine 'h100x9'" in err
    assert "samples: a100x4, h100x8, h200x4, l40sx8, mi300x8cpx, mi355x8" in err


def test_enrolling_with_a_feature_branch_checked_out_says_so(
    site_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # issue 41 point 2: docs/deploy.md's reader, still on the change's branch, enrolled gpu9 onto it unwarned
    import subprocess

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(site_repo), *args], capture_output=True, text=True, check=True).stdout

    git("checkout", "-q", "-b", "mistral-context")
    bundle = tmp_path / "gpu9.json"
    assert main(["facts", "gpu9", "--sample", "h200x4", "-o", str(bundle)]) == 0
    args = ["enroll", "gpu9", "--facts", str(bundle), "-C", str(site_repo), "--owner", "cerit-sc", "--site", "brno"]
    capsys.readouterr()
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "note: the site repo has branch `mistral-context` checked out, not main: the node is committed there" in err
    assert f"(git -C {site_repo} checkout main)" in err and "or pass --branch main" in err
    assert "gpu9.yaml" in git("show", "--stat", "--format=", "mistral-context")
    # the hint followed: on main, no note, and the node is committed on main
    git("checkout", "-q", "main")
    other = tmp_path / "gpu10.json"
    assert main(["facts", "gpu10", "--sample", "h200x4", "-o", str(other)]) == 0
    capsys.readouterr()
    assert main(["enroll", "gpu10", "--facts", str(other), *args[4:]]) == 0
    assert "not main" not in capsys.readouterr().err
    assert "gpu10.yaml" in git("show", "--stat", "--format=", "main")
