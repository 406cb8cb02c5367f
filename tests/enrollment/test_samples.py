"""`fabric facts --sample NAME`: the shipped sample machines, enrolled with `fabric enroll --facts`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llm_fabric.cli.main import main
from llm_fabric.enrollment.samples import sample_names


@pytest.mark.parametrize("name", sample_names())
def test_every_sample_machine_enrolls_at_full_tier(
    name: str, site_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = tmp_path / f"{name}.facts.json"
    assert main(["facts", "box1", "--sample", name, "-o", str(bundle)]) == 0
    assert f"wrote {bundle}: sample machine {name} as host box1 (not gathered)" in capsys.readouterr().out
    args = ["enroll", "box1", "--facts", str(bundle), "-C", str(site_repo), "--owner", "cerit-sc", "--site", "brno"]
    assert main([*args, "--dry-run", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tier"] == "full"


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
    assert "samples: h100x8, h200x4, mi355x8" in err
