"""dcgm-exporter per site: the objects the observability stack renders, checked against the real schemas
(kubernetes-validate for the DaemonSet, the Prometheus Operator's CRD for the ServiceMonitor), the Pulumi
stack registering them, and a site whose GPU Operator already runs the exporter."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from llm_fabric.cli.main import main
from llm_fabric.deploy.build import StackInputs, build_stack
from llm_fabric.deploy.crd_validation import core_errors
from llm_fabric.distribution import data_path
from llm_fabric.kube.manifests import all_objects
from llm_fabric.kube.options import StackOptions
from llm_fabric.observability.gpu_metrics import COLLECTED, DCGM_EXPORTER_IMAGE, counters_csv
from llm_fabric.observability.rules import alert_rules
from tests.deploy.crdschemas import validate_custom
from tests.deploy.test_pulumi_stacks import run_stack


def _by_kind(inputs: StackInputs) -> dict[str, dict[str, Any]]:
    return {o["kind"]: o for o in all_objects(build_stack("observability", inputs)) if "dcgm" in o["metadata"]["name"]}


def test_the_exporter_runs_on_the_sites_nvidia_nodes(reference_inputs: StackInputs) -> None:
    objects = _by_kind(reference_inputs)
    assert set(objects) == {"ConfigMap", "DaemonSet", "Service", "ServiceMonitor"}
    daemon_set = objects["DaemonSet"]
    assert core_errors(daemon_set, "1.33") == []
    pod = daemon_set["spec"]["template"]["spec"]
    (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    # the labels the provisioning puts on each node (kube/labels.py): brno's NVIDIA GPU models
    assert term["matchExpressions"] == [
        {"key": "fabric.llm/site", "operator": "In", "values": ["brno"]},
        {"key": "fabric.llm/gpu-model", "operator": "In", "values": ["b200", "b300", "h200"]},
    ]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    (container,) = pod["containers"]
    assert container["image"] == DCGM_EXPORTER_IMAGE == "nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3-4.1.3-ubuntu22.04"
    assert container["args"] == ["-f", "/etc/dcgm-exporter/llm-fabric/counters.csv"]
    assert objects["ConfigMap"]["data"]["counters.csv"] == counters_csv()
    for obj in objects.values():
        if obj["kind"] != "ServiceMonitor":
            assert core_errors(obj, "1.33") == [], obj["kind"]


def test_the_service_monitor_passes_its_crd_and_labels_the_node(reference_inputs: StackInputs) -> None:
    monitor = _by_kind(reference_inputs)["ServiceMonitor"]
    validate_custom(monitor)
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["llm-fabric"]}
    assert monitor["spec"]["selector"]["matchLabels"] == _by_kind(reference_inputs)["Service"]["spec"]["selector"]
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == "metrics"
    assert endpoint["relabelings"] == [
        {"action": "replace", "sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node"}
    ]


def test_the_collectors_name_every_field_the_alerts_and_dashboards_read(reference_inputs: StackInputs) -> None:
    read = {r["expr"] for r in alert_rules(StackOptions(site_repo=data_path("examples")))}
    for obj in all_objects(build_stack("observability", reference_inputs)):
        if obj["metadata"]["labels"].get("grafana_dashboard") == "1":
            (text,) = obj["data"].values()
            read |= {t["expr"] for p in json.loads(text)["panels"] for t in p.get("targets", [])}
    fields = {f for expr in read for f in re.findall(r"DCGM_FI_[A-Z0-9_]+", expr)}
    assert {"DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_POWER_USAGE"} <= fields
    assert fields <= set(COLLECTED)
    lines = counters_csv().splitlines()
    assert "DCGM_FI_DEV_XID_ERRORS, gauge, Value of the last Xid error encountered." in lines
    assert "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL, counter, Total number of double-bit volatile ECC errors." in lines


def test_the_pulumi_stack_registers_the_exporter(reference_inputs: StackInputs) -> None:
    mocks = run_stack("observability", reference_inputs)
    registered = {
        (typ, inputs["metadata"]["name"]) for typ, _, inputs in mocks.resources if typ.startswith("kubernetes:")
    }
    assert {
        ("kubernetes:apps/v1:DaemonSet", "llm-fabric-dcgm-exporter"),
        ("kubernetes:core/v1:Service", "llm-fabric-dcgm-exporter"),
        ("kubernetes:core/v1:ConfigMap", "llm-fabric-dcgm-exporter-counters"),
        ("kubernetes:monitoring.coreos.com/v1:ServiceMonitor", "llm-fabric-dcgm-exporter"),
    } <= registered
    assert ("llm-fabric:observability:GpuMetrics", "dcgm-exporter") in {(t, n) for t, n, _ in mocks.resources}


GPU_OPERATOR = '      kubernetes_version: "1.33"\n'


def _gpu_operator_site(edited_site: Callable[[dict[str, str]], StackInputs], extra: str) -> StackInputs:
    text = data_path("examples", "cerit-sc", "fabric.yaml").read_text()
    assert text.count(GPU_OPERATOR) == 2
    return edited_site({"fabric.yaml": text.replace(GPU_OPERATOR, GPU_OPERATOR + extra, 1)})


def test_where_the_gpu_operator_runs_it_only_the_scrape_is_rendered(
    edited_site: Callable[[dict[str, str]], StackInputs],
) -> None:
    inputs = _gpu_operator_site(
        edited_site, "      dcgm_exporter: gpu-operator\n      gpu_operator_namespace: nvidia-gpu\n"
    )
    objects = _by_kind(inputs)
    assert set(objects) == {"ServiceMonitor"}
    monitor = objects["ServiceMonitor"]
    validate_custom(monitor)
    assert monitor["metadata"]["namespace"] == "llm-fabric"
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["nvidia-gpu"]}
    assert monitor["spec"]["selector"] == {"matchLabels": {"app": "nvidia-dcgm-exporter"}}
    assert monitor["spec"]["endpoints"][0]["port"] == "gpu-metrics"


def test_a_misspelt_exporter_field_is_named_with_the_one_meant(
    site_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = site_repo / "fabric.yaml"
    path.write_text(path.read_text().replace(GPU_OPERATOR, GPU_OPERATOR + "      dcgm_exportr: gpu-operator\n", 1))
    line = next(i for i, row in enumerate(path.read_text().splitlines(), start=1) if "dcgm_exportr" in row)
    assert main(["render", "--site", "brno", str(site_repo), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"fabric.yaml:{line}" in err and "did you mean `dcgm_exporter`?" in err


def test_an_unknown_exporter_owner_lists_the_choices(
    site_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = site_repo / "fabric.yaml"
    path.write_text(path.read_text().replace(GPU_OPERATOR, GPU_OPERATOR + "      dcgm_exporter: operator\n", 1))
    assert main(["render", "--site", "brno", str(site_repo), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "sites.brno.cluster.dcgm_exporter" in err and "'fabric' or 'gpu-operator'" in err


def test_render_check_validates_the_exporter_objects(
    reference_inputs: StackInputs, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.deploy.crdschemas import crds_or_skip

    plan = tmp_path / "plan.json"
    plan.write_text(reference_inputs.the_plan().model_dump_json())
    site = str(reference_inputs.site.root)
    out = tmp_path / "out"
    args = ["render", "--site", "brno", site, "--out", str(out), "--plan", str(plan), "--stack", "observability"]
    assert main([*args, "--check", "--crds", str(crds_or_skip()), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    # the counters and the four dashboards (ConfigMaps), DaemonSet, Service
    assert report["check"]["core"] == 7 and report["check"]["custom"] == 2
    written = sorted(p.name for p in (out / "brno" / "observability").glob("*dcgm*"))
    assert written == [
        "configmap-llm-fabric-dcgm-exporter-counters.yaml",
        "daemonset-llm-fabric-dcgm-exporter.yaml",
        "service-llm-fabric-dcgm-exporter.yaml",
        "servicemonitor-llm-fabric-dcgm-exporter.yaml",
    ]


def test_the_exporter_tolerates_the_taints_of_the_sites_nvidia_nodes(reference_inputs: StackInputs) -> None:
    nodes = reference_inputs.site.nodes
    nodes["hgx-h200-ceitec"] = nodes["hgx-h200-ceitec"].model_copy(
        update={"taints": ["fabric.llm/dedicated=ceitec:NoSchedule"]}
    )
    nodes["hgx-h100-tuwien"] = nodes["hgx-h100-tuwien"].model_copy(update={"taints": ["vienna-only:NoExecute"]})
    pod = _by_kind(reference_inputs)["DaemonSet"]["spec"]["template"]["spec"]
    # brno's taint is tolerated; Vienna's node is another site's exporter
    assert pod["tolerations"] == [
        {"key": "fabric.llm/dedicated", "operator": "Equal", "value": "ceitec", "effect": "NoSchedule"},
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
    ]
