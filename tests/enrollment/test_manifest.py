"""`build_manifest`: the node manifest's GPU summary and the labels the node will carry."""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_fabric.enrollment.admission import decide
from llm_fabric.enrollment.assembly import inventory_from_bundle
from llm_fabric.enrollment.enroll import EnrollRequest, build_manifest
from llm_fabric.site.loader import load_site
from tests.fixtures.factsbundle import make_bundle


@pytest.mark.parametrize("profile", ["h100x8", "l40sx8", "mi300x4"])
def test_labels_agree_with_the_measured_gpus(site_repo: Path, profile: str) -> None:
    inventory = inventory_from_bundle(make_bundle(profile, uuid_salt="m"))
    verdict = decide(inventory)
    request = EnrollRequest("host", site_repo, "cerit-sc", "brno")
    manifest = build_manifest("box", request, load_site(site_repo), inventory, verdict)
    gpus, labels = manifest.gpus, manifest.labels
    assert gpus.count == len(inventory.gpus) and gpus.uuids == [g.uuid for g in inventory.gpus]
    assert gpus.memory_mib == inventory.gpus[0].memory_mib and gpus.catalog_id == verdict.gpus.model
    assert labels["fabric.llm/tier"] == verdict.tier and labels["fabric.llm/gpu-model"] == gpus.catalog_id
    assert labels["fabric.llm/jurisdiction"] == "CZ"  # site brno of the cerit-sc example
    if gpus.vendor == "nvidia":
        major, minor = gpus.compute_capability.split(".")
        assert labels["nvidia.com/gpu.count"] == str(gpus.count)
        assert labels["nvidia.com/gpu.memory"] == str(gpus.memory_mib)
        assert (labels["nvidia.com/gpu.compute.major"], labels["nvidia.com/gpu.compute.minor"]) == (major, minor)
        assert " " not in labels["nvidia.com/gpu.product"] and labels["nvidia.com/gpu.product"].startswith("NVIDIA")
    else:
        assert labels["amd.com/gpu.vram"] == f"{round(gpus.memory_mib / 1024)}G"
        assert labels["amd.com/gpu.device-id"] == inventory.gpus[0].pci_device_id.removeprefix("0x")  # type: ignore[union-attr]
        assert not any(k.startswith("nvidia.com/") for k in labels)
