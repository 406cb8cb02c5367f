"""`fabric render --check`: the gateway's objects in the serving stack of its site, valid against the CRDs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.fixtures.gateway_site import edit_yaml, issue_keys, make_gateway_plan, make_gateway_site
from tests.fixtures.siterepo import SHARED

from llm_fabric.cli.main import main
from llm_fabric.gateway.objects.gateway import build_gateway_bundles
from llm_fabric.kube import labels as L
from llm_fabric.plan.document import load_plan
from llm_fabric.site.loader import load_site

CRDS = SHARED / "crds"


@pytest.fixture(scope="module")
def site_and_plan(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("gateway-render")
    repo = make_gateway_site(root / "site")
    plan = make_gateway_plan(repo, root)
    issue_keys(repo)
    return repo, plan


def _render(repo: Path, plan: Path, out: Path, site: str = "brno") -> dict[str, dict[str, object]]:
    code = main(
        [
            "render",
            "-C",
            str(repo),
            "--site",
            site,
            "--plan",
            str(plan),
            "--out",
            str(out),
            "--check",
            "--crds",
            str(CRDS),
        ]
    )
    assert code == 0
    return {p.name: yaml.safe_load(p.read_text()) for p in (out / site / "serving").glob("*.yaml")}


def test_the_gateway_renders_valid_objects_without_keys(site_and_plan: tuple[Path, Path], tmp_path: Path) -> None:
    repo, plan = site_and_plan
    objects = _render(repo, plan, tmp_path / "out")
    for name in (
        "deployment-fabric-gateway.yaml",
        "service-fabric-gateway.yaml",
        "configmap-fabric-gateway.yaml",
        "networkpolicy-fabric-gateway-egress.yaml",
        "podmonitor-fabric-gateway.yaml",
        "prometheusrule-fabric-gateway.yaml",
        "persistentvolumeclaim-fabric-gateway-records.yaml",
    ):
        assert name in objects, name
    settings = json.loads(objects["configmap-fabric-gateway.yaml"]["data"]["fabric-gateway.json"])  # type: ignore[index]
    assert all(t["key_sha256"] == [] for t in settings["tenants"].values())  # the hashes come from a Secret
    pod = objects["deployment-fabric-gateway.yaml"]["spec"]["template"]["spec"]  # type: ignore[index]
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    assert env["LITELLM_LOCAL_MODEL_COST_MAP"]["value"] == "True"
    assert env["FABRIC_GATEWAY_KEYS"]["value"].endswith("tenant-keys.json")
    assert env["CLOUD_API_KEY"]["valueFrom"]["secretKeyRef"]["name"] == "fabric-gateway-external"
    assert {"name": "keys", "secret": {"secretName": "fabric-gateway-keys"}} in pod["volumes"]
    # the meter's day files survive restarts: a claim, not an emptyDir, with one pod at a time on it
    assert {"name": "records", "persistentVolumeClaim": {"claimName": "fabric-gateway-records"}} in pod["volumes"]
    assert env["FABRIC_GATEWAY_RECORDS"]["value"] == "/var/lib/fabric-gateway"
    assert env["FABRIC_GATEWAY_WRITER"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    claim = objects["persistentvolumeclaim-fabric-gateway-records.yaml"]["spec"]
    assert claim == {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}}
    assert objects["deployment-fabric-gateway.yaml"]["spec"]["strategy"] == {"type": "Recreate"}  # type: ignore[index]
    rules = objects["prometheusrule-fabric-gateway.yaml"]["spec"]["groups"][0]["rules"]  # type: ignore[index]
    assert {r["alert"] for r in rules} == {"FabricGatewayThrottling", "FabricGatewayErrors"}
    assert not [n for n in objects if n.startswith(("inferencepool-", "httproute-"))]


GATEWAY_NAME = "gateway.networking.k8s.io/gateway-name"


def _inference_site(repo: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "site"
    shutil.copytree(repo, copy)
    edit_yaml(copy / "fabric.yaml", lambda d: d["gateway"].update(routing="inference-extension"))
    return copy


def test_inference_extension_routing_adds_pools_pickers_and_routes(
    site_and_plan: tuple[Path, Path], tmp_path: Path
) -> None:
    repo, plan = site_and_plan
    objects = _render(_inference_site(repo, tmp_path), plan, tmp_path / "out")  # --check against ../shared/crds
    for deployment in ("qwen3-5", "qwen3-5-122b"):  # the deployments with replicas in brno
        pool = objects[f"inferencepool-{deployment}.yaml"]["spec"]
        assert pool["selector"]["matchLabels"][L.DEPLOYMENT] == deployment  # type: ignore[index]
        assert "app.kubernetes.io/name" not in pool["selector"]["matchLabels"]  # type: ignore[index]  # both engines
        ref = pool["endpointPickerRef"]  # type: ignore[index]
        service = objects[f"service-{ref['name']}.yaml"]
        assert ref["port"]["number"] in [p["port"] for p in service["spec"]["ports"]]  # type: ignore[index]
        epp = objects[f"deployment-{deployment}-epp.yaml"]["spec"]
        assert service["spec"]["selector"] == epp["selector"]["matchLabels"]  # type: ignore[index]
        pod = epp["template"]["spec"]  # type: ignore[index]
        container = pod["containers"][0]
        assert container["image"] == "registry.k8s.io/gateway-api-inference-extension/epp:v1.5.0"
        args = container["args"]
        assert args[args.index("--pool-name") + 1] == deployment
        assert args[args.index("--config-file") + 1] == "/config/epp-config.yaml"
        assert {p["containerPort"] for p in container["ports"]} == {9002, 9003, 9090}
        assert epp["replicas"] == 1 and epp["strategy"] == {"type": "Recreate"}  # type: ignore[index]
        # the config the picker reads: every profile entry names a declared plugin, scorers weighted
        config_map = objects[f"configmap-{deployment}-epp.yaml"]
        assert pod["volumes"] == [{"name": "config", "configMap": {"name": config_map["metadata"]["name"]}}]  # type: ignore[index]
        config = yaml.safe_load(config_map["data"]["epp-config.yaml"])  # type: ignore[index]
        assert (config["apiVersion"], config["kind"]) == (
            "inference.networking.x-k8s.io/v1alpha1",
            "EndpointPickerConfig",
        )
        declared = {p.get("name", p["type"]) for p in config["plugins"]}
        [profile] = config["schedulingProfiles"]
        weights = {p["pluginRef"]: p.get("weight") for p in profile["plugins"]}
        assert set(weights) <= declared
        assert weights == {
            "queue-scorer": 2,
            "kv-cache-utilization-scorer": 2,
            "prefix-cache-scorer": 3,
            "max-score-picker": None,
        }
        # RBAC: the picker's own ServiceAccount may read pods and pools in the namespace, nothing else
        role = objects[f"role-{deployment}-epp.yaml"]
        granted = {(g, r) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]}  # type: ignore[index]
        assert {("", "pods"), ("inference.networking.k8s.io", "inferencepools")} <= granted
        assert {v for rule in role["rules"] for v in rule["verbs"]} == {"get", "watch", "list"}  # type: ignore[index]
        binding = objects[f"rolebinding-{deployment}-epp.yaml"]
        assert binding["subjects"] == [  # type: ignore[index]
            {"kind": "ServiceAccount", "name": pod["serviceAccountName"], "namespace": "llm-fabric"}
        ]
        assert f"serviceaccount-{pod['serviceAccountName']}.yaml" in objects
        route = objects[f"httproute-{deployment}.yaml"]["spec"]["rules"][0]  # type: ignore[index]
        assert route["backendRefs"][0] == {
            "group": "inference.networking.k8s.io",
            "kind": "InferencePool",
            "name": deployment,
        }
        assert route["matches"][0]["headers"] == [{"name": "X-Gateway-Model-Name", "value": deployment}]
        # the engines admit only the tenant gateway, the prober and Prometheus: here also the inference
        # Gateway's proxy and this deployment's picker (issue 39, F8)
        ingress = objects[f"networkpolicy-{deployment}-engines-ingress.yaml"]["spec"]
        assert ingress["podSelector"]["matchLabels"][L.DEPLOYMENT] == deployment  # type: ignore[index]
        proxy = {"namespaceSelector": {}, "podSelector": {"matchLabels": {GATEWAY_NAME: "llm-fabric-inference"}}}
        picker = {"podSelector": {"matchLabels": {"inferencepool": f"{deployment}-epp"}}}
        assert ingress["ingress"] == [{"from": [proxy, picker], "ports": [{"protocol": "TCP", "port": 8000}]}]  # type: ignore[index]
        assert config["featureGates"] == ["flowControl"]  # the fairness id and the objectives' priorities count
        fairness = config["flowControl"]["defaultPriorityBand"]["fairnessPolicyRef"]
        assert fairness == "round-robin-fairness-policy" and fairness in declared  # per tenant, not first come
    # the allocation bands as InferenceObjectives (checked against GIE v1.5.0's CRD by --check --crds):
    # qwen3-5-122b is ceitec-structural's, lent beyond its reserve; qwen3-5 a pool deployment
    objectives = {
        n.removeprefix("inferenceobjective-").removesuffix(".yaml"): o["spec"]
        for n, o in objects.items()
        if n.startswith("inferenceobjective-")
    }
    pool_ref = {"group": "inference.networking.k8s.io", "kind": "InferencePool"}
    assert objectives == {
        "qwen3-5-pool": {"poolRef": pool_ref | {"name": "qwen3-5"}, "priority": 0},
        "qwen3-5-122b-owner": {"poolRef": pool_ref | {"name": "qwen3-5-122b"}, "priority": 10},
        "qwen3-5-122b-lent": {"poolRef": pool_ref | {"name": "qwen3-5-122b"}, "priority": 0},
    }
    # the tenant gateway sends brno's requests to the inference Gateway, naming the deployment in that header
    config = yaml.safe_load(objects["configmap-fabric-gateway.yaml"]["data"]["litellm-config.yaml"])  # type: ignore[index]
    for entry in config["model_list"]:
        params, site = entry["litellm_params"], entry["model_info"].get("fabric_site")
        if site == "brno":
            assert params["api_base"] == "http://llm-fabric-inference.llm-fabric.svc.cluster.local/v1"
            assert params["extra_headers"] == {"X-Gateway-Model-Name": entry["model_info"]["fabric_deployment"]}
        elif site == "vienna":
            assert params["api_base"].endswith(".vienna.example/v1") and "extra_headers" not in params
    egress = objects["networkpolicy-fabric-gateway-egress.yaml"]["spec"]["egress"]  # type: ignore[index]
    gateway_pods = {"gateway.networking.k8s.io/gateway-name": "llm-fabric-inference"}
    assert {"to": [{"namespaceSelector": {}, "podSelector": {"matchLabels": gateway_pods}}]} in egress


def test_the_pulumi_stack_registers_the_pickers_it_renders(site_and_plan: tuple[Path, Path], tmp_path: Path) -> None:
    """The serving stack through the real Pulumi SDK (mocks): the same objects as the render, typed resources."""
    from tests.deploy.test_pulumi_stacks import kubernetes, run_stack

    from llm_fabric.deploy.build import build_stack, load_inputs
    from llm_fabric.kube.manifests import all_objects
    from llm_fabric.kube.options import StackOptions

    repo, plan = site_and_plan
    copy = _inference_site(repo, tmp_path)
    inputs = load_inputs(StackOptions(site_repo=copy, site="brno"), site=load_site(copy), plan=load_plan(plan))
    mocks = run_stack("serving", inputs)
    registered = kubernetes(mocks)
    rendered = {f"{o['kind']}/{o['metadata']['name']}": o for o in all_objects(build_stack("serving", inputs))}
    assert registered == rendered
    assert {"Deployment/qwen3-5-epp", "Role/qwen3-5-epp", "RoleBinding/qwen3-5-epp", "InferencePool/qwen3-5"} <= set(
        registered
    )
    types = {typ for typ, name, _ in mocks.resources if name.endswith("qwen3-5-epp")}
    assert {"kubernetes:rbac.authorization.k8s.io/v1:Role", "kubernetes:apps/v1:Deployment"} <= types


def test_every_site_that_gateway_sites_lists_runs_its_own(site_and_plan: tuple[Path, Path], tmp_path: Path) -> None:
    repo, plan = site_and_plan
    site, placed = load_site(repo), load_plan(plan)
    assert build_gateway_bundles(site, placed, "vienna", "llm-fabric")
    assert build_gateway_bundles(site, placed, "brno", "llm-fabric")
    copy = tmp_path / "site"
    shutil.copytree(repo, copy)
    edit_yaml(copy / "fabric.yaml", lambda d: d["gateway"].update(sites={"brno": {}}))
    assert build_gateway_bundles(load_site(copy), placed, "vienna", "llm-fabric") == []


def test_all_sites_render_one_folder_each_with_its_own_flux_source(tmp_path: Path) -> None:
    repo = make_gateway_site(tmp_path / "site")
    plan = make_gateway_plan(repo, tmp_path)
    out = repo / "deploy"
    code = main(
        [
            "render",
            "-C",
            str(repo),
            "--plan",
            str(plan),
            "--out",
            str(out),
            "--all-sites",
            "--flux-repo",
            "ssh://git@git.example/fed/site.git",
            "--check",
            "--crds",
            str(CRDS),
        ]
    )
    assert code == 0
    placed = {"brno": set(), "vienna": set()}  # type: dict[str, set[str]]
    for site in ("brno", "vienna"):
        for path in (out / site).rglob("*.yaml"):
            obj = yaml.safe_load(path.read_text())
            labels = (obj.get("metadata") or {}).get("labels") or {}
            if L.SITE in labels:  # a workload: it belongs to this site's folder only
                assert labels[L.SITE] == site, path
                placed[site].add(labels[L.REPLICA])
        source = yaml.safe_load((out / site / "flux" / f"gitrepository-llm-fabric-{site}.yaml").read_text())
        assert source["spec"]["ignore"] == f"/*\n!/deploy/{site}/\n"  # the site pulls its own folder only
        assert source["spec"]["secretRef"]["name"] == f"llm-fabric-{site}-git"
        sync = yaml.safe_load((out / site / "flux" / f"kustomization-llm-fabric-{site}.yaml").read_text())
        assert sync["spec"]["path"] == f"./deploy/{site}"
    assert placed["vienna"] == {"qwen3-5-1"}
    assert "qwen3-5-1" not in placed["brno"] and "qwen3-5-0" in placed["brno"]
    for site in ("brno", "vienna"):  # a gateway per site, with the federation's peer key for relays
        gateway = yaml.safe_load((out / site / "serving" / "deployment-fabric-gateway.yaml").read_text())
        env = {e["name"]: e for e in gateway["spec"]["template"]["spec"]["containers"][0]["env"]}
        assert env["FABRIC_GATEWAY_PEER_KEY"]["valueFrom"]["secretKeyRef"]["name"] == "fabric-gateway-peer-key"


def test_site_and_all_sites_exclude_each_other(site_and_plan: tuple[Path, Path], tmp_path: Path) -> None:
    repo, plan = site_and_plan
    assert (
        main(["render", "-C", str(repo), "--plan", str(plan), "--out", str(tmp_path), "--all-sites", "--site", "brno"])
        == 2
    )


def test_the_reference_federation_renders_each_site_only_its_own_objects(site_repo: Path, tmp_path: Path) -> None:
    """The example itself (brno, CZ; vienna, AT) with the planner's own plan, through `plan -o` and `render`."""
    plan_file = tmp_path / "plan.json"
    assert main(["plan", "-C", str(site_repo), "-o", str(plan_file)]) == 0
    out = site_repo / "deploy"
    args = ["render", "-C", str(site_repo), "--plan", str(plan_file), "--out", str(out), "--all-sites"]
    assert main([*args, "--flux-repo", "ssh://git@git.example/fed/site.git", "--check", "--crds", str(CRDS)]) == 0
    plan, site = load_plan(plan_file), load_site(site_repo)
    sites = sorted(site.config.sites)
    assert sites == ["brno", "vienna"]
    nodes_at = {s: {n for n, m in site.nodes.items() if m.site == s} for s in sites}
    expected = {s: {f"{r.deployment}-{r.index}" for r in plan.replicas if r.site == s} for s in sites}
    found: dict[str, set[str]] = {s: set() for s in sites}
    for here in sites:
        elsewhere = set().union(*(nodes_at[s] for s in sites if s != here))
        for path in (out / here).rglob("*.yaml"):
            text = path.read_text()
            obj = yaml.safe_load(text)
            labels = (obj.get("metadata") or {}).get("labels") or {}
            if L.SITE in labels:
                assert labels[L.SITE] == here, path
                found[here].add(labels[L.REPLICA])
            # no object names a node of another site (node affinity, annotations, quotas)
            assert not [n for n in elsewhere if n in text], path
    assert found == expected and all(expected.values())
    # public/internal gpt-oss-120b runs at both sites; whatever serves sensitive data only in CZ
    assert {r.deployment for r in plan.replicas if r.site == "vienna"} == {"gpt-oss-120b"}
    assert {r.site for r in plan.replicas if r.deployment == "gpt-oss-120b"} == {"brno", "vienna"}
    for replica in plan.replicas:
        if "sensitive" in site.deployments[replica.deployment].data_classes:
            assert site.config.sites[replica.site].jurisdiction.country == "CZ", replica

    # one gateway per site; each reaches the other site's replicas only through that site's gateway
    def entries(at: str) -> list[dict[str, Any]]:
        config = yaml.safe_load((out / at / "serving" / "configmap-fabric-gateway.yaml").read_text())
        return yaml.safe_load(config["data"]["litellm-config.yaml"])["model_list"]  # type: ignore[no-any-return]

    urls = {"brno": "https://gateway.llm.cerit-sc.example/v1", "vienna": "https://gateway.llm.vsc.example/v1"}
    for here, other in (("brno", "vienna"), ("vienna", "brno")):
        listed = entries(here)
        remote = [e for e in listed if e["model_info"].get("fabric_site") == other]
        assert remote and all(e["litellm_params"]["api_base"] == urls[other] for e in remote), here
        local = [e for e in listed if e["model_info"].get("fabric_site") == here]
        assert all(".svc.cluster.local" in e["litellm_params"]["api_base"] for e in local), here
    at_brno = {e["model_name"] for e in entries("brno") if e["model_info"].get("fabric_site") == "vienna"}
    assert at_brno == {"gpt-oss-120b@public~vienna", "gpt-oss-120b@internal~vienna"}
    # Vienna's gateway takes no sensitive data: no group of that class there
    assert not [e for e in entries("vienna") if "@sensitive" in e["model_name"]]


