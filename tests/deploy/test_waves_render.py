"""`fabric render` of a plan with a rollout: the waves folders, Argo CD's sync waves, Flux's chain, the
surge replica and the PodDisruptionBudgets, through the real CLI, `render --check` with the shared CRD
schemas and kustomize itself (`kubectl kustomize`)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from llm_fabric.cli.main import main
from llm_fabric.kube import labels as L
from llm_fabric.kube.options import StackOptions
from llm_fabric.plan.document import DeploymentRollout, Rollout, RolloutWave, SurgeReplica
from llm_fabric.plan.planning import plan_site
from llm_fabric.serving.waves import SYNC_WAVE
from llm_fabric.serving.workloads import build_serving
from llm_fabric.site.models import Deployment, HostInventory, RdmaPort
from tests.deploy.crdschemas import crds_or_skip, validate_custom
from tests.deploy.planfixture import seed_plan
from tests.deploy.rolloutfixture import rollout_plan
from tests.plan.onesite import federation, node

FLUX_REPO = "ssh://git@git.example/fed/site.git"


def _render(site_repo: Path, tmp_path: Path, plan_json: str, *extra: str) -> Path:
    plan = tmp_path / "plan.json"
    plan.write_text(plan_json)
    out = site_repo / "deploy"
    args = ["render", "--site", "brno", "-C", str(site_repo), "--out", str(out), "--plan", str(plan), *extra]
    assert main(args) == 0
    return out / "brno"


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def _kustomize(folder: Path) -> dict[str, dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl (its built-in kustomize) is not installed")
    built = subprocess.run([kubectl, "kustomize", str(folder)], capture_output=True, text=True, check=True).stdout
    return {f"{o['kind']}/{o['metadata']['name']}": o for o in yaml.safe_load_all(built) if o}


def test_waves_folders_hold_the_restarted_and_surge_workloads(site_repo: Path, tmp_path: Path) -> None:
    site = _render(site_repo, tmp_path, rollout_plan().model_dump_json(), "--check", "--crds", str(crds_or_skip()))
    assert _load(site / "kustomization.yaml")["resources"] == [
        "allocations",
        "serving",
        "observability",
        "waves/wave-1",
        "waves/wave-2",
    ]
    assert sorted(p.name for p in (site / "waves" / "wave-1").iterdir()) == [
        "deployment-mistral-small-4-0.yaml",
        "deployment-qwen3-5-surge-0.yaml",
        "kustomization.yaml",
    ]
    assert sorted(p.name for p in (site / "waves" / "wave-2").iterdir()) == [
        "deployment-qwen3-5-0.yaml",
        "kustomization.yaml",
    ]
    serving = {p.name for p in (site / "serving").iterdir()}
    assert "deployment-qwen3-5-0.yaml" not in serving and "deployment-mistral-small-4-0.yaml" not in serving
    assert "deployment-glm-5-1-0.yaml" in serving  # not restarted: the base
    glm = _load(site / "serving" / "deployment-glm-5-1-0.yaml")
    assert SYNC_WAVE not in glm["metadata"]["annotations"]
    for wave, name in ((1, "mistral-small-4-0"), (1, "qwen3-5-surge-0"), (2, "qwen3-5-0")):
        obj = _load(site / "waves" / f"wave-{wave}" / f"deployment-{name}.yaml")
        assert obj["metadata"]["annotations"][SYNC_WAVE] == str(wave)  # Argo CD reads a string
        # the pod template is left alone: the mark going with the next render restarts nothing
        assert SYNC_WAVE not in obj["spec"]["template"]["metadata"]["annotations"]
    # kubectl apply -k of the site's folder (and Argo CD over it) still applies every object, once
    built = _kustomize(site)
    assert {"Deployment/qwen3-5-0", "Deployment/qwen3-5-surge-0", "Deployment/glm-5-1-0"} <= set(built)
    assert built["Deployment/qwen3-5-surge-0"]["metadata"]["annotations"][SYNC_WAVE] == "1"


def test_the_surge_is_served_by_the_deployments_service_but_is_no_replica_of_it(
    site_repo: Path, tmp_path: Path
) -> None:
    site = _render(site_repo, tmp_path, rollout_plan().model_dump_json())
    surge = _load(site / "waves" / "wave-1" / "deployment-qwen3-5-surge-0.yaml")
    replica = _load(site / "waves" / "wave-2" / "deployment-qwen3-5-0.yaml")
    pod = surge["spec"]["template"]["metadata"]
    assert pod["labels"]["llm-fabric.io/surge-for"] == "qwen3-5-0"
    assert pod["annotations"]["llm-fabric.io/surge-for"] == "qwen3-5-0"
    assert pod["labels"][L.REPLICA] == "qwen3-5-surge-0"
    assert pod["labels"][L.NODE] == "hgx-h200-ceitec"
    # its readiness reads no canary verdict (the one at its index is the restarting replica's); the replica's does
    ready = surge["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["exec"]["command"]
    assert "--canary-url" not in ready and "--drain-file" in ready
    replica_ready = replica["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["exec"]["command"]
    assert "--canary-url" in replica_ready
    # nor does its drain tell the prober: the mark at its index would take the restarted replica out of rotation
    surge_drain = surge["spec"]["template"]["spec"]["containers"][0]["lifecycle"]["preStop"]["exec"]["command"]
    replica_drain = replica["spec"]["template"]["spec"]["containers"][0]["lifecycle"]["preStop"]["exec"]["command"]
    assert "--notice-url" not in surge_drain and "--drain-file" in surge_drain
    assert replica_drain[replica_drain.index("--notice-url") + 1].endswith("/replicas/qwen3-5/0/drain")
    prober = _load(site / "serving" / "configmap-fabric-canary.yaml")
    assert '"rollout":null' in prober["data"]["plan.json"].replace(" ", "")  # the prober's plan has none
    affinity = surge["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
    terms = affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms[0]["matchExpressions"][0]["values"] == ["hgx-h200-ceitec"]

    def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in selector.items())

    service = _load(site / "serving" / "service-qwen3-5.yaml")
    direct = _load(site / "serving" / "service-qwen3-5-0-direct.yaml")
    budget = _load(site / "serving" / "poddisruptionbudget-qwen3-5.yaml")
    assert selects(service["spec"]["selector"], pod["labels"])  # the gateway's route reaches it
    assert selects(budget["spec"]["selector"]["matchLabels"], pod["labels"])
    assert not selects(direct["spec"]["selector"], pod["labels"])  # the canary's verdicts stay the replica's
    assert not selects(replica["spec"]["selector"]["matchLabels"], pod["labels"])
    assert not selects(surge["spec"]["selector"]["matchLabels"], replica["spec"]["template"]["metadata"]["labels"])


def test_flux_chains_one_kustomization_per_wave_after_the_base(site_repo: Path, tmp_path: Path) -> None:
    crds = str(crds_or_skip())
    site = _render(
        site_repo, tmp_path, rollout_plan().model_dump_json(), "--flux-repo", FLUX_REPO, "--check", "--crds", crds
    )
    flux = site / "flux"
    assert _load(flux / "kustomization.yaml")["resources"] == [
        "gitrepository-llm-fabric-brno.yaml",
        "kustomization-llm-fabric-brno.yaml",
        "kustomization-llm-fabric-brno-wave-1.yaml",
        "kustomization-llm-fabric-brno-wave-2.yaml",
    ]
    base = _load(flux / "kustomization-llm-fabric-brno.yaml")["spec"]
    assert base["path"] == "./deploy/brno/flux/base"
    wave1 = _load(flux / "kustomization-llm-fabric-brno-wave-1.yaml")["spec"]
    wave2 = _load(flux / "kustomization-llm-fabric-brno-wave-2.yaml")["spec"]
    labels = [_load(flux / f"kustomization-llm-fabric-brno-wave-{n}.yaml")["metadata"]["labels"] for n in (1, 2)]
    assert labels == [{"llm-fabric.io/wave-of": "llm-fabric-brno"}] * 2  # what `kubectl delete -l` selects
    assert "labels" not in _load(flux / "kustomization-llm-fabric-brno.yaml")["metadata"]
    assert wave1["dependsOn"] == [{"name": "llm-fabric-brno"}]
    assert wave2["dependsOn"] == [{"name": "llm-fabric-brno-wave-1"}]
    assert (wave1["path"], wave2["path"]) == ("./deploy/brno/waves/wave-1", "./deploy/brno/waves/wave-2")
    assert wave1["wait"] is wave1["prune"] is wave2["wait"] is True
    # twice the slowest expected cold start of the wave (qwen3-5/0: 900 s), never under the interval
    assert (wave1["timeout"], wave2["timeout"]) == ("800s", "1800s")
    assert all(s["sourceRef"] == {"kind": "GitRepository", "name": "llm-fabric-brno"} for s in (base, wave1, wave2))
    # the base applies the stacks and no wave: the waves wait for it
    in_base = _kustomize(flux / "base")
    assert "Deployment/glm-5-1-0" in in_base and "PodDisruptionBudget/qwen3-5" in in_base
    assert not {"Deployment/qwen3-5-0", "Deployment/qwen3-5-surge-0", "Deployment/mistral-small-4-0"} & set(in_base)


def test_check_validates_the_flux_kustomizations_against_their_crd(
    site_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    crds = crds_or_skip()
    # a CRD copy whose Kustomization requires a field the render does not write: the check must see the waves
    copy = tmp_path / "crds"
    shutil.copytree(crds, copy)
    path = copy / "flux" / "kustomize.toolkit.fluxcd.io_kustomizations.yaml"
    crd = yaml.safe_load(path.read_text())
    for version in crd["spec"]["versions"]:
        version["schema"]["openAPIV3Schema"]["properties"]["spec"].setdefault("required", []).append("targetNamespace")
    path.write_text(yaml.safe_dump(crd))
    plan = tmp_path / "plan.json"
    plan.write_text(rollout_plan().model_dump_json())
    out = site_repo / "deploy"
    args = ["render", "--site", "brno", "-C", str(site_repo), "--out", str(out), "--plan", str(plan)]
    assert main([*args, "--flux-repo", FLUX_REPO, "--check", "--crds", str(copy)]) == 3
    err = capsys.readouterr().err
    for name in ("kustomization-llm-fabric-brno.yaml", "-wave-1.yaml", "-wave-2.yaml"):
        assert name in err
    assert "targetNamespace" in err
    assert not out.exists()  # a refused check writes nothing


def test_the_next_render_without_a_rollout_prunes_the_waves(site_repo: Path, tmp_path: Path) -> None:
    site = _render(site_repo, tmp_path, rollout_plan().model_dump_json(), "--flux-repo", FLUX_REPO)
    assert (site / "waves").is_dir() and (site / "flux" / "base").is_dir()
    _render(site_repo, tmp_path, seed_plan().model_dump_json(), "--flux-repo", FLUX_REPO)
    assert not (site / "waves").exists() and not (site / "flux" / "base").exists()
    assert not list(site.rglob("*surge*"))  # the surge is gone with its wave
    assert _load(site / "kustomization.yaml")["resources"] == ["allocations", "serving", "observability"]
    assert (site / "serving" / "deployment-qwen3-5-0.yaml").is_file()
    assert _load(site / "flux" / "kustomization-llm-fabric-brno.yaml")["spec"]["path"] == "./deploy/brno"
    assert sorted(p.name for p in (site / "flux").iterdir()) == [
        "gitrepository-llm-fabric-brno.yaml",
        "kustomization-llm-fabric-brno.yaml",
        "kustomization.yaml",
    ]
    # and the same bytes as a render of that plan into a fresh folder
    fresh = tmp_path / "fresh"
    shutil.copytree(site_repo, fresh, ignore=shutil.ignore_patterns("deploy"))
    again = _render(fresh, tmp_path, seed_plan().model_dump_json(), "--flux-repo", FLUX_REPO)
    texts = {p.relative_to(site): p.read_text() for p in site.rglob("*") if p.is_file()}
    assert texts == {p.relative_to(again): p.read_text() for p in again.rglob("*") if p.is_file()}


def test_a_pod_disruption_budget_per_deployment_from_its_rollout_policy(site_repo: Path, tmp_path: Path) -> None:
    path = site_repo / "deployments" / "qwen3-5.yaml"
    path.write_text(path.read_text() + "rollout: {max_unavailable: 2}\n")
    subprocess.run(["git", "-C", str(site_repo), "commit", "-qam", "qwen3-5: two at once"], check=True)
    site = _render(site_repo, tmp_path, seed_plan().model_dump_json(), "--check", "--crds", str(crds_or_skip()))
    budgets = {p.name: _load(p) for p in (site / "serving").glob("poddisruptionbudget-*.yaml")}
    assert sorted(budgets) == sorted(f"poddisruptionbudget-{r.deployment}.yaml" for r in seed_plan().replicas)
    qwen = budgets["poddisruptionbudget-qwen3-5.yaml"]
    assert qwen["apiVersion"] == "policy/v1"
    assert qwen["spec"]["maxUnavailable"] == 2
    assert qwen["spec"]["selector"]["matchLabels"] == {
        "app.kubernetes.io/part-of": L.PART_OF,
        "app.kubernetes.io/component": "engine",
        L.DEPLOYMENT: "qwen3-5",
    }
    assert budgets["poddisruptionbudget-glm-5-1.yaml"]["spec"]["maxUnavailable"] == 1  # the default


def test_a_multi_node_surge_is_a_leader_worker_set_of_its_own() -> None:
    ports = [
        RdmaPort(
            device=f"mlx5_{i}", port=1, link_layer="InfiniBand", rate_gbps=400, state="ACTIVE", physical_state="LinkUp"
        )
        for i in range(8)
    ]
    nodes = [node(n, "h100-sxm", host=HostInventory(rdma=ports)) for n in ("h100-a", "h100-b", "h100-c", "h100-d")]
    deployment = Deployment(
        name="deepseek-v3", recipe="deepseek-v3", quantization="fp8", replicas=1, data_classes=["public"]
    )
    site = federation(nodes, deployment)
    plan = plan_site(site, time_limit_s=2)
    [replica] = plan.replicas
    spare = sorted({"h100-a", "h100-b", "h100-c", "h100-d"} - set(replica.nodes))
    placement = replica.model_copy(update={"node": spare[0], "worker_nodes": [spare[1]]})
    plan = plan.model_copy(
        update={
            "rollout": Rollout(
                base_revision="0" * 40,
                deployments=[
                    DeploymentRollout(
                        deployment=replica.deployment,
                        max_unavailable=1,
                        surges=[SurgeReplica(replaces=0, placement=placement, source="free")],
                        waves=[RolloutWave(wave=1, surges=[0], serving=2, target=1)],
                    )
                ],
            )
        }
    )
    objects = [
        o
        for b in build_serving(site, plan, "brno", "llm-fabric", StackOptions(site_repo=Path("/x")))
        for o in b.objects
    ]
    sets = {o["metadata"]["name"]: o for o in objects if o["kind"] == "LeaderWorkerSet"}
    assert sorted(sets) == ["deepseek-v3-0", "deepseek-v3-surge-0"]
    surge = sets["deepseek-v3-surge-0"]
    validate_custom(surge)
    template = surge["spec"]["leaderWorkerTemplate"]
    for role in ("leaderTemplate", "workerTemplate"):
        labels = template[role]["metadata"]["labels"]
        assert labels["llm-fabric.io/surge-for"] == "deepseek-v3-0" and labels[L.REPLICA] == "deepseek-v3-surge-0"
        anti = template[role]["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert anti[0]["labelSelector"]["matchLabels"] == {L.REPLICA: "deepseek-v3-surge-0"}
    assert template["workerTemplate"]["metadata"]["labels"]["app.kubernetes.io/component"] == "engine-worker"
    ready = template["leaderTemplate"]["spec"]["containers"][0]["readinessProbe"]["exec"]["command"]
    assert "--canary-url" not in ready
