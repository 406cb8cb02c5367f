"""`fabric plan --base main` names the nodes a branch enrols, cordons or retires, and the GPUs they change.

Chained as an operator runs it: `fabric init`, `fabric enroll --facts` of a real 4 x H200 capture onto a
review branch, `fabric nodes cordon` / `retire --no-drain` on branches, then `fabric plan --base main` in
text, Markdown and JSON.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.fixtures.cli import fabric, git
from tests.fixtures.factsbundle import write_bundle


def _review(site: Path) -> tuple[str, str, dict[str, object]]:
    text = fabric("plan", "-C", str(site), "--base", "main")
    markdown = fabric("plan", "-C", str(site), "--base", "main", "--format", "markdown")
    as_json = fabric("plan", "-C", str(site), "--base", "main", "--json")
    for done in (text, markdown, as_json):
        assert done.returncode == 0, done.stderr
    diff = json.loads(as_json.stdout)["diff"]
    assert isinstance(diff, dict)
    return text.stdout, markdown.stdout, diff


def test_enrol_cordon_retire_are_named_with_their_gpus(tmp_path: Path) -> None:
    site = tmp_path / "site"
    assert fabric("init", str(site), "--example", "cerit-sc").returncode == 0
    facts = write_bundle(tmp_path / "gpu9.facts.json", "h200x4", uuid_salt="review", hostname="gpu9")
    enrolled = fabric(
        "enroll", "gpu9", "--facts", str(facts), "-C", str(site), "--owner", "cerit-sc", "--site", "brno",
        "--branch", "enroll/gpu9",
    )  # fmt: skip
    assert enrolled.returncode == 0, enrolled.stderr
    git(site, "checkout", "-q", "enroll/gpu9")

    text, markdown, diff = _review(site)
    assert "Changes against main: nodes" in text and "gpu9" in text
    assert "active, 4x h200, brno, owner cerit-sc" in text
    assert "20 -> 24" in text and "+4" in text
    assert "no replica is added" in text  # the node is spare capacity: no replica moves onto it
    assert "| gpu9 | brno | added | - | active, 4x h200, brno, owner cerit-sc |" in markdown
    assert "| brno | all | 20 -> 24 | +4 | 0 -> 4 |" in markdown
    assert diff["nodes"] == [
        {"node": "gpu9", "site": "brno", "change": "added", "before": None,
         "after": "active, 4x h200, brno, owner cerit-sc"}
    ]  # fmt: skip
    assert {"site": "brno", "gpu_model": "h200", "gpus_before": 4, "gpus_after": 8} in diff["gpus"]  # type: ignore[operator]
    assert diff["sites"] == [{"site": "brno", "gpus_before": 20, "gpus_after": 24, "free_before": 0, "free_after": 4}]

    git(site, "checkout", "-q", "main")
    git(site, "merge", "-q", "--ff-only", "enroll/gpu9")
    git(site, "checkout", "-q", "-b", "cordon/gpu9")
    cordoned = fabric("nodes", "cordon", "gpu9", "-C", str(site))
    assert cordoned.returncode == 0, cordoned.stderr
    text, markdown, diff = _review(site)
    assert "| gpu9 | brno | cordoned | active, 4x h200, brno, owner cerit-sc | cordoned, 4x h200" in markdown
    assert "24 -> 20" in text and "-4" in text
    assert [(c["node"], c["change"]) for c in diff["nodes"]] == [("gpu9", "cordoned")]  # type: ignore[attr-defined]
    brno = next(s for s in diff["sites"] if s["site"] == "brno")  # type: ignore[attr-defined]
    assert (brno["gpus_before"], brno["gpus_after"]) == (24, 20)

    git(site, "checkout", "-q", "main")
    git(site, "checkout", "-q", "-b", "retire/gpu9")
    retired = fabric("nodes", "retire", "gpu9", "-C", str(site), "--no-drain")
    assert retired.returncode == 0, retired.stderr
    text, markdown, diff = _review(site)
    assert "retired" in text and "gpu9" in text
    assert "| gpu9 | brno | retired | active, 4x h200, brno, owner cerit-sc | retired, 4x h200" in markdown
    assert [(c["node"], c["change"]) for c in diff["nodes"]] == [("gpu9", "retired")]  # type: ignore[attr-defined]
    assert {"site": "brno", "gpu_model": "h200", "gpus_before": 8, "gpus_after": 4} in diff["gpus"]  # type: ignore[operator]