def test_the_pulumi_stack_of_each_site_registers_its_own_gateway(site_and_plan: tuple[Path, Path]) -> None:
    """Vienna's serving stack (the real Pulumi SDK, mocks) holds Vienna's gateway, built for Vienna: it relays to
    Brno's gateway and takes no sensitive data."""
    from tests.deploy.test_pulumi_stacks import kubernetes, run_stack

    from llm_fabric.deploy.build import load_inputs
    from llm_fabric.kube.options import StackOptions

    repo, plan = site_and_plan
    inputs = load_inputs(StackOptions(site_repo=repo, site="vienna"), site=load_site(repo), plan=load_plan(plan))
    registered = kubernetes(run_stack("serving", inputs))
    assert {"Deployment/fabric-gateway", "ConfigMap/fabric-gateway", "Service/fabric-gateway"} <= set(registered)
    settings = json.loads(registered["ConfigMap/fabric-gateway"]["data"]["fabric-gateway.json"])
    assert settings["site"] == "vienna" and settings["entry_sites"]["sensitive"] == ["brno"]
    config = yaml.safe_load(registered["ConfigMap/fabric-gateway"]["data"]["litellm-config.yaml"])
    relays = {m["litellm_params"]["api_base"] for m in config["model_list"] if m["model_info"].get("fabric_relay")}
    assert relays == {"http://gateway.brno.example/v1"}
