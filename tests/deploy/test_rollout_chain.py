"""A rollout from the review to the controller, through the real commands: `fabric plan --base main -o`
writes the plan with its rollout, `fabric render --plan --flux-repo --check` turns it into waves (the
surge in wave 1, the restart in wave 2, Flux's chain, Argo CD's sync waves, validated against the real CRD
schemas), the serving stack registers the same order through the Pulumi SDK's mocks, and once the change
is merged the next plan's render removes the surge and the waves."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from llm_fabric.deploy.build import load_inputs
from llm_fabric.kube.options import StackOptions
from llm_fabric.serving.waves import SYNC_WAVE
from tests.deploy.crdschemas import crds_or_skip
from tests.deploy.test_waves_pulumi import _run
from tests.fixtures.cli import git
from tests.fixtures.factsbundle import write_bundle

FABRIC = str(Path(sys.executable).parent / "fabric")
FLUX_REPO = "https://git.example.org/federation/site.git"


def fabric(*args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([FABRIC, *args], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def _load(path: Path) -> dict[str, object]:
    loaded = yaml.safe_load(path.read_text())
    assert isinstance(loaded, dict)
    return loaded


def _render(site: Path, plan: Path) -> Path:
    fabric("render", "-C", str(site), "--plan", str(plan), "--all-sites", "--out", str(site / "deploy"),
           "--flux-repo", FLUX_REPO, "--check", "--crds", str(crds_or_skip()))  # fmt: skip
    return site / "deploy" / "brno"


def test_a_reviewed_rollout_renders_in_waves_and_the_next_render_ends_it(site_repo: Path, tmp_path: Path) -> None:
    # a node with room on main (a saved facts bundle, docs/enroll.md), then a one-replica change on a branch
    bundle = write_bundle(tmp_path / "gpu9.facts.json", "h200x4", uuid_salt="gpu9")
    fabric("enroll", "gpu9", "--facts", str(bundle), "--site-repo", str(site_repo), "--owner", "cerit-sc",
           "--site", "brno")  # fmt: skip
    git(site_repo, "checkout", "-q", "-b", "mistral-context")
    dep = site_repo / "deployments" / "mistral-small-4.yaml"
    dep.write_text(dep.read_text().replace("max_model_len: 131072", "max_model_len: 65536"))
    git(site_repo, "commit", "-qam", "mistral-small-4: a 64k context")

    reviewed = tmp_path / "reviewed.json"
    fabric("plan", "-C", str(site_repo), "--base", "main", "-o", str(reviewed))
    brno = _render(site_repo, reviewed)

    surge = _load(brno / "waves" / "wave-1" / "deployment-mistral-small-4-surge-0.yaml")
    restart = _load(brno / "waves" / "wave-2" / "deployment-mistral-small-4-0.yaml")
    assert not (brno / "serving" / "deployment-mistral-small-4-0.yaml").exists()  # in its wave, not twice
    assert (brno / "serving" / "deployment-glm-5-1-0.yaml").exists()  # what the change does not restart stays
    assert surge["metadata"]["annotations"][SYNC_WAVE] == "1"  # type: ignore[index]
    assert restart["metadata"]["annotations"][SYNC_WAVE] == "2"  # type: ignore[index]
    surge_pod = surge["spec"]["template"]["spec"]  # type: ignore[index]
    terms = surge_pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["gpu9"]
    assert "65536" in surge_pod["containers"][0]["args"]  # the new configuration, beside the old replica
    site_kustomization = _load(brno / "kustomization.yaml")
    assert site_kustomization["resources"] == [
        "allocations", "serving", "observability", "waves/wave-1", "waves/wave-2"
    ]  # fmt: skip

    flux = {p.name: _load(p) for p in (brno / "flux").glob("kustomization-*.yaml")}
    wave1, wave2 = flux["kustomization-llm-fabric-brno-wave-1.yaml"], flux["kustomization-llm-fabric-brno-wave-2.yaml"]
    assert wave1["spec"]["dependsOn"] == [{"name": "llm-fabric-brno"}]  # type: ignore[index]
    assert wave2["spec"]["dependsOn"] == [{"name": "llm-fabric-brno-wave-1"}]  # type: ignore[index]
    assert wave2["spec"]["path"].endswith("/brno/waves/wave-2") and wave2["spec"]["wait"] is True  # type: ignore[index]

    # the Pulumi stack of the same plan file registers the same order
    options = StackOptions(site_repo=site_repo, site="brno", plan_file=reviewed)
    depends = _run(load_inputs(options)).depends
    assert depends["Deployment/mistral-small-4-0"] == {"Deployment/mistral-small-4-surge-0"}
    assert "Deployment/mistral-small-4-surge-0" not in depends["Deployment/glm-5-1-0"]

    # merged: the plan of main restarts nothing, and its render removes the surge and the waves
    git(site_repo, "checkout", "-q", "main")
    git(site_repo, "merge", "-q", "--ff-only", "mistral-context")
    settled = tmp_path / "settled.json"
    fabric("plan", "-C", str(site_repo), "-o", str(settled))
    brno = _render(site_repo, settled)
    assert not (brno / "waves").exists()
    assert not list(brno.rglob("*surge*"))
    replica = _load(brno / "serving" / "deployment-mistral-small-4-0.yaml")
    assert SYNC_WAVE not in replica["metadata"]["annotations"]  # type: ignore[index]
    assert "65536" in replica["spec"]["template"]["spec"]["containers"][0]["args"]  # type: ignore[index]
    assert _load(brno / "kustomization.yaml")["resources"] == ["allocations", "serving", "observability"]
